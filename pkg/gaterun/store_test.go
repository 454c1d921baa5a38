package gaterun_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/gaterun/gateruntest"
)

func TestMemoryRunStoreConformance(t *testing.T) {
	gateruntest.Run(t, func(*testing.T) gaterun.Store { return gaterun.NewMemoryStore() })
}

func TestMongoRunStoreConformance(t *testing.T) {
	gateruntest.Run(t, func(t *testing.T) gaterun.Store {
		s, err := gaterun.NewMongoStore(context.Background(), mongotest.DB(t))
		if err != nil {
			t.Fatalf("NewMongoStore: %v", err)
		}
		return s
	})
}

// TestMongoRunStoreCreatesIndexes pins that the store's queries have their
// indexes: the unsettled listing, one installation's, the listing of every
// run in order (List without a state), the by-pull and the by-head lookups.
func TestMongoRunStoreCreatesIndexes(t *testing.T) {
	db := mongotest.DB(t)
	if _, err := gaterun.NewMongoStore(context.Background(), db); err != nil {
		t.Fatalf("NewMongoStore: %v", err)
	}
	specs, err := db.Collection(gaterun.Collection).Indexes().ListSpecifications(context.Background())
	if err != nil {
		t.Fatalf("ListSpecifications: %v", err)
	}
	have := map[string]bool{}
	for _, s := range specs {
		have[s.Name] = true
	}
	for _, name := range []string{"unsettled_by_updated", "unsettled_by_installation", "by_updated", "by_pull_key", "by_head_key"} {
		if !have[name] {
			t.Errorf("index %q missing (have %v): every query of the store has an index", name, have)
		}
	}
}

// TestMongoRunStoreFindsDocumentsWithoutKey pins the migration of documents
// written before repo_key: opening the store gives each its key, so the
// lookups find it under any spelling of its name, and its repo is kept.
func TestMongoRunStoreFindsDocumentsWithoutKey(t *testing.T) {
	now := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	db := mongotest.DB(t)
	id := gaterun.ID("github.com", "Acme/App", 4, "abc")
	legacy := bson.D{{Key: "_id", Value: id}, {Key: "host", Value: "github.com"}, {Key: "repo", Value: "Acme/App"}, {Key: "pull", Value: 4},
		{Key: "head_sha", Value: "abc"}, {Key: "context", Value: "iterion/review"}, {Key: "verdict", Value: "success"},
		{Key: "created_at", Value: now}, {Key: "updated_at", Value: now}, {Key: "settled", Value: false}}
	if _, err := db.Collection(gaterun.Collection).InsertOne(context.Background(), legacy); err != nil {
		t.Fatal(err)
	}
	s, err := gaterun.NewMongoStore(context.Background(), db)
	if err != nil {
		t.Fatalf("NewMongoStore: %v", err)
	}
	runs, err := s.ForPull(context.Background(), "github.com", "acme/app", 4)
	if err != nil || len(runs) != 1 || runs[0].ID != id || runs[0].Repo != "Acme/App" {
		t.Errorf("ForPull(acme/app#4) = %+v, %v, want the document written without repo_key, repo Acme/App", runs, err)
	}
	runs, err = s.ForHead(context.Background(), "github.com", "ACME/APP", "abc")
	if err != nil || len(runs) != 1 || runs[0].ID != id {
		t.Errorf("ForHead(ACME/APP@abc) = %+v, %v, want the document written without repo_key", runs, err)
	}
}

// TestMongoRunStoreMovesDocumentsWithoutInstallation pins that a document
// written before the installation field is installation 0's to Move, as it
// is to UnsettledIn: the adopter moves such runs from 0.
func TestMongoRunStoreMovesDocumentsWithoutInstallation(t *testing.T) {
	now := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	db := mongotest.DB(t)
	s, err := gaterun.NewMongoStore(context.Background(), db)
	if err != nil {
		t.Fatalf("NewMongoStore: %v", err)
	}
	id := gaterun.ID("github.com", "acme/app", 4, "abc")
	legacy := bson.D{{Key: "_id", Value: id}, {Key: "host", Value: "github.com"}, {Key: "repo", Value: "acme/app"}, {Key: "repo_key", Value: "acme/app"},
		{Key: "pull", Value: 4}, {Key: "head_sha", Value: "abc"}, {Key: "context", Value: "iterion/review"}, {Key: "verdict", Value: "success"},
		{Key: "created_at", Value: now}, {Key: "updated_at", Value: now}, {Key: "settled", Value: false}}
	if _, err := db.Collection(gaterun.Collection).InsertOne(context.Background(), legacy); err != nil {
		t.Fatal(err)
	}
	if moved, err := s.Move(context.Background(), id, 0, 7, now.Add(time.Minute)); err != nil || !moved {
		t.Fatalf("Move(0 to 7) of a document without installation = %v, %v, want true: it is installation 0's", moved, err)
	}
	if got, err := s.Get(context.Background(), id); err != nil || got.Installation != 7 || got.Verdict != gaterun.VerdictSuccess {
		t.Errorf("after Move: %+v, %v, want installation 7, verdict kept", got, err)
	}
}

