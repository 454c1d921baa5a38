package mongotest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"iterion.dev/iterion/internal/testing/mongotest"
)

// TestConditionalUpsertRaceElectsOne checks the property the proxy exists
// for: candidates racing the lease's conditional upsert
// ({_id, $or: [{owner: me}, {expires: {$lte: now}}]}, upsert, $set owner)
// for an absent or an expired document elect exactly one winner; every other
// candidate gets a duplicate-key refusal. FerretDB alone elects several.
func TestConditionalUpsertRaceElectsOne(t *testing.T) {
	const candidates, rounds = 8, 30
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	coll := mongotest.DB(t).Collection("leases")
	now := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	for round := range rounds {
		name := fmt.Sprintf("lease-%d", round)
		state := "absent"
		if round%2 == 1 {
			state = "expired"
			old := bson.D{{Key: "_id", Value: name}, {Key: "owner", Value: "old"}, {Key: "expires", Value: now.Add(-time.Second)}}
			if _, err := coll.InsertOne(ctx, old); err != nil {
				t.Fatalf("seed expired lease: %v", err)
			}
		}
		won := make([]bool, candidates)
		errs := make([]error, candidates)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range candidates {
			wg.Go(func() {
				me := fmt.Sprintf("cand-%d", i)
				filter := bson.D{{Key: "_id", Value: name}, {Key: "$or", Value: bson.A{
					bson.D{{Key: "owner", Value: me}},
					bson.D{{Key: "expires", Value: bson.D{{Key: "$lte", Value: now}}}},
				}}}
				update := bson.D{{Key: "$set", Value: bson.D{{Key: "owner", Value: me}, {Key: "expires", Value: now.Add(time.Minute)}}}}
				<-start
				res, err := coll.UpdateOne(ctx, filter, update, options.UpdateOne().SetUpsert(true))
				switch {
				case mongo.IsDuplicateKeyError(err):
				case err != nil:
					errs[i] = err
				default:
					won[i] = res.MatchedCount == 1 || res.UpsertedCount == 1
				}
			})
		}
		close(start)
		wg.Wait()
		var winners []string
		for i := range candidates {
			if errs[i] != nil {
				t.Fatalf("round %d (%s): candidate %d: got error %v, want a win or a duplicate-key refusal", round, state, i, errs[i])
			}
			if won[i] {
				winners = append(winners, fmt.Sprintf("cand-%d", i))
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d (%s): got winners %v, want exactly one: racing conditional upserts elect one", round, state, winners)
		}
		var doc struct {
			Owner string `bson:"owner"`
		}
		if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: name}}).Decode(&doc); err != nil {
			t.Fatalf("round %d: read lease: %v", round, err)
		}
		if doc.Owner != winners[0] {
			t.Fatalf("round %d (%s): got owner %q, want the winner %q: the document names the one winner", round, state, doc.Owner, winners[0])
		}
	}
}
