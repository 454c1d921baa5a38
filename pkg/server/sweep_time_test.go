package server_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// steadyLatency is GitHub's latency model without its tail: every query
// takes its median (1 s plus 5 ms a node), so the tests' times are exact.
func steadyLatency() forgesim.Latency {
	l := forgesim.GitHubLatency()
	l.Tail = 0
	return l
}

// sweepRecorder keeps the passes of a sweeper and the simulator's GraphQL
// request count at the end of each.
type sweepRecorder struct {
	mu      sync.Mutex
	sim     *forgesim.Sim
	passes  []server.SweepPass
	queries []int64
	took    []time.Duration // each pass's duration, tick to report
}

func (r *sweepRecorder) onPass(p server.SweepPass) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.passes = append(r.passes, p)
	r.queries = append(r.queries, r.sim.Requests(forgesim.Filter{Route: "POST /graphql"}))
	r.took = append(r.took, time.Since(p.At))
}

func (r *sweepRecorder) snapshot() ([]server.SweepPass, []int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.passes), slices.Clone(r.queries)
}

// sweepFor runs one term of sw for d of virtual time and returns the
// passes rec recorded.
func sweepFor(sw *server.Sweeper, rec *sweepRecorder, d time.Duration) []server.SweepPass {
	stop := startSweeper(sw)
	time.Sleep(d)
	synctest.Wait()
	stop()
	passes, _ := rec.snapshot()
	return passes
}

// sweepSwitchingLatency runs one term of sw for before of virtual time,
// then sets sim's latency model to l and runs it for after more, and
// returns the passes rec recorded.
func sweepSwitchingLatency(t *testing.T, sw *server.Sweeper, rec *sweepRecorder, sim *forgesim.Sim, before time.Duration, l forgesim.Latency, after time.Duration) []server.SweepPass {
	t.Helper()
	stop := startSweeper(sw)
	defer stop()
	time.Sleep(before)
	synctest.Wait()
	if err := sim.SetLatency(l); err != nil {
		t.Fatal(err)
	}
	time.Sleep(after)
	synctest.Wait()
	stop()
	passes, _ := rec.snapshot()
	return passes
}

// TestSweepStopsAtAGraphQL200Limit pins, against the simulator with the
// latency model on and GraphQL limits answered 200 with an errors array:
// a limit met mid-pass stops the pass after at most one more request, the
// pass reports the limit's cause, no request goes out before the limit's
// reset, and the next pass, after the reset, checks the runs the stopped
// one did not reach; with two batches in flight at once too, the other
// being the one more request.
func TestSweepStopsAtAGraphQL200Limit(t *testing.T) {
	for _, c := range []struct {
		name  string
		cause forge.RateLimitCause
		conc  int // batches in flight at once
	}{
		{"primary RATE_LIMITED", forge.CausePrimary, 1},
		{"secondary message", forge.CauseSecondary, 1},
		{"primary RATE_LIMITED, two batches at once", forge.CausePrimary, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n = 500
				sim := forgesim.New(forgesim.WithLatency(steadyLatency()), forgesim.WithGraphQLLimitAnswer(forgesim.GraphQLLimit200))
				fc, runs, stopSim := seedSweepRuns(t, sim, n, 0)
				defer stopSim()
				sim.ResetStats()
				rec := &sweepRecorder{sim: sim}
				sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: server.NewReconciler(runs, fc, nil), Interval: time.Minute, OnPass: rec.onPass,
					Concurrency: c.conc})
				start := time.Now()
				stop := startSweeper(sw)
				defer stop()
				time.Sleep(time.Minute)
				// Two queries in, the limit is set, so the next is refused:
				// the hour's points spent behind the client's back (its
				// gate saw plenty left), or a secondary limit.
				var limitedAt int64
				for limitedAt < 2 {
					time.Sleep(100 * time.Millisecond)
					synctest.Wait()
					limitedAt = sim.Requests(forgesim.Filter{Route: "POST /graphql"})
				}
				var err error
				if c.cause == forge.CausePrimary {
					err = sim.SetBudget("tok", int(limitedAt))
				} else {
					err = sim.SecondaryLimit("", 90*time.Second, 1)
				}
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Minute)
				synctest.Wait()
				passes, queries := rec.snapshot()
				if len(passes) != 1 {
					t.Fatalf("got %d passes in the first two intervals, want 1: the tick before the reset is skipped", len(passes))
				}
				p := passes[0]
				if p.Complete || p.Limited != c.cause || queries[0] > limitedAt+2 {
					t.Fatalf("pass 1: complete %v, limited %q, %d queries; want incomplete, %q, at most %d (the refused one and at most one more): a 200 limit answer stops the pass",
						p.Complete, p.Limited, queries[0], c.cause, limitedAt+2)
				}
				if p.Offered >= n {
					t.Fatalf("pass 1 offered %d runs, want fewer than %d: the limit met it mid-pass", p.Offered, n)
				}
				// The reset: the hour of the primary budget, whose window
				// opened at the first query, one interval in; 90 s after
				// the refusal, a few seconds into the first pass, for the
				// secondary limit.
				reset := time.Hour + time.Minute
				if c.cause == forge.CauseSecondary {
					reset = time.Minute + 90*time.Second
				}
				time.Sleep(time.Until(start.Add(reset - 2*time.Second)))
				synctest.Wait()
				if q := sim.Requests(forgesim.Filter{Route: "POST /graphql"}); q != queries[0] {
					t.Fatalf("%d queries before the reset, want %d: nothing is sent while the limit holds", q, queries[0])
				}
				if c.cause == forge.CausePrimary {
					if err := sim.SetBudget("tok", 5000); err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(3 * time.Minute)
				synctest.Wait()
				passes, _ = rec.snapshot()
				if len(passes) < 2 {
					t.Fatalf("got %d passes after the reset, want at least 2: the sweep resumes after the reset", len(passes))
				}
				if q := passes[1]; !q.Complete || q.Limited != "" || q.ForgeErrors != 0 || q.Offered+p.Offered < n {
					t.Fatalf("pass after the reset: %+v; want complete, unlimited, and with the stopped pass's %d every one of the %d runs offered", q, p.Offered, n)
				}
			})
		})
	}
}

