package delivery

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"iterion.dev/iterion/internal/mongostore"
)

// Collection is the collection MongoStore keeps delivery
// ids in.
const Collection = "webhook_deliveries"

// MongoStore is the MongoDB Store twin, shared by every
// replica: collection webhook_deliveries, one document per delivery id
// ({_id, expires}), with a TTL index that lets MongoDB delete a document
// once its expiry has passed. MongoDB's TTL monitor runs about once a
// minute, so Claim also treats a lingering expired document as absent. On
// a server without TTL indexes (FerretDB v1, the test server and dev-mongo)
// it indexes expires plainly and deletes expired ids itself, on every
// pruneEvery-th claim. It is safe for concurrent use.
type MongoStore struct {
	coll      *mongo.Collection
	selfPrune bool          // no TTL index: Claim deletes expired ids
	claims    atomic.Uint64 // claims so far, to prune every pruneEvery
}

// pruneEvery is how many claims pass between two deletions of expired ids
// when the server has no TTL index.
const pruneEvery = 256

// codeNotImplemented is the server error FerretDB answers for an index
// option it lacks, such as expireAfterSeconds.
const codeNotImplemented = 238

var _ Store = (*MongoStore)(nil)

// NewMongoStore returns a MongoStore on db's
// webhook_deliveries collection, after creating its TTL index (an existing
// one is kept).
func NewMongoStore(ctx context.Context, db *mongo.Database) (*MongoStore, error) {
	coll := db.Collection(Collection)
	s := &MongoStore{coll: coll}
	err := mongostore.CreateIndexes(ctx, coll, []mongo.IndexModel{{
		Keys:    bson.D{{Key: "expires", Value: 1}},
		Options: options.Index().SetName("ttl_expires").SetExpireAfterSeconds(0),
	}})
	if se, ok := errors.AsType[mongo.ServerError](err); ok && se.HasErrorCode(codeNotImplemented) {
		s.selfPrune = true
		err = mongostore.CreateIndexes(ctx, coll, []mongo.IndexModel{{
			Keys: bson.D{{Key: "expires", Value: 1}}, Options: options.Index().SetName("by_expires"),
		}})
	}
	if err != nil {
		return nil, fmt.Errorf("delivery: create %s indexes: %w", Collection, err)
	}
	return s, nil
}

// Claim implements Store: an insert, and on a duplicate id one
// conditional update that takes over the id only when its expiry passed.
func (s *MongoStore) Claim(ctx context.Context, id string, now time.Time, window time.Duration) (bool, error) {
	if err := checkClaim(id, window); err != nil {
		return false, err
	}
	now = mongostore.Stamp(now)
	expires := mongostore.Stamp(now.Add(window))
	if s.selfPrune && s.claims.Add(1)%pruneEvery == 0 {
		if _, err := s.coll.DeleteMany(ctx, bson.D{{Key: "expires", Value: bson.D{{Key: "$lte", Value: now}}}}); err != nil {
			return false, fmt.Errorf("delivery: prune deliveries: %w", err)
		}
	}
	_, err := s.coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "expires", Value: expires}})
	if err == nil {
		return true, nil
	}
	if !mongo.IsDuplicateKeyError(err) {
		return false, fmt.Errorf("delivery: claim delivery %q: %w", id, err)
	}
	res, err := s.coll.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: id}, {Key: "expires", Value: bson.D{{Key: "$lte", Value: now}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "expires", Value: expires}}}})
	if err != nil {
		return false, fmt.Errorf("delivery: claim delivery %q: %w", id, err)
	}
	return res.MatchedCount == 1, nil
}

// Forget implements Store.
func (s *MongoStore) Forget(ctx context.Context, id string) error {
	if _, err := s.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
		return fmt.Errorf("delivery: forget delivery %q: %w", id, err)
	}
	return nil
}
