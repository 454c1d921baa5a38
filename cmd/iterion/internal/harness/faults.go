package harness

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"syscall"
	"time"

	"iterion.dev/iterion/internal/clock"
	"iterion.dev/iterion/pkg/server"
)

// Check is one rule a scenario asserts, with what was measured.
type Check struct {
	Rule   string
	OK     bool
	Detail string
}

// FaultResult is one fault scenario.
type FaultResult struct {
	Name string
	// Drifted runs had their forge status changed behind the replicas'
	// backs during the fault; Repaired of them agreed with their verdict
	// again afterwards.
	Drifted, Repaired int
	// RepairAfter is from the end of the fault until every drifted run was
	// repaired (0 when they were repaired before it ended); Bound is one
	// deep pass: 30 intervals, plus the tick that starts it.
	RepairAfter, Bound time.Duration
	// Takeover is, for the partition, from the cut to the successor's
	// first sweeper request, against TakeoverBound (TTL + retry + one tick,
	// the bound of a crash); 0 for the other faults.
	Takeover, TakeoverBound time.Duration
	Checks                  []Check
}

// OK reports whether every check held and nothing was lost.
func (f FaultResult) OK() bool {
	for _, c := range f.Checks {
		if !c.OK {
			return false
		}
	}
	return f.Repaired == f.Drifted && f.RepairAfter <= f.Bound
}

func (f *FaultResult) check(rule string, ok bool, format string, args ...any) {
	f.Checks = append(f.Checks, Check{Rule: rule, OK: ok, Detail: fmt.Sprintf(format, args...)})
}

// faults runs each fault scenario on fresh replicas.
func (h *run) faults(ctx context.Context) error {
	for _, f := range []struct {
		name string
		run  func(context.Context, *FaultResult) error
	}{
		{"partition of the leader from Mongo", h.partition},
		{"Mongo server restarted", h.mongoRestart},
		{"rate-limited forge", h.rateLimited},
	} {
		res := FaultResult{Name: f.name, Bound: (server.DeepEvery + 1) * h.o.Interval}
		if _, err := h.c.startReplicas(ctx, h.o.Replicas, replicaSpec{}); err != nil {
			return err
		}
		if err := f.run(ctx, &res); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		h.c.stopAll()
		h.rep.Faults = append(h.rep.Faults, res)
		h.logf("%s: drifted %d, repaired %d, %v after the fault (bound %v), checks ok %v",
			res.Name, res.Drifted, res.Repaired, res.RepairAfter.Round(time.Millisecond), res.Bound, res.OK())
		for _, c := range res.Checks {
			if !c.OK {
				h.logf("  FAILED %s: %s", c.Rule, c.Detail)
			}
		}
	}
	return nil
}

// drifted is the share of the population whose statuses a fault changes.
func (h *run) drifted() []runRequest {
	return h.population[:max(1, len(h.population)/4)]
}

// drift sets every drifted run's gate status to failure, disagreeing with
// its success verdict.
func (h *run) drift(ctx context.Context) error {
	for _, r := range h.drifted() {
		if err := h.c.sim.setStatus(ctx, r.Repo, r.HeadSHA, gateContext, "failure"); err != nil {
			return err
		}
	}
	return nil
}

// awaitRepair polls the drifted runs' statuses until each agrees with its
// verdict again, at most within bound after `from`, and records the result.
func (h *run) awaitRepair(ctx context.Context, res *FaultResult, from time.Time) error {
	rs := h.drifted()
	res.Drifted = len(rs)
	var err error
	res.Repaired, res.RepairAfter, err = awaitAgreement(ctx, h.c.sim, rs, from, res.Bound+5*time.Second, h.o.Interval)
	return err
}

