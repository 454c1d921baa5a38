package leasetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

// RunGroupInvariant runs seeds random fault schedules of a lease group, each
// a parallel subtest in virtual time on a fresh store from newStore (which
// must list its leases and scope releases to a term, or the test skips),
// and checks the group's guarantee: no two terms of a shard overlap, late
// calls included (see "Late calls" in the lease package doc): any overlap
// fails the schedule.
//
// In each schedule four member slots serve one group of 6 shards for 30
// virtual seconds. A slot's member joins, serves 3–15s, then leaves cleanly
// or is killed (its calls fail from then on, so it releases nothing), and
// a new member takes the slot 0–3s later. Every call may fail, or be held
// 0–4s and land late, after its caller gave up (a late Release among them);
// a member is cut off from the store for 1–5s now and then; a quarter of
// the terms' work returns early. The schedules must exercise elections and
// hand-overs, or the test fails: a check that sees none proves nothing.
func RunGroupInvariant(t *testing.T, seeds int, newStore func(t *testing.T) lease.Store) {
	t.Helper()
	var mu sync.Mutex
	terms, handovers, late := 0, 0, 0
	// A few parallel workers run the schedules one after the other, so a
	// large run does not start a goroutine per schedule up front.
	workers := 2 * runtime.GOMAXPROCS(0)
	t.Run("seeds", func(t *testing.T) {
		for w := range workers {
			t.Run(fmt.Sprint("worker", w), func(t *testing.T) {
				t.Parallel()
				for seed := uint64(w); seed < uint64(seeds); seed += uint64(workers) {
					t.Run(fmt.Sprint(seed), func(t *testing.T) {
						st, ok := newStore(t).(groupStore)
						if !ok {
							t.Skip("the store does not list its leases and scope releases to a term (lease.Inspector, lease.TermStore)")
						}
						b := newBridge(t, st)
						synctest.Test(t, func(t *testing.T) {
							tm, ho, lt := groupSchedule(t, b, seed)
							mu.Lock()
							defer mu.Unlock()
							terms, handovers, late = terms+tm, handovers+ho, late+lt
						})
					})
				}
			})
		}
	})
	if t.Failed() || t.Skipped() {
		return
	}
	if terms < seeds*20 || handovers < seeds*10 || late < seeds {
		t.Errorf("got %d terms, %d hand-overs and %d late calls over %d seeds, want at least %d, %d and %d: the schedules must exercise elections, hand-overs and late calls",
			terms, handovers, late, seeds, seeds*20, seeds*10, seeds)
	}
	t.Logf("%d shard terms, %d hand-overs, %d calls landing after their caller gave up, over %d schedules: no overlap",
		terms, handovers, late, seeds)
}

// groupSchedule runs one random schedule and returns its shard terms, its
// hand-overs (a term whose previous holder of the shard was another
// member) and its calls that landed after their caller gave up. The
// world's end checks that no two terms of a shard overlapped.
func groupSchedule(t *testing.T, b *bridge, seed uint64) (terms, handovers, late int) {
	const span = 30 * time.Second
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 21))
	draw := func(n int) int {
		mu.Lock()
		defer mu.Unlock()
		return rng.IntN(n)
	}
	ms := func(n int) time.Duration { return time.Duration(draw(n)) * time.Millisecond }
	w := newWorld(t, b, lease.GroupSpec{Name: "g", Shards: 6, TTL: groupTTL, Retry: groupRetry})
	var lateMu sync.Mutex
	plan := func(cuts [][2]time.Time) func(op, name string) fault {
		return func(op, name string) fault {
			now := time.Now()
			for _, c := range cuts {
				if !now.Before(c[0]) && now.Before(c[1]) {
					return fault{fail: true}
				}
			}
			switch p := draw(100); {
			case p < 80:
				return fault{}
			case p < 88:
				return fault{fail: true}
			case p < 96:
				return fault{hold: ms(1500)}
			}
			hold := 1500*time.Millisecond + ms(2500) // past the TTL/3 cut: lands late
			lateMu.Lock()
			late++
			lateMu.Unlock()
			return fault{hold: hold}
		}
	}
	var slots sync.WaitGroup
	for slot := range 4 {
		slots.Go(func() {
			time.Sleep(ms(2000))
			for n := 0; time.Now().Before(w.at(span)); n++ {
				owner := fmt.Sprintf("%c%d", 'a'+slot, n)
				var cuts [][2]time.Time
				for at := time.Now(); at.Before(w.at(span)); {
					at = at.Add(5*time.Second + ms(20000))
					end := at.Add(time.Second + ms(4000))
					cuts = append(cuts, [2]time.Time{at, end})
					at = end
				}
				m := w.startWork(owner, func(ctx context.Context, _ int) {
					if draw(4) > 0 {
						<-ctx.Done()
						return
					}
					select { // the work finishes its term early
					case <-ctx.Done():
					case <-time.After(time.Second + ms(9000)):
					}
				})
				m.view.setPlan(plan(cuts))
				time.Sleep(3*time.Second + ms(12000))
				if draw(2) == 0 {
					w.kill(owner)
				} else {
					w.leave(owner)
				}
				time.Sleep(ms(3000))
			}
		})
	}
	slots.Wait()
	w.end()
	w.mu.Lock()
	defer w.mu.Unlock()
	last := map[int]string{}
	for _, e := range w.events {
		if e.Kind != lease.Elected {
			continue
		}
		terms++
		if prev, ok := last[e.Shard]; ok && prev != e.Owner {
			handovers++
		}
		last[e.Shard] = e.Owner
	}
	return terms, handovers, late
}
