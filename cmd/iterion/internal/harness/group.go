package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"time"

	"iterion.dev/iterion/internal/clock"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// GroupResult is the lease-group scenario: replicas running the
// measurement group (serve --measure-group-shards) of Shards shards, its
// figures computed from each replica's logged shard terms (the start and
// end of every term, with the replica's timestamps: one machine, one
// clock) and its store-call counter.
type GroupResult struct {
	Shards, Replicas int
	Interval         time.Duration // the replicas' sweep interval: TTL 3 of them, retry 1
	TTL, Retry       time.Duration
	// Settled says, per phase, whether the group settled (every shard held
	// by a live replica, none above its fair share) before the deadline.
	Settled map[string]bool
	// MaxHeld is the most shards one replica held after settling at
	// Replicas replicas; Fair is ceil(Shards/Replicas).
	MaxHeld, Fair int
	// KilledShards are the shards the replica killed with SIGKILL held;
	// KillReheld the longest of them went unheld after the kill, and
	// KillMaxUnheld the longest any shard went unheld until the group
	// settled again. Bound: TTL + retry + one tick (an interval).
	KilledShards              int
	KillReheld, KillMaxUnheld time.Duration
	// StopHandOvers are the terms the SIGTERM-stopped replicas ended;
	// StopGap the longest a shard went unheld after one of them, from its
	// release to the next term. Bound: one retry. StopMaxUnheld is the
	// longest any shard went unheld, for any cause, until the group
	// settled again.
	StopHandOvers          int
	StopGap, StopMaxUnheld time.Duration
	// Moves are the shards that changed hands when scaling up to Replicas;
	// UpHandOvers the terms that ended meanwhile, for any reason, and UpGap
	// the longest a shard went unheld after one of them. Bound: one retry.
	// UpMaxUnheld is the longest any shard went unheld, for any cause,
	// while scaling up (from the start of the new replicas).
	Moves, UpHandOvers int
	UpGap, UpMaxUnheld time.Duration
	// Deadlines are the terms that stepped down at their deadline over
	// the whole run: renewals the store did not answer in time, none of
	// the scenario's doing.
	Deadlines                     int
	OpsPerMinute                  float64 // store calls of the group, all replicas, steady state
	OpsByOp                       map[string]float64
	GoalOpsPerMinute, NaivePerMin float64
	// Overlaps counts pairs of terms of one shard that overlapped in time;
	// Terms is how many terms were logged.
	Overlaps, Terms int
}

// Goals reports each goal of the scenario and whether it was met, in a
// fixed order. A goal whose figures were not measured (no term logged, the
// killed replica holding no shard, no hand-over timed, no store call
// counted, as in the result of a run that failed part-way) is not met.
func (g GroupResult) Goals() []GroupGoal {
	tick := g.Interval
	logged := g.Terms > 0
	return []GroupGoal{
		{"balance: most shards any replica holds ≤ ceil(S/N)", fmt.Sprintf("%d ≤ %d", g.MaxHeld, g.Fair), g.MaxHeld > 0 && g.MaxHeld <= g.Fair && g.Settled[phaseBalance]},
		{"kill -9: its shards re-held within TTL + retry + one tick",
			fmt.Sprintf("%d shards, longest %v ≤ %v", g.KilledShards, g.KillReheld.Round(time.Millisecond), g.TTL+g.Retry+tick), g.KilledShards > 0 && g.KillReheld <= g.TTL+g.Retry+tick},
		{"kill -9: no shard unheld longer", fmt.Sprintf("%v ≤ %v", g.KillMaxUnheld.Round(time.Millisecond), g.TTL+g.Retry+tick), logged && g.KillMaxUnheld <= g.TTL+g.Retry+tick},
		{"5 → 10: shards that changed hands ≤ 0.6·S", fmt.Sprintf("%d ≤ %.1f", g.Moves, 0.6*float64(g.Shards)), logged && float64(g.Moves) <= 0.6*float64(g.Shards)},
		{"5 → 10: each hand-over at most one retry unheld",
			fmt.Sprintf("%d hand-overs, longest %v ≤ %v (any shard, any cause: %v)", g.UpHandOvers, g.UpGap.Round(time.Millisecond), g.Retry, g.UpMaxUnheld.Round(time.Millisecond)), g.UpHandOvers > 0 && g.UpGap <= g.Retry},
		{"10 → 5 by SIGTERM: every shard re-held within one retry",
			fmt.Sprintf("%d shards, longest %v ≤ %v (any shard, any cause: %v)", g.StopHandOvers, g.StopGap.Round(time.Millisecond), g.Retry, g.StopMaxUnheld.Round(time.Millisecond)), g.StopHandOvers > 0 && g.StopGap <= g.Retry},
		{"store calls/min ≤ 1.2 × (S per TTL/3 + 2N per retry)",
			fmt.Sprintf("%.0f ≤ %.0f (naive N·S per retry: %.0f)", g.OpsPerMinute, g.GoalOpsPerMinute, g.NaivePerMin), g.OpsPerMinute > 0 && g.OpsPerMinute <= g.GoalOpsPerMinute},
		{"overlapping terms of one shard", fmt.Sprintf("%d of %d terms", g.Overlaps, g.Terms), logged && g.Overlaps == 0},
	}
}

