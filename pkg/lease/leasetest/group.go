package leasetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/internal/conformance"
	"iterion.dev/iterion/pkg/lease"
)

// RunGroup runs every lease-group case as a subtest of t, each on a fresh
// store from newStore, which may use t for setup and cleanup. The store
// must list its leases and scope releases to a term ([lease.Inspector] and
// [lease.TermStore]); the cases skip otherwise. Each case runs members of
// one group ([lease.RunGroup]) in virtual time (testing/synctest), with
// faults injected in each member's view of the store, and checks, besides
// its own rule, that no two terms of a shard overlap. Store calls go
// through goroutines outside the bubble, so a database client works, and
// take no virtual time. RunGroup does not call t.Parallel.
func RunGroup(t *testing.T, newStore func(t *testing.T) lease.Store) {
	t.Helper()
	conformance.Run(t, groupCases(), func(t *testing.T) *bridge {
		st, ok := newStore(t).(groupStore)
		if !ok {
			t.Skip("the store does not list its leases and scope releases to a term (lease.Inspector, lease.TermStore)")
		}
		return newBridge(t, st)
	})
}

// The group cases: 8 shards, TTL 3s (renewals every 1s, a term steps down
// 2.5s after its last proven renewal), a survey every 1s.
const (
	groupShards = 8
	groupTTL    = 3 * time.Second
	groupRetry  = time.Second
	settled     = 5 * time.Second // members started by 1s have settled
)

// groupCase runs check on a world of the group in a bubble, then ends the
// world, which checks that no two terms of a shard overlapped.
func groupCase(check func(t *testing.T, w *world)) func(t *testing.T, b *bridge) {
	return func(t *testing.T, b *bridge) {
		synctest.Test(t, func(t *testing.T) {
			w := newWorld(t, b, lease.GroupSpec{Name: "g", Shards: groupShards, TTL: groupTTL, Retry: groupRetry})
			defer w.end()
			check(t, w)
		})
	}
}

// startThree starts members a, b and c at 0s, 0.3s and 0.6s, so their
// surveys fall at different instants.
func startThree(w *world) {
	for i, o := range []string{"a", "b", "c"} {
		w.sleepUntil(time.Duration(i) * 300 * time.Millisecond)
		w.start(o)
	}
}

// wantCounts fails unless the shards are held as want says, when.
func wantCounts(t *testing.T, w *world, when string, want string, rule string) {
	t.Helper()
	if got := fmt.Sprint(w.counts()); got != want {
		t.Errorf("%s: shards held %s, want %s: %s", when, got, want, rule)
	}
}