// seedLatencySweep is a simulator with GitHub's latency model as it ships
// (seed 1) and n open runs seeded in the shallow window (seedSweepRuns),
// its stats reset: what the measurements of the sweep on GitHub's clock
// start from.
func seedLatencySweep(tb testing.TB, n int) (*forgesim.Sim, *forge.Client, *gaterun.MemoryStore, func()) {
	tb.Helper()
	lat := forgesim.GitHubLatency()
	lat.Seed = 1
	sim := forgesim.New(forgesim.WithLatency(lat))
	fc, runs, stop := seedSweepRuns(tb, sim, n, 0)
	sim.ResetStats()
	return sim, fc, runs, stop
}

// graphqlMinutes is the simulator's own figure of GraphQL response time
// in each of its minutes (forgesim.CPUMinute), GitHub's seconds.
func graphqlMinutes(sim *forgesim.Sim) []float64 {
	var out []float64
	for _, m := range sim.Stats().CPUMinutes {
		if m.Resource == "graphql" {
			out = append(out, m.Seconds)
		}
	}
	return out
}

// checkGraphQLMinutes fails t for each of sim's minutes that counted more
// than 30 s of GraphQL, half of GitHub's 60 s; prefix and why frame the
// message.
func checkGraphQLMinutes(t *testing.T, sim *forgesim.Sim, prefix, why string) {
	t.Helper()
	for i, sec := range graphqlMinutes(sim) {
		if sec > 30 {
			t.Errorf("%sthe simulator's minute %d counted %.1f s of GraphQL, want at most 30%s", prefix, i+1, sec, why)
		}
	}
}

