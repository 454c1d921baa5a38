// Package mongolease is the MongoDB twin of lease.MemoryStore: [MongoStore]
// keeps the leases of [iterion.dev/iterion/pkg/lease] in one collection of a
// MongoDB replica set, so that the replicas sharing it elect among
// themselves. It passes the conformance suite of
// [iterion.dev/iterion/pkg/lease/leasetest]. It lives apart from pkg/lease so
// that a user of the election seam compiles no database driver.
package mongolease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"iterion.dev/iterion/internal/mongostore"
	"iterion.dev/iterion/pkg/lease"
)

// ErrMalformed reports a lease document of the wrong shape: an _id or owner
// that is not a string, an expiry that is not a date (a missing field, or
// an array even of strings or dates, is the wrong shape too), or a term that
// is present and not a string (null or an array included). MongoStore
// never elects anyone over such a document; it answers with this error until
// an operator removes or repairs the document. It lives here, not in
// pkg/lease, because only a document store has a shape to get wrong.
var ErrMalformed = errors.New("mongolease: malformed lease document")

// Collection is the collection MongoStore keeps its leases in, one document
// per name: {_id: name, owner: string, expires: date, term: string}. term is
// the token of the AcquireTerm that took or last re-took the lease; it is
// absent when a plain Acquire did, and in documents written before it
// existed. An empty term is read as none, as an absent one.
const Collection = "leases"

// The lease document's fields.
const (
	fieldName    = "_id"
	fieldOwner   = "owner"
	fieldExpires = "expires"
	fieldTerm    = "term"
)

// writeConcern is every lease write's: acknowledged by a majority of the
// replica set's voting members, each having written it to its journal, so
// that an acknowledged take survives a failover rather than trusting the
// server's default, which is w:1 on a set with arbiters whose data-bearing
// voting members are no more than the voting majority, such as
// primary-secondary-arbiter
// (https://www.mongodb.com/docs/manual/reference/mongodb-defaults/).
var writeConcern = &writeconcern.WriteConcern{W: writeconcern.WCMajority, Journal: new(true)}

// MongoStore keeps leases in a MongoDB collection ([Collection]), one
// document per name, so that the replicas of a deployment that share a
// MongoDB replica set elect among themselves. It passes the same
// conformance suite as lease.MemoryStore.
//
// Round trips: Acquire and Renew are one command each, whatever the answer:
// one ordered update command of two statements. The first, the shape probe,
// matches the lease document only when it has the wrong shape and then
// fails, writing nothing (it would change the immutable _id), which stops
// the command and is reported as [ErrMalformed]. The second is the call's
// own conditional upsert (Acquire) or update (Renew); its duplicate-key
// refusal, or its empty match, means the lease is another's. AcquireTerm is
// one such command too, of four statements: the probe, then three
// conditional updates that move the term only with the expiry (see
// termUpdates), the last of them the upsert that answers. Release and
// ReleaseTerm are one
// delete, plus a read when it deleted nothing. Holders is one query.
//
// Every write (update, delete) asks for write concern {w: "majority", j:
// true}, whatever the server's default, so that an answered Acquire is one
// a failover does not roll back.
//
// The caller's context bounds each call, driver retries included: a
// context deadline overrides a client's timeoutMS, and within it the driver
// retries a retryable write as often as it can
// (https://www.mongodb.com/docs/drivers/go/current/connect/connection-options/csot/).
// On a replica set a retry carries the first attempt's transaction number,
// and the server answers it with the outcome of the write that landed
// rather than applying it again
// (https://www.mongodb.com/docs/manual/core/retryable-writes/), so an
// Acquire or Renew whose first answer was lost reports what landed. A
// standalone server (the test server) does no retryable writes: a lost
// answer is an error, which means no answer.
//
// Only MongoDB evaluates a conditional update atomically; FerretDB v1 does
// not (see [MongoStore.CheckServer]).
//
// A MongoStore is safe for concurrent use.
type MongoStore struct {
	coll *mongo.Collection
}

var (
	_ lease.Store     = (*MongoStore)(nil)
	_ lease.TermStore = (*MongoStore)(nil)
	_ lease.Inspector = (*MongoStore)(nil)
)

// NewStore returns a MongoStore that keeps its leases in db's [Collection]
// collection, writing with majority, journaled write concern (whatever db's
// own). It sends nothing to the server; the collection needs no index
// beyond _id.
func NewStore(db *mongo.Database) *MongoStore {
	return &MongoStore{coll: db.Collection(Collection, options.Collection().SetWriteConcern(writeConcern))}
}

