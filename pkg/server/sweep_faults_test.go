package server_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/server"
)

// TestSweepUnderFaultsLosesNothingAndItsBatchRecovers pins the sweep
// against the simulator with GitHub's latency model (2% of 100-pull
// queries past the 10 s timeout) and 1% more of GraphQL queries answered
// 502, then a burst of 502s that drives the batch to its floor, then no
// fault at all:
//
//   - nothing is lost: every run whose gate status drifted is repaired;
//   - no verdict from a wrong commit: a run whose pull request has another
//     head is settled, and nothing is written on the new head;
//   - the batch size is back to 100 within 10 intervals of the faults
//     stopping.
//
// It holds one batch at a time (the default), and with two in flight at
// once (SweepConcurrency 2, with three quarters of GitHub's GraphQL time).
func TestSweepUnderFaultsLosesNothingAndItsBatchRecovers(t *testing.T) {
	t.Parallel() // virtual time: its figures do not depend on what else runs
	for _, conc := range []int{1, 2} {
		t.Run(fmt.Sprintf("concurrency %d", conc), func(t *testing.T) { sweepUnderFaults(t, conc) })
	}
}

// sweepUnderFaults is TestSweepUnderFaultsLosesNothingAndItsBatchRecovers
// with conc batches in flight at once.
func sweepUnderFaults(t *testing.T, conc int) {
	synctest.Test(t, func(t *testing.T) {
		const n, drifted, moved = 1000, 50, 20
		lat := forgesim.GitHubLatency()
		lat.Seed = 2
		sim := forgesim.New(forgesim.WithLatency(lat), forgesim.WithGraphQLFaults(forgesim.GraphQLFaults{BadGatewayShare: 0.01, Seed: 3}))
		fc, runs, stopSim := seedSweepRuns(t, sim, n, drifted)
		defer stopSim()
		// Runs drifted+1 .. drifted+moved: their pull requests got a new
		// head the runs never saw.
		newHead := func(i int) string { return fmt.Sprintf("%040x", 1<<20+i) }
		for i := drifted + 1; i <= drifted+moved; i++ {
			if err := sim.PushHead("acme", "app", i, newHead(i)); err != nil {
				t.Fatal(err)
			}
		}
		rec := &sweepRecorder{sim: sim}
		cfg := server.SweeperConfig{Runs: runs, Offer: server.NewReconciler(runs, fc, nil), Interval: time.Minute, OnPass: rec.onPass, Concurrency: conc}
		if conc > 1 {
			cfg.TimeShare = 0.75
		}
		stop := startSweeper(server.NewSweeper(cfg))
		defer stop()

		// 6 intervals at the fault rates, then 2 of a 502 burst.
		time.Sleep(6*time.Minute + 50*time.Second)
		synctest.Wait()
		burst := len(func() []server.SweepPass { p, _ := rec.snapshot(); return p }())
		if err := sim.SetGraphQLFaults(forgesim.GraphQLFaults{BadGatewayShare: 0.7, Seed: 4}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		// The faults stop: no 502, no tail.
		if err := sim.SetGraphQLFaults(forgesim.GraphQLFaults{}); err != nil {
			t.Fatal(err)
		}
		if err := sim.SetLatency(steadyLatency()); err != nil {
			t.Fatal(err)
		}
		stopped := len(func() []server.SweepPass { p, _ := rec.snapshot(); return p }())
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		stop()
		passes, _ := rec.snapshot()

		timeouts, floor := 0, forge.MaxPullBatch
		for i, p := range passes {
			if i < burst {
				timeouts += p.Timeouts
			}
			if i < stopped {
				floor = min(floor, p.Batch)
			}
			t.Logf("pass %d: offered %d, batches %d, failed %d, timeouts %d, batch after %d, forge time %v, complete %v, behind %v",
				p.Pass, p.Offered, p.ForgeReads, p.ForgeErrors, p.Timeouts, p.Batch, p.ForgeTime, p.Complete, p.Behind)
		}
		if timeouts == 0 || floor > 12 {
			t.Fatalf("%d timeouts and 502s at the issue's rates, smallest batch %d before the faults stopped; want some, and the batch near its floor of 10 after the burst: the faults must bite for the test to mean anything", timeouts, floor)
		}
		recovered := 0
		for i := stopped; i < len(passes); i++ {
			if passes[i].Batch == forge.MaxPullBatch {
				recovered = i - stopped + 1
				break
			}
		}
		if recovered == 0 || recovered > 10 {
			t.Errorf("batch back to %d after %d passes of the faults stopping (0: never in %d), want within 10 intervals", forge.MaxPullBatch, recovered, len(passes)-stopped)
		}
		for i := 1; i <= drifted; i++ {
			if got := gateState(t, fc, fmt.Sprintf("%040d", i)); got != "success" {
				t.Errorf("run %d's drifted gate status: got %q, want success: nothing is lost to timeouts and 502s", i, got)
			}
		}
		for i := drifted + 1; i <= drifted+moved; i++ {
			if got := gateState(t, fc, newHead(i)); got != "" {
				t.Errorf("pull %d's new head: gate status %q, want none: no verdict from a wrong commit", i, got)
			}
			run, err := runs.Get(context.Background(), gateRun(i, fmt.Sprintf("%040d", i), gaterun.VerdictSuccess).ID)
			if err != nil || !run.Settled {
				t.Errorf("run %d, whose pull request has another head: settled %v (%v), want settled", i, run.Settled, err)
			}
		}
	})
}

// TestSweepQueryTimeoutSkipsNoPass pins that a query GitHub stops at its
// timeout (answered 502 or 504 after 10 s) does not back the sweep off as
// a failing forge does (TestPassSuccessMeansForgeSuccess: a 502 at once):
// with every query of a few runs, already at the smallest batch, past the
// timeout, a pass still comes every interval (3 in 3 intervals, each with
// two timeouts, the batch's and its one more try, and no server error),
// where the 5xx back-off would skip the next tick after each.
func TestSweepQueryTimeoutSkipsNoPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 5
		lat := steadyLatency()
		lat.GraphQLPerNode = 3 * time.Second // a node a pull: 5 pulls take 16 s, past the timeout
		sim := forgesim.New(forgesim.WithLatency(lat))
		fc, runs, stopSim := seedSweepRuns(t, sim, n, 0)
		defer stopSim()
		rec := &sweepRecorder{sim: sim}
		sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: server.NewReconciler(runs, fc, nil), Interval: time.Minute, OnPass: rec.onPass})
		passes := sweepFor(sw, rec, 3*time.Minute+50*time.Second)
		if len(passes) != 3 {
			t.Fatalf("got %d passes in 3 intervals of timed-out queries, want 3: a query timeout skips no pass", len(passes))
		}
		for _, p := range passes {
			if p.Timeouts != 2 || p.ServerErrors != 0 || p.ForgeReads != 2 {
				t.Errorf("pass %d: %d timeouts, %d server errors, %d forge reads; want 2, 0, 2: a timeout is no server error, and the smallest batch is tried once more", p.Pass, p.Timeouts, p.ServerErrors, p.ForgeReads)
			}
		}
	})
}