// TestSweepSpendsAtMostItsTimeBudget pins the time budget against the
// simulator with the latency model on: with more shallow-window runs than
// half of GitHub's GraphQL time allows in a minute, the simulator counts
// at most 30 s of GraphQL time in every one of its minutes; each pass
// spends close to what that leaves once a whole timeout is kept free for
// its next batch (at least 20 s), stops at its cursor and says it is
// behind (the Behind gauge is 1), the next passes resume there so every
// run is checked within 4 intervals (the fourth reaches the window's end
// and goes round to its start: its deep window, easing, has no room), and
// no limit of the simulator refuses a request.
func TestSweepSpendsAtMostItsTimeBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 5000
		sim := forgesim.New(forgesim.WithLatency(steadyLatency()))
		fc, runs, stopSim := seedSweepRuns(t, sim, n, 0)
		defer stopSim()
		sim.ResetStats()
		behind := prometheus.NewGauge(prometheus.GaugeOpts{Name: "behind"})
		rec := &sweepRecorder{sim: sim}
		var gauge []float64
		sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: server.NewReconciler(runs, fc, nil), Interval: time.Minute, Behind: behind,
			OnPass: func(p server.SweepPass) { rec.onPass(p); gauge = append(gauge, testutil.ToFloat64(behind)) }})
		passes := sweepFor(sw, rec, 4*time.Minute+45*time.Second)
		if len(passes) != 4 {
			t.Fatalf("got %d passes in 4 intervals, want 4", len(passes))
		}
		offered := 0
		for i, p := range passes {
			if p.ForgeTime > 30*time.Second || p.ForgeTime < 20*time.Second {
				t.Errorf("pass %d spent %v of forge time, want 20 to 30 s: at most half of GitHub's 60 s of GraphQL a minute, less the 10 s kept for the next batch", p.Pass, p.ForgeTime)
			}
			if !p.Complete || p.Limited != "" {
				t.Errorf("pass %d: complete %v, limited %q; want complete and unlimited: a pass stopped by its budget did its share", p.Pass, p.Complete, p.Limited)
			}
			if !p.Behind || p.ShallowDone || gauge[i] != 1 {
				t.Errorf("pass %d: behind %v, shallow done %v, gauge %v; want behind, not done, 1: the shallow window is more than one pass's time", p.Pass, p.Behind, p.ShallowDone, gauge[i])
			}
			offered += p.Offered
		}
		if last := passes[3].Offered; offered < n || offered-last >= n {
			t.Errorf("4 passes offered %d runs, the fourth %d; want all %d, the fourth some a second time: each pass resumes where the last stopped, and the fourth goes round to the window's start", offered, last, n)
		}
		checkGraphQLMinutes(t, sim, "", ": half of GitHub's 60 s in every minute")
		for _, rc := range sim.Stats().Requests {
			if rc.Status != 200 {
				t.Errorf("simulator answered %d %s %s %d times, want only 200s: the budget keeps the sweep under GitHub's time limit", rc.Status, rc.Method, rc.Route, rc.Count)
			}
		}
	})
}

// TestSweepRepairsADriftedBacklogWithinItsBudget pins a batch's status
// writes to the time budget: after an outage 100 open runs have drifted,
// and under GitHub's latency model without its tail (a 100-pull query
// about 1.5 s, a status write about 1 s) one batch would write all 100,
// about 100 s, past the 30 s budget and the 1-minute interval, and the
// watchdog would cut the pass. Each write is admitted as a batch is, only
// while the budget has room for a whole GitHub timeout more (and it could
// end within the interval), so each pass spends at most 30 s, ends within
// its interval and is complete, repairing about 20 runs, and the backlog
// is repaired over the passes that follow, every simulator minute holding
// at most 30 s of REST and GraphQL time together.
func TestSweepRepairsADriftedBacklogWithinItsBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 100
		sim := forgesim.New(forgesim.WithLatency(steadyLatency()))
		fc, runs, stopSim := seedSweepRuns(t, sim, n, n)
		defer stopSim()
		rec := &sweepRecorder{sim: sim}
		var writes []int64
		sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: server.NewReconciler(runs, fc, nil), Interval: time.Minute,
			OnPass: func(p server.SweepPass) {
				rec.onPass(p)
				writes = append(writes, sim.Requests(forgesim.Filter{Route: statusRoute}))
			},
			Watchdog: lease.Watchdog{Name: "merge-gate-sweeper", PassTimeout: time.Minute}})
		passes := sweepFor(sw, rec, 7*time.Minute+59*time.Second)
		if len(passes) != 7 {
			t.Fatalf("got %d passes in 7 intervals, want 7: the watchdog ends a term whose passes it cuts", len(passes))
		}
		for i, p := range passes {
			t.Logf("pass %d: offered %d, status writes %d in all, forge time %v, took %v", p.Pass, p.Offered, writes[i], p.ForgeTime, rec.took[i])
			if p.ForgeTime > 30*time.Second || rec.took[i] > time.Minute || !p.Complete {
				t.Errorf("pass %d spent %v of forge time in %v, complete %v; want at most the 30 s budget, within its 1 m interval, complete: a batch's writes are admitted as batches are", p.Pass, p.ForgeTime, rec.took[i], p.Complete)
			}
		}
		if first := writes[0]; first < 15 || first >= n {
			t.Errorf("pass 1 wrote %d statuses, want 15 to 99: as many as the budget leaves room for", first)
		}
		if last := writes[len(writes)-1]; last != n {
			t.Errorf("%d statuses written in %d passes, want all %d: the runs a pass could not write are repaired by the next", last, len(passes), n)
		}
		for _, m := range sim.Stats().CPUMinutes { // before the test's own reads below
			if m.Resource == "all" && m.Seconds > 30 {
				t.Errorf("the simulator's minute from %v counted %.1f s of REST and GraphQL, want at most 30: the writes are within the budget", m.Start, m.Seconds)
			}
		}
		for i := 1; i <= n; i++ {
			if got := gateState(t, fc, fmt.Sprintf("%040d", i)); got != "success" {
				t.Errorf("pull %d: gate status %q, want success", i, got)
			}
		}
	})
}

