package server

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/pkg/lease"
)

// newMeasureCalls registers the measurement group's store-call counter on
// reg.
func newMeasureCalls(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "measure_group_store_calls_total",
		Help: "Store calls of the measurement-only lease group (--measure-group-shards), by operation.",
	}, []string{"op"})
	return c, reg.Register(c)
}

// measureGroup serves the measurement-only group (Comparison.MeasureGroupShards)
// until ctx is done. Its work holds each shard term and does nothing else;
// the group's TTL and retry follow the sweep interval, as the sweeper's do.
func (s *Server) measureGroup(ctx context.Context) {
	g := MeasureGroup()
	err := lease.RunGroup(ctx, s.cfg.Leases, lease.GroupSpec{
		Name:    g.Name,
		Owner:   s.cfg.Owner,
		Shards:  s.cmp.MeasureGroupShards,
		TTL:     g.TTL(s.cfg.SweepInterval),
		Retry:   g.Retry(s.cfg.SweepInterval),
		Logger:  s.cfg.Logger,
		Health:  s.health,
		OnEvent: s.measureEvent,
	}, func(ctx context.Context, shard int) { <-ctx.Done() })
	if err != nil {
		s.log.Error("measurement group not started", "lease", g.Name, "err", err)
	}
}

// measureEvent passes a measurement group event to the lease metrics,
// counts its store calls and logs its shard terms' starts and ends.
func (s *Server) measureEvent(ev lease.Event) {
	s.leases.Observe(ev)
	switch {
	case ev.Kind == lease.StoreCalled:
		s.measureCalls.WithLabelValues(ev.Op).Inc()
	case ev.Shard >= 0 && (ev.Kind == lease.Elected || ev.Kind == lease.SteppedDown):
		s.log.Info("measure group: shard term", "lease", ev.Name, "shard", ev.Shard, "event", ev.Kind.String(), "reason", ev.Reason)
	}
}
