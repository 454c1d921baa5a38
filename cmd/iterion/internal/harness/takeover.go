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
	// stop", without the process's own shutdown. The release is taken at
	// the sending of the last poll of a follower's GET /leases?format=json
	// that still named the stopped leader (polled every pollEvery): the
	// poll read the store after it was sent, so the release came later,
	// by up to one poll and its round trip: the delay errs long. A stop
	// whose lease was not released (releaseOf) has no release to measure
	// from: its delay runs from the signal.
	FromRelease []time.Duration
	// Unreleased names the replicas of the SIGTERM stops whose lease went
	// to a successor only once it expired (clean stops that did not
	// release it), whose logs Run keeps (Report.Dir) so that a missing
	// release can be read.
	Unreleased []string
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

// takeoverBound is the ADR's bound on a takeover after sig: retry + one
// tick after a clean stop (SIGTERM), whose lease is released; TTL + retry
// + one tick after a crash (SIGKILL), whose lease must expire first.
func takeoverBound(sig syscall.Signal, ttl, retry, tick time.Duration) time.Duration {
	if sig == syscall.SIGKILL {
		return ttl + retry + tick
	}
	return retry + tick
}

// doubleSweep reports whether more than one of the followers (others)
// sent sweeper requests between the simulator's counts base, read at the
// stop, and after: two successors sweeping at once, which a takeover
// must never produce.
func doubleSweep(base, after simStats, others []string) bool {
	return len(grown(base, after, others)) > 1
}

// takeoverScenario stops the leader takeovers times with SIGTERM, then
// with SIGKILL, starting a fresh replica after each stop so the count stays
// replicas.
type takeoverScenario struct {
	replicas, takeovers int
	logf                func(format string, args ...any)
}

// run stops c's leaders and returns a result per signal, SIGTERM first;
// on an error, the results of the signals done before it.
func (s takeoverScenario) run(ctx context.Context, c *cluster) ([]TakeoverResult, error) {
	var out []TakeoverResult
	if _, err := c.startReplicas(ctx, s.replicas, replicaSpec{}); err != nil {
		return out, err
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		res := TakeoverResult{Signal: sigName(sig), Bound: takeoverBound(sig, c.ttl(), c.retry(), c.interval)}
		for i := range s.takeovers {
			if err := takeoverOnce(ctx, c, sig, &res); err != nil {
				return out, fmt.Errorf("%s #%d: %w", res.Signal, i+1, err)
			}
			// A fresh replica in the stopped one's place.
			if _, err := c.startReplicas(ctx, 1, replicaSpec{}); err != nil {
				return out, fmt.Errorf("%s #%d: %w", res.Signal, i+1, err)
			}
		}
		out = append(out, res)
		s.logf("%s ×%d: median %v, max %v, bound %v (from the signal: median %v, max %v), double sweeps %d, not released %d %v",
			res.Signal, len(res.FromSignal), res.Median().Round(time.Millisecond), res.Max().Round(time.Millisecond), res.Bound,
			median(res.FromSignal).Round(time.Millisecond), maxOf(res.FromSignal).Round(time.Millisecond), res.Doubles, len(res.Unreleased), res.Unreleased)
	}
	return out, nil
}

// takeoverOnce stops the leader with sig at a random phase of its
// interval and measures the delay to the successor's first sweeper
// request; the stopped leader is reaped and forgotten, the cluster one
// replica short.
func takeoverOnce(ctx context.Context, c *cluster, sig syscall.Signal, res *TakeoverResult) error {
	l, err := c.leader(ctx)
	if err != nil {
		return err
	}
	// The harness's own steps are multiples of the interval; without a
	// random phase every stop would land at the same point of the
	// followers' campaign cycle and measure one delay twenty times.
	clock.Sleep(ctx, rand.N(c.interval))
	// The followers' counts at the signal: none of them sweeps.
	base, err := c.sim.stats(ctx)
	if err != nil {
		return err
	}
	followers := slices.DeleteFunc(slices.Clone(c.replicas), func(r *replica) bool { return r == l })
	others := tokensOf(followers)
	docs := startWatch(ctx, pollEvery, func(ctx context.Context) (holder, error) {
		return followers[0].api.leaseHolder(ctx, server.MergeGateSweeper().Name)
	})
	defer docs.stop()
	t0 := time.Now()
	if err := l.p.signal(sig); err != nil {
		return err
	}
	t1, err := pollUntil(ctx, c.sim, pollEvery, 3*res.Bound+5*time.Second, func(st simStats) bool {
		return len(grown(base, st, others)) > 0
	})
	if err != nil {
		return fmt.Errorf("no successor swept after %s: %w", l.name, err)
	}
	res.FromSignal = append(res.FromSignal, t1.Sub(t0))
	// Two intervals after the successor's first request, it must be the
	// only one of the others that swept.
	clock.Sleep(ctx, 2*c.interval)
	after, err := c.sim.stats(ctx)
	if err != nil {
		return err
	}
	if doubleSweep(base, after, others) {
		res.Doubles++
	}
	c.stopReplica(l, syscall.SIGKILL) // already exiting or dead: reap it
	changes := docs.stop()
	if sig == syscall.SIGTERM {
		from, released, ok := releaseOf(changes, t0, l.owner, c.ttl())
		if !ok {
			return fmt.Errorf("%w: /leases of %s never stopped naming %s as the holder of %s after SIGTERM", ErrMeasure, followers[0].name, l.owner, server.MergeGateSweeper().Name)
		}
		if !released {
			res.Unreleased = append(res.Unreleased, l.name)
		}
		res.FromRelease = append(res.FromRelease, t1.Sub(from))
	}
	return nil
}

// releaseOf finds, in the changes of the lease document a follower polled
// (watch), the instant the stopped leader owner released it after t, its
// SIGTERM, to measure the takeover from. The release deletes the document,
// and happened after the last poll that still named owner was sent
// (change.since): measured from there, the delay errs long, never short.
// A document seen naming another owner that its new holder wrote before
// owner's last expiry was released too (deleted, then taken within one
// poll: an unexpired lease is never taken); its expiry less ttl, the
// lease's TTL, is the instant (to the millisecond the store keeps) of its
// holder's latest Acquire or Renew, which a poll answered late (a loaded replica's GET /leases) does not
// move. One written from that expiry on was not released: released is
// false, and the instant is t, there being no release to measure from,
// for the ADR's bound after a clean stop would pass the expiry's takeover
// unseen. ok is false when the document never stopped naming owner.
func releaseOf(cs []change[holder], t time.Time, owner string, ttl time.Duration) (from time.Time, released, ok bool) {
	var expires time.Time // owner's last expiry before the change
	for _, c := range cs {
		if c.v.Owner == owner {
			expires = c.v.Expires
			continue
		}
		if !c.at.After(t) {
			continue
		}
		released = c.v.Owner == "" || c.v.Expires.Add(-ttl).Before(expires)
		if !released {
			return t, false, true
		}
		if c.since.Before(t) {
			return t, true, true
		}
		return c.since, true, true
	}
	return time.Time{}, false, false
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
