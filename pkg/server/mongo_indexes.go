package server

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/mongo"
)

// createIndexes creates models on coll one at a time; an existing index of
// the same name and keys is kept. One at a time because the MongoDB-wire
// test server (FerretDB v1, internal/mongotest, cmd/dev-mongo) drops
// the connection when one createIndexes names two or more indexes that
// already exist, which every replica after the first would send.
func createIndexes(ctx context.Context, coll *mongo.Collection, models []mongo.IndexModel) error {
	for _, m := range models {
		if _, err := coll.Indexes().CreateOne(ctx, m); err != nil {
			return err
		}
	}
	return nil
}