// TestMongoRunStoreGivesLegacyRunsTheirReportTime pins that an unsettled
// document written without reported_at (by an earlier release) gets its
// updated_at as reported_at when a store opens, so a Move, which changes
// updated_at alone, leaves when its verdict was reported; and that a
// document still without it reads Reported = Updated, and settles as
// reported then.
func TestMongoRunStoreGivesLegacyRunsTheirReportTime(t *testing.T) {
	now := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	db := mongotest.DB(t)
	doc := func(pull int) (string, bson.D) {
		id := gaterun.ID("github.com", "acme/app", pull, "abc")
		return id, bson.D{{Key: "_id", Value: id}, {Key: "host", Value: "github.com"}, {Key: "repo", Value: "acme/app"}, {Key: "repo_key", Value: "acme/app"},
			{Key: "pull", Value: pull}, {Key: "head_sha", Value: "abc"}, {Key: "context", Value: "iterion/review"}, {Key: "verdict", Value: "success"},
			{Key: "created_at", Value: now.Add(-time.Hour)}, {Key: "updated_at", Value: now}, {Key: "settled", Value: false}} // created earlier: reported at its update, not its creation
	}
	before, legacy := doc(4)
	if _, err := db.Collection(gaterun.Collection).InsertOne(context.Background(), legacy); err != nil {
		t.Fatal(err)
	}
	s, err := gaterun.NewMongoStore(context.Background(), db)
	if err != nil {
		t.Fatalf("NewMongoStore: %v", err)
	}
	after, late := doc(5) // written by an earlier release's replica after this one opened
	if _, err := db.Collection(gaterun.Collection).InsertOne(context.Background(), late); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(context.Background(), after); err != nil || !got.Reported.Equal(now) {
		t.Errorf("a document without reported_at: Reported %v, %v; want its updated_at %v", got.Reported, err, now)
	}
	if settled, err := s.Settle(context.Background(), after, now); err != nil || !settled {
		t.Errorf("Settle(its updated_at) of a document without reported_at = %v, %v, want true: it was reported at its updated_at", settled, err)
	}
	if moved, err := s.Move(context.Background(), before, 0, 7, now.Add(time.Minute)); err != nil || !moved {
		t.Fatalf("Move(0 to 7) = %v, %v, want true", moved, err)
	}
	if got, err := s.Get(context.Background(), before); err != nil || !got.Reported.Equal(now) || !got.Updated.Equal(now.Add(time.Minute)) {
		t.Errorf("a legacy run moved after the store opened: Reported %v Updated %v, %v; want %v and %v: the move is not a report", got.Reported, got.Updated, err, now, now.Add(time.Minute))
	}
}

// TestMongoRunStoreMalformedDocuments pins that a document of the wrong
// shape is never a panic or a run: Get answers ErrMalformed, and a listing
// that meets it skips it and tells WithSkipped's function, with its _id and
// an ErrMalformed error. (A listing answered ErrMalformed until listings
// skipped such documents, and one bad document stopped every sweep:
// TestMongoRunStoreListingsSkipAMalformedDocument.)
func TestMongoRunStoreMalformedDocuments(t *testing.T) {
	now := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	good := bson.D{{Key: "_id", Value: "bad"}, {Key: "host", Value: "github.com"}, {Key: "repo", Value: "acme/app"}, {Key: "pull", Value: 1},
		{Key: "head_sha", Value: "abc"}, {Key: "context", Value: "iterion/review"}, {Key: "verdict", Value: "success"},
		{Key: "created_at", Value: now}, {Key: "updated_at", Value: now}, {Key: "settled", Value: false}}
	with := func(key string, v any) bson.D { return mongotest.WithField(good, key, v) }
	for _, c := range []struct {
		name string
		doc  bson.D
		// listed: the document still matches the unsettled listing's filter,
		// so Unsettled must meet it and skip it.
		listed bool
	}{
		{"pull is a string", with("pull", "one"), true},
		{"verdict unknown", with("verdict", "approved"), true},
		{"repo missing", with("repo", nil), true},
		{"created_at missing", with("created_at", nil), true},
		{"updated_at is a string", with("updated_at", "yesterday"), false},
		{"settled is a number", with("settled", 3), false},
		// The driver would convert these to a run's types, but the queries,
		// which compare by BSON type, would never find the run they made.
		{"updated_at is a date string", with("updated_at", now.Format(time.RFC3339)), false},
		{"created_at is a number", with("created_at", now.UnixMilli()), true},
		{"pull is a boolean", with("pull", true), true},
		{"installation is a boolean", mongotest.WithField(append(good, bson.E{Key: "installation", Value: int64(0)}), "installation", true), true},
		{"verdict is null", with("verdict", bson.Null{}), true},
		{"reported_at is a string", mongotest.WithField(append(good, bson.E{Key: "reported_at", Value: now}), "reported_at", "yesterday"), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := mongotest.DB(t)
			s, err := gaterun.NewMongoStore(context.Background(), db)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Collection(gaterun.Collection).InsertOne(context.Background(), c.doc); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(context.Background(), "bad"); !errors.Is(err, gaterun.ErrMalformed) {
				t.Errorf("Get = %v, want ErrMalformed: a malformed document is an error, never a run", err)
			}
			if !c.listed {
				return
			}
			var skipped []error
			ctx := gaterun.WithSkipped(context.Background(), func(id string, err error) {
				if id != "bad" {
					t.Errorf("skipped _id %q, want \"bad\"", id)
				}
				skipped = append(skipped, err)
			})
			runs, err := s.Unsettled(ctx, time.Time{}, gaterun.Cursor{}, 10)
			if err != nil || len(runs) != 0 {
				t.Errorf("Unsettled = %v, %v, want no run and no error: a malformed document is skipped, never a run", runs, err)
			}
			if len(skipped) != 1 || !errors.Is(skipped[0], gaterun.ErrMalformed) {
				t.Errorf("skipped %v, want one ErrMalformed: a listing tells of each document it skips", skipped)
			}
		})
	}
}