// TestSweepTimeBudgetHoldsInEveryMinuteWhateverTheInterval pins the time
// budget's window to GitHub's minute, not the sweep interval: with 5,000
// shallow-window runs and GitHub's latency model as it ships (seed 1),
// sweepers at intervals of 20 s, 1 m and 5 m each keep the simulator's
// GraphQL time at most 30 s in every one of its minutes, with no request
// refused; and a 5-minute pass goes on past its first minute's budget,
// waiting for room, so it offers more than two minutes' worth of runs
// (2,000; about 1,000 a minute, fewer after a timeout halves the batch).
// Budgeting per interval instead spent 66 s in a minute at 5 m (past
// GitHub's whole 60 s) and 32 s at 20 s.
func TestSweepTimeBudgetHoldsInEveryMinuteWhateverTheInterval(t *testing.T) {
	t.Parallel() // virtual time: its figures do not depend on what else runs
	for _, interval := range []time.Duration{20 * time.Second, time.Minute, 5 * time.Minute} {
		t.Run(interval.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n = 5000
				sim, fc, runs, stopSim := seedLatencySweep(t, n)
				defer stopSim()
				rec := &sweepRecorder{sim: sim}
				sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: server.NewReconciler(runs, fc, nil), Interval: interval, OnPass: rec.onPass})
				passes := sweepFor(sw, rec, 15*time.Minute)
				if len(passes) == 0 {
					t.Fatal("no pass in 15 minutes")
				}
				checkGraphQLMinutes(t, sim, fmt.Sprintf("interval %v: ", interval), ": half of GitHub's 60 s in every minute, whatever the interval")
				for _, rc := range sim.Stats().Requests {
					if rc.Status == 403 || rc.Status == 429 {
						t.Errorf("interval %v: simulator answered %d %s %d times, want no refusal", interval, rc.Status, rc.Route, rc.Count)
					}
				}
				if interval == 5*time.Minute {
					for _, p := range passes[:len(passes)-1] {
						if p.Offered < 2000 {
							t.Errorf("5-minute pass %d offered %d runs, want at least 2,000: a pass longer than a minute waits for room and goes on", p.Pass, p.Offered)
						}
					}
				}
			})
		})
	}
}

// TestSweepHalvesABatchThatTimesOut pins the batch size against the
// simulator: with queries of 100 pull requests past GitHub's 10 s timeout
// and queries of 50 under it, a pass offers the timed-out runs again in
// halves and goes on, so every run is checked; the next pass starts with
// the size that worked (50), and each pass without a timeout grows it by
// half, back to 100 (75, then 100): its batches of 50 take 6 s, more than
// half GitHub's timeout, so the size is near what GitHub can answer and
// is not doubled.
func TestSweepHalvesABatchThatTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 300
		lat := steadyLatency()
		lat.GraphQLPerNode = 100 * time.Millisecond // a node a pull: 100 pulls take 11 s, past the timeout; 75 take 8.5 s, 50 take 6 s
		sim := forgesim.New(forgesim.WithLatency(lat))
		fc, runs, stopSim := seedSweepRuns(t, sim, n, 0)
		defer stopSim()
		rec := &sweepRecorder{sim: sim}
		// All of GitHub's 60 s a minute, so each pass ends within its minute.
		sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: server.NewReconciler(runs, fc, nil), Interval: time.Minute, TimeShare: 1, OnPass: rec.onPass})
		passes := sweepFor(sw, rec, 3*time.Minute+50*time.Second)
		if len(passes) != 3 {
			t.Fatalf("got %d passes, want 3", len(passes))
		}
		if p := passes[0]; p.Timeouts != 1 || p.Batch != 50 || !p.Complete || p.ForgeErrors != 1 || p.Offered != n+100 {
			t.Errorf("pass 1: %d timeouts, batch %d, complete %v, %d forge errors, %d offered; want 1, 50, complete, 1, %d (the timed-out 100 again in halves)", p.Timeouts, p.Batch, p.Complete, p.ForgeErrors, p.Offered, n+100)
		}
		for i, want := range []int{75, 100} {
			if p := passes[i+1]; p.Timeouts != 0 || p.Batch != want || p.Offered != n || !p.Complete {
				t.Errorf("pass %d: %d timeouts, batch %d, %d offered, complete %v; want 0, %d (grown back by half), %d, complete", p.Pass, p.Timeouts, p.Batch, p.Offered, p.Complete, want, n)
			}
		}
	})
}

