package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// BenchmarkInstallationsView times one answer of the installations view
// at the scale of the tenants scenario: 1,000 installations, 10
// open runs each, a recorded sweep each, 64 shards held by 10 owners, on
// the in-memory stores: the JSON's first page (100, the lowest budget
// first) and the HTML page (a summary of all 1,000 and 100 rows).
func BenchmarkInstallationsView(b *testing.B) {
	const n, shards = 1000, server.DefaultSweepShards
	sim, simSrv := startSim(b)
	if err := sim.SeedInstallations(n, 1); err != nil {
		b.Fatal(err)
	}
	app, err := forge.NewApp(forge.AppConfig{BaseURL: simSrv.URL + "/", AppID: 42, PrivateKey: forgetest.AppKey(b), ETagCacheBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	if err := app.Relist(context.Background()); err != nil {
		b.Fatal(err)
	}
	ctx, now := context.Background(), time.Now()
	runs, leases := gaterun.NewMemoryStore(), lease.NewMemoryStore()
	var sweeps []gaterun.InstallationSweep
	for id := int64(1); id <= n; id++ {
		repo := "org-" + strconv.FormatInt(id, 10) + "/repo-1"
		for pull := 1; pull <= 10; pull++ {
			r := gaterun.Run{ID: gaterun.ID("github.com", repo, pull, headSHA), Host: "github.com", Repo: repo, Pull: pull,
				HeadSHA: headSHA, Context: gaterun.DefaultContext, Verdict: gaterun.VerdictSuccess, Installation: id}
			if _, err := runs.Put(ctx, r, now); err != nil {
				b.Fatal(err)
			}
		}
		sweeps = append(sweeps, gaterun.InstallationSweep{Installation: id, At: now, Owner: "replica-1",
			Budgets: []forge.RateLimit{{Resource: "core", Limit: 5000, Remaining: int(5000 - id), Reset: now.Add(time.Hour)}}})
	}
	if err := runs.RecordSweeps(ctx, sweeps); err != nil {
		b.Fatal(err)
	}
	for i := range shards {
		if _, err := leases.Acquire(ctx, lease.ShardName(server.MergeGateSweeper().Name, shards, i), "replica-"+strconv.Itoa(i%10), now, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	srv, err := server.New(server.Config{Runs: runs, Leases: leases, App: app, APIToken: apiToken, Owner: "replica-1"})
	if err != nil {
		b.Fatal(err)
	}
	h := srv.Handler()
	for _, path := range []string{"/api/installations", "/installations"} {
		b.Run(path, func(b *testing.B) {
			for b.Loop() {
				rec := httptest.NewRecorder()
				req := httptest.NewRequest("GET", path, nil)
				req.Header.Set("Authorization", "Bearer "+apiToken)
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("GET %s = %d %s", path, rec.Code, rec.Body)
				}
			}
		})
	}
}