func groupCases() []conformance.Case[*bridge] {
	return []conformance.Case[*bridge]{
		{Name: "GroupOneMemberHoldsEveryShard", Rule: "a member alone holds every shard from its first survey: a deployment of one process serves the whole group",
			Check: groupCase(func(t *testing.T, w *world) {
				w.start("a")
				w.sleepUntil(0)
				wantCounts(t, w, "at 0s", "[a=8]", "one member takes every free shard at its first survey")
			})},
		{Name: "GroupSpreadsAndStays", Rule: "three members settle to 3, 3 and 2 shards, then nothing moves and the store sees only renewals, one member renewal and one list per member per Retry",
			Check: groupCase(func(t *testing.T, w *world) {
				startThree(w)
				w.sleepUntil(settled)
				if got := w.shares(); got != "[3 3 2]" {
					t.Errorf("settled: shares %s, want [3 3 2]: each member holds its share, ceil or floor of 8/3, and every shard is held", got)
				}
				before := map[string]map[string]int{}
				for _, o := range []string{"a", "b", "c"} {
					before[o] = map[string]int{}
					for _, op := range []string{"acquire", "acquireTerm", "renew", "release", "releaseTerm", "list"} {
						before[o][op] = w.member(o).view.count(op)
					}
				}
				const span = time.Minute
				w.sleepUntil(settled + span)
				if moved := w.since(settled, 0); len(moved) != 0 {
					t.Errorf("after settling: %d shard transitions, want 0: a settled group is sticky", len(moved))
				}
				renewals := 0
				for _, o := range []string{"a", "b", "c"} {
					v := w.member(o).view
					for op, want := range map[string]int{"acquire": 60, "list": 60, "acquireTerm": 0, "release": 0, "releaseTerm": 0} {
						if got := v.count(op) - before[o][op]; got != want {
							t.Errorf("%s over %v: %d %s calls, want %d: steady state costs one member renewal and one list per Retry, nothing more", o, span, got, op, want)
						}
					}
					renewals += v.count("renew") - before[o]["renew"]
				}
				if want := groupShards * int(span/(groupTTL/3)); renewals != want {
					t.Errorf("over %v: %d renewals, want %d: every shard renews every TTL/3", span, renewals, want)
				}
			})},
		{Name: "GroupKilledMembersShardsMove", Rule: "a killed member's shards are held again within TTL + Retry of the kill, and the survivors share them",
			Check: groupCase(func(t *testing.T, w *world) {
				startThree(w)
				w.sleepUntil(settled)
				w.kill("c")
				w.sleepUntil(settled + groupTTL + groupRetry)
				wantCounts(t, w, "TTL + Retry after the kill", "[a=4 b=4]", "the survivors hold every shard, 4 each")
				for _, g := range w.gaps(settled) {
					if g > groupTTL+groupRetry {
						t.Errorf("a shard went %v without a holder, want at most TTL + Retry = %v", g, groupTTL+groupRetry)
					}
				}
			})},
		{Name: "GroupStalledMemberStepsDownFirst", Rule: "a member whose calls stall past its TTL steps its terms down before anyone takes its shards, and gets its share back after",
			Check: groupCase(func(t *testing.T, w *world) {
				startThree(w)
				w.sleepUntil(settled)
				stallEnd := w.at(settled + 2*groupTTL)
				w.member("c").view.setPlan(func(string, string) fault {
					return fault{hold: time.Until(stallEnd)}
				})
				w.sleepUntil(settled + 2*groupTTL - time.Millisecond)
				wantCounts(t, w, "during the stall", "[a=4 b=4]", "the stalled member's shards went to the others")
				w.member("c").view.setPlan(nil)
				w.sleepUntil(settled + 2*groupTTL + 3*groupRetry)
				if got := w.shares(); got != "[3 3 2]" {
					t.Errorf("after the stall: shares %s (%v), want [3 3 2]: the member came back and got its share", got, w.counts())
				}
			})},
		{Name: "GroupStoreDownElectsNobody", Rule: "with the store unreachable every term steps down by its deadline and no shard is elected; once it answers, every shard is held again within one Retry",
			Check: groupCase(func(t *testing.T, w *world) {
				startThree(w)
				w.sleepUntil(settled)
				for _, o := range []string{"a", "b", "c"} {
					w.member(o).view.setPlan(func(string, string) fault { return fault{fail: true} })
				}
				outage := 4 * groupTTL
				w.sleepUntil(settled + groupTTL)
				wantCounts(t, w, "one TTL into the outage", "[unheld=8]", "every term stepped down, fail-closed, by its deadline")
				w.sleepUntil(settled + outage)
				if el := w.since(settled, lease.Elected); len(el) != 0 {
					t.Errorf("during the outage: %d elections, want 0: a store that cannot answer elects nobody", len(el))
				}
				for _, o := range []string{"a", "b", "c"} {
					w.member(o).view.setPlan(nil)
				}
				w.sleepUntil(settled + outage + groupRetry)
				if got := w.holding(); slices.Contains(got, "") {
					t.Errorf("one Retry after the outage: holders %q, want every shard held", got)
				}
				w.sleepUntil(settled + outage + 3*groupRetry)
				if got := w.shares(); got != "[3 3 2]" {
					t.Errorf("three Retries after the outage: shares %s (%v), want [3 3 2]: the members even out again", got, w.counts())
				}
			})},
		{Name: "GroupJoinAndLeaveHandOverCleanly", Rule: "a member that joins gets its share with the fewest moves, each shard without a holder at most one Retry; one that leaves hands its shards over within one Retry",
			Check: groupCase(func(t *testing.T, w *world) {
				w.start("a")
				w.sleepUntil(300 * time.Millisecond)
				w.start("b")
				w.sleepUntil(settled)
				wantCounts(t, w, "two members settled", "[a=4 b=4]", "two members hold 4 each")
				w.start("c")
				w.sleepUntil(2 * settled)
				wantCounts(t, w, "after c joined", "[a=3 b=3 c=2]", "a and b, holding the most, keep the larger shares")
				if moved := w.since(settled, lease.SteppedDown); len(moved) != 2 {
					t.Errorf("c joining: %d hand-overs, want 2: only c's share moves", len(moved))
				}
				for _, g := range w.gaps(settled) {
					if g > groupRetry {
						t.Errorf("joining: a shard went %v without a holder, want at most one Retry (%v)", g, groupRetry)
					}
				}
				w.leave("c")
				w.sleepUntil(2*settled + groupRetry)
				wantCounts(t, w, "one Retry after c left", "[a=4 b=4]", "a clean leave hands every shard over within one Retry")
				for _, g := range w.gaps(2 * settled) {
					if g > groupRetry {
						t.Errorf("leaving: a shard went %v without a holder, want at most one Retry (%v)", g, groupRetry)
					}
				}
			})},
		{Name: "GroupLateReleaseKeepsTheLaterTerm", Rule: "a shard's release that lands after its owner's next term of that shard began deletes nothing: the later term runs on",
			Check: groupCase(func(t *testing.T, w *world) {
				// Shard 0's first term ends at 1.5s (its work returns); its
				// release is held until 4s, past its 1s cut. At the 2s survey
				// the lease is still a's: a serves it again, in a new term.
				w.sleepUntil(0)
				first := true
				w.startWork("a", func(ctx context.Context, shard int) {
					if shard == 0 && first {
						first = false
						time.Sleep(1500 * time.Millisecond)
						w.member("a").view.setPlan(func(op, name string) fault {
							if (op == "release" || op == "releaseTerm") && name == lease.ShardName("g", groupShards, 0) {
								return fault{hold: 2500 * time.Millisecond}
							}
							return fault{}
						})
						return
					}
					<-ctx.Done()
				})
				w.sleepUntil(10 * time.Second)
				if got := w.holding()[0]; got != "a" {
					t.Errorf("at 10s: shard 0 held by %q, want a: the late release of the earlier term deleted the later term's lease", got)
				}
				if down := w.since(2*time.Second, lease.SteppedDown); len(down) != 0 {
					t.Errorf("after 2s: %d step-downs (%v), want 0: the later term runs on", len(down), down[0].Reason)
				}
			})},
	}
}