// TestSweepHalvesATimedOutBatchDownToItsFloor pins the floor of the
// halving: with every query of ten pulls or more past GitHub's 10 s
// timeout, a pass reads the first runs in batches of 100, 50, 25 and 12,
// then 10 (MinSweepBatch), never fewer, and the batch that timed out at
// 10 is passed (offered once more after the rest of the shallow window),
// not read again at once: the next batch begins at the next run (the
// pass's last room reads the rest of the first 100 in one). Halved
// below the floor, a query's fixed cost would be paid for fewer and fewer
// runs; read again at the floor, one slow batch would take the pass's
// whole budget and leave the rest of the window unchecked.
func TestSweepHalvesATimedOutBatchDownToItsFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lat := steadyLatency()
		lat.GraphQLPerNode = 2 * time.Second // a node a pull: 10 pulls take 20 s, past the timeout
		sim := forgesim.New(forgesim.WithLatency(lat))
		fc, runs, stopSim := seedSweepRuns(t, sim, 300, 0)
		defer stopSim()
		batches := &batchRuns{Offerer: server.NewReconciler(runs, fc, nil)}
		rec := &sweepRecorder{sim: sim}
		// All of GitHub's 60 s a minute: six 10 s queries a pass.
		sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: batches, Interval: time.Minute, TimeShare: 1, OnPass: rec.onPass})
		passes := sweepFor(sw, rec, 2*time.Minute+50*time.Second)
		if len(passes) != 2 {
			t.Fatalf("got %d passes, want 2", len(passes))
		}
		sizes := make([]int, len(batches.first))
		for i, b := range batches.runs {
			sizes[i] = len(b)
		}
		if want := []int{100, 50, 25, 12, server.MinSweepBatch}; !slices.Equal(sizes[:min(len(sizes), len(want))], want) {
			t.Errorf("the first pass's batches: got %v runs, want %v: a timed-out batch is halved down to its floor of %d", sizes, want, server.MinSweepBatch)
		}
		for i, n := range sizes {
			if n < server.MinSweepBatch {
				t.Errorf("batch %d: %d runs, want %d or more: the halving stops at its floor", i+1, n, server.MinSweepBatch)
			}
			if i > 0 && sizes[i-1] == server.MinSweepBatch && batches.first[i] == batches.first[i-1] {
				t.Errorf("batch %d: the runs of batch %d again: a batch that timed out at its floor of %d runs is passed, not read again at once", i+1, i, server.MinSweepBatch)
			}
		}
		for _, p := range passes {
			if p.Batch < server.MinSweepBatch {
				t.Errorf("pass %d: the next pass's batch size %d, want %d or more: the floor holds across passes", p.Pass, p.Batch, server.MinSweepBatch)
			}
		}
	})
}

// batchRuns is an Offerer that records the runs of each batch it is
// offered, in order (first: the first run's ID).
type batchRuns struct {
	server.Offerer
	mu    sync.Mutex
	runs  [][]gaterun.Run
	first []string
}

func (b *batchRuns) OfferBatch(ctx context.Context, runs []gaterun.Run) ([]server.Outcome, error) {
	b.mu.Lock()
	b.runs, b.first = append(b.runs, runs), append(b.first, runs[0].ID)
	b.mu.Unlock()
	return b.Offerer.OfferBatch(ctx, runs)
}

// TestSweepGrowsItsBatchAMinuteAfterATimeout pins the batch size's growth
// in a pass longer than a minute: a 3-minute interval, 3,000 shallow-window
// runs, the first query of 100 pulls past GitHub's 10 s timeout (then
// GitHub's latency without its tail, a 50-pull query 1.25 s). The pass
// reads those runs again in halves and goes on in batches of 50; a minute
// after the timeout, with none since, the size grows a step within the
// pass, as a pass of a minute's interval would grow it at its end: doubled
// to 100 in one step, as the pass's batches answered in well under half
// GitHub's timeout on average (TestSweepHalvesABatchThatTimesOut pins the
// step by half for slower ones).
func TestSweepGrowsItsBatchAMinuteAfterATimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 3000
		slow := steadyLatency()
		slow.GraphQLPerNode = 100 * time.Millisecond // 100 pulls take 11 s: past the timeout
		sim := forgesim.New(forgesim.WithLatency(slow))
		fc, runs, stopSim := seedSweepRuns(t, sim, n, 0)
		defer stopSim()
		sizes := &batchSizes{Offerer: server.NewReconciler(runs, fc, nil)}
		rec := &sweepRecorder{sim: sim}
		sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: sizes, Interval: 3 * time.Minute, OnPass: rec.onPass})
		// Past the first pass's first query, timed out: GitHub's latency
		// without its tail from then.
		passes := sweepSwitchingLatency(t, sw, rec, sim, 3*time.Minute+15*time.Second, steadyLatency(), 2*time.Minute+30*time.Second)
		if len(passes) != 1 || passes[0].Timeouts != 1 {
			t.Fatalf("got %d passes, %+v; want 1 with 1 timeout", len(passes), passes)
		}
		if sizes.n[0] != 100 {
			t.Fatalf("first batch %d runs, want 100", sizes.n[0])
		}
		// GitHub stops the first query at 10 s; from then, the first batch
		// begun a minute or more after the timeout grows the size a step:
		// 50, then 100.
		grown, want, steps := sizes.at[0].Add(forgesim.GraphQLTimeout), 50, 0
		for i := 1; i < len(sizes.n); i++ {
			if want < 100 && sizes.at[i].Sub(grown) >= time.Minute {
				grown, want, steps = sizes.at[i], 100, steps+1
			}
			if last := i == len(sizes.n)-1; sizes.n[i] != want && !(last && sizes.n[i] < want) {
				t.Errorf("batch %d, %v after the timeout: %d runs, want %d: the size doubles a minute after the timeout when the pass's batches answered fast", i+1, sizes.at[i].Sub(sizes.at[0]).Round(time.Second), sizes.n[i], want)
			}
		}
		if steps != 1 {
			t.Errorf("the size grew %d times in the pass, want 1: to 100", steps)
		}
	})
}

