package mongotest

import (
	"context"
	"crypto/rand"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// EnvURI names the environment variable that, when set, points DB at a real
// MongoDB deployment (a replica set) instead of the embedded server.
const EnvURI = "ITERION_TEST_MONGO_URI"

// setupTimeout bounds starting a server and dropping a test's database.
const setupTimeout = 30 * time.Second

// shared is the server DB uses: one per test binary, started on first use
// and stopped when the process exits (its data directory, emptied as each
// test drops its database, stays in the temporary directory).
var shared struct {
	once sync.Once
	uri  string
	err  error
}

// DB returns a fresh, uniquely named database, dropped (and its client
// disconnected) when the test ends. The database lives on one embedded server
// shared by the test binary, started on first use, or on the deployment named
// by ITERION_TEST_MONGO_URI when that is set. It never skips: a server that
// cannot start fails the test with the reason. Safe for concurrent use.
func DB(t testing.TB) *mongo.Database {
	t.Helper()
	uri := URI(t)
	db := connect(t, uri).Database(dbName())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if err := db.Drop(ctx); err != nil {
			t.Errorf("mongotest: drop database %s: %v", db.Name(), err)
		}
	})
	return db
}

// MonitoredDB is DB through a client of its own with command monitor mon,
// for a test that asserts on the commands a store sends (how many, their
// write concern): a fresh database on the same server, dropped and its
// client disconnected when the test ends.
func MonitoredDB(t testing.TB, mon *event.CommandMonitor) *mongo.Database {
	t.Helper()
	uri := URI(t)
	c, err := mongo.Connect(options.Client().ApplyURI(uri).SetMonitor(mon))
	if err != nil {
		t.Fatalf("mongotest: connect %s: %v", uri, err)
	}
	db := c.Database(dbName())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if err := db.Drop(ctx); err != nil {
			t.Errorf("mongotest: drop database %s: %v", db.Name(), err)
		}
		_ = c.Disconnect(ctx)
	})
	return db
}

// URI returns the connection string DB uses, for a test that needs its own
// client options (a command monitor, say): ITERION_TEST_MONGO_URI when set,
// else the shared embedded server's, started on first use. It never skips:
// a server that cannot start fails the test with the reason. Safe for
// concurrent use.
func URI(t testing.TB) string {
	t.Helper()
	if uri := os.Getenv(EnvURI); uri != "" {
		return uri
	}
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		s, err := Start(ctx, "127.0.0.1:0", nil)
		if err != nil {
			shared.err = err
			return
		}
		shared.uri = s.URI()
	})
	if shared.err != nil {
		t.Fatalf("mongotest: shared server: %v", shared.err)
	}
	return shared.uri
}

// NewServer starts a dedicated server (FerretDB on a t.TempDir directory,
// so RestartBackend keeps data) for tests that inject
// faults through its Proxy; it is closed when the test ends. It never uses
// ITERION_TEST_MONGO_URI: the faults need the proxy.
func NewServer(t testing.TB) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	s, err := StartDir(ctx, "127.0.0.1:0", t.TempDir(), nil)
	if err != nil {
		t.Fatalf("mongotest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Client returns a new client of s, disconnected when the test ends.
func (s *Server) Client(t testing.TB) *mongo.Client {
	t.Helper()
	return connect(t, s.uri)
}

// DB returns a fresh, uniquely named database on s, through a new client
// disconnected when the test ends. The database is not dropped: the server
// and its data directory go away at cleanup, whatever faults are still on.
func (s *Server) DB(t testing.TB) *mongo.Database {
	t.Helper()
	return s.Client(t).Database(dbName())
}

// connect returns a client of uri, disconnected at cleanup.
func connect(t testing.TB, uri string) *mongo.Client {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatalf("mongotest: connect %s: %v", uri, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		_ = c.Disconnect(ctx)
	})
	return c
}

// dbName returns a database name unique to this process and run.
func dbName() string { return "test_" + strings.ToLower(rand.Text()[:12]) }
