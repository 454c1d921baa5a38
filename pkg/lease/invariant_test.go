package lease_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

// seeds is how many fault schedules TestNoTwoTermsOverlapUnderRandomFaults
// runs: 1,000 by default, shortSeeds with -short unless -lease.seeds is
// given; docs/benchmarks.md records a run of 100,000 (-lease.seeds=100000).
var seeds = flag.Int("lease.seeds", 1000, "fault schedules TestNoTwoTermsOverlapUnderRandomFaults runs")

// shortSeeds is the schedules -short runs: a tenth of the default, a
// second or two.
const shortSeeds = 100

// scheduleCount is the number of fault schedules to run: -lease.seeds when
// given, shortSeeds with -short, or the default.
func scheduleCount() int {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "lease.seeds" })
	if testing.Short() && !given {
		return shortSeeds
	}
	return *seeds
}

// TestNoTwoTermsOverlapUnderRandomFaults is the lease's guarantee (package
// doc): with holders that do not stall, a term's step-down precedes any
// successor's election. Four candidates share one MemoryStore, through its
// term-scoped release; every call may fail, be refused, hang until it is
// cut, land with its answer lost, or land late after its caller gave up (a
// late Release too, which may land after its owner's next term began);
// work sometimes returns early.
func TestNoTwoTermsOverlapUnderRandomFaults(t *testing.T) {
	const span = time.Minute // virtual time per schedule
	seeds := scheduleCount()
	owners := []string{"a", "b", "c", "d"}
	var countMu sync.Mutex // guards the three counts below
	total, handovers, lateReleases := 0, 0, 0
	t.Run("seeds", func(t *testing.T) {
		for seed := range uint64(seeds) {
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				synctest.Test(t, func(t *testing.T) {
					h := newHarness(t)
					var mu sync.Mutex
					rng := rand.New(rand.NewPCG(seed, 117))
					draw := func(n int) int {
						mu.Lock()
						defer mu.Unlock()
						return rng.IntN(n)
					}
					// Each candidate is also cut off from the store now and then: a
					// partition of 1–6s starting every 5–25s.
					partitions := map[string][][2]time.Time{}
					for _, o := range owners {
						for at := h.at(0); at.Before(h.at(span)); {
							at = at.Add(time.Duration(5000+draw(20000)) * time.Millisecond)
							end := at.Add(time.Duration(1000+draw(5000)) * time.Millisecond)
							partitions[o] = append(partitions[o], [2]time.Time{at, end})
							at = end
						}
					}
					st := newTermFaultStore(lease.NewMemoryStore(), func(c storeCall) fault {
						for _, p := range partitions[c.Owner] {
							if !c.At.Before(p[0]) && c.At.Before(p[1]) {
								return fault{kind: fail}
							}
						}
						d := time.Duration(draw(1500)) * time.Millisecond
						switch p := draw(100); {
						case p < 55:
							return fault{}
						case p < 65:
							return fault{kind: fail}
						case p < 72:
							return fault{kind: refuse}
						case p < 80:
							return fault{kind: landLose}
						case p < 90:
							return fault{delay: d} // cut at TTL/3 when d exceeds it
						}
						// A late Release may land after its owner's next term
						// began: the term-scoped release keeps that term's lease.
						return fault{kind: late, delay: d}
					})
					ctx, cancel := context.WithCancel(t.Context())
					var dones []<-chan error
					for i, o := range owners {
						time.Sleep(time.Duration(draw(1000)) * time.Millisecond)
						early := time.Duration(1+draw(20)) * time.Second
						dones = append(dones, h.start(ctx, st, h.spec(o, time.Duration(100+i*150)*time.Millisecond), h.work(o, func(ctx context.Context) {
							if draw(3) > 0 {
								<-ctx.Done()
								return
							}
							select { // the net finishes its term early
							case <-ctx.Done():
							case <-time.After(early):
							}
						})))
					}
					h.sleepUntil(span)
					cancel()
					for _, d := range dones {
						<-d
					}
					st.Settle()
					terms := h.Intervals()
					hand := 0
					for i := 1; i < len(terms); i++ {
						prev, next := terms[i-1], terms[i]
						if prev.StepSeq < 0 || next.ElectedSeq < prev.StepSeq || next.Elected.Before(prev.Stepped) {
							t.Errorf("seed %d: %s's term from %v overlaps %s's, stepped down at %v: no two terms overlap",
								seed, next.Owner, h.since(next.Elected), prev.Owner, h.since(prev.Stepped))
						}
						if next.Owner != prev.Owner {
							hand++
						}
					}
					// Work ran inside its term: started after the election, saw
					// its context cancelled at the step-down.
					for _, w := range h.Terms("") {
						if w.Cancelled.Before(w.Start) {
							t.Errorf("seed %d: %s's work saw its step-down at %v before it started at %v", seed, w.Owner, h.since(w.Cancelled), h.since(w.Start))
						}
					}
					if n := len(h.Terms("")); n != len(terms) {
						t.Errorf("seed %d: got %d calls of work for %d terms, want one per term", seed, n, len(terms))
					}
					late := lateReleasesIntoALaterTerm(st.Calls("release", ""), h.Events("", lease.Elected))
					countMu.Lock()
					defer countMu.Unlock()
					total += len(terms)
					lateReleases += late
					handovers += hand
				})
			})
		}
	})
	// The faults must leave room for terms and hand-overs, or the check
	// above proves nothing.
	if total < seeds*8 || handovers < seeds*4 || lateReleases < seeds/20 {
		t.Errorf("got %d terms, %d hand-overs and %d late releases into a later term over %d seeds, want at least %d, %d and %d: the test must exercise elections and late releases",
			total, handovers, lateReleases, seeds, seeds*8, seeds*4, seeds/20)
	}
	t.Logf("%d terms, %d hand-overs, %d late releases landing in their owner's later term, over %d seeds", total, handovers, lateReleases, seeds)
}