// TestSweepTakesBackItsBatchSizeAfterASlowMoment pins what a timeout's
// halves say: 1,000 shallow-window runs, the first batch of 100 answered
// as GitHub's timeout (a 504), its runs read again in two batches of 50.
// When those answer within half GitHub's timeout together (GitHub's
// latency without its tail: 1.25 s each), the timeout was a slow moment,
// not the size: the pass goes on in batches of 100 and ends at 100. When
// they take longer (a base of 2.6 s: 2.85 s each, 5.7 s together), the
// size that worked, 50, is kept for the rest of the pass and after it.
func TestSweepTakesBackItsBatchSizeAfterASlowMoment(t *testing.T) {
	for _, tc := range []struct {
		name string
		base time.Duration
		want int
	}{
		{"halves quick", time.Second, 100},
		{"halves slow", 2600 * time.Millisecond, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lat := steadyLatency()
				lat.GraphQLBase = tc.base
				sim := forgesim.New(forgesim.WithLatency(lat))
				fc, runs, stopSim := seedSweepRuns(t, sim, 1000, 0)
				defer stopSim()
				first, err := runs.Unsettled(context.Background(), time.Time{}, gaterun.Cursor{}, 1)
				if err != nil || len(first) != 1 {
					t.Fatalf("first run: %v, %v", first, err)
				}
				sizes := &batchSizes{Offerer: &timeOutNthFrom{Offerer: server.NewReconciler(runs, fc, nil), first: first[0].ID, nth: 1}}
				rec := &sweepRecorder{sim: sim}
				sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: sizes, Interval: time.Minute, OnPass: rec.onPass})
				passes := sweepFor(sw, rec, time.Minute+50*time.Second)
				if len(passes) != 1 || passes[0].Timeouts != 1 {
					t.Fatalf("got %d passes, %+v; want 1 with 1 timeout", len(passes), passes)
				}
				if len(sizes.n) < 4 || sizes.n[0] != 100 || sizes.n[1] != 50 || sizes.n[2] != 50 {
					t.Fatalf("batches %v, want 100 (timed out), then its runs in two of 50", sizes.n)
				}
				for i, n := range sizes.n[3:] {
					if n != tc.want && i < len(sizes.n)-4 {
						t.Errorf("batch %d: %d runs, want %d", i+4, n, tc.want)
					}
				}
				if got := passes[0].Batch; got != tc.want {
					t.Errorf("the pass ended at batch size %d, want %d", got, tc.want)
				}
			})
		})
	}
}

// batchSizes records each batch's size and when it was offered.
type batchSizes struct {
	server.Offerer
	mu sync.Mutex
	n  []int
	at []time.Time
}

func (b *batchSizes) OfferBatch(ctx context.Context, runs []gaterun.Run) ([]server.Outcome, error) {
	b.mu.Lock()
	b.n, b.at = append(b.n, len(runs)), append(b.at, time.Now())
	b.mu.Unlock()
	return b.Offerer.OfferBatch(ctx, runs)
}

