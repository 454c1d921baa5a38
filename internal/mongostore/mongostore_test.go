package mongostore_test

import (
	"context"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"iterion.dev/iterion/internal/mongostore"
	"iterion.dev/iterion/internal/testing/mongotest"
)

// TestCreateIndexesKeepsExistingIndexes pins that a store starts on a database
// whose indexes exist already, as every replica after the first, and every
// restart, finds them: CreateIndexes succeeds again and the indexes are there.
func TestCreateIndexesKeepsExistingIndexes(t *testing.T) {
	coll := mongotest.DB(t).Collection("things")
	models := []mongo.IndexModel{
		{Keys: bson.D{{Key: "a", Value: 1}}, Options: options.Index().SetName("by_a")},
		{Keys: bson.D{{Key: "b", Value: -1}, {Key: "_id", Value: 1}}, Options: options.Index().SetName("by_b")},
	}
	for i := range 2 {
		if err := mongostore.CreateIndexes(context.Background(), coll, models); err != nil {
			t.Fatalf("CreateIndexes, start %d: got %v, want nil: existing indexes are kept", i+1, err)
		}
	}
	specs, err := coll.Indexes().ListSpecifications(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	for _, want := range []string{"by_a", "by_b"} {
		if !slices.Contains(names, want) {
			t.Errorf("indexes: got %v, want %s among them: CreateIndexes creates every model", names, want)
		}
	}
}