// TestSweepWriteGitHubStoppedIsNoFailingForge pins how the sweep counts a
// status write GitHub stopped at its 10 s timeout (forgesim answers 502
// "Server Error", as GitHub's "Troubleshooting the REST API" says) after
// the batch's read answered: a failed write, the run offered again by the
// next pass, not a failing forge. So no pass is
// skipped for it (ServerErrors 0; passes stay an interval apart), where a
// 5xx on every read backs the sweeper off. Counted as a failed read, a
// one-run installation skipped two intervals after one slow write.
func TestSweepWriteGitHubStoppedIsNoFailingForge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := steadyLatency()
		l.REST = map[string]time.Duration{statusRoute: 12 * time.Second}
		sim := forgesim.New(forgesim.WithLatency(l))
		fc, runs, stopSim := seedSweepRuns(t, sim, 1, 1)
		defer stopSim()
		rec := &sweepRecorder{sim: sim}
		sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: server.NewReconciler(runs, fc, nil),
			Interval: time.Minute, OnPass: rec.onPass})
		passes := sweepFor(sw, rec, 4*time.Minute+30*time.Second)
		for _, p := range passes {
			t.Logf("pass %d at %v: reads %d, failed %d, 5xx %d", p.Pass, p.At, p.ForgeReads, p.ForgeErrors, p.ServerErrors)
		}
		if len(passes) != 4 {
			t.Fatalf("got %d passes in 4.5 intervals, want 4 (the first an interval in): a write GitHub stopped skips no pass", len(passes))
		}
		for _, p := range passes {
			if p.ServerErrors != 0 || p.ForgeErrors != 0 || p.ForgeReads != 1 {
				t.Errorf("pass %d: %d forge reads, %d failed, %d with a 5xx; want 1, 0, 0: the read answered, only the write failed", p.Pass, p.ForgeReads, p.ForgeErrors, p.ServerErrors)
			}
		}
		// The simulator keeps a write GitHub stopped (GitHub does not say it
		// is undone), so the next pass reads the run current.
		if got := sim.Requests(forgesim.Filter{Route: statusRoute}); got != 1 {
			t.Errorf("%d status writes, want 1: the stopped write was made, and the next pass reads it", got)
		}
		if got := gateState(t, fc, fmt.Sprintf("%040d", 1)); got != "success" {
			t.Errorf("gate status %q, want success", got)
		}
	})
}
