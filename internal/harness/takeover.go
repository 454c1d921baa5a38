package harness

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"time"
)

// TakeoverResult is the takeover scenario for one signal.
type TakeoverResult struct {
	Signal string // "SIGTERM" or "SIGKILL"
	// Delays are, per stop, from the signal to the successor's first
	// sweeper request as the simulator counted it.
	Delays []time.Duration
	// Bound is the ADR's: retry + one tick after a clean stop, TTL + retry +
	// one tick after a crash.
	Bound time.Duration
	// Doubles counts stops after which more than one replica swept in the
	// same interval once the successor had started.
	Doubles int
}

// Median and Max summarize Delays.
func (t TakeoverResult) Median() time.Duration { return median(t.Delays) }

// Max is the longest of Delays.
func (t TakeoverResult) Max() time.Duration { return maxOf(t.Delays) }

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
			d, double, err := h.takeoverOnce(ctx, sig, res.Bound)
			if err != nil {
				return fmt.Errorf("%s #%d: %w", res.Signal, i+1, err)
			}
			res.Delays = append(res.Delays, d)
			if double {
				res.Doubles++
			}
		}
		h.rep.Takeover = append(h.rep.Takeover, res)
		h.logf("%s ×%d: median %v, max %v, bound %v, double sweeps %d",
			res.Signal, len(res.Delays), res.Median().Round(time.Millisecond), res.Max().Round(time.Millisecond), res.Bound, res.Doubles)
	}
	return nil
}

// leader waits for exactly one live replica to sweep over two intervals and
// returns it with the simulator's counts at that instant.
func (h *run) leader(ctx context.Context) (*replica, map[string]int64, error) {
	deadline := time.Now().Add(h.o.ttl() + 4*h.o.retry() + 10*time.Second)
	prev, err := h.c.sim.stats(ctx)
	if err != nil {
		return nil, nil, err
	}
	for {
		sleep(ctx, 2*h.o.Interval)
		st, err := h.c.sim.stats(ctx)
		if err != nil {
			return nil, nil, err
		}
		before, now := prev.byToken(nil), st.byToken(nil)
		var active []*replica
		for _, r := range h.c.replicas {
			if now[r.token] > before[r.token] {
				active = append(active, r)
			}
		}
		if len(active) == 1 {
			return active[0], now, nil
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("%w: want one sweeping replica, got %d", ErrMeasure, len(active))
		}
		prev = st
	}
}

// takeoverOnce stops the leader with sig and measures the delay to the
// successor's first sweeper request. It restarts a replica before it
// returns.
func (h *run) takeoverOnce(ctx context.Context, sig syscall.Signal, bound time.Duration) (time.Duration, bool, error) {
	l, _, err := h.leader(ctx)
	if err != nil {
		return 0, false, err
	}
	// The followers' counts at the signal: none of them sweeps.
	base, err := h.c.sim.stats(ctx)
	if err != nil {
		return 0, false, err
	}
	t0 := time.Now()
	if err := l.p.signal(sig); err != nil {
		return 0, false, err
	}
	others := slices.DeleteFunc(slices.Clone(h.c.replicas), func(r *replica) bool { return r == l })
	baseCounts := base.byToken(nil)
	t1, err := pollUntil(ctx, h.c.sim, 10*time.Millisecond, 3*bound+5*time.Second, func(st simStats) bool {
		c := st.byToken(nil)
		for _, r := range others {
			if c[r.token] > baseCounts[r.token] {
				return true
			}
		}
		return false
	})
	if err != nil {
		return 0, false, fmt.Errorf("no successor swept after %s: %w", l.name, err)
	}
	// Two intervals after the successor's first request, it must be the
	// only one of the others that swept.
	sleep(ctx, 2*h.o.Interval)
	after, err := h.c.sim.stats(ctx)
	if err != nil {
		return 0, false, err
	}
	c := after.byToken(nil)
	swept := 0
	for _, r := range others {
		if c[r.token] > baseCounts[r.token] {
			swept++
		}
	}
	h.c.stopReplica(l, syscall.SIGKILL) // already exiting or dead: reap it
	if _, err := h.c.startReplicas(ctx, 1, replicaSpec{}); err != nil {
		return 0, false, err
	}
	return t1.Sub(t0), swept > 1, nil
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