// TestSweepUnderGitHubLatency measures the sweep against the simulator with
// GitHub's latency model as it ships (a 100-pull query's median 1.5 s, 2%
// of them past the 10 s timeout, half of those 502s), at 1,000 and 5,000
// open runs all in the shallow window, one replica, over 6 intervals, and
// logs each pass (docs/benchmarks.md). It asserts what holds whatever the
// draws: no request refused by any limit, a pass every interval, and at
// most 30 s of GraphQL time in every one of the simulator's minutes, as
// the simulator counts it. How often each run is checked is measured, not
// asserted: the tail makes it vary (docs/benchmarks.md).
func TestSweepUnderGitHubLatency(t *testing.T) {
	for _, n := range []int{1000, 5000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sim, fc, runs, stopSim := seedLatencySweep(t, n)
				defer stopSim()
				rec := &sweepRecorder{sim: sim}
				sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: server.NewReconciler(runs, fc, nil), Interval: time.Minute, OnPass: rec.onPass})
				passes := sweepFor(sw, rec, 6*time.Minute+59*time.Second)
				for i, p := range passes {
					took := rec.took[i]
					t.Logf("runs %d pass %d: forge time %v, waited %v, offered %d, batches %d, timeouts %d, batch after %d, shallow done %v, behind %v, pass ÷ interval %.2f",
						n, p.Pass, p.ForgeTime, p.Waited, p.Offered, p.ForgeReads, p.Timeouts, p.Batch, p.ShallowDone, p.Behind, took.Seconds()/60)
					if p.ForgeTime > 30*time.Second {
						t.Errorf("pass %d spent %v, want at most 30 s", p.Pass, p.ForgeTime)
					}
					if !p.Complete || took+forgesim.GraphQLTimeout > time.Minute {
						t.Errorf("pass %d: complete %v, took %v; want complete, ending a whole timeout before its interval ends: a pass stops while any batch it sends must end within its interval (else the watchdog cuts it short)", p.Pass, p.Complete, took)
					}
				}
				for _, rc := range sim.Stats().Requests {
					if rc.Status == 403 || rc.Status == 429 {
						t.Errorf("simulator answered %d %s %d times, want no refusal", rc.Status, rc.Route, rc.Count)
					}
				}
				minutes := graphqlMinutes(sim)
				t.Logf("runs %d: the simulator's GraphQL seconds by minute: %v", n, minutes)
				for i, sec := range minutes {
					if sec > 30 {
						t.Errorf("the simulator's minute %d counted %v s of GraphQL, want at most 30, whatever the tail draws: the budget keeps a whole timeout free for the next batch", i+1, sec)
					}
				}
				if len(passes) != 6 {
					t.Errorf("got %d passes in 6 intervals, want 6", len(passes))
				}
			})
		})
	}
}

// seenOfferer records the IDs of the runs offered through it.
type seenOfferer struct {
	server.Offerer
	mu   sync.Mutex
	seen map[string]int // offers by run ID
}

func (o *seenOfferer) OfferBatch(ctx context.Context, runs []gaterun.Run) ([]server.Outcome, error) {
	o.mu.Lock()
	for _, r := range runs {
		o.seen[r.ID]++
	}
	o.mu.Unlock()
	return o.Offerer.OfferBatch(ctx, runs)
}

// take returns the offers since the last take.
func (o *seenOfferer) take() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.seen
	o.seen = make(map[string]int)
	return out
}

