package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
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
			tr, stop := serveSimOnPipe(sim)
			defer stop()
			fc, err := forge.New(forge.Config{BaseURL: "http://sim/", Token: "tok", Next: tr})
			if err != nil {
				b.Fatal(err)
			}
			runs := server.NewMemoryRunStore()
			page := make([]server.GateRun, 0, forge.MaxPullBatch)
			for i := 1; i <= forge.MaxPullBatch; i++ {
				sha := fmt.Sprintf("%040d", i)
				if err := sim.SeedPull("acme", "app", i, sha, "open"); err != nil {
					b.Fatal(err)
				}
				if err := sim.SetStatus("acme", "app", sha, forgesim.Status{Context: server.DefaultContext, State: "success"}); err != nil {
					b.Fatal(err)
				}
				r := gateRun(i, sha, server.VerdictSuccess)
				if _, err := runs.Put(context.Background(), r, time.Now()); err != nil {
					b.Fatal(err)
				}
				page = append(page, r)
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