// awaitAgreement polls the statuses of rs on s until each agrees with its
// verdict, giving up `within` after from, and returns how many agree and
// when, from `from` (0 when they agreed before it). It paces its reads to
// a third of the 900 points a minute GitHub allows one endpoint (the
// simulator's minute is `minute`), so that polling draws no secondary-limit
// refusal of its own.
func awaitAgreement(ctx context.Context, s sim, rs []runRequest, from time.Time, within, minute time.Duration) (int, time.Duration, error) {
	deadline := from.Add(within)
	gap := max(50*time.Millisecond, time.Duration(len(rs))*minute/300)
	for {
		repaired := 0
		for _, r := range rs {
			st, err := s.statusOf(ctx, r.Repo, r.HeadSHA, gateContext)
			if err != nil {
				return repaired, 0, err
			}
			if st == r.Verdict {
				repaired++
			}
		}
		now := time.Now()
		if repaired == len(rs) {
			return repaired, max(0, now.Sub(from)), nil
		}
		if now.After(deadline) {
			return repaired, now.Sub(from), nil
		}
		clock.Sleep(ctx, gap)
	}
}

// soleSweeper checks that exactly one live replica sweeps over three
// intervals from now.
func (h *run) soleSweeper(ctx context.Context, res *FaultResult, rule string) error {
	sp := startSampler(ctx, h.c.sim, 50*time.Millisecond)
	clock.Sleep(ctx, 3*h.o.Interval)
	ss, err := sp.stop()
	if err != nil {
		return err
	}
	act := activeIn(ss, ss[0].at, ss[len(ss)-1].at, tokensOf(h.c.replicas))
	res.check(rule, len(act) == 1, "sweeping over 3 intervals: %v, want exactly one", act)
	return nil
}

// partition cuts the leader's connections to Mongo until a successor has
// swept for two intervals, then heals it.
func (h *run) partition(ctx context.Context, res *FaultResult) error {
	l, err := h.leader(ctx)
	if err != nil {
		return err
	}
	followers := slices.DeleteFunc(slices.Clone(h.c.replicas), func(r *replica) bool { return r == l })
	others := tokensOf(followers)
	sweeper := server.MergeGateSweeper().Name
	// Structured sources, not log text: the old leader's own lease_held
	// gauge says when it stepped down, a follower's /leases when the
	// store's owner changed (the successor's election).
	held := startWatch(ctx, pollEvery, func(ctx context.Context) (bool, error) { return l.api.holdsLease(ctx, sweeper) })
	owners := startWatch(ctx, pollEvery, func(ctx context.Context) (string, error) {
		return followers[0].api.leaseOwner(ctx, sweeper)
	})
	defer held.stop()
	defer owners.stop()
	sp := startSampler(ctx, h.c.sim, pollEvery)
	clock.Sleep(ctx, h.o.Interval)
	tCut := time.Now()
	l.fwd.cut()
	if err := h.drift(ctx); err != nil {
		return err
	}
	bound := h.o.ttl() + h.o.retry() + h.o.Interval
	base, err := h.c.sim.stats(ctx)
	if err != nil {
		return err
	}
	if _, err := pollUntil(ctx, h.c.sim, pollEvery, 3*bound+5*time.Second, func(st simStats) bool {
		return len(grown(base, st, others)) > 0
	}); err != nil {
		return fmt.Errorf("no successor swept while %s was partitioned: %w", l.name, err)
	}
	clock.Sleep(ctx, 2*h.o.Interval)
	tHeal := time.Now()
	l.fwd.heal()
	if err := h.awaitRepair(ctx, res, tHeal); err != nil {
		return err
	}
	if err := h.soleSweeper(ctx, res, "one replica sweeps after the partition heals"); err != nil {
		return err
	}
	ss, err := sp.stop()
	if err != nil {
		return err
	}
	inc := increases(ss)
	var firstNew time.Time
	var successor string
	for _, tok := range others {
		for _, at := range inc[tok] {
			if at.After(tCut) && (firstNew.IsZero() || at.Before(firstNew)) {
				firstNew, successor = at, tok
			}
		}
	}
	oldTimes := inc[l.token]
	var lastOld time.Time
	for _, at := range oldTimes {
		if at.Before(firstNew) && at.After(lastOld) {
			lastOld = at
		}
	}
	laterOld := slices.IndexFunc(oldTimes, func(at time.Time) bool { return !at.Before(firstNew) })
	res.check("the partitioned leader's last sweep precedes its successor's first (no overlap)",
		!firstNew.IsZero() && lastOld.Before(firstNew) && laterOld < 0,
		"%s last swept %v after the cut, %s first swept %v after it; old leader swept again after that: %v",
		l.name, lastOld.Sub(tCut).Round(time.Millisecond), successor, firstNew.Sub(tCut).Round(time.Millisecond), laterOld >= 0)
	res.Takeover, res.TakeoverBound = firstNew.Sub(tCut), bound
	stepped, okS := firstChange(held.stop(), tCut, func(held bool) bool { return !held })
	var elected change[string]
	okE := false
	if succ := h.c.byToken(successor); succ != nil {
		elected, okE = firstChange(owners.stop(), tCut, func(o string) bool { return o == succ.owner })
	}
	// Both are polled every pollEvery: the step-down happened by stepped.at,
	// the election after elected.since, so stepped.at <= elected.since
	// proves the order; closer than one poll apart it is not proven.
	res.check("the partitioned leader steps down before its successor is elected (its lease_held gauge, a follower's /leases, polled every "+pollEvery.String()+")",
		okS && okE && !stepped.at.After(elected.since),
		"%s seen stepped down %v after the cut (seen: %v), %s seen elected between %v and %v after it (seen: %v)",
		l.name, stepped.at.Sub(tCut).Round(time.Millisecond), okS, successor,
		elected.since.Sub(tCut).Round(time.Millisecond), elected.at.Sub(tCut).Round(time.Millisecond), okE)
	return nil
}

