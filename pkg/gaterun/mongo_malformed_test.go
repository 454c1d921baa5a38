package gaterun_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"

	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/gaterun"
)

// TestMongoRunStoreListingsSkipAMalformedDocument pins what a listing does
// with a document it cannot read as a run (a replica of another release
// writing another shape, a hand edit): it skips it, tells ctx's WithSkipped
// function its _id and an ErrMalformed error naming the field, once a
// listing, and lists every run after it, each page full but the last, so a
// sweep paging through reaches every run. Get and ForPull of it still
// answer ErrMalformed naming the field: they answer for one run, or for a
// pull request's runs together, and must not decide from some of them.
// The bad documents sit where paging meets them: one tied with a run's
// instant (after it by _id), one whose _id is no string (no place in
// listing order), and one whose updated_at is a string (first, for a
// listing without since).
func TestMongoRunStoreListingsSkipAMalformedDocument(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	db := mongotest.DB(t)
	s, err := gaterun.NewMongoStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	var good []gaterun.Run
	for i := range 5 {
		r := gaterun.Run{ID: gaterun.ID("github.com", "acme/app", i+1, "abc"), Host: "github.com", Repo: "acme/app", Pull: i + 1,
			HeadSHA: "abc", Context: gaterun.DefaultContext, Verdict: gaterun.VerdictSuccess}
		if _, err := s.Put(ctx, r, t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
		r, _ = s.Get(ctx, r.ID)
		good = append(good, r)
	}
	doc := func(id any, pull int, at any) bson.D {
		return bson.D{{Key: "_id", Value: id}, {Key: "host", Value: "github.com"}, {Key: "repo", Value: "acme/app"}, {Key: "repo_key", Value: "acme/app"},
			{Key: "pull", Value: pull}, {Key: "head_sha", Value: "abc"}, {Key: "context", Value: "iterion/review"}, {Key: "verdict", Value: "success"},
			{Key: "created_at", Value: t0}, {Key: "updated_at", Value: at}, {Key: "reported_at", Value: t0}, {Key: "settled", Value: false}}
	}
	oid := bson.NewObjectID()
	bad := []bson.D{
		mongotest.WithField(doc("zzz-bad-verdict", 20, t0.Add(time.Second)), "verdict", "approved"),
		doc(oid, 21, t0.Add(2500*time.Millisecond)),
		doc("bad-updated", 22, "yesterday"),
	}
	for _, d := range bad {
		if _, err := db.Collection(gaterun.Collection).InsertOne(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	oidText := bson.RawValue{Type: bson.TypeObjectID, Value: oid[:]}.String()
	for _, c := range []struct {
		name string
		list func(ctx context.Context, after gaterun.Cursor) ([]gaterun.Run, error)
		// skips: the bad documents the listing's filter matches.
		skips []string
	}{
		{"Unsettled", func(ctx context.Context, after gaterun.Cursor) ([]gaterun.Run, error) {
			return s.Unsettled(ctx, time.Time{}, after, 2)
		}, []string{"zzz-bad-verdict", oidText}},
		{"UnsettledIn", func(ctx context.Context, after gaterun.Cursor) ([]gaterun.Run, error) {
			return s.UnsettledIn(ctx, 0, time.Time{}, after, 2)
		}, []string{"zzz-bad-verdict", oidText}},
		{"UnsettledAmong", func(ctx context.Context, after gaterun.Cursor) ([]gaterun.Run, error) {
			return s.UnsettledAmong(ctx, []int64{0}, time.Time{}, after, 2)
		}, []string{"zzz-bad-verdict", oidText}},
		{"List", func(ctx context.Context, after gaterun.Cursor) ([]gaterun.Run, error) {
			return s.List(ctx, gaterun.Query{After: after, Limit: 2})
		}, []string{"bad-updated", "zzz-bad-verdict", oidText}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var skipped []string
			ctx := gaterun.WithSkipped(ctx, func(id string, err error) {
				skipped = append(skipped, id)
				if !errors.Is(err, gaterun.ErrMalformed) {
					t.Errorf("skipped %s for %v, want ErrMalformed", id, err)
				}
			})
			var got []gaterun.Run
			after := gaterun.Cursor{}
			for range 10 {
				page, err := c.list(ctx, after)
				if err != nil {
					t.Fatalf("%s after %+v: %v, want the runs after the malformed documents: one bad document stops no listing", c.name, after, err)
				}
				got = append(got, page...)
				if len(page) < 2 {
					break
				}
				after = gaterun.CursorAt(page[len(page)-1])
			}
			if !slices.Equal(got, good) {
				t.Errorf("%s paged by 2 = %v, want the 5 runs %v, pages full but the last: a page cut short by a skipped document would end the listing there", c.name, pulls(got), pulls(good))
			}
			if !slices.Equal(skipped, c.skips) {
				t.Errorf("%s told of skipping %q, want %q: each document the listing skips, once", c.name, skipped, c.skips)
			}
		})
	}
	if _, err := s.Get(ctx, "zzz-bad-verdict"); !errors.Is(err, gaterun.ErrMalformed) || !strings.Contains(err.Error(), "verdict") {
		t.Errorf("Get of the malformed document = %v, want ErrMalformed naming verdict: a run is read whole or not at all", err)
	}
	if runs, err := s.ForPull(ctx, "github.com", "acme/app", 20); !errors.Is(err, gaterun.ErrMalformed) || !strings.Contains(err.Error(), "verdict") {
		t.Errorf("ForPull of its pull = %v, %v, want ErrMalformed naming verdict: a pull request's runs decide together", pulls(runs), err)
	}
}

// pulls names runs by their pull, for messages.
func pulls(runs []gaterun.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = fmt.Sprintf("#%d", r.Pull)
	}
	return out
}

// TestMongoRunStoreRepoKeyMustBeItsReposKey pins that a document whose
// repo_key is not its repo's forge.RepoKey (another case, another
// repository's, not a string) is malformed, naming repo_key: the lookups
// match repo_key, so such a run was missed by every lookup of its
// repository, silently. Get answers ErrMalformed, a listing skips it and
// tells of it. A document without repo_key (an earlier release's, which
// the store's start keys) and one with its key read as runs.
func TestMongoRunStoreRepoKeyMustBeItsReposKey(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	base := bson.D{{Key: "_id", Value: "run"}, {Key: "host", Value: "github.com"}, {Key: "repo", Value: "Acme/App"},
		{Key: "pull", Value: 1}, {Key: "head_sha", Value: "abc"}, {Key: "context", Value: "iterion/review"}, {Key: "verdict", Value: "success"},
		{Key: "created_at", Value: now}, {Key: "updated_at", Value: now}, {Key: "settled", Value: false}}
	for _, c := range []struct {
		name      string
		key       any // nil: no repo_key
		malformed bool
	}{
		{"the key of its repo", "acme/app", false},
		{"no key, as an earlier release wrote", nil, false},
		{"the repo as spelt, not lower-cased", "Acme/App", true},
		{"upper-cased", "ACME/APP", true},
		{"another repository's key", "acme/lib", true},
		{"a number", 42, true},
		{"null", bson.Null{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := mongotest.DB(t)
			s, err := gaterun.NewMongoStore(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			doc := base
			if c.key != nil {
				doc = append(slices.Clone(base), bson.E{Key: "repo_key", Value: c.key})
			}
			if _, err := db.Collection(gaterun.Collection).InsertOne(ctx, doc); err != nil {
				t.Fatal(err)
			}
			var skipped []error
			listCtx := gaterun.WithSkipped(ctx, func(_ string, err error) { skipped = append(skipped, err) })
			runs, listErr := s.List(listCtx, gaterun.Query{Limit: 10})
			_, err = s.Get(ctx, "run")
			if !c.malformed {
				if err != nil || listErr != nil || len(runs) != 1 || len(skipped) != 0 {
					t.Errorf("Get = %v; List = %d runs, %v, skipped %v; want the run: its repo_key is its repo's, or absent", err, len(runs), listErr, skipped)
				}
				return
			}
			if !errors.Is(err, gaterun.ErrMalformed) || !strings.Contains(err.Error(), "repo_key") {
				t.Errorf("Get = %v, want ErrMalformed naming repo_key: a key that is not its repo's hides the run from its repository's lookups", err)
			}
			if listErr != nil || len(runs) != 0 || len(skipped) != 1 || !strings.Contains(skipped[0].Error(), "repo_key") {
				t.Errorf("List = %d runs, %v, skipped %v; want none, nil, and one skip naming repo_key", len(runs), listErr, skipped)
			}
		})
	}
}

// TestMongoOpenRunsSkipsARunWhoseInstallationItCannotRead pins that
// OpenRuns counts a run only under an installation it holds as an
// integer, and that such a document does not fail the count: a hand
// edit's installation 7.5 (which a truncating read counted under 7) or
// "7" is left out and reported to WithSkipped, naming the field, while
// the other installations' runs are counted. One such document failed the
// whole count, and with it run adoption and the installations page.
func TestMongoOpenRunsSkipsARunWhoseInstallationItCannotRead(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	s, err := gaterun.NewMongoStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []bson.D{
		{{Key: "_id", Value: "edited"}, {Key: "settled", Value: false}, {Key: "installation", Value: 7.5}},
		{{Key: "_id", Value: "quoted"}, {Key: "settled", Value: false}, {Key: "installation", Value: "7"}},
		{{Key: "_id", Value: "good"}, {Key: "settled", Value: false}, {Key: "installation", Value: int64(3)}},
	} {
		if _, err := db.Collection(gaterun.Collection).InsertOne(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	skipped := map[string]error{}
	got, err := s.OpenRuns(gaterun.WithSkipped(ctx, func(id string, err error) { skipped[id] = err }))
	if err != nil || len(got) != 1 || got[3] != 1 {
		t.Fatalf("OpenRuns = %v, %v; want map[3:1]: the runs whose installation is no integer are left out, not counted under 7, and fail nothing", got, err)
	}
	for _, id := range []string{"edited", "quoted"} {
		if err := skipped[id]; !errors.Is(err, gaterun.ErrMalformed) || !strings.Contains(err.Error(), "installation") {
			t.Errorf("skipped[%q] = %v, want ErrMalformed naming the installation", id, err)
		}
	}
}

// TestMongoOpenRunsReadsNothingToNameASkipWithoutAListener pins that
// OpenRuns looks a document up to name an installation value it cannot
// read only when ctx carries a WithSkipped function: the installations
// page counts open runs without one, and each bad value cost it a read
// whose answer nobody was told.
func TestMongoOpenRunsReadsNothingToNameASkipWithoutAListener(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	finds := 0
	db := mongotest.MonitoredDB(t, &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		if e.CommandName == "find" {
			mu.Lock()
			finds++
			mu.Unlock()
		}
	}})
	s, err := gaterun.NewMongoStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []bson.D{
		{{Key: "_id", Value: "edited"}, {Key: "settled", Value: false}, {Key: "installation", Value: 7.5}},
		{{Key: "_id", Value: "good"}, {Key: "settled", Value: false}, {Key: "installation", Value: int64(3)}},
	} {
		if _, err := db.Collection(gaterun.Collection).InsertOne(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	count := func(ctx context.Context) int {
		mu.Lock()
		before := finds
		mu.Unlock()
		if got, err := s.OpenRuns(ctx); err != nil || len(got) != 1 || got[3] != 1 {
			t.Fatalf("OpenRuns = %v, %v; want map[3:1]", got, err)
		}
		mu.Lock()
		defer mu.Unlock()
		return finds - before
	}
	if n := count(ctx); n != 0 {
		t.Errorf("OpenRuns without WithSkipped sent %d finds, want 0: nobody is told the name it would read", n)
	}
	var named []string
	if n := count(gaterun.WithSkipped(ctx, func(id string, _ error) { named = append(named, id) })); n != 1 || len(named) != 1 || named[0] != "edited" {
		t.Errorf("OpenRuns with WithSkipped sent %d finds and named %v, want 1 find naming [edited]", n, named)
	}
}
