package board_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/board"
	"iterion.dev/iterion/pkg/board/boardtest"
)

func TestMemoryStoreConformance(t *testing.T) {
	boardtest.Run(t, func(*testing.T) board.Store { return board.NewMemoryStore() })
}

func TestMongoStoreConformance(t *testing.T) {
	boardtest.Run(t, func(t *testing.T) board.Store { return newMongoStore(t, mongotest.DB(t)) })
}

func newMongoStore(t *testing.T, db *mongo.Database) *board.MongoStore {
	t.Helper()
	s, err := board.NewMongoStore(context.Background(), db)
	if err != nil {
		t.Fatalf("NewMongoStore: %v", err)
	}
	return s
}

// TestMongoStoreCreatesIndexes pins that the store's queries have their
// indexes: the whole board and one repository's, both newest first.
func TestMongoStoreCreatesIndexes(t *testing.T) {
	db := mongotest.DB(t)
	newMongoStore(t, db)
	specs, err := db.Collection(board.Collection).Indexes().ListSpecifications(context.Background())
	if err != nil {
		t.Fatalf("ListSpecifications: %v", err)
	}
	have := map[string]bool{}
	for _, s := range specs {
		have[s.Name] = true
	}
	for _, name := range []string{"by_updated", "repo_by_updated"} {
		if !have[name] {
			t.Errorf("index %q missing (have %v): every query of the store has an index", name, have)
		}
	}
}

// TestMongoStoreMalformedDocuments pins that a document of the wrong
// shape is an ErrMalformed error from Cards and from a Put it blocks,
// never a panic, a card, or a silent skip.
func TestMongoStoreMalformedDocuments(t *testing.T) {
	now := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	const id = "github.com/acme/app#1"
	good := bson.D{{Key: "_id", Value: id}, {Key: "host", Value: "github.com"}, {Key: "repo", Value: "acme/app"},
		{Key: "number", Value: 1}, {Key: "title", Value: "t"}, {Key: "state", Value: "open"},
		{Key: "labels", Value: bson.A{"bug"}}, {Key: "assignees", Value: bson.A{}},
		{Key: "pull_request", Value: false}, {Key: "url", Value: ""}, {Key: "updated_at", Value: now.Add(time.Hour)}}
	with := func(key string, v any) bson.D { return mongotest.WithField(good, key, v) }
	for _, c := range []struct {
		name string
		doc  bson.D
	}{
		{"number is a string", with("number", "one")},
		{"state unknown", with("state", "merged")},
		{"repo missing", with("repo", nil)},
		{"labels is a string", with("labels", "bug")},
		{"updated_at is a string", with("updated_at", "yesterday")},
		{"updated_at missing", with("updated_at", nil)},
		// The driver would convert these to a card's types, but the store's
		// queries compare by BSON type: an updated_at of another type sorts
		// apart from the dates and never passes Put's filter.
		{"updated_at is a date string", with("updated_at", now.Add(time.Hour).Format(time.RFC3339))},
		{"updated_at is a number", with("updated_at", now.Add(time.Hour).UnixMilli())},
		{"number is a boolean", with("number", true)},
		{"pull_request is a number", with("pull_request", 1)},
		{"title is null", with("title", bson.Null{})},
		{"_id is not the card's", with("number", 2)},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := mongotest.DB(t)
			s := newMongoStore(t, db)
			if _, err := db.Collection(board.Collection).InsertOne(context.Background(), c.doc); err != nil {
				t.Fatal(err)
			}
			if cards, err := s.Cards(context.Background(), board.Query{Limit: 10}); !errors.Is(err, board.ErrMalformed) {
				t.Errorf("Cards = %v, %v, want ErrMalformed: a malformed document is an error, never a card", cards, err)
			}
			// The card is older than the stored document claims to be, so
			// the store must read that document to decide.
			card := board.Card{Host: "github.com", Repo: "acme/app", Number: 1, State: "open", Updated: now}
			if changed, err := s.Put(context.Background(), card); !errors.Is(err, board.ErrMalformed) {
				t.Errorf("Put over it = %v, %v, want ErrMalformed: a malformed document is reported, never skipped in silence", changed, err)
			}
		})
	}
}
