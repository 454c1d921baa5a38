// Package mongostore is what the project's MongoDB stores (gating runs,
// board cards, webhook deliveries) and their memory twins share: the
// instant as BSON keeps it, creating their indexes in a way every
// MongoDB-wire server this project runs on accepts, the test server
// included, and reading a query's documents through the store's own
// decoder.
package mongostore

import (
	"context"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Stamp is t as BSON keeps it, so both twins of a store agree: UTC,
// truncated to the millisecond. (pkg/lease keeps its own, lease.Stamp, to
// stay on the standard library alone.)
func Stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// DecimalID is the _id of a document keyed by a number, such as an
// installation ID: the number in decimal, a string. FerretDB v1.24, the
// test server, pushes a filter down to SQLite only when it is an _id
// alone, a string or an ObjectID (internal/backends/sqlite/collection.go,
// Query); with a numeric _id every lookup decoded the whole collection in
// Go, 4× the time at 1,000 documents (docs/benchmarks.md).
func DecimalID(id int64) string { return strconv.FormatInt(id, 10) }

// CreateIndexes creates models on coll one at a time; an existing index of the
// same name and keys is kept. One at a time because the MongoDB-wire test
// server (FerretDB v1, internal/testing/mongotest, iterion dev-mongo) drops the
// connection when one createIndexes names two or more indexes that already
// exist, which every replica after the first would send. The first error
// is returned unwrapped; the indexes before it stay created.
func CreateIndexes(ctx context.Context, coll *mongo.Collection, models []mongo.IndexModel) error {
	for _, m := range models {
		if _, err := coll.Indexes().CreateOne(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// FindAll runs a find of filter with opts on coll and returns every
// document turned into a T by decode, in the cursor's order. It stops at
// the first error: the find's or the cursor's, returned unwrapped, or
// decode's, returned as decode made it.
func FindAll[T any](ctx context.Context, coll *mongo.Collection, filter bson.D, opts *options.FindOptionsBuilder,
	decode func(bson.Raw) (T, error)) ([]T, error) {
	cur, err := coll.Find(ctx, filter, opts)
	if err != nil {
		return nil, err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	var out []T
	for cur.Next(ctx) {
		v, err := decode(cur.Current)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, cur.Err()
}
