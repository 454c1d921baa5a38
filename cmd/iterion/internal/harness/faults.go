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

// faultScenario runs each fault on fresh replicas: a partition of the
// leader from Mongo, a Mongo restart and a rate-limited forge. During each,
// a quarter of the population drifts behind the replicas' backs.
type faultScenario struct {
	replicas   int
	population []runRequest // every seeded run
	logf       func(format string, args ...any)
}

// run runs every fault on c and returns a result for each, in order; on an
// error, the results of the faults done before it.
func (s faultScenario) run(ctx context.Context, c *cluster) ([]FaultResult, error) {
	var out []FaultResult
	for _, f := range []struct {
		name string
		run  func(context.Context, *cluster, *FaultResult) error
	}{
		{"partition of the leader from Mongo", s.partition},
		{"Mongo server restarted", s.mongoRestart},
		{"rate-limited forge", s.rateLimited},
	} {
		res := FaultResult{Name: f.name, Bound: (server.DeepEvery + 1) * c.interval}
		if _, err := c.startReplicas(ctx, s.replicas, replicaSpec{}); err != nil {
			return out, err
		}
		if err := f.run(ctx, c, &res); err != nil {
			return out, fmt.Errorf("%s: %w", f.name, err)
		}
		c.stopAll()
		out = append(out, res)
		s.logf("%s: drifted %d, repaired %d, %v after the fault (bound %v), checks ok %v",
			res.Name, res.Drifted, res.Repaired, res.RepairAfter.Round(time.Millisecond), res.Bound, res.OK())
		for _, ch := range res.Checks {
			if !ch.OK {
				s.logf("  FAILED %s: %s", ch.Rule, ch.Detail)
			}
		}
	}
	return out, nil
}

// drifted is the share of the population whose statuses a fault changes.
func (s faultScenario) drifted() []runRequest {
	return s.population[:max(1, len(s.population)/4)]
}

// drift sets every drifted run's gate status to failure, disagreeing with
// its success verdict.
func (s faultScenario) drift(ctx context.Context, c *cluster) error {
	for _, r := range s.drifted() {
		if err := c.sim.setStatus(ctx, r.Repo, r.HeadSHA, gateContext, "failure"); err != nil {
			return err
		}
	}
	return nil
}

// awaitRepair polls the drifted runs' statuses until each agrees with its
// verdict again, at most within bound after `from`, and records the result.
func (s faultScenario) awaitRepair(ctx context.Context, c *cluster, res *FaultResult, from time.Time) error {
	rs := s.drifted()
	res.Drifted = len(rs)
	var err error
	res.Repaired, res.RepairAfter, err = awaitAgreement(ctx, c.sim, rs, from, res.Bound+5*time.Second, c.interval)
	return err
}

// soleSweeper checks that exactly one live replica sweeps over three
// intervals from now.
func soleSweeper(ctx context.Context, c *cluster, res *FaultResult, rule string) error {
	sp := startSampler(ctx, c.sim, 50*time.Millisecond)
	clock.Sleep(ctx, 3*c.interval)
	ss, err := sp.stop()
	if err != nil {
		return err
	}
	act, err := activeThroughout(ss, tokensOf(c.replicas))
	if err != nil {
		return fmt.Errorf("%s: %w", rule, err)
	}
	res.check(rule, len(act) == 1, "sweeping over 3 intervals: %v, want exactly one", act)
	return nil
}

// partition cuts the leader's connections to Mongo until a successor has
// swept for two intervals, then heals it.
func (s faultScenario) partition(ctx context.Context, c *cluster, res *FaultResult) error {
	l, err := c.leader(ctx)
	if err != nil {
		return err
	}
	followers := slices.DeleteFunc(slices.Clone(c.replicas), func(r *replica) bool { return r == l })
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
	sp := startSampler(ctx, c.sim, pollEvery)
	clock.Sleep(ctx, c.interval)
	tCut := time.Now()
	l.fwd.cut()
	if err := s.drift(ctx, c); err != nil {
		return err
	}
	bound := c.ttl() + c.retry() + c.interval
	base, err := c.sim.stats(ctx)
	if err != nil {
		return err
	}
	if _, err := pollUntil(ctx, c.sim, pollEvery, 3*bound+5*time.Second, func(st simStats) bool {
		return len(grown(base, st, others)) > 0
	}); err != nil {
		return fmt.Errorf("no successor swept while %s was partitioned: %w", l.name, err)
	}
	clock.Sleep(ctx, 2*c.interval)
	tHeal := time.Now()
	l.fwd.heal()
	if err := s.awaitRepair(ctx, c, res, tHeal); err != nil {
		return err
	}
	if err := soleSweeper(ctx, c, res, "one replica sweeps after the partition heals"); err != nil {
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
	res.check("the successor's first sweep comes within TTL + retry + one tick of the cut, as after a crash (one interval of slack for a loaded machine)",
		!firstNew.IsZero() && res.Takeover <= bound+c.interval,
		"%s first swept %v after the cut (bound %v)", successor, res.Takeover.Round(time.Millisecond), bound)
	stepped, okS := firstChange(held.stop(), tCut, func(held bool) bool { return !held })
	var elected change[string]
	okE := false
	if succ := c.byToken(successor); succ != nil {
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
func (s faultScenario) rateLimited(ctx context.Context, c *cluster, res *FaultResult) error {
	if _, err := c.leader(ctx); err != nil {
		return err
	}
	tokens := tokensOf(c.replicas)
	for _, t := range tokens {
		if err := c.sim.secondary(ctx, t, time.Second, 1_000_000); err != nil {
			return err
		}
	}
	tStart := time.Now()
	if err := s.drift(ctx, c); err != nil {
		return err
	}
	clock.Sleep(ctx, c.ttl()+c.retry())
	st, err := c.sim.stats(ctx)
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
		if err := c.sim.secondary(ctx, t, time.Second, 1); err != nil {
			return err
		}
	}
	tEnd := time.Now()
	if err := s.awaitRepair(ctx, c, res, tEnd); err != nil {
		return err
	}
	return soleSweeper(ctx, c, res, "one replica sweeps after the rate limit")
}

// mongoRestart stops the Mongo server for TTL + 2 retries, drifting
// statuses meanwhile, then starts it again on the same address and files.
func (s faultScenario) mongoRestart(ctx context.Context, c *cluster, res *FaultResult) error {
	if _, err := c.leader(ctx); err != nil {
		return err
	}
	sp := startSampler(ctx, c.sim, pollEvery)
	tStop := time.Now()
	c.mongo.signal(syscall.SIGTERM)
	c.mongo.wait(10 * time.Second)
	if err := s.drift(ctx, c); err != nil {
		return err
	}
	clock.Sleep(ctx, c.ttl()+2*c.retry())
	tStart := time.Now()
	if err := c.startMongoRetry(); err != nil {
		return err
	}
	if err := s.awaitRepair(ctx, c, res, tStart); err != nil {
		return err
	}
	if err := soleSweeper(ctx, c, res, "one replica is elected after the restart"); err != nil {
		return err
	}
	ss, err := sp.stop()
	if err != nil {
		return err
	}
	during := activeIn(ss, tStop.Add(c.interval), tStart, tokensOf(c.replicas))
	res.check("nobody sweeps while Mongo is down (from one interval after the stop)",
		len(during) == 0, "sweeping during the %v outage: %v", tStart.Sub(tStop).Round(time.Millisecond), during)
	return nil
}
