package server_test

import (
	"context"
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