// rateLimited holds every replica's forge requests behind a secondary rate
// limit (403 with Retry-After) while statuses drift, then lifts it. A
// primary limit would not do in compressed time: the client rightly waits
// for the reset the forge announced, a real hour after the window opened.
func (h *run) rateLimited(ctx context.Context, res *FaultResult) error {
	if _, err := h.leader(ctx); err != nil {
		return err
	}
	tokens := tokensOf(h.c.replicas)
	for _, t := range tokens {
		if err := h.c.sim.secondary(ctx, t, time.Second, 1_000_000); err != nil {
			return err
		}
	}
	tStart := time.Now()
	if err := h.drift(ctx); err != nil {
		return err
	}
	clock.Sleep(ctx, h.o.ttl()+h.o.retry())
	st, err := h.c.sim.stats(ctx)
	if err != nil {
		return err
	}
	limited := st.byToken(func(r simRequests) bool { return r.Status == http.StatusForbidden })
	var n int64
	for _, t := range tokens {
		n += limited[t]
	}
	res.check("the forge rate-limits the replicas during the fault", n > 0,
		"%d requests answered 403 in %v", n, time.Since(tStart).Round(time.Millisecond))
	// Lift it: one last limited request, with a Retry-After of a second
	// (without one, a client rightly backs off a minute, as GitHub asks).
	for _, t := range tokens {
		if err := h.c.sim.secondary(ctx, t, time.Second, 1); err != nil {
			return err
		}
	}
	tEnd := time.Now()
	if err := h.awaitRepair(ctx, res, tEnd); err != nil {
		return err
	}
	return h.soleSweeper(ctx, res, "one replica sweeps after the rate limit")
}

// mongoRestart stops the Mongo server for TTL + 2 retries, drifting
// statuses meanwhile, then starts it again on the same address and files.
func (h *run) mongoRestart(ctx context.Context, res *FaultResult) error {
	if _, err := h.leader(ctx); err != nil {
		return err
	}
	sp := startSampler(ctx, h.c.sim, pollEvery)
	tStop := time.Now()
	h.c.mongo.signal(syscall.SIGTERM)
	h.c.mongo.wait(10 * time.Second)
	if err := h.drift(ctx); err != nil {
		return err
	}
	clock.Sleep(ctx, h.o.ttl()+2*h.o.retry())
	tStart := time.Now()
	if err := h.c.startMongoRetry(); err != nil {
		return err
	}
	if err := h.awaitRepair(ctx, res, tStart); err != nil {
		return err
	}
	if err := h.soleSweeper(ctx, res, "one replica is elected after the restart"); err != nil {
		return err
	}
	ss, err := sp.stop()
	if err != nil {
		return err
	}
	during := activeIn(ss, tStop.Add(h.o.Interval), tStart, tokensOf(h.c.replicas))
	res.check("nobody sweeps while Mongo is down (from one interval after the stop)",
		len(during) == 0, "sweeping during the %v outage: %v", tStart.Sub(tStop).Round(time.Millisecond), during)
	return nil
}
