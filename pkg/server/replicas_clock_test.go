package server_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
)

// clockCost is what the simulator counted of the sweep at one replica
// count: GraphQL queries and points, the passes and their sweepers.
type clockCost struct {
	queries, points int64
	passes          int
	timeouts        int
	owners          map[string]bool
	elected         int
}

// sweepCostAt runs n replicas, on one lease store, one run store and one
// simulator with GitHub's latency model (seed 1), over runs open runs
// (the first shallow of them updated now, the rest 5 hours ago, each
// pull request's gate status already its verdict) for intervals sweep
// intervals of a minute, and returns what the simulator counted.
func sweepCostAt(t *testing.T, n, runs, shallow, intervals int) (cost clockCost) {
	synctest.Test(t, func(t *testing.T) {
		lat := forgesim.GitHubLatency()
		lat.Seed = 1
		c := &cluster{sim: forgesim.New(forgesim.WithLatency(lat)), leases: lease.NewMemoryStore(), runs: gaterun.NewMemoryStore(), tl: &timeline{}}
		for i := 1; i <= runs; i++ {
			sha := fmt.Sprintf("%040d", i)
			updated := time.Now()
			if i > shallow {
				updated = updated.Add(-5 * time.Hour)
			}
			err := c.sim.SeedPull("acme", "app", i, sha, "open")
			if err == nil {
				err = c.sim.SetStatus("acme", "app", sha, forgesim.Status{Context: gaterun.DefaultContext, State: "success"})
			}
			if err == nil {
				_, err = c.runs.Put(context.Background(), gateRun(i, sha, gaterun.VerdictSuccess), updated)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		tr, stopSim := serveSimOnPipe(c.sim)
		defer stopSim()
		startReplicas(t, c, tr, n, time.Minute, nil)
		time.Sleep(time.Duration(intervals)*time.Minute + 30*time.Second)
		synctest.Wait()
		c.stopAll()
		for _, rc := range c.sim.Stats().Requests {
			if rc.Route == "POST /graphql" {
				cost.queries += rc.Count
				cost.points += rc.Points
			}
		}
		events, passes := c.tl.snapshot()
		cost.passes, cost.owners = len(passes), make(map[string]bool)
		for _, p := range passes {
			cost.owners[p.Owner] = true
			cost.timeouts += p.Timeouts
		}
		for _, e := range events {
			if e.Kind == lease.Elected {
				cost.elected++
			}
		}
	})
	return cost
}

// TestSweepCostWithTheLeaseDoesNotGrowWithReplicas pins the lease's
// ÷N, measured in process and in virtual time with GitHub's latency model
// on (a fixed seed, so the draws of slow queries and timeouts are the
// same at every replica count): 1,000 open runs, 500 of them in the
// shallow window, over 20 intervals, cost the simulator the same GraphQL
// queries and points at 10 replicas as at 1, within 5%, because one
// replica is elected for the whole run and sweeps alone
// (docs/benchmarks.md, GitHub's clock).
func TestSweepCostWithTheLeaseDoesNotGrowWithReplicas(t *testing.T) {
	t.Parallel() // virtual time: its figures do not depend on what else runs
	const runs, shallow, intervals = 1000, 500, 20
	one := sweepCostAt(t, 1, runs, shallow, intervals)
	ten := sweepCostAt(t, 10, runs, shallow, intervals)
	qr, pr := float64(ten.queries)/float64(one.queries), float64(ten.points)/float64(one.points)
	t.Logf("1 replica: %d queries, %d points, %d passes, %d timeouts; 10 replicas: %d queries, %d points, %d passes, %d timeouts; ratio 10 ÷ 1: queries %.3f, points %.3f",
		one.queries, one.points, one.passes, one.timeouts, ten.queries, ten.points, ten.passes, ten.timeouts, qr, pr)
	for _, c := range []struct {
		n    int
		cost clockCost
	}{{1, one}, {10, ten}} {
		if c.cost.elected != 1 || len(c.cost.owners) != 1 || c.cost.passes != intervals {
			t.Errorf("%d replicas: %d elections, %d sweepers, %d passes; want 1, 1, %d: one replica sweeps every interval", c.n, c.cost.elected, len(c.cost.owners), c.cost.passes, intervals)
		}
	}
	if one.queries == 0 || qr > 1.05 || pr > 1.05 {
		t.Errorf("10 replicas over 1: queries %.3f, points %.3f; want at most 1.05: with the lease, the sweep's cost does not grow with replicas", qr, pr)
	}
}
