// Package mongoidx creates a store's MongoDB indexes in a way every
// MongoDB-wire server this project runs on accepts, the test server
// included.
package mongoidx

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Create creates models on coll one at a time; an existing index of the
// same name and keys is kept. One at a time because the MongoDB-wire test
// server (FerretDB v1, internal/mongotest, iterion dev-mongo) drops the
// connection when one createIndexes names two or more indexes that already
// exist, which every replica after the first would send. The first error
// is returned unwrapped; the indexes before it stay created.
func Create(ctx context.Context, coll *mongo.Collection, models []mongo.IndexModel) error {
	for _, m := range models {
		if _, err := coll.Indexes().CreateOne(ctx, m); err != nil {
			return err
		}
	}
	return nil
}