// RunGroupGoals runs a lease group of 64 shards through its goals on a
// fresh store from newStore, in virtual time, asserting each and logging
// the figures: at most 7 shards a member at 10 members; 5 → 10 members
// moves at most 0.6·S shards, none without a holder for more than one
// Retry; in steady state the store sees S renewals per TTL/3 and 2 calls
// per member per Retry (at most 1.2 times that); after a kill every shard
// is held again within TTL + Retry; 10 → 5 members by clean stops leaves no
// shard without a holder for more than one Retry. It makes thousands of
// store calls: on a database, it takes minutes.
func RunGroupGoals(t *testing.T, newStore func(t *testing.T) lease.Store) {
	st, ok := newStore(t).(groupStore)
	if !ok {
		t.Skip("the store does not list its leases and scope releases to a term (lease.Inspector, lease.TermStore)")
	}
	b := newBridge(t, st)
	synctest.Test(t, func(t *testing.T) { groupGoals(t, b) })
}

// groupGoals is RunGroupGoals in the bubble.
func groupGoals(t *testing.T, b *bridge) {
	const shards = 64
	w := newWorld(t, b, lease.GroupSpec{Name: "g", Shards: shards, TTL: groupTTL, Retry: groupRetry})
	defer w.end()
	owners := []string{"m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9"}
	most := func() (most, unheld int) {
		by := map[string]int{}
		for _, h := range w.holding() {
			if h == "" {
				unheld++
			}
			by[h]++
		}
		for o, n := range by {
			if o != "" {
				most = max(most, n)
			}
		}
		return most, unheld
	}
	worstGap := func(from time.Duration) (worst time.Duration) {
		for _, g := range w.gaps(from) {
			worst = max(worst, g)
		}
		return worst
	}
	at := time.Duration(0)
	for i, o := range owners[:5] {
		w.sleepUntil(time.Duration(i) * 100 * time.Millisecond)
		w.start(o)
	}
	at = 10 * time.Second
	w.sleepUntil(at)
	if m, u := most(); m > 13 || u != 0 {
		t.Errorf("5 members settled: most %d, unheld %d; want at most 13 (ceil 64/5) and 0", m, u)
	}

	// 5 → 10.
	grow := at
	for i, o := range owners[5:] {
		w.sleepUntil(grow + time.Duration(i)*100*time.Millisecond)
		w.start(o)
	}
	at += 10 * time.Second
	w.sleepUntil(at)
	moved := len(w.since(grow, lease.SteppedDown))
	m, u := most()
	t.Logf("5 → 10 members: %d of %d shards changed hands (%.2f·S), longest without a holder %v; then the most any member holds is %d (ceil %d/10 = 7), %d unheld",
		moved, shards, float64(moved)/shards, worstGap(grow), m, shards, u)
	if m > 7 || u != 0 {
		t.Errorf("10 members settled: most %d, unheld %d; want at most 7 and 0", m, u)
	}
	if moved > shards*6/10 {
		t.Errorf("5 → 10: %d shards changed hands, want at most 0.6·S = %d", moved, shards*6/10)
	}
	if g := worstGap(grow); g > groupRetry {
		t.Errorf("5 → 10: a shard went %v without a holder, want at most one Retry (%v)", g, groupRetry)
	}

	// Steady state, one minute.
	ops := func() (n int) {
		for _, o := range owners {
			v := w.member(o).view
			for _, op := range []string{"acquire", "acquireTerm", "renew", "release", "releaseTerm", "list"} {
				n += v.count(op)
			}
		}
		return n
	}
	before := ops()
	at += time.Minute
	w.sleepUntil(at)
	perMinute := ops() - before
	bound := shards*int(time.Minute/(groupTTL/3)) + 2*len(owners)*int(time.Minute/groupRetry)
	naive := bound + len(owners)*shards*int(time.Minute/groupRetry)
	t.Logf("steady state at S=%d, N=%d: %d store calls per minute; bound 1.2 × %d = %d; a member trying every shard every Retry would make %d",
		shards, len(owners), perMinute, bound, bound*12/10, naive)
	if perMinute*10 > bound*12 {
		t.Errorf("steady state: %d store calls per minute, want at most 1.2 × %d", perMinute, bound)
	}

	// kill -9 of one of 10.
	kill := at
	w.kill("m9")
	at += groupTTL + 2*groupRetry
	w.sleepUntil(at)
	m, u = most()
	t.Logf("kill -9 of 1 of 10: longest without a holder %v (bound TTL + Retry = %v); then most %d, unheld %d",
		worstGap(kill), groupTTL+groupRetry, m, u)
	if g := worstGap(kill); g > groupTTL+groupRetry {
		t.Errorf("kill: a shard went %v without a holder, want at most TTL + Retry = %v", g, groupTTL+groupRetry)
	}
	if m > 8 || u != 0 {
		t.Errorf("9 members settled: most %d, unheld %d; want at most 8 (ceil 64/9) and 0", m, u)
	}
	w.start("m10")
	at += 10 * time.Second
	w.sleepUntil(at)

	// 10 → 5 by clean stops.
	shrink := at
	for _, o := range []string{"m5", "m6", "m7", "m8", "m10"} {
		w.leave(o)
	}
	at += 10 * time.Second
	w.sleepUntil(at)
	m, u = most()
	t.Logf("10 → 5 by clean stops: longest without a holder %v (one Retry = %v); then most %d, unheld %d", worstGap(shrink), groupRetry, m, u)
	if g := worstGap(shrink); g > groupRetry {
		t.Errorf("10 → 5: a shard went %v without a holder, want at most one Retry (%v)", g, groupRetry)
	}
	if m > 13 || u != 0 {
		t.Errorf("5 members settled: most %d, unheld %d; want at most 13 and 0", m, u)
	}
}
