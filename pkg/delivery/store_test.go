package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/delivery"
	"iterion.dev/iterion/pkg/delivery/deliverytest"
)

func TestMemoryStoreConformance(t *testing.T) {
	deliverytest.Run(t, func(*testing.T) delivery.Store { return delivery.NewMemoryStore() })
}

func TestMongoStoreConformance(t *testing.T) {
	deliverytest.Run(t, func(t *testing.T) delivery.Store {
		s, err := delivery.NewMongoStore(context.Background(), mongotest.DB(t), nil)
		if err != nil {
			t.Fatalf("NewMongoStore: %v", err)
		}
		return s
	})
}

// TestMongoStoreExpiresIDs pins that expired delivery ids are
// deleted, so the collection does not grow forever: by MongoDB through a
// TTL index, or, on a server without TTL indexes (FerretDB v1), by the
// store itself every 256 claims.
func TestMongoStoreExpiresIDs(t *testing.T) {
	db := mongotest.DB(t)
	s, err := delivery.NewMongoStore(context.Background(), db, nil)
	if err != nil {
		t.Fatalf("NewMongoStore: %v", err)
	}
	coll := db.Collection(delivery.Collection)
	if sp := ttlIndex(t, coll); sp != nil {
		if sp.ExpireAfterSeconds == nil || *sp.ExpireAfterSeconds != 0 {
			t.Errorf("ttl_expires expireAfterSeconds: got %v, want 0: a document expires at its own instant", sp.ExpireAfterSeconds)
		}
		return
	}
	t.Log("no TTL index on this server: checking the store's own pruning")
	ctx := context.Background()
	base := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	for i := range 255 { // the 256th claim, below, prunes
		if _, err := s.Claim(ctx, fmt.Sprintf("old-%d", i), base, time.Minute); err != nil {
			t.Fatalf("Claim: %v", err)
		}
	}
	if _, err := s.Claim(ctx, "new", base.Add(time.Hour), time.Minute); err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Errorf("documents after 255 expired claims and a new one: got %d (err %v), want 1: the 256th claim deletes the expired ids", n, err)
	}
}

// TestMongoStoreClaimStandsWhenItsPruneFails pins that deleting expired
// ids, on a server without TTL indexes, is housekeeping: the claim that
// runs a prune which fails (here its delete held until the claim's context
// ends, as a slow server would) keeps its answer, since failing it would
// answer the webhook 503 for a side job's failure; the failure is logged
// with its error and counted (PruneFailures); and the prune is tried again
// 16 claims later, not 256.
func TestMongoStoreClaimStandsWhenItsPruneFails(t *testing.T) {
	srv := mongotest.NewServer(t)
	db := srv.DB(t)
	var log strings.Builder
	s, err := delivery.NewMongoStore(context.Background(), db, slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatalf("NewMongoStore: %v", err)
	}
	coll := db.Collection(delivery.Collection)
	if ttlIndex(t, coll) != nil {
		t.Skip("this server has TTL indexes: the store never prunes")
	}
	ctx := context.Background()
	base := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	for i := range 255 { // the 256th claim, below, prunes
		if _, err := s.Claim(ctx, fmt.Sprintf("old-%d", i), base, time.Minute); err != nil {
			t.Fatalf("Claim: %v", err)
		}
	}
	deletes := func() int { return srv.Proxy().Commands()["delete"] }
	before := deletes()
	held := srv.Proxy().Hold(func(c mongotest.Command) bool { return c.Name == "delete" && c.Collection == delivery.Collection })
	t.Cleanup(held.Release) // never forwarded before the test ends: the held delete does not land
	claimCtx, cancel := context.WithCancel(ctx)
	got := claimInBackground(claimCtx, s, "new-0", base.Add(time.Hour), time.Minute)
	<-held.Arrived()
	cancel() // the prune gets no answer before the claim's context ends
	if a := <-got; a.claim != delivery.Claimed || a.err != nil {
		t.Fatalf("Claim running a failed prune = %v, %v; want claimed, nil: a failed prune does not fail the claim", a.claim, a.err)
	}
	if n := s.PruneFailures(); n != 1 {
		t.Errorf("PruneFailures = %d, want 1: a failed prune is counted", n)
	}
	if !strings.Contains(log.String(), "level=WARN") || !strings.Contains(log.String(), "context canceled") {
		t.Errorf("log %q: want a warning with the prune's error", log.String())
	}
	for i := 1; i < 16; i++ {
		if _, err := s.Claim(ctx, fmt.Sprintf("new-%d", i), base.Add(time.Hour), time.Minute); err != nil {
			t.Fatalf("Claim: %v", err)
		}
	}
	if n := deletes(); n != before {
		t.Errorf("deletes forwarded within 15 claims of the failed prune: %d, want none: a failing prune is not tried on every claim", n-before)
	}
	if _, err := s.Claim(ctx, "new-16", base.Add(time.Hour), time.Minute); err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 17 {
		t.Errorf("documents after the 16th claim past the failed prune: got %d (err %v), want the 17 new ones: the prune is tried again 16 claims later", n, err)
	}
	if n := s.PruneFailures(); n != 1 {
		t.Errorf("PruneFailures = %d after a prune that worked, want still 1", n)
	}
}

// claimAnswer is what a Claim answered.
type claimAnswer struct {
	claim delivery.Claim
	err   error
}

// claimInBackground runs s.Claim in a goroutine, for a test that holds
// one of its calls at the proxy, and delivers its answer.
func claimInBackground(ctx context.Context, s delivery.Store, id string, now time.Time, hold time.Duration) <-chan claimAnswer {
	got := make(chan claimAnswer, 1)
	go func() {
		c, err := s.Claim(ctx, id, now, hold)
		got <- claimAnswer{c, err}
	}()
	return got
}

