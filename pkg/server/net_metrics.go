package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/pkg/board"
)

// netMetrics are the elected nets' pass metrics, the ones an operator
// alerts on (deploy/prometheus/iterion-rules.yaml). Their lease label is
// the name of the lease that elects the net, as in the lease_* metrics. Each replica exports what it ran itself: a replica that
// never held a net's lease has no pass series for it. Safe for concurrent
// use.
//
//   - iterion_net_last_success_timestamp_seconds{lease}: when this replica's
//     last complete pass of the net ended (Unix seconds); absent until one has.
//   - iterion_net_pass_duration_seconds{lease}: every pass, complete or not.
//   - iterion_net_interval_seconds{lease}: the net's configured interval, so a
//     rule can say "no pass in 3 intervals" whatever the interval.
//   - iterion_net_pass_timeouts_total{lease}: passes cancelled at their
//     deadline (lease.Watchdog).
//   - iterion_net_forge_error_ratio{lease}: of this replica's last pass
//     that read the forge, the share of its forge reads that failed (the
//     sweeper's batches, the board's repositories); absent until one has.
//   - iterion_net_stalls_total{lease}: terms this replica ended because
//     stallPasses passes in a row did not complete; in App mode's lease
//     groups, an installation's sweep parked or board sync ended so, the
//     shard's term going on.
type netMetrics struct {
	lastSuccess *prometheus.GaugeVec
	duration    *prometheus.HistogramVec
	interval    *prometheus.GaugeVec
	timeouts    *prometheus.CounterVec
	stalls      *prometheus.CounterVec
	errorRatio  *prometheus.GaugeVec
}

// newNetMetrics registers the pass metrics on reg.
func newNetMetrics(reg prometheus.Registerer) (*netMetrics, error) {
	m := &netMetrics{
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "iterion_net_last_success_timestamp_seconds",
			Help: "When this replica's last complete pass of the elected net ended, in Unix seconds.",
		}, []string{"lease"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "iterion_net_pass_duration_seconds",
			Help:    "Duration of the elected net's passes on this replica, complete or not.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 8), // 10ms to about 2m44s
		}, []string{"lease"}),
		interval: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "iterion_net_interval_seconds",
			Help: "The elected net's configured interval between passes, in seconds.",
		}, []string{"lease"}),
		timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iterion_net_pass_timeouts_total",
			Help: "Passes of the elected net cancelled at their deadline on this replica.",
		}, []string{"lease"}),
		stalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iterion_net_stalls_total",
			Help: "Terms of the elected net this replica ended because its passes kept failing; in App mode, an installation's sweep parked (or board sync ended) because its passes kept failing, the shard's term going on.",
		}, []string{"lease"}),
		errorRatio: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "iterion_net_forge_error_ratio",
			Help: "Share of the forge reads of this replica's last pass of the elected net that failed, 0 to 1.",
		}, []string{"lease"}),
	}
	for _, c := range []prometheus.Collector{m.lastSuccess, m.duration, m.interval, m.timeouts, m.stalls, m.errorRatio} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// pass records one pass, which began at began and ended at ended, of the
// net elected by the lease named name; complete passes move the
// last-success timestamp, and a pass that read the forge (reads > 0) sets
// the error ratio to failed/reads.
func (m *netMetrics) pass(name string, began, ended time.Time, complete bool, reads, failed int) {
	m.duration.WithLabelValues(name).Observe(ended.Sub(began).Seconds())
	if complete {
		m.lastSuccess.WithLabelValues(name).Set(float64(ended.UnixNano()) / 1e9)
	}
	if reads > 0 {
		m.errorRatio.WithLabelValues(name).Set(float64(failed) / float64(reads))
	}
}

// sweepPass records p, then hands it to next (nil: nobody).
func (m *netMetrics) sweepPass(now func() time.Time, next func(SweepPass)) func(SweepPass) {
	return func(p SweepPass) {
		m.pass(MergeGateSweeper().Name, p.At, now(), p.Complete, p.ForgeReads, p.ForgeErrors)
		if next != nil {
			next(p)
		}
	}
}

// boardPass records p, complete when the pass reached every repository and
// synced each, then hands it to next (nil: nobody).
func (m *netMetrics) boardPass(now func() time.Time, next func(board.Pass)) func(board.Pass) {
	return func(p board.Pass) {
		failed := 0
		for _, r := range p.Repos {
			if r.Err != nil {
				failed++
			}
		}
		m.pass(ForgeBoardSync().Name, p.At, now(), passSynced(p), len(p.Repos), failed)
		if next != nil {
			next(p)
		}
	}
}

// passSynced reports whether board pass p reached every repository and
// synced each.
func passSynced(p board.Pass) bool {
	ok := p.Complete
	for _, r := range p.Repos {
		ok = ok && r.Err == nil
	}
	return ok
}
