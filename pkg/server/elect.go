// Electing the nets: each through its lease, with the pass watchdog that
// ends a stalled term.

package server

import (
	"context"
	"time"

	"iterion.dev/iterion/internal/clock"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
)

// electedNet is one periodic net the server elects a replica for.
type electedNet struct {
	lease    Lease
	interval time.Duration
	work     func(context.Context)
}

// nets lists the server's elected nets. Adding a net costs one entry here
// and its Lease in leases.go: elect runs each through lease.Run.
func (s *Server) nets() []electedNet {
	var nets []electedNet
	if s.sweeper != nil { // App mode sweeps through the group instead (installationSweeps)
		nets = append(nets, electedNet{MergeGateSweeper(), s.cfg.SweepInterval, s.sweeper.Work})
	}
	if s.board != nil {
		nets = append(nets, electedNet{ForgeBoardSync(), s.board.Interval(), s.board.Work})
	}
	if s.adopter != nil {
		wd := s.watchdog(RunAdopter(), s.adopter.interval)
		nets = append(nets, electedNet{RunAdopter(), s.adopter.interval, func(ctx context.Context) { s.adopter.work(ctx, wd) }})
	}
	return nets
}

// healthBound is how long a net's work may outlive its term, or a pass its
// deadline, before /healthz fails: TTL/6 of the shortest lease, the margin
// lease.Run keeps before a successor can be elected, so a failing check
// means an overlap or a stalled holder.
func healthBound(sweepInterval, boardInterval time.Duration, board bool) time.Duration {
	bound := MergeGateSweeper().TTL(sweepInterval) / 6
	if board {
		bound = min(bound, ForgeBoardSync().TTL(boardInterval)/6)
	}
	return bound
}

// stallPasses is how many passes in a row may fail before a net's holder
// ends its term, so that another replica may try: as many intervals as
// the lease's TTL.
const stallPasses = 3

// watchdog bounds each pass of the net under l by its interval, counts
// the passes cancelled at it, reports a pass that ignores its cancellation
// to /healthz, and ends a term after stallPasses passes in a row failed,
// signalling elect to sit out.
func (s *Server) watchdog(l Lease, interval time.Duration) lease.Watchdog {
	return lease.Watchdog{
		Name: l.Name, PassTimeout: interval, StallAfter: stallPasses, Health: s.health,
		TimedOut: s.passes.timeouts.WithLabelValues(l.Name).Inc,
		Stalled: func() {
			s.passes.stalls.WithLabelValues(l.Name).Inc()
			select {
			case s.stalls[l.Name] <- struct{}{}:
			default: // one signal pending is enough
			}
		},
	}
}

// elect runs n's work under its lease until ctx is done: terms through
// lease.Run, with this replica's owner and the shared metrics, health and
// event hook. When a term ends because its passes kept failing (the
// watchdog), elect stops campaigning for stallPasses intervals, so another
// replica takes over rather than this one winning the next election: its
// forge may be the one that hangs. With Comparison.NoLease it runs the work directly,
// as one endless term.
func (s *Server) elect(ctx context.Context, n electedNet) {
	if s.cmp.NoLease {
		s.log.Warn("running without a lease (--no-lease): for comparison measurements only", "lease", n.lease.Name)
		n.work(ctx)
		return
	}
	for {
		stalled := s.runTerms(ctx, n)
		if !stalled || ctx.Err() != nil {
			return
		}
		sitOut := stallPasses * n.interval
		s.log.Warn("not campaigning: the last term stalled; another replica may take over", "lease", n.lease.Name, "for", sitOut.String())
		if !clock.Sleep(ctx, sitOut) {
			return
		}
	}
}

// runTerms campaigns for n's lease and serves its terms through lease.Run
// until ctx is done or a term stalls, and reports whether one did.
func (s *Server) runTerms(ctx context.Context, n electedNet) (stalled bool) {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	stalls := s.stalls[n.lease.Name]
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-stalls:
			stalled = true
			stop()
		case <-runCtx.Done():
		}
	}()
	err := lease.Run(runCtx, s.cfg.Leases, lease.Spec{
		Name:    n.lease.Name,
		Owner:   s.cfg.Owner,
		TTL:     n.lease.TTL(n.interval),
		Retry:   n.lease.Retry(n.interval),
		Logger:  s.cfg.Logger, // lease.Run adds the owner itself
		Health:  s.health,
		OnEvent: s.leaseEvent,
	}, n.work)
	stop()
	<-watched
	if err != nil {
		s.log.Error("elected net not started", "lease", n.lease.Name, "err", err)
		return false
	}
	return stalled
}

// leaseEvent counts ev in the lease metrics and notes this replica's terms
// for the pages, then passes a transition on to Config.OnLeaseEvent.
func (s *Server) leaseEvent(ev lease.Event) {
	s.leases.Observe(ev)
	s.seen.leaseEvent(ev, s.cfg.Now())
	switch ev.Kind {
	case lease.Elected, lease.SteppedDown, lease.Released:
		if s.cfg.OnLeaseEvent != nil {
			s.cfg.OnLeaseEvent(ev)
		}
	case lease.Surveyed:
		s.logShardCountChange(ev.View)
	}
}

// logShardCountChange logs, when a survey of a lease group shows other
// owners serving it with another shard count than the last one did, who
// they are (at Warn: a change of the shard count, --sweep-shards, is
// under way, and until it is done each installation is served by both
// counts), or, once none is left, that the change is done.
func (s *Server) logShardCountChange(v *lease.GroupView) {
	owners := v.OtherOwners()
	if !s.seen.surveyed(v.Name, owners) {
		return
	}
	if len(owners) == 0 {
		s.log.Info("lease group: no replica serves it with another shard count any more; a change of the shard count is done", "group", v.Name, "shards", v.Shards)
		return
	}
	counts := make([]int, len(v.Others))
	for i, o := range v.Others {
		counts[i] = o.Shards
	}
	s.log.Warn("lease group: replicas serve it with another shard count; a change of the shard count is under way, and each of its installations is served by both counts until only one count has replicas",
		"group", v.Name, "shards", v.Shards, "other_shards", counts, "other_owners", owners)
}

// laneOfferer is the server's offer on one lane through rec, as an
// offerer.
type laneOfferer struct {
	s    *Server
	rec  *reconciler
	lane string
}

func (o laneOfferer) Offer(ctx context.Context, run gaterun.Run) (outcome, error) {
	return o.s.offerBy(ctx, o.rec, o.lane, run)
}

// OfferBatch offers runs together on the lane, and counts and notes each
// run's offer as Offer does.
func (o laneOfferer) OfferBatch(ctx context.Context, runs []gaterun.Run) ([]outcome, error) {
	outs, errs, err := o.rec.offerBatch(forge.WithLane(ctx, o.lane), runs)
	for i, out := range outs {
		o.s.offered(o.lane, runs[i].ID, out, errs[i])
	}
	return outs, err
}
