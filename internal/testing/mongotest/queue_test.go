package mongotest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"iterion.dev/iterion/internal/testing/mongotest"
)

// TestSlowExchangeHoldsOnlyItsCollection pins the proxy's queues with a
// find on "slow" kept inside its exchange (HoldExchange, as a slow query
// would be): with per-collection queues a command of another collection
// (of another database, or a getMore naming it) and a new connection's
// handshake are served meanwhile, while a write on "slow" and a command of
// no single collection wait behind it; with the global queue everything
// waits, handshakes included. A wait is shown by a short deadline
// expiring, which can only happen while the find is held.
func TestSlowExchangeHoldsOnlyItsCollection(t *testing.T) {
	const waitFor = 300 * time.Millisecond
	// Each op is set up before the find is held (on the test database, through a
	// client of its own) and returns what runs while it is held.
	type op func(t *testing.T, srv *mongotest.Server, db *mongo.Database) func(context.Context) error
	write := func(coll string) op {
		return func(t *testing.T, _ *mongotest.Server, db *mongo.Database) func(context.Context) error {
			// Warm the client's pool, so that what waits below is
			// the write, not a connection handshake.
			if n := count(t, db.Collection(coll), bson.D{}); n != 0 {
				t.Fatalf("got %d documents in a fresh collection, want 0", n)
			}
			return func(ctx context.Context) error {
				_, err := db.Collection(coll).UpdateOne(ctx, bson.D{{Key: "_id", Value: "l"}},
					bson.D{{Key: "$set", Value: bson.D{{Key: "owner", Value: "me"}}}}, options.UpdateOne().SetUpsert(true))
				return err
			}
		}
	}
	otherDatabase := func(t *testing.T, srv *mongotest.Server, db *mongo.Database) func(context.Context) error {
		return write("slow")(t, srv, db.Client().Database(db.Name()+"_other"))
	}
	getMore := func(t *testing.T, _ *mongotest.Server, db *mongo.Database) func(context.Context) error {
		coll := db.Collection("leases")
		if _, err := coll.InsertMany(opCtx(t), []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}}); err != nil {
			t.Fatal(err)
		}
		cur, err := coll.Find(opCtx(t), bson.D{}, options.Find().SetBatchSize(1))
		if err != nil || !cur.Next(opCtx(t)) {
			t.Fatalf("find: %v, %v", err, cur.Err())
		}
		return func(ctx context.Context) error {
			if !cur.Next(ctx) {
				return fmt.Errorf("getMore: no second document (%w)", cur.Err())
			}
			return nil
		}
	}
	listCollections := func(t *testing.T, _ *mongotest.Server, db *mongo.Database) func(context.Context) error {
		if _, err := db.ListCollectionNames(opCtx(t), bson.D{}); err != nil {
			t.Fatal(err)
		}
		return func(ctx context.Context) error {
			_, err := db.ListCollectionNames(ctx, bson.D{})
			return err
		}
	}
	handshake := func(_ *testing.T, srv *mongotest.Server, _ *mongo.Database) func(context.Context) error {
		return func(ctx context.Context) error {
			c, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
			if err != nil {
				return err
			}
			defer func() { _ = c.Disconnect(context.Background()) }()
			return c.Ping(ctx, nil)
		}
	}
	for _, tc := range []struct {
		name  string
		queue mongotest.Queue
		op    op
		waits bool
		why   string
	}{
		{"per collection, other collection", mongotest.QueuePerCollection, write("leases"), false, "a slow exchange on one collection does not hold another's"},
		{"per collection, same collection", mongotest.QueuePerCollection, write("slow"), true, "exchanges on one collection are serialised (the atomicity the proxy exists for)"},
		{"per collection, same name in another database", mongotest.QueuePerCollection, otherDatabase, false, "a collection is its database and its name"},
		{"per collection, getMore of another collection", mongotest.QueuePerCollection, getMore, false, "a getMore queues on the collection its collection field names"},
		{"per collection, command of no single collection", mongotest.QueuePerCollection, listCollections, true, "a command naming no single collection waits for every exchange"},
		{"per collection, new connection's handshake", mongotest.QueuePerCollection, handshake, false, "handshake and monitoring commands touch no collection and wait for none"},
		{"global queue, other collection", mongotest.QueueGlobal, write("leases"), true, "the global queue forwards one exchange at a time across all collections"},
		{"global queue, new connection's handshake", mongotest.QueueGlobal, handshake, true, "the global queue holds handshakes too"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mongotest.NewServer(t)
			srv.Proxy().SetQueue(tc.queue)
			db := srv.DB(t)
			run := tc.op(t, srv, srv.Client(t).Database(db.Name()))
			h := srv.Proxy().HoldExchange(func(c mongotest.Command) bool { return c.Name == "find" && c.Collection == "slow" })
			found := make(chan error, 1)
			go func() { found <- db.Collection("slow").FindOne(opCtx(t), bson.D{}).Err() }()
			<-h.Arrived()

			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			if tc.waits {
				ctx, cancel = context.WithTimeout(context.Background(), waitFor)
			}
			err := run(ctx)
			cancel()
			switch {
			case tc.waits && !errors.Is(err, context.DeadlineExceeded):
				t.Errorf("got %v while the find on slow was held, want the %v deadline to expire: %s", err, waitFor, tc.why)
			case !tc.waits && err != nil:
				t.Errorf("got %v while the find on slow was held, want it served: %s", err, tc.why)
			}
			h.Release()
			<-h.Done()
			if err := <-found; err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
				t.Errorf("got %v for the released find, want an answer (no documents): a released exchange is forwarded", err)
			}
		})
	}
}