// lateReleasesIntoALaterTerm counts the late releases that landed after
// their owner was elected again: the schedule a term-scoped release closes.
func lateReleasesIntoALaterTerm(releases []storeCall, elected []lease.Event) int {
	n := 0
	for _, r := range releases {
		if r.Fault.kind != late {
			continue
		}
		landed := r.At.Add(r.Fault.delay)
		for _, e := range elected {
			if e.Owner == r.Owner && r.At.Before(e.At) && e.At.Before(landed) {
				n++
				break
			}
		}
	}
	return n
}

// TestStalledHolderOverlapsItsSuccessorByTheStall pins the documented limit
// (docs/design.md, decision 4): a holder whose work ignores its cancellation keeps
// running past its step-down, and overlaps its successor for the length of
// the stall. Health reports it.
func TestStalledHolderOverlapsItsSuccessorByTheStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stall = 10 * time.Second
		partition := 4200 * time.Millisecond
		h := newHarness(t)
		health := lease.NewHealth(time.Second)
		st := newFaultStore(lease.NewMemoryStore(), func(c storeCall) fault {
			if c.Owner == "a" && !c.At.Before(h.at(partition)) {
				return fault{kind: fail}
			}
			return fault{}
		})
		ctx, cancel := context.WithCancel(t.Context())
		specA := h.spec("a", time.Second)
		specA.Health = health
		doneA := h.start(ctx, st, specA, h.work("a", func(ctx context.Context) {
			<-ctx.Done()
			time.Sleep(stall) // ignores its step-down
		}))
		time.Sleep(500 * time.Millisecond)
		doneB := h.start(ctx, st, h.spec("b", time.Second), h.work("b", nil))
		h.sleepUntil(8 * time.Second)
		if err := health.Check(); err == nil {
			t.Errorf("at 8s: Check() = nil, want a's stuck work reported")
		}
		h.sleepUntil(20 * time.Second)
		cancel()
		<-doneA
		<-doneB

		a, b := h.Terms("a"), h.Terms("b")
		if len(a) != 1 || len(b) != 1 {
			t.Fatalf("got terms a %+v b %+v, want one each", a, b)
		}
		// a's last landed renewal was sent at 4s: a steps down at 6.5s, its
		// lease expires at 7s, b wins at 7.5s, a's work returns at 16.5s.
		if a[0].Cancelled != h.at(6500*time.Millisecond) || a[0].Returned != h.at(16500*time.Millisecond) || b[0].Start != h.at(7500*time.Millisecond) {
			t.Fatalf("got a %v–%v (returned %v), b from %v; want 6.5s, 16.5s, 7.5s",
				h.since(a[0].Start), h.since(a[0].Cancelled), h.since(a[0].Returned), h.since(b[0].Start))
		}
		overlap := a[0].Returned.Sub(b[0].Start)
		if overlap != 9*time.Second || overlap > stall {
			t.Errorf("got an overlap of %v, want 9s, within the stall %v: the documented limit", overlap, stall)
		}
	})
}
