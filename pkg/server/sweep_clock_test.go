package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/server"
)

// slowRuns is a run store whose reads and writes of one run take d: a
// store as slow as dev-mongo under load.
type slowRuns struct {
	gaterun.Store
	d time.Duration
}

func (s slowRuns) Get(ctx context.Context, id string) (gaterun.Run, error) {
	time.Sleep(s.d)
	return s.Store.Get(ctx, id)
}

func (s slowRuns) ForHead(ctx context.Context, host, repo, sha string) ([]gaterun.Run, error) {
	time.Sleep(s.d)
	return s.Store.ForHead(ctx, host, repo, sha)
}

// TestSweepBudgetCountsTheForgesTimeNotTheStores pins what the time budget
// counts, against the simulator with the latency model on (no tail): the
// forge's response time alone. A pass over 100 runs, 5 of them drifted,
// on a store that takes 2 s for each read of a drifted run (its re-read
// and its commit's runs), spends the 100-pull query's 1.5 s and the 5
// status writes' 1 s each, 6.5 s, not the 20 s of the store's reads with
// them.
func TestSweepBudgetCountsTheForgesTimeNotTheStores(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, drifted = 100, 5
		sim := forgesim.New(forgesim.WithLatency(steadyLatency()))
		fc, runs, stopSim := seedSweepRuns(t, sim, n, drifted)
		defer stopSim()
		store := slowRuns{Store: runs, d: 2 * time.Second}
		rec := &sweepRecorder{sim: sim}
		sw := server.NewSweeper(server.SweeperConfig{Runs: store, Offer: server.NewReconciler(store, fc, nil), Interval: time.Minute, OnPass: rec.onPass})
		passes := sweepFor(sw, rec, time.Minute+50*time.Second)
		if len(passes) != 1 {
			t.Fatalf("got %d passes, want 1", len(passes))
		}
		p, want := passes[0], 1500*time.Millisecond+drifted*time.Second
		if p.Offered != n || p.ForgeTime != want || rec.took[0] < want+2*drifted*store.d {
			t.Errorf("pass: offered %d, forge time %v, took %v; want %d, %v (the query and the %d status writes), at least %v: the store's reads take time but not the forge's",
				p.Offered, p.ForgeTime, rec.took[0], n, want, drifted, want+2*drifted*store.d)
		}
	})
}

// TestSweepReadsATimedOutShallowBatchAgainBeforeTheDeepWindow pins, against
// the simulator, what a pass does with the shallow window's runs whose
// query GitHub stopped at its 10 s timeout (the next queries answered in
// their median time): it reads them again in the same pass, before the
// deep window. 100 shallow-window runs are read again at once in two
// queries of 50; 5 (one query, under the floor of 10: nothing smaller to
// halve it into) once more after the rest of the shallow window. Either
// way pass 1 reads every shallow run once, each before any run of the deep
// window, and the deep window's runs too.
func TestSweepReadsATimedOutShallowBatchAgainBeforeTheDeepWindow(t *testing.T) {
	for _, c := range []struct {
		name           string
		shallow, reads int // reads: the pass's queries, the deep window's one included
	}{
		{"halved", 100, 4},
		{"at the floor", 5, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const old = 3
				slow := steadyLatency()
				slow.GraphQLPerNode = 3 * time.Second // 5 pulls take 16 s, 100 take 301 s: past the timeout
				sim := forgesim.New(forgesim.WithLatency(slow))
				fc, runs, stopSim := seedSweepRuns(t, sim, c.shallow, 0)
				defer stopSim()
				seedAgedRuns(t, sim, runs, c.shallow+1, c.shallow+old)
				rec := &sweepRecorder{sim: sim}
				sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: server.NewReconciler(runs, fc, nil), Interval: time.Minute, OnPass: rec.onPass})
				stop := startSweeper(sw)
				defer stop()
				// The first query goes out one interval in; GitHub stops it
				// at 10 s.
				time.Sleep(time.Minute + 5*time.Second)
				synctest.Wait()
				if err := sim.SetLatency(steadyLatency()); err != nil {
					t.Fatal(err)
				}
				time.Sleep(45 * time.Second)
				synctest.Wait()
				stop()
				passes, _ := rec.snapshot()
				if len(passes) != 1 {
					t.Fatalf("got %d passes, want 1", len(passes))
				}
				if p := passes[0]; p.Timeouts != 1 || p.ForgeReads != c.reads || !p.ShallowDone {
					t.Errorf("pass 1: %d timeouts, %d forge reads, shallow done %v; want 1, %d (the timed-out query, its runs again, the deep window's), done", p.Timeouts, p.ForgeReads, p.ShallowDone, c.reads)
				}
				read := make(map[int]time.Time)
				for _, r := range sim.Reads("") {
					if len(r.At) != 1 {
						t.Errorf("pull %d delivered %d times, want once", r.Number, len(r.At))
					}
					if len(r.At) > 0 {
						read[r.Number] = r.At[0]
					}
				}
				firstOld := read[c.shallow+1]
				for i := c.shallow + 1; i <= c.shallow+old; i++ {
					if read[i].IsZero() {
						t.Errorf("deep-window pull %d never read, want read in pass 1", i)
					} else if read[i].Before(firstOld) {
						firstOld = read[i]
					}
				}
				for i := 1; i <= c.shallow; i++ {
					if read[i].IsZero() || !read[i].Before(firstOld) {
						t.Errorf("shallow-window pull %d read at %v, the deep window's first at %v; want read in pass 1, before the deep window: its timed-out query is sent again", i, read[i], firstOld)
						break
					}
				}
			})
		})
	}
}