// ttlIndex is coll's TTL index, ttl_expires, or nil on a server without
// TTL indexes (FerretDB v1), which refuses it.
func ttlIndex(t *testing.T, coll *mongo.Collection) *mongo.IndexSpecification {
	t.Helper()
	specs, err := coll.Indexes().ListSpecifications(context.Background())
	if err != nil {
		t.Fatalf("ListSpecifications: %v", err)
	}
	if i := slices.IndexFunc(specs, func(sp mongo.IndexSpecification) bool { return sp.Name == "ttl_expires" }); i >= 0 {
		return &specs[i]
	}
	return nil
}

// TestMongoStoreMalformedDocuments pins that Claim over a delivery document
// of the wrong shape is an error wrapping ErrMalformed that names the
// field, never Held or Done: a document whose expires is not a date never
// expires (MongoDB's TTL monitor passes it by, and so does Claim's
// take-over, which compares dates), so it would answer for ever.
func TestMongoStoreMalformedDocuments(t *testing.T) {
	now := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	good := bson.D{{Key: "_id", Value: "d"}, {Key: "state", Value: "held"}, {Key: "expires", Value: now.Add(time.Minute)}}
	with := func(key string, v any) bson.D { return mongotest.WithField(good, key, v) }
	for _, c := range []struct {
		name, field string
		doc         bson.D
	}{
		{"expires missing", "expires", with("expires", nil)},
		{"expires is a date string", "expires", with("expires", now.Add(-time.Hour).Format(time.RFC3339))},
		{"state unknown", "state", with("state", "processing")},
		{"state is null", "state", with("state", bson.Null{})},
		{"state is a number", "state", with("state", 1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := mongotest.DB(t)
			s, err := delivery.NewMongoStore(context.Background(), db, nil)
			if err != nil {
				t.Fatalf("NewMongoStore: %v", err)
			}
			if _, err := db.Collection(delivery.Collection).InsertOne(context.Background(), c.doc); err != nil {
				t.Fatal(err)
			}
			claim, err := s.Claim(context.Background(), "d", now, time.Second)
			if !errors.Is(err, delivery.ErrMalformed) || !strings.Contains(err.Error(), c.field) {
				t.Errorf("Claim = %v, %v, want ErrMalformed naming %s: a malformed document is an error, never an answer", claim, err, c.field)
			}
		})
	}
}

// TestMongoStoreClaimOfAVanishedDocumentIsHeld pins that a claim which
// wrote no hold is never Claimed: when the id's document is deleted as
// expired (by MongoDB's TTL monitor or another replica's prune) between the
// claim's take-over and its read of the state, the claim answers Held, so
// the caller asks again; answering Claimed would let another replica's
// claim, which inserts the id afresh, be Claimed too, and the delivery be
// processed twice.
func TestMongoStoreClaimOfAVanishedDocumentIsHeld(t *testing.T) {
	srv := mongotest.NewServer(t)
	db := srv.DB(t)
	s, err := delivery.NewMongoStore(context.Background(), db, nil)
	if err != nil {
		t.Fatalf("NewMongoStore: %v", err)
	}
	ctx := context.Background()
	base := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	if c, err := s.Claim(ctx, "d", base, time.Minute); err != nil || c != delivery.Claimed {
		t.Fatalf("first Claim = %v, %v; want claimed", c, err)
	}
	held := srv.Proxy().Hold(func(c mongotest.Command) bool { return c.Name == "find" && c.Collection == delivery.Collection })
	t.Cleanup(held.Release)
	got := claimInBackground(ctx, s, "d", base.Add(30*time.Second), time.Minute)
	<-held.Arrived() // the take-over matched nothing: the hold stands
	if _, err := db.Collection(delivery.Collection).DeleteOne(ctx, bson.D{{Key: "_id", Value: "d"}}); err != nil {
		t.Fatalf("delete the document: %v", err)
	}
	held.Release()
	if a := <-got; a.err != nil || a.claim != delivery.Held {
		t.Errorf("Claim whose document vanished before its read = %v, %v; want held, nil: a claim that wrote no hold is not Claimed", a.claim, a.err)
	}
	if c, err := s.Claim(ctx, "d", base.Add(31*time.Second), time.Minute); err != nil || c != delivery.Claimed {
		t.Errorf("the next Claim = %v, %v; want claimed: the id is free, and exactly one claim holds it", c, err)
	}
}

// TestMongoStoreReadsTheEarlierFormatAsDone pins that a delivery document
// of the earlier format ({_id, expires}, written only for processed ids,
// with no state) answers Done until it expires: reading it as Held would
// answer GitHub 503 for a delivery already processed.
func TestMongoStoreReadsTheEarlierFormatAsDone(t *testing.T) {
	db := mongotest.DB(t)
	s, err := delivery.NewMongoStore(context.Background(), db, nil)
	if err != nil {
		t.Fatalf("NewMongoStore: %v", err)
	}
	ctx := context.Background()
	now := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	if _, err := db.Collection(delivery.Collection).InsertOne(ctx, bson.D{{Key: "_id", Value: "d"}, {Key: "expires", Value: now.Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Claim(ctx, "d", now, time.Minute); err != nil || c != delivery.Done {
		t.Errorf("Claim over an earlier-format document = %v, %v; want done, nil: it was written for a processed delivery", c, err)
	}
	if c, err := s.Claim(ctx, "d", now.Add(time.Hour), time.Minute); err != nil || c != delivery.Claimed {
		t.Errorf("Claim at its expiry = %v, %v; want claimed: it lapses like any other", c, err)
	}
}