// GroupGoal is one goal of the group scenario: what it asks, what was
// measured, and whether that meets it.
type GroupGoal struct {
	Goal, Measured string
	Met            bool
}

// The group scenario's phases, the keys of GroupResult.Settled.
const (
	phaseBalance = "balance at N"
	phaseKill    = "after kill -9"
	phaseStop    = "after clean stops"
	phaseUp      = "after scaling up"
)

// groupScenario runs replicas with the measurement group of shards
// shards: it settles them, measures the store cost, kills one with
// SIGKILL, stops half with SIGTERM and starts them again.
type groupScenario struct {
	shards, replicas int
	interval         time.Duration
	window           time.Duration // the store cost's window
	logf             func(format string, args ...any)
}

// groupReplica is a replica the scenario started, kept after it stops so
// its log can be read.
type groupReplica struct {
	r      *replica
	killed time.Time // when it was sent SIGKILL; zero if never
}

// run drives c's replicas through the scenario's steps and returns what it
// measured; on an error, the figures set before it.
func (s groupScenario) run(ctx context.Context, c *cluster) (GroupResult, error) {
	g := server.MeasureGroup()
	res := GroupResult{Shards: s.shards, Replicas: s.replicas, Interval: s.interval,
		TTL: g.TTL(s.interval), Retry: g.Retry(s.interval), Settled: map[string]bool{},
		Fair: (s.shards + s.replicas - 1) / s.replicas}
	spec := replicaSpec{extra: []string{"--measure-group-shards", fmt.Sprint(s.shards), "--sweep-interval", s.interval.String()}}
	var all []*groupReplica
	start := func(n int) error {
		rs, err := c.startReplicas(ctx, n, spec)
		for _, r := range rs {
			all = append(all, &groupReplica{r: r})
		}
		return err
	}
	tStart := time.Now()
	if err := start(s.replicas); err != nil {
		return res, err
	}
	// Balance, then the store cost in steady state.
	var err error
	if res.Settled[phaseBalance], err = s.settle(ctx, c); err != nil {
		return res, err
	}
	tBalance := time.Now()
	if err := s.storeCost(ctx, c, &res); err != nil {
		return res, err
	}
	s.logf("store calls: %.0f/min (goal ≤ %.0f, naive %.0f)", res.OpsPerMinute, res.GoalOpsPerMinute, res.NaivePerMin)
	// kill -9 one of them, at a random phase of its retry.
	clock.Sleep(ctx, rand.N(s.interval))
	victim := all[len(all)-1]
	tKill := time.Now()
	victim.killed = tKill
	c.stopReplica(victim.r, syscall.SIGKILL)
	if res.Settled[phaseKill], err = s.settle(ctx, c); err != nil {
		return res, err
	}
	tKillDone := time.Now()
	// Back to N, then stop half of them cleanly, together.
	if err := start(1); err != nil {
		return res, err
	}
	if _, err = s.settle(ctx, c); err != nil {
		return res, err
	}
	half := slices.Clone(c.replicas[:s.replicas-s.replicas/2])
	tStop := time.Now()
	stopTogether(c, half)
	if res.Settled[phaseStop], err = s.settle(ctx, c); err != nil {
		return res, err
	}
	tStopDone := time.Now()
	// And start them again: N/2 → N.
	tUp := time.Now()
	if err := start(len(half)); err != nil {
		return res, err
	}
	if res.Settled[phaseUp], err = s.settle(ctx, c); err != nil {
		return res, err
	}
	tEnd := time.Now()

	terms, err := readTerms(all, tEnd)
	if err != nil {
		return res, err
	}
	res.Terms = len(terms)
	res.MaxHeld = maxHeldAt(terms, tBalance)
	res.KilledShards, res.KillReheld = reheld(terms, victim.r.name, tKill)
	res.KillMaxUnheld = longestUnheld(terms, s.shards, tKill, tKillDone)
	stopped := namesOf(half)
	res.StopHandOvers, res.StopGap = handOverGap(terms, tStop, tStopDone, func(st shardTerm) bool {
		return st.reason == lease.ReasonCanceled && slices.Contains(stopped, st.replica)
	})
	res.StopMaxUnheld = longestUnheld(terms, s.shards, tStop, tStopDone)
	res.Moves = moves(terms, s.shards, tUp, tEnd.Add(-time.Millisecond)) // open terms end at tEnd
	// Every term that ended while scaling up is a hand-over, whatever its
	// reason: one given up to even the share, or lost at its deadline.
	res.UpHandOvers, res.UpGap = handOverGap(terms, tUp, tEnd, func(st shardTerm) bool { return st.to.Before(tEnd) })
	res.UpMaxUnheld = longestUnheld(terms, s.shards, tUp, tEnd)
	res.Deadlines = stepDowns(terms, tStart, tEnd, lease.ReasonDeadline)
	res.Overlaps = overlaps(terms)
	for _, gl := range res.Goals() {
		s.logf("%s: %s (%s)", gl.Goal, gl.Measured, metWord(gl.Met))
	}
	return res, nil
}

