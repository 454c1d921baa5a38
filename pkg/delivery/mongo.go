package delivery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
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
// ({_id, state: "held" or "done", expires}), with a TTL index that lets MongoDB delete a document
// once its expiry has passed. MongoDB's TTL monitor runs about once a
// minute, so Claim also treats a lingering expired document as absent. On
// a server without TTL indexes (FerretDB v1, the test server and dev-mongo)
// it indexes expires plainly and deletes expired ids itself, after every
// pruneEvery-th claim's own calls; that prune is housekeeping, so its
// failure does not fail the claim (see Claim). It is safe for concurrent
// use.
type MongoStore struct {
	coll      *mongo.Collection
	log       *slog.Logger
	selfPrune bool          // no TTL index: Claim deletes expired ids
	claims    atomic.Uint64 // claims so far
	// nextPrune is the claim count at which Claim next deletes expired
	// ids: pruneEvery claims after a prune, pruneRetry after a failed one.
	nextPrune atomic.Uint64
	// pruneFailures counts the failed prunes (PruneFailures).
	pruneFailures atomic.Uint64
}

// pruneEvery is how many claims pass between two deletions of expired ids
// when the server has no TTL index; pruneRetry, how many pass after a
// failed one before it is tried again: soon, but not on every claim, which
// would add a failing call (a timeout, say) to each while it lasts.
const (
	pruneEvery = 256
	pruneRetry = 16
)

// codeNotImplemented is the server error FerretDB answers for an index
// option it lacks, such as expireAfterSeconds.
const codeNotImplemented = 238

var _ Store = (*MongoStore)(nil)

// NewMongoStore returns a MongoStore on db's
// webhook_deliveries collection, after creating its TTL index (an existing
// one is kept). logger gets a warning for each failed prune of expired ids;
// nil discards.
func NewMongoStore(ctx context.Context, db *mongo.Database, logger *slog.Logger) (*MongoStore, error) {
	coll := db.Collection(Collection)
	s := &MongoStore{coll: coll, log: cmp.Or(logger, slog.New(slog.DiscardHandler))}
	s.nextPrune.Store(pruneEvery)
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

// The states of a delivery document.
const (
	stateHeld = "held"
	stateDone = "done"
)

// Claim implements Store: an insert, and on a duplicate id one
// conditional update that takes over the id only when its hold or window
// passed, then, when that matched nothing, a read of the id's state. On a
// server without TTL indexes, a claim that got its answer then deletes
// the expired ids when a prune is due; a failed prune is logged, counted
// (PruneFailures) and tried again pruneRetry claims later, and the claim
// keeps its answer. Failing the claim would answer the webhook 503 for a
// side job's failure, and GitHub does not redeliver a failed delivery on
// its own
// (https://docs.github.com/en/webhooks/using-webhooks/handling-failed-webhook-deliveries);
// the prune runs after the claim's calls so that one eating ctx's
// deadline cannot fail them either.
func (s *MongoStore) Claim(ctx context.Context, id string, now time.Time, hold time.Duration) (Claim, error) {
	if err := check(id, "hold", hold); err != nil {
		return 0, err
	}
	now = mongostore.Stamp(now)
	claim, err := s.claim(ctx, id, now, mongostore.Stamp(now.Add(hold)))
	if err == nil && s.selfPrune {
		s.prune(ctx, now)
	}
	return claim, err
}

// prune deletes the ids expired at now when a prune is due, at most one
// claim of those running at once doing it.
func (s *MongoStore) prune(ctx context.Context, now time.Time) {
	n := s.claims.Add(1)
	due := s.nextPrune.Load()
	if n < due || !s.nextPrune.CompareAndSwap(due, n+pruneEvery) {
		return
	}
	if _, err := s.coll.DeleteMany(ctx, bson.D{{Key: "expires", Value: bson.D{{Key: "$lte", Value: now}}}}); err != nil {
		s.nextPrune.Store(n + pruneRetry)
		s.pruneFailures.Add(1)
		s.log.Warn("delivery: expired delivery ids not deleted; the claim stands, the prune is tried again",
			"collection", Collection, "retry_after_claims", pruneRetry, "err", err)
	}
}

// PruneFailures is how many prunes of expired ids failed since the store
// was made: always 0 on a server with TTL indexes, where MongoDB deletes
// them.
func (s *MongoStore) PruneFailures() uint64 { return s.pruneFailures.Load() }

// claim is Claim's calls, with now and expires stamped.
func (s *MongoStore) claim(ctx context.Context, id string, now, expires time.Time) (Claim, error) {
	_, err := s.coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "state", Value: stateHeld}, {Key: "expires", Value: expires}})
	if err == nil {
		return Claimed, nil
	}
	if !mongo.IsDuplicateKeyError(err) {
		return 0, fmt.Errorf("delivery: claim delivery %q: %w", id, err)
	}
	res, err := s.coll.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: id}, {Key: "expires", Value: bson.D{{Key: "$lte", Value: now}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "state", Value: stateHeld}, {Key: "expires", Value: expires}}}})
	if err != nil {
		return 0, fmt.Errorf("delivery: claim delivery %q: %w", id, err)
	}
	if res.MatchedCount == 1 {
		return Claimed, nil
	}
	raw, err := s.coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Raw()
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		// Deleted as expired between the two calls: free, but another
		// claim may be racing for it; the caller asks for it again.
		return Held, nil
	case err != nil:
		return 0, fmt.Errorf("delivery: claim delivery %q: read its state: %w", id, err)
	}
	return stateOf(id, raw)
}

// stateOf is what the document of delivery id, which Claim could not take
// over, answers: Done or Held. A document of the wrong shape is an error
// wrapping ErrMalformed that names the field: one whose expires is not a
// date would answer for ever, since neither the take-over's $lte nor
// MongoDB's TTL monitor passes it
// (https://www.mongodb.com/docs/manual/core/index-ttl/: a document whose
// indexed field is not a date does not expire).
func stateOf(id string, raw bson.Raw) (Claim, error) {
	if v := raw.Lookup("expires"); v.Type != bson.TypeDateTime {
		return 0, fmt.Errorf("%w: delivery %q: expires is %s, want a date", ErrMalformed, id, cmp.Or(v.String(), "missing"))
	}
	v := raw.Lookup("state")
	if v.IsZero() { // the earlier format, processed ids only
		return Done, nil
	}
	switch state, _ := v.StringValueOK(); state {
	case stateDone:
		return Done, nil
	case stateHeld:
		return Held, nil
	}
	return 0, fmt.Errorf("%w: delivery %q: state is %s, want %q or %q", ErrMalformed, id, v, stateHeld, stateDone)
}

// Complete implements Store: one upsert.
func (s *MongoStore) Complete(ctx context.Context, id string, now time.Time, window time.Duration) error {
	if err := check(id, "window", window); err != nil {
		return err
	}
	now = mongostore.Stamp(now)
	_, err := s.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "state", Value: stateDone}, {Key: "expires", Value: mongostore.Stamp(now.Add(window))}}}},
		options.UpdateOne().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("delivery: complete delivery %q: %w", id, err)
	}
	return nil
}
