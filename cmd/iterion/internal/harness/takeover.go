package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"time"

	"iterion.dev/iterion/internal/clock"
	"iterion.dev/iterion/pkg/server"
)

// TakeoverResult is the takeover scenario for one signal.
type TakeoverResult struct {
	Signal string // "SIGTERM" or "SIGKILL"
	// FromSignal are, per stop, from the signal to the successor's first
	// sweeper request as the simulator counted it.
	FromSignal []time.Duration
	// FromRelease are, per SIGTERM stop, from the release of the stopped
	// leader to the successor's first request: the ADR's "after a clean
	// stop", without the process's own shutdown. The release is the last
	// poll of a follower's GET /leases?format=json that still named the
	// stopped leader (polled every pollEvery), so it is early by up to one
	// poll: the delay errs long.
	FromRelease []time.Duration
	// Bound is the ADR's: retry + one tick after a clean stop, TTL + retry +
	// one tick after a crash.
	Bound time.Duration
	// Doubles counts stops after which more than one replica swept in the
	// two intervals after the successor's first request.
	Doubles int
}

// Measured are the delays the bound applies to: from the release after a
// clean stop, from the signal after a crash (the last renewal came before
// it, so that is conservative).
func (t TakeoverResult) Measured() []time.Duration {
	if len(t.FromRelease) > 0 {
		return t.FromRelease
	}
	return t.FromSignal
}

// Within reports whether the longest measured delay is within Bound, to
// the polling resolution: a delay is seen up to pollEvery late.
func (t TakeoverResult) Within() bool { return t.Max() <= t.Bound+pollEvery }

// Median is the median of Measured.
func (t TakeoverResult) Median() time.Duration { return median(t.Measured()) }

// Max is the longest of Measured.
func (t TakeoverResult) Max() time.Duration { return maxOf(t.Measured()) }

// takeovers stops the leader Takeovers times with SIGTERM, then with SIGKILL,
// starting a fresh replica after each stop so the count stays Replicas.
func (h *run) takeovers(ctx context.Context) error {
	if _, err := h.c.startReplicas(ctx, h.o.Replicas, replicaSpec{}); err != nil {
		return err
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		res := TakeoverResult{Signal: sigName(sig), Bound: h.o.retry() + h.o.Interval}
		if sig == syscall.SIGKILL {
			res.Bound += h.o.ttl()
		}
		for i := range h.o.Takeovers {
			if err := h.takeoverOnce(ctx, sig, &res); err != nil {
				return fmt.Errorf("%s #%d: %w", res.Signal, i+1, err)
			}
		}
		h.rep.Takeover = append(h.rep.Takeover, res)
		h.logf("%s ×%d: median %v, max %v, bound %v (from the signal: median %v, max %v), double sweeps %d",
			res.Signal, len(res.FromSignal), res.Median().Round(time.Millisecond), res.Max().Round(time.Millisecond), res.Bound,
			median(res.FromSignal).Round(time.Millisecond), maxOf(res.FromSignal).Round(time.Millisecond), res.Doubles)
	}
	return nil
}

// leader waits for exactly one live replica to sweep over two intervals,
// with GET /leases?format=json naming that replica's owner as the sweeper
// lease's holder, and returns it.
func (h *run) leader(ctx context.Context) (*replica, error) {
	deadline := time.Now().Add(h.o.ttl() + 4*h.o.retry() + 10*time.Second)
	prev, err := h.c.sim.stats(ctx)
	if err != nil {
		return nil, err
	}
	for {
		clock.Sleep(ctx, 2*h.o.Interval)
		st, err := h.c.sim.stats(ctx)
		if err != nil {
			return nil, err
		}
		before, now := prev.byToken(nil), st.byToken(nil)
		var active []*replica
		for _, r := range h.c.replicas {
			if now[r.token] > before[r.token] {
				active = append(active, r)
			}
		}
		if len(active) == 1 && h.holds(ctx, active[0]) {
			return active[0], nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: want one sweeping replica, got %d", ErrMeasure, len(active))
		}
		prev = st
	}
}

// holds reports whether a live replica's /leases names r's owner as the
// sweeper lease's holder.
func (h *run) holds(ctx context.Context, r *replica) bool {
	for _, q := range h.c.replicas {
		owner, err := q.api.leaseOwner(ctx, server.MergeGateSweeper().Name)
		if err != nil {
			continue
		}
		return owner == r.owner
	}
	return false
}

// takeoverOnce stops the leader with sig at a random phase of its
// interval, measures the delay to the successor's first sweeper request,
// and starts a replica in its place.
func (h *run) takeoverOnce(ctx context.Context, sig syscall.Signal, res *TakeoverResult) error {
	l, err := h.leader(ctx)
	if err != nil {
		return err
	}
	// The harness's own steps are multiples of the interval; without a
	// random phase every stop would land at the same point of the
	// followers' campaign cycle and measure one delay twenty times.
	clock.Sleep(ctx, rand.N(h.o.Interval))
	// The followers' counts at the signal: none of them sweeps.
	base, err := h.c.sim.stats(ctx)
	if err != nil {
		return err
	}
	followers := slices.DeleteFunc(slices.Clone(h.c.replicas), func(r *replica) bool { return r == l })
	others := tokensOf(followers)
	owners := startWatch(ctx, pollEvery, func(ctx context.Context) (string, error) {
		return followers[0].api.leaseOwner(ctx, server.MergeGateSweeper().Name)
	})
	defer owners.stop()
	t0 := time.Now()
	if err := l.p.signal(sig); err != nil {
		return err
	}
	t1, err := pollUntil(ctx, h.c.sim, pollEvery, 3*res.Bound+5*time.Second, func(st simStats) bool {
		return len(grown(base, st, others)) > 0
	})
	if err != nil {
		return fmt.Errorf("no successor swept after %s: %w", l.name, err)
	}
	res.FromSignal = append(res.FromSignal, t1.Sub(t0))
	// Two intervals after the successor's first request, it must be the
	// only one of the others that swept.
	clock.Sleep(ctx, 2*h.o.Interval)
	after, err := h.c.sim.stats(ctx)
	if err != nil {
		return err
	}
	if len(grown(base, after, others)) > 1 {
		res.Doubles++
	}
	h.c.stopReplica(l, syscall.SIGKILL) // already exiting or dead: reap it
	changes := owners.stop()
	if sig == syscall.SIGTERM {
		// The release deletes the lease document: the store stops naming
		// the stopped leader. It happened after the last poll that still
		// named it, which is where the delay is measured from, so it comes
		// out long by up to one poll, never short.
		rel, ok := firstChange(changes, t0, func(o string) bool { return o != l.owner })
		if !ok {
			return fmt.Errorf("%w: /leases of %s never stopped naming %s as the holder of %s after SIGTERM", ErrMeasure, followers[0].name, l.owner, server.MergeGateSweeper().Name)
		}
		from := rel.since
		if from.Before(t0) {
			from = t0
		}
		res.FromRelease = append(res.FromRelease, t1.Sub(from))
	}
	_, err = h.c.startReplicas(ctx, 1, replicaSpec{})
	return err
}

func sigName(s syscall.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	}
	return s.String()
}