func metWord(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// settle waits until one live replica's /leases shows every shard of the
// group held by a live replica and none holding more than its fair share,
// then two retries more; it reports false if that did not happen within
// TTL + 10 retries.
func (s groupScenario) settle(ctx context.Context, c *cluster) (bool, error) {
	g := server.MeasureGroup()
	ttl, retry := g.TTL(s.interval), g.Retry(s.interval)
	deadline := time.Now().Add(ttl + 10*retry)
	for {
		if ok, err := s.balanced(ctx, c); err != nil {
			return false, err
		} else if ok {
			clock.Sleep(ctx, 2*retry)
			return true, ctx.Err()
		}
		if time.Now().After(deadline) {
			s.logf("group did not settle within %v", ttl+10*retry)
			return false, nil
		}
		clock.Sleep(ctx, 100*time.Millisecond)
	}
}

// balanced reads the store's holders through the first live replica.
func (s groupScenario) balanced(ctx context.Context, c *cluster) (bool, error) {
	if len(c.replicas) == 0 {
		return false, fmt.Errorf("%w: no live replica", ErrMeasure)
	}
	hs, err := c.replicas[0].api.leases(ctx)
	if err != nil {
		return false, err
	}
	live := map[string]int{}
	for _, r := range c.replicas {
		live[r.owner] = 0
	}
	byName := map[string]holder{}
	for _, h := range hs {
		byName[h.Name] = h
	}
	g := server.MeasureGroup()
	fair := (s.shards + len(c.replicas) - 1) / len(c.replicas)
	now := time.Now()
	for i := range s.shards {
		h, ok := byName[lease.ShardName(g.Name, s.shards, i)]
		if !ok || !h.Expires.After(now) {
			return false, nil
		}
		n, ok := live[h.Owner]
		if !ok {
			return false, nil
		}
		live[h.Owner] = n + 1
	}
	for _, n := range live {
		if n > fair {
			return false, nil
		}
	}
	return true, nil
}

// storeCost measures the group's store calls per minute over the window,
// from every live replica's measure_group_store_calls_total.
func (s groupScenario) storeCost(ctx context.Context, c *cluster, res *GroupResult) error {
	read := func() (map[string]float64, error) {
		out := map[string]float64{}
		for _, r := range c.replicas {
			fams, err := r.api.metrics(ctx)
			if err != nil {
				return nil, err
			}
			for _, m := range fams["measure_group_store_calls_total"].GetMetric() {
				out[label(m, "op")] += m.GetCounter().GetValue()
			}
		}
		return out, nil
	}
	t0 := time.Now()
	a, err := read()
	if err != nil {
		return err
	}
	clock.Sleep(ctx, s.window)
	b, err := read()
	if err != nil {
		return err
	}
	perMin := time.Minute.Seconds() / time.Since(t0).Seconds()
	res.OpsByOp = map[string]float64{}
	for op, v := range b {
		res.OpsByOp[op] = (v - a[op]) * perMin
		res.OpsPerMinute += res.OpsByOp[op]
	}
	res.GoalOpsPerMinute, res.NaivePerMin = storeGoal(s.shards, len(c.replicas), res.TTL, res.Retry)
	return nil
}

// storeGoal is the store-cost goal per minute, 1.2 × (shards renewals per
// TTL/3 + 2 calls per replica per retry), and the naive figure, every
// replica trying every shard every retry.
func storeGoal(shards, replicas int, ttl, retry time.Duration) (goal, naive float64) {
	perMin := func(n int, every time.Duration) float64 { return float64(n) * time.Minute.Seconds() / every.Seconds() }
	return 1.2 * (perMin(shards, ttl/3) + perMin(2*replicas, retry)), perMin(replicas*shards, retry)
}

// stopTogether stops rs with SIGTERM at once and waits for them.
func stopTogether(c *cluster, rs []*replica) {
	for _, r := range rs {
		r.p.signal(syscall.SIGTERM)
	}
	for _, r := range rs {
		c.stopReplica(r, syscall.SIGTERM)
	}
}

func namesOf(rs []*replica) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.name
	}
	return out
}
