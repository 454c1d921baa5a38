package gaterun_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/gaterun"
)

// BenchmarkMongoInstallationReads times the installations view's two
// run-store reads on the test MongoDB at the tenants scenario's scale
// (1,000 installations, 10 unsettled runs each, a sweep each), and the
// sweeper's write of one shard's passes (16 installations, about 1,000 /
// 64) and of all 1,000 at once. The runs are inserted as documents of the
// store's shape, as 10,000 Puts would take minutes on the test server.
func BenchmarkMongoInstallationReads(b *testing.B) {
	const n, perInstallation = 1000, 10
	ctx, now := context.Background(), time.Now().UTC().Truncate(time.Millisecond)
	db := mongotest.DB(b)
	s, err := gaterun.NewMongoStore(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	docs := make([]any, 0, n*perInstallation)
	for id := 1; id <= n; id++ {
		repo := fmt.Sprintf("org-%d/repo-1", id)
		for pull := 1; pull <= perInstallation; pull++ {
			docs = append(docs, bson.D{{Key: "_id", Value: gaterun.ID("github.com", repo, pull, "abc")}, {Key: "host", Value: "github.com"},
				{Key: "repo", Value: repo}, {Key: "repo_key", Value: repo}, {Key: "pull", Value: pull}, {Key: "head_sha", Value: "abc"},
				{Key: "context", Value: gaterun.DefaultContext}, {Key: "verdict", Value: "success"}, {Key: "created_at", Value: now},
				{Key: "updated_at", Value: now}, {Key: "settled", Value: false}, {Key: "installation", Value: int64(id)}})
		}
	}
	if _, err := db.Collection(gaterun.Collection).InsertMany(ctx, docs); err != nil {
		b.Fatal(err)
	}
	sweeps := func(from, count int, at time.Time) []gaterun.InstallationSweep {
		out := make([]gaterun.InstallationSweep, count)
		for i := range out {
			out[i] = gaterun.InstallationSweep{Installation: int64(from + i), At: at, Owner: "replica-1",
				Budgets: []forge.RateLimit{{Resource: "core", Limit: 5000, Remaining: 4000, Reset: at.Add(time.Hour)}}}
		}
		return out
	}
	if err := s.RecordSweeps(ctx, sweeps(1, n, now)); err != nil {
		b.Fatal(err)
	}
	b.Run("OpenRuns", func(b *testing.B) {
		for b.Loop() {
			open, err := s.OpenRuns(ctx)
			if err != nil || len(open) != n || open[1] != perInstallation {
				b.Fatalf("OpenRuns = %d installations, %d runs of 1, %v; want %d of %d", len(open), open[1], err, n, perInstallation)
			}
		}
	})
	b.Run("UnsettledIn", func(b *testing.B) {
		for b.Loop() {
			if got, err := s.UnsettledIn(ctx, 500, now.Add(-time.Hour), gaterun.Cursor{}, 100); err != nil || len(got) != perInstallation {
				b.Fatalf("UnsettledIn = %d, %v; want %d", len(got), err, perInstallation)
			}
		}
	})
	b.Run("Put", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			run := gaterun.Run{ID: gaterun.ID("github.com", "org-1/repo-1", 100+i, "abc"), Host: "github.com", Repo: "org-1/repo-1",
				Pull: 100 + i, HeadSHA: "abc", Context: gaterun.DefaultContext, Verdict: "success", Installation: 1}
			if _, err := s.Put(ctx, run, now); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Sweeps", func(b *testing.B) {
		for b.Loop() {
			if got, err := s.Sweeps(ctx); err != nil || len(got) != n {
				b.Fatalf("Sweeps = %d, %v; want %d", len(got), err, n)
			}
		}
	})
	for _, batch := range []int{16, n} {
		b.Run(fmt.Sprintf("RecordSweeps/%d", batch), func(b *testing.B) {
			at := now
			for b.Loop() {
				at = at.Add(time.Millisecond) // each write a later pass, as the sweeper's
				if err := s.RecordSweeps(ctx, sweeps(1, batch, at)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
