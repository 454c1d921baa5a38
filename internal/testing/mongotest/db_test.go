package mongotest_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"iterion.dev/iterion/internal/testing/mongotest"
)

// TestDBRoundTrip checks that DB hands out a working database: a document
// written through the proxy reads back the same.
func TestDBRoundTrip(t *testing.T) {
	ctx := context.Background()
	coll := mongotest.DB(t).Collection("docs")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: 7}}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	var got struct {
		N int `bson:"n"`
	}
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "a"}}).Decode(&got); err != nil {
		t.Fatalf("find: %v", err)
	}
	if got.N != 7 {
		t.Fatalf("got n=%d, want 7: a document written through the proxy reads back unchanged", got.N)
	}
}

// TestDBIsFresh checks that each DB call gives a database of its own: a
// second database does not see the first one's documents.
func TestDBIsFresh(t *testing.T) {
	ctx := context.Background()
	a, b := mongotest.DB(t), mongotest.DB(t)
	if a.Name() == b.Name() {
		t.Fatalf("got the same database name %q twice, want distinct: each DB call is fresh", a.Name())
	}
	if _, err := a.Collection("docs").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	n, err := b.Collection("docs").CountDocuments(ctx, bson.D{})
	if err != nil {
		t.Fatalf("count: %v", err)
	}
	if n != 0 {
		t.Fatalf("got %d documents in a new database, want 0: each DB call is fresh", n)
	}
}

// TestURIIsDBs checks that URI names the server DB uses: a client of URI
// sees what was written through DB.
func TestURIIsDBs(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	if _, err := db.Collection("docs").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	c := uriClient(t)
	n, err := c.Database(db.Name()).Collection("docs").CountDocuments(ctx, bson.D{})
	if err != nil || n != 1 {
		t.Fatalf("got %d documents, %v through URI, want 1: URI is the server DB uses", n, err)
	}
}

// uriClient is a client of URI, disconnected when the test ends.
func uriClient(t *testing.T) *mongo.Client {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI(mongotest.URI(t)))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c
}

// TestDBUsesEnvURI checks that ITERION_TEST_MONGO_URI, when set, is where
// DB's databases live: here it points at a dedicated server whose proxy
// counts the write.
func TestDBUsesEnvURI(t *testing.T) {
	srv := mongotest.NewServer(t)
	t.Setenv(mongotest.EnvURI, srv.URI())
	before := srv.Proxy().Commands()["insert"]
	if _, err := mongotest.DB(t).Collection("docs").InsertOne(context.Background(), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	if got := srv.Proxy().Commands()["insert"] - before; got != 1 {
		t.Fatalf("got %d inserts on the server named by %s, want 1: DB uses it when set", got, mongotest.EnvURI)
	}
}

// TestDBIsDroppedWhenTheTestEnds checks that DB's database is dropped at
// the test's cleanup: the shared server does not keep every test's data.
func TestDBIsDroppedWhenTheTestEnds(t *testing.T) {
	ctx := context.Background()
	var name string
	t.Run("uses a database", func(t *testing.T) {
		db := mongotest.DB(t)
		name = db.Name()
		if _, err := db.Collection("docs").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
			t.Fatalf("insert: %v", err)
		}
	})
	c := uriClient(t)
	names, err := c.ListDatabaseNames(ctx, bson.D{{Key: "name", Value: name}})
	if err != nil || len(names) != 0 {
		t.Fatalf("got databases %v, %v after the test ended, want none named %s: DB's database is dropped", names, err, name)
	}
}