// CheckServer asks the server for its buildInfo, once per call, and logs a
// warning through logger (nil discards) when the server is FerretDB: FerretDB
// v1 evaluates an update's filter and writes in two steps, so several
// candidates racing for an expired lease can each win. FerretDB is a test
// server, not a production lease store. A server calls CheckServer once at
// start; the returned error is the buildInfo command's, if it failed.
func (s *MongoStore) CheckServer(ctx context.Context, logger *slog.Logger) error {
	var info bson.Raw
	err := s.coll.Database().RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info)
	if err != nil {
		return fmt.Errorf("mongolease: buildInfo: %w", err)
	}
	version, err := info.LookupErr("ferretdbVersion")
	if err != nil {
		return nil // MongoDB: no FerretDB field.
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger.Warn("mongolease: the lease store is FerretDB, a test server: FerretDB v1 does not evaluate conditional updates atomically, so a lease can elect several holders; use MongoDB in production",
		"ferretdbVersion", version.String(), "database", s.coll.Database().Name())
	return nil
}

// Acquire takes the lease name for owner until trunc(trunc(now)+ttl) when it
// is free, expired at now, or already owner's, and reports whether it did,
// in one conditional upsert. It never moves an expiry backward. It returns
// false, nil when another owner holds the lease unexpired; an error wrapping
// ErrMalformed, writing nothing, when the lease's document has the wrong
// shape; and an error, writing nothing, when an argument is invalid
// (lease.ErrInvalid) or ctx is done before the call. Any other error means no
// answer: the upsert may have landed. It sends one command.
func (s *MongoStore) Acquire(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (bool, error) {
	if err := lease.CheckArgs(ctx, "acquire", name, owner, ttl); err != nil {
		return false, err
	}
	return s.acquire(ctx, name, owner, now, ttl, "")
}

// AcquireTerm is Acquire that records token as the lease's term when it
// succeeds (see [lease.TermStore]), in the same one command. A blank token
// is an error wrapping lease.ErrInvalid, writing nothing.
func (s *MongoStore) AcquireTerm(ctx context.Context, name, owner string, now time.Time, ttl time.Duration, token string) (bool, error) {
	if err := lease.CheckArgs(ctx, "acquire", name, owner, ttl); err != nil {
		return false, err
	}
	if err := lease.CheckToken(token); err != nil {
		return false, err
	}
	return s.acquire(ctx, name, owner, now, ttl, token)
}

// acquire is Acquire's (token "": it unsets the term) and AcquireTerm's
// one command.
func (s *MongoStore) acquire(ctx context.Context, name, owner string, now time.Time, ttl time.Duration, token string) (bool, error) {
	expires := lease.Expiry(now, ttl)
	var updates []mongo.WriteModel
	if token == "" {
		// The type guards keep a malformed document out of the match, so it
		// is never taken over even if it became malformed after the probe.
		// The document matches when it is owner's or expired; when it exists
		// and does not match, the upsert's insert collides with its _id. $max
		// keeps a same-owner expiry from moving backward, and is a plain set
		// on a takeover, whose new expiry is after now and so after the old
		// one.
		updates = []mongo.WriteModel{mongo.NewUpdateOneModel().
			SetFilter(takeable(name, owner, now)).
			SetUpdate(bson.D{
				{Key: "$set", Value: bson.D{{Key: fieldOwner, Value: owner}}},
				{Key: "$max", Value: bson.D{{Key: fieldExpires, Value: expires}}},
				{Key: "$unset", Value: bson.D{{Key: fieldTerm, Value: ""}}},
			}).SetUpsert(true)}
	} else {
		updates = termUpdates(name, owner, now, expires, token)
	}
	_, err := s.probed(ctx, "acquire", name, updates...)
	if mongo.IsDuplicateKeyError(err) {
		// The upsert's insert, past a well-formed document: another's.
		return false, nil
	}
	if err != nil {
		return false, err
	}
	// The last statement, an upsert, matched or inserted the lease.
	return true, nil
}

// takeable matches the lease document name when it is well-formed and
// owner's, or expired at now.
func takeable(name, owner string, now time.Time) bson.D {
	return bson.D{
		{Key: fieldName, Value: name},
		{Key: fieldOwner, Value: typed("string")},
		{Key: fieldExpires, Value: typed("date")},
		{Key: "$or", Value: bson.A{
			bson.D{{Key: fieldOwner, Value: owner}},
			bson.D{{Key: fieldExpires, Value: bson.D{{Key: "$lte", Value: lease.Stamp(now)}}}},
		}},
	}
}

// termUpdates are AcquireTerm's statements, each a conditional update on
// the well-formed lease document name, so that the term moves only with
// the expiry (see [lease.TermStore]) without an update pipeline, which
// FerretDB v1 lacks:
//
//  1. owner's lease whose expiry is before expires: the term set to token,
//     the expiry moved to expires;
//  2. another's lease expired at now: taken over, term token, expiry
//     expires (after now, so after the old one);
//  3. the upsert that answers: it matches owner's lease, now whatever its
//     term, and moves no expiry backward ($max), or inserts the lease with
//     term token when there is none; a lease still another's makes its
//     insert collide with the _id.
//
// A lease of owner's that already expires at or after expires (a late or
// same-millisecond send) matches only the third, which leaves its term.
func termUpdates(name, owner string, now, expires time.Time, token string) []mongo.WriteModel {
	forward := mongo.NewUpdateOneModel().
		SetFilter(bson.D{
			{Key: fieldName, Value: name},
			{Key: fieldOwner, Value: bson.D{{Key: "$eq", Value: owner}, {Key: "$not", Value: bson.D{{Key: "$type", Value: "array"}}}}},
			{Key: fieldExpires, Value: append(typed("date"), bson.E{Key: "$lt", Value: expires})},
		}).
		SetUpdate(bson.D{
			{Key: "$set", Value: bson.D{{Key: fieldTerm, Value: token}}},
			{Key: "$max", Value: bson.D{{Key: fieldExpires, Value: expires}}},
		})
	takeover := mongo.NewUpdateOneModel().
		SetFilter(bson.D{
			{Key: fieldName, Value: name},
			{Key: fieldOwner, Value: append(typed("string"), bson.E{Key: "$ne", Value: owner})},
			{Key: fieldExpires, Value: append(typed("date"), bson.E{Key: "$lte", Value: lease.Stamp(now)})},
		}).
		SetUpdate(bson.D{
			{Key: "$set", Value: bson.D{{Key: fieldOwner, Value: owner}, {Key: fieldTerm, Value: token}}},
			{Key: "$max", Value: bson.D{{Key: fieldExpires, Value: expires}}},
		})
	answer := mongo.NewUpdateOneModel().
		SetFilter(bson.D{
			{Key: fieldName, Value: name},
			{Key: fieldOwner, Value: typed("string")},
			{Key: fieldExpires, Value: typed("date")},
			{Key: "$or", Value: bson.A{bson.D{{Key: fieldOwner, Value: owner}}}},
		}).
		SetUpdate(bson.D{
			{Key: "$set", Value: bson.D{{Key: fieldOwner, Value: owner}}},
			{Key: "$max", Value: bson.D{{Key: fieldExpires, Value: expires}}},
			{Key: "$setOnInsert", Value: bson.D{{Key: fieldTerm, Value: token}}},
		}).SetUpsert(true)
	return []mongo.WriteModel{forward, takeover, answer}
}

// Renew extends owner's own lease name to trunc(trunc(now)+ttl), unless it
// already expires later, and reports whether owner held it, in one
// conditional update. A lease past its expiry that nobody took is still
// owner's and renewable. Renew never creates or takes a lease: it returns
// false, nil when the lease is absent or another's. Errors are as for
// Acquire. It sends one command.
func (s *MongoStore) Renew(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (bool, error) {
	if err := lease.CheckArgs(ctx, "renew", name, owner, ttl); err != nil {
		return false, err
	}
	update := mongo.NewUpdateOneModel().
		SetFilter(owned(name, owner, "")).
		SetUpdate(bson.D{{Key: "$max", Value: bson.D{{Key: fieldExpires, Value: lease.Expiry(now, ttl)}}}})
	res, err := s.probed(ctx, "renew", name, update)
	if err != nil {
		return false, err
	}
	// The probe matched nothing, or it would have failed: this is Renew's.
	return res.MatchedCount == 1, nil
}

// Release deletes owner's lease name, expired or not. Releasing a lease
// nobody holds is a no-op that returns nil; releasing another owner's
// returns lease.ErrLost and changes nothing; a malformed document is an error
// wrapping ErrMalformed and stays. It returns an error, changing nothing,
// when an argument is invalid (lease.ErrInvalid) or ctx is done before the call.
// It costs at most two round trips.
func (s *MongoStore) Release(ctx context.Context, name, owner string) error {
	if err := lease.CheckReleaseArgs(ctx, name, owner); err != nil {
		return err
	}
	return s.release(ctx, name, owner, "")
}

// ReleaseTerm deletes owner's lease name when its term is token or it has
// none (see [lease.TermStore]): a document written before terms existed,
// or whose term is empty, is released as Release would. Nobody's lease: no-op, nil; another owner's, or
// owner's of another term: lease.ErrLost, changing nothing. A malformed
// document, a term that is not a string included, is an error wrapping
// ErrMalformed and stays. Other errors are as for Release; it costs at most
// two round trips.
func (s *MongoStore) ReleaseTerm(ctx context.Context, name, owner, token string) error {
	if err := lease.CheckReleaseArgs(ctx, name, owner); err != nil {
		return err
	}
	if err := lease.CheckToken(token); err != nil {
		return err
	}
	return s.release(ctx, name, owner, token)
}

// release is Release's (token "") and ReleaseTerm's delete, and the read
// that explains a delete that matched nothing.
func (s *MongoStore) release(ctx context.Context, name, owner, token string) error {
	res, err := s.coll.DeleteOne(ctx, owned(name, owner, token))
	if err != nil {
		return fmt.Errorf("mongolease: release %q: %w", name, err)
	}
	if res.DeletedCount == 1 {
		return nil
	}
	h, term, found, err := s.find(ctx, "release", name)
	switch {
	case err != nil || !found:
		return err
	case h.Owner != owner:
		return fmt.Errorf("%w: %q is held by %q, not %q", lease.ErrLost, name, h.Owner, owner)
	case token != "" && otherTerm(term, token):
		return fmt.Errorf("%w: %q is %q's term %s, not %q", lease.ErrLost, name, owner, term, token)
	}
	// owner's again: a concurrent Acquire of the same owner landed after the
	// delete missed. Calls of one owner are not ordered; this one came first.
	return nil
}

// Holders returns every lease the collection keeps, expired ones included,
// sorted by name, with Expires in UTC, in one query. A document of the wrong
// shape is an error wrapping ErrMalformed. Its cursor is closed on the
// server even when ctx ends part-way, so a cancelled caller leaves none open.
func (s *MongoStore) Holders(ctx context.Context) ([]lease.Holder, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("mongolease: holders: %w", err)
	}
	hs, err := mongostore.FindAll(ctx, s.coll, bson.D{}, options.Find().SetSort(bson.D{{Key: fieldName, Value: 1}}), decodeLease)
	if err != nil && !errors.Is(err, ErrMalformed) {
		return nil, fmt.Errorf("mongolease: holders: %w", err)
	}
	return hs, err
}

// codeImmutableField is the server's error code for an update that would
// change a document's _id, the shape probe's failure.
const codeImmutableField = 66

// probed sends, in one ordered update command, the shape probe on the lease
// document name and then updates. The probe matches the document only when
// it has the wrong shape, and then fails with ImmutableField before writing
// anything ($set of _id to null, never a lease's _id), which stops the
// command before updates: that failure is returned wrapping ErrMalformed.
// On a well-formed or absent document the probe matches nothing, so the
// result's counts are the updates' alone. Any other error is an update's,
// or the command's, wrapped to name op and name.
//
// The probe's failure is told by its code, ImmutableField, which the
// updates (no _id in their update documents) never return: FerretDB v1
// reports every write error of a batch at index 0 and drops the counts, so
// the index alone cannot tell; MongoDB reports the probe's at 0 and the
// updates' at 1 and on.
func (s *MongoStore) probed(ctx context.Context, op, name string, updates ...mongo.WriteModel) (*mongo.BulkWriteResult, error) {
	probe := mongo.NewUpdateOneModel().
		SetFilter(bson.D{
			{Key: fieldName, Value: name},
			{Key: "$nor", Value: bson.A{bson.D{
				{Key: fieldOwner, Value: typed("string")},
				{Key: fieldExpires, Value: typed("date")},
				termIs(""),
			}}},
		}).
		SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: fieldName, Value: nil}}}})
	res, err := s.coll.BulkWrite(ctx, append([]mongo.WriteModel{probe}, updates...), options.BulkWrite().SetOrdered(true))
	var bwe mongo.BulkWriteException
	if errors.As(err, &bwe) {
		for _, we := range bwe.WriteErrors {
			if we.Index == 0 && we.Code == codeImmutableField {
				return nil, fmt.Errorf("%w: %s %q: its %s is not a string, its %s is not a date, or its %s is not a string", ErrMalformed, op, name, fieldOwner, fieldExpires, fieldTerm)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("mongolease: %s %q: %w", op, name, err)
	}
	return res, nil
}
