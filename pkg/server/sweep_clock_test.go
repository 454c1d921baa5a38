package server_test

import (
	"context"
	"fmt"
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
// query timed out at the smallest batch (no smaller query to halve it
// into): it reads them again in the same pass, after the rest of the
// shallow window and before the deep window. Five shallow-window runs (one
// query, under the floor of 10) whose query GitHub stops at its 10 s
// timeout, the next query answered in its median time: pass 1 reads every
// shallow run, each before any run of the deep window, and the deep
// window's runs too.
func TestSweepReadsATimedOutShallowBatchAgainBeforeTheDeepWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shallow, old = 5, 3
		slow := steadyLatency()
		slow.GraphQLPerNode = 3 * time.Second // 5 pulls take 16 s: past the timeout
		sim := forgesim.New(forgesim.WithLatency(slow))
		fc, runs, stopSim := seedSweepRuns(t, sim, shallow, 0)
		defer stopSim()
		for i := shallow + 1; i <= shallow+old; i++ {
			sha := fmt.Sprintf("%040d", i)
			if err := sim.SeedPull("acme", "app", i, sha, "open"); err != nil {
				t.Fatal(err)
			}
			if _, err := runs.Put(context.Background(), gateRun(i, sha, gaterun.VerdictSuccess), time.Now().Add(-5*time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		rec := &sweepRecorder{sim: sim}
		sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: server.NewReconciler(runs, fc, nil), Interval: time.Minute, OnPass: rec.onPass})
		stop := startSweeper(sw)
		defer stop()
		// The first query goes out one interval in; GitHub stops it at 10 s.
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
		if p := passes[0]; p.Timeouts != 1 || p.ForgeReads != 3 || !p.ShallowDone {
			t.Errorf("pass 1: %d timeouts, %d forge reads, shallow done %v; want 1, 3 (the timed-out query, it again, the deep window's), done", p.Timeouts, p.ForgeReads, p.ShallowDone)
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
		firstOld := read[shallow+1]
		for i := shallow + 1; i <= shallow+old; i++ {
			if read[i].IsZero() {
				t.Errorf("deep-window pull %d never read, want read in pass 1", i)
			} else if read[i].Before(firstOld) {
				firstOld = read[i]
			}
		}
		for i := 1; i <= shallow; i++ {
			if read[i].IsZero() || !read[i].Before(firstOld) {
				t.Errorf("shallow-window pull %d read at %v, the deep window's first at %v; want read in pass 1, before the deep window: its timed-out query is sent again", i, read[i], firstOld)
			}
		}
	})
}