// TestSweepShallowFirstDeepWithinItsPeriod pins the order of a pass against
// the simulator with the latency model on (no tail): with 5,000 open runs,
// 500 of them updated in the last hour, every pass checks the 500 first,
// and one deep batch: the 500 take 7.5 s, leaving the easing deep window
// no room in a quarter of the interval. The second pass that leaves it no
// room ends the easing, and the deep window, too much for one pass's
// time, goes on from its cursor over the next passes with the whole time
// budget and has checked every run within the deep-pass period; no pass
// is behind and no request is refused.
func TestSweepShallowFirstDeepWithinItsPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, shallow = 5000, 500
		sim := forgesim.New(forgesim.WithLatency(steadyLatency()))
		fc, runs, stopSim := seedSweepRuns(t, sim, shallow, 0)
		defer stopSim()
		for i := shallow + 1; i <= n; i++ {
			sha := fmt.Sprintf("%040d", i)
			if err := sim.SeedPull("acme", "app", i, sha, "open"); err != nil {
				t.Fatal(err)
			}
			if err := sim.SetStatus("acme", "app", sha, forgesim.Status{Context: gaterun.DefaultContext, State: "success"}); err != nil {
				t.Fatal(err)
			}
			if _, err := runs.Put(context.Background(), gateRun(i, sha, gaterun.VerdictSuccess), time.Now().Add(-5*time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		sim.ResetStats()
		offer := &seenOfferer{Offerer: server.NewReconciler(runs, fc, nil), seen: make(map[string]int)}
		rec := &sweepRecorder{sim: sim}
		var seen []map[string]int
		sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: offer, Interval: time.Minute,
			OnPass: func(p server.SweepPass) { rec.onPass(p); seen = append(seen, offer.take()) }})
		const intervals = 8
		passes := sweepFor(sw, rec, intervals*time.Minute+45*time.Second)
		if len(passes) != intervals {
			t.Fatalf("got %d passes in %d intervals, want %d", len(passes), intervals, intervals)
		}
		deep := make(map[string]bool)
		deepDone := 0
		for i, p := range passes {
			fresh := 0
			for j := 1; j <= shallow; j++ {
				if seen[i][gateRun(j, fmt.Sprintf("%040d", j), gaterun.VerdictSuccess).ID] > 0 {
					fresh++
				}
			}
			for id := range seen[i] {
				deep[id] = true
			}
			t.Logf("pass %d: forge time %v, runs checked %d (shallow window %d), runs checked so far %d of %d, behind %v", p.Pass, p.ForgeTime, len(seen[i]), fresh, len(deep), n, p.Behind)
			if fresh != shallow || !p.ShallowDone || p.Behind {
				t.Errorf("pass %d: %d of the %d shallow-window runs checked, shallow done %v, behind %v; want all, done, not behind: the shallow window goes first every interval", p.Pass, fresh, shallow, p.ShallowDone, p.Behind)
			}
			if deepDone == 0 && len(deep) == n {
				deepDone = p.Pass
			}
			if p.Pass == 1 && len(seen[i]) != shallow+100 {
				t.Errorf("pass 1 checked %d runs; want the %d of the shallow window and one deep batch of 100: it leaves the easing deep window no room, and reads one batch of it", len(seen[i]), shallow)
			}
			if p.Pass == 2 && p.ForgeTime < 20*time.Second {
				t.Errorf("pass 2 spent %v, want 20 s or more: the second pass in a row to leave the easing deep window no room ends the easing, and the deep window has the whole budget", p.ForgeTime)
			}
		}
		if deepDone == 0 || deepDone > server.DeepEvery {
			t.Errorf("every run checked by pass %d, want by pass %d at most: the deep window finishes within the deep-pass period", deepDone, server.DeepEvery)
		}
		for _, rc := range sim.Stats().Requests {
			if rc.Status != 200 {
				t.Errorf("simulator answered %d %s %d times, want only 200s", rc.Status, rc.Route, rc.Count)
			}
		}
	})
}

// TestSweepShallowWindowGoesRoundFromItsCursor pins the shallow window's
// cursor across passes against the simulator (no tail: every 100-pull
// query 1.5 s): with 2,000 runs in the shallow window, more than one
// pass's time, each pass from the second resumes where the last stopped
// and, reaching the window's end with time left, goes round to its start
// (the term's first deep window, easing, has no room, so it waits, but
// for a pass that reaches the end early): every pass that goes round
// spends its time on runs (none offers fewer than 1,300, where stopping at
// the window's end would offer 600), and no run goes unchecked for 2
// passes in a row.
func TestSweepShallowWindowGoesRoundFromItsCursor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 2000
		sim := forgesim.New(forgesim.WithLatency(steadyLatency()))
		fc, runs, stopSim := seedSweepRuns(t, sim, n, 0)
		defer stopSim()
		offer := &seenOfferer{Offerer: server.NewReconciler(runs, fc, nil), seen: make(map[string]int)}
		rec := &sweepRecorder{sim: sim}
		var seen []map[string]int
		sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: offer, Interval: time.Minute,
			OnPass: func(p server.SweepPass) { rec.onPass(p); seen = append(seen, offer.take()) }})
		passes := sweepFor(sw, rec, 8*time.Minute+45*time.Second)
		if len(passes) != 8 {
			t.Fatalf("got %d passes in 8 intervals, want 8", len(passes))
		}
		for i, p := range passes {
			t.Logf("pass %d: deep %v, offered %d, forge time %v, waited %v, behind %v", p.Pass, p.Deep, p.Offered, p.ForgeTime, p.Waited, p.Behind)
			if i >= 1 && p.Since.Equal(p.At.Add(-server.ShallowWindow)) && (p.Offered < 1300 || len(seen[i]) != p.Offered) {
				t.Errorf("pass %d: offered %d runs (%d distinct), want at least 1,300, each once: a pass that reaches the window's end, and not the deep window, goes round to its start", p.Pass, p.Offered, len(seen[i]))
			}
			if i == 0 {
				continue
			}
			for j := 1; j <= n; j++ {
				id := gateRun(j, fmt.Sprintf("%040d", j), gaterun.VerdictSuccess).ID
				if seen[i][id] == 0 && seen[i-1][id] == 0 {
					t.Errorf("run %d unchecked in passes %d and %d: each pass resumes where the last stopped", j, p.Pass-1, p.Pass)
					break
				}
			}
		}
	})
}
