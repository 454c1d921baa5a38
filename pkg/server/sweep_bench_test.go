package server_test

import (
	"context"
	"fmt"
	"testing"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/server"
)

// BenchmarkSweepDecision times the sweeper's decision path for one page of
// forge.MaxPullBatch open runs that all agree with the forge (nothing to
// write), side by side: the batched offer (one GraphQL query) and the
// per-run REST offer it replaced (two reads a run, the ETag cache on, so
// the reads after the first op are 304s). The simulator answers over an
// in-memory pipe, so the figures are the client's, the decision's and the
// simulator's work, with no network. requests/op is the simulator's count.
func BenchmarkSweepDecision(b *testing.B) {
	for _, mode := range []server.SweepMode{server.SweepBatch, server.SweepREST} {
		b.Run(string(mode), func(b *testing.B) {
			sim := forgesim.New(forgesim.WithBudget(1<<30), forgesim.WithSecondaryLimits(forgesim.SecondaryLimits{}))
			fc, runs, stop := seedSweepRuns(b, sim, forge.MaxPullBatch, 0)
			defer stop()
			page := make([]gaterun.Run, 0, forge.MaxPullBatch)
			for i := 1; i <= forge.MaxPullBatch; i++ {
				page = append(page, gateRun(i, fmt.Sprintf("%040d", i), gaterun.VerdictSuccess))
			}
			var off server.Offerer = server.NewReconciler(runs, fc, nil)
			if mode == server.SweepREST {
				off = server.PerRunOfferer(off)
			}
			ctx := context.Background()
			sim.ResetStats()
			b.ResetTimer()
			for b.Loop() {
				outs, err := off.OfferBatch(ctx, page)
				if err != nil || outs[0] != server.OutcomeCurrent {
					b.Fatalf("got %v, %v; want every run current: nothing drifted", outs[0], err)
				}
			}
			b.ReportMetric(float64(sim.Requests(forgesim.Filter{}))/float64(b.N), "requests/op")
		})
	}
}