// seedAgedRuns seeds pulls from..to as seedSweepRuns does (open, the gate
// status already the verdict), with runs updated 5 hours ago: in the deep
// window, not the shallow one.
func seedAgedRuns(t *testing.T, sim *forgesim.Sim, runs gaterun.Store, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		sha := fmt.Sprintf("%040d", i)
		err := sim.SeedPull("acme", "app", i, sha, "open")
		if err == nil {
			err = sim.SetStatus("acme", "app", sha, forgesim.Status{Context: gaterun.DefaultContext, State: "success"})
		}
		if err == nil {
			_, err = runs.Put(context.Background(), gateRun(i, sha, gaterun.VerdictSuccess), time.Now().Add(-5*time.Hour))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// checkedOfferer records the runs whose offer got the forge's answer
// (any outcome but failed): the runs a pass checked.
type checkedOfferer struct {
	server.Offerer
	mu      sync.Mutex
	checked map[string]bool
}

func (o *checkedOfferer) OfferBatch(ctx context.Context, runs []gaterun.Run) ([]server.Outcome, error) {
	outs, err := o.Offerer.OfferBatch(ctx, runs)
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, r := range runs {
		if outs[i] != server.OutcomeFailed {
			o.checked[r.ID] = true
		}
	}
	return outs, err
}

// take returns the runs checked since the last take.
func (o *checkedOfferer) take() map[string]bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.checked
	o.checked = make(map[string]bool)
	return out
}

// TestSweepShallowWindowUnderGitHubLatency measures the shallow
// goal in process, in virtual time, against the simulator with GitHub's
// latency model as it ships (seed 1): 5,000 open runs, 500 of them in the
// shallow window, one sweeper, 36 intervals; it logs each pass that left
// shallow-window runs unchecked, how many passes did, and the most passes
// in a row a shallow-window run went unchecked
// (docs/benchmarks.md, GitHub's clock). It asserts what holds whatever
// the draws: a pass every interval and at most 30 s of GraphQL time in
// every one of the simulator's minutes. Skipped by -short.
func TestSweepShallowWindowUnderGitHubLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("a measurement over 36 intervals of 5,000 runs")
	}
	synctest.Test(t, func(t *testing.T) {
		const n, shallow, intervals = 5000, 500, 36
		lat := forgesim.GitHubLatency()
		lat.Seed = 1
		sim := forgesim.New(forgesim.WithLatency(lat))
		fc, runs, stopSim := seedSweepRuns(t, sim, shallow, 0)
		defer stopSim()
		seedAgedRuns(t, sim, runs, shallow+1, n)
		sim.ResetStats()
		offer := &checkedOfferer{Offerer: server.NewReconciler(runs, fc, nil), checked: make(map[string]bool)}
		rec := &sweepRecorder{sim: sim}
		var checked []map[string]bool
		sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: offer, Interval: time.Minute,
			OnPass: func(p server.SweepPass) { rec.onPass(p); checked = append(checked, offer.take()) }})
		passes := sweepFor(sw, rec, intervals*time.Minute+50*time.Second)
		missed, timedOut, longest := 0, 0, 0
		unchecked := make([]int, shallow+1) // passes in a row each run went unchecked
		for i, p := range passes {
			fresh := 0
			for j := 1; j <= shallow; j++ {
				if checked[i][gateRun(j, fmt.Sprintf("%040d", j), gaterun.VerdictSuccess).ID] {
					fresh++
					unchecked[j] = 0
				} else {
					unchecked[j]++
					longest = max(longest, unchecked[j])
				}
			}
			if p.Timeouts > 0 {
				timedOut++
			}
			if fresh < shallow {
				missed++
				t.Logf("pass %d: %d of %d shallow-window runs checked; deep %v, timeouts %d, batch after %d, forge time %v, waited %v",
					p.Pass, fresh, shallow, p.Deep, p.Timeouts, p.Batch, p.ForgeTime, p.Waited)
			}
		}
		t.Logf("%d of %d passes checked every shallow-window run; %d passes had a timeout; the most passes in a row a shallow-window run went unchecked: %d",
			len(passes)-missed, len(passes), timedOut, longest)
		if len(passes) != intervals {
			t.Errorf("got %d passes in %d intervals, want %d", len(passes), intervals, intervals)
		}
		for i, sec := range graphqlMinutes(sim) {
			if sec > 30 {
				t.Errorf("the simulator's minute %d counted %v s of GraphQL, want at most 30", i+1, sec)
			}
		}
	})
}
