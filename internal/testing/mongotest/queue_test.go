package mongotest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"iterion.dev/iterion/internal/testing/mongotest"
)

// TestSlowExchangeHoldsOnlyItsCollection pins the proxy's queues with a
// find on "slow" kept inside its exchange (HoldExchange, as a slow query
// would be): with per-collection queues a lease write on "leases" is
// served meanwhile and a write on "slow" waits behind it; with the global
// queue the lease write waits too. A wait is shown by a short deadline
// expiring, which can only happen while the find is held.
func TestSlowExchangeHoldsOnlyItsCollection(t *testing.T) {
	const waitFor = 300 * time.Millisecond
	for _, tc := range []struct {
		name  string
		queue mongotest.Queue
		coll  string
		waits bool
		why   string
	}{
		{"per collection, other collection", mongotest.QueuePerCollection, "leases", false, "a slow exchange on one collection does not hold another's"},
		{"per collection, same collection", mongotest.QueuePerCollection, "slow", true, "exchanges on one collection are serialised (the atomicity the proxy exists for)"},
		{"global queue, other collection", mongotest.QueueGlobal, "leases", true, "the global queue forwards one exchange at a time across all collections"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mongotest.NewServer(t)
			srv.Proxy().SetQueue(tc.queue)
			db := srv.DB(t)
			other := srv.Client(t).Database(db.Name()).Collection(tc.coll)
			// Warm the second client's pool, so that what waits below is
			// the write, not a connection handshake.
			if n := count(t, other, bson.D{}); n != 0 {
				t.Fatalf("got %d documents in a fresh collection, want 0", n)
			}
			h := srv.Proxy().HoldExchange(func(c mongotest.Command) bool { return c.Name == "find" && c.Collection == "slow" })
			found := make(chan error, 1)
			go func() { found <- db.Collection("slow").FindOne(opCtx(t), bson.D{}).Err() }()
			<-h.Arrived()

			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			if tc.waits {
				ctx, cancel = context.WithTimeout(context.Background(), waitFor)
			}
			_, err := other.UpdateOne(ctx, bson.D{{Key: "_id", Value: "l"}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "owner", Value: "me"}}}}, options.UpdateOne().SetUpsert(true))
			cancel()
			switch {
			case tc.waits && !errors.Is(err, context.DeadlineExceeded):
				t.Errorf("got %v while the find on slow was held, want the %v deadline to expire: %s", err, waitFor, tc.why)
			case !tc.waits && err != nil:
				t.Errorf("got %v while the find on slow was held, want the write served: %s", err, tc.why)
			}
			h.Release()
			<-h.Done()
			if err := <-found; err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
				t.Errorf("got %v for the released find, want an answer (no documents): a released exchange is forwarded", err)
			}
		})
	}
}
