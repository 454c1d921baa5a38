// Package mongotest runs a real MongoDB-wire server for tests and local runs:
// FerretDB v1 (SQLite backend) embedded in-process, behind a wire proxy that
// forwards one request/response exchange at a time per collection and
// injects faults.
//
// FerretDB v1 evaluates an update's filter and applies its write in two
// steps, so on its own it lets several concurrent conditional upserts win
// (several winners in 97 of 100 measured lease takeover races). Behind the
// proxy, which serialises each collection's exchanges across all
// connections, the same race elects exactly one, as MongoDB does. It is a
// test server, not a production lease store.
//
// Tests call DB for a fresh database on a server shared by the test binary,
// or NewServer for a dedicated server whose Proxy injects faults. With
// ITERION_TEST_MONGO_URI set, DB uses that MongoDB deployment instead.
package mongotest

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"

	"github.com/FerretDB/FerretDB/ferretdb"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

// Server is a running FerretDB behind its Proxy. Its methods are safe for
// concurrent use.
type Server struct {
	proxy   *Proxy
	uri     string
	tempDir string // removed by Close; "" when the caller owns the directory
}

// Start runs a server whose data lives in a new temporary directory, removed
// by Close, with the proxy listening on listen ("127.0.0.1:0" picks a free
// port). ctx bounds the start only; the server runs until Close. logger gets
// the proxy's events and FerretDB's errors (not its info or warnings); nil discards.
func Start(ctx context.Context, listen string, logger *slog.Logger) (*Server, error) {
	dir, err := os.MkdirTemp("", "iterion-mongotest-")
	if err != nil {
		return nil, fmt.Errorf("mongotest: data directory: %w", err)
	}
	s, err := StartDir(ctx, listen, dir, logger)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s.tempDir = dir
	return s, nil
}

// StartDir is Start with FerretDB's SQLite files in the existing directory
// dir, which Close leaves in place: data survives RestartBackend and later
// servers on the same directory.
func StartDir(ctx context.Context, listen, dir string, logger *slog.Logger) (*Server, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("mongotest: data directory %q: %w", dir, err)
	}
	sqlite := (&url.URL{Scheme: "file", Opaque: abs + "/"}).String()
	backend := &ferret{sqliteURL: sqlite, logger: slog.New(minLevel{slog.LevelError, logger.Handler()})}
	if err := backend.start(); err != nil {
		return nil, err
	}
	p, err := newProxy(listen, backend, logger)
	if err != nil {
		backend.stop()
		return nil, err
	}
	s := &Server{proxy: p, uri: "mongodb://" + p.Addr() + "/?serverMonitoringMode=poll"}
	if err := s.ping(ctx); err != nil {
		s.Close()
		return nil, err
	}
	logger.Info("mongotest: serving", "uri", s.uri, "backend", backend.addr, "dir", dir)
	return s, nil
}

// URI returns the connection string of the proxy, with
// serverMonitoringMode=poll (the proxy relays no streamed hello).
func (s *Server) URI() string { return s.uri }

// Proxy returns the proxy in front of the server, for fault injection.
func (s *Server) Proxy() *Proxy { return s.proxy }

// Close stops the proxy (closing every client connection) and FerretDB, and
// removes the data directory Start made. Idempotent.
func (s *Server) Close() {
	s.proxy.close()
	s.proxy.restart.Lock()
	defer s.proxy.restart.Unlock()
	s.proxy.backend.stop()
	if s.tempDir != "" {
		_ = os.RemoveAll(s.tempDir)
	}
}

// ping waits until the server answers through the proxy.
func (s *Server) ping(ctx context.Context) error {
	c, err := mongo.Connect(options.Client().ApplyURI(s.uri))
	if err != nil {
		return fmt.Errorf("mongotest: connect %s: %w", s.uri, err)
	}
	defer func() { _ = c.Disconnect(context.WithoutCancel(ctx)) }()
	if err := c.Ping(ctx, readpref.Primary()); err != nil {
		return fmt.Errorf("mongotest: ping %s: %w", s.uri, err)
	}
	return nil
}

// ferretNew serialises ferretdb.New, which writes a package-level variable of
// FerretDB's (its version info); two servers starting at once would race.
var ferretNew sync.Mutex

// ferret is one embedded FerretDB on a SQLite URL, restartable. Not safe for
// concurrent use: the Proxy serialises start, stop and restart.
type ferret struct {
	sqliteURL string
	logger    *slog.Logger
	addr      string             // host:port while running
	cancel    context.CancelFunc // nil while stopped
	done      chan struct{}      // closed when Run returned
}

func (f *ferret) start() error {
	ferretNew.Lock()
	db, err := ferretdb.New(&ferretdb.Config{
		Handler:   "sqlite",
		SQLiteURL: f.sqliteURL,
		Listener:  ferretdb.ListenerConfig{TCP: "127.0.0.1:0"},
		Logger:    f.logger,
	})
	ferretNew.Unlock()
	if err != nil {
		return fmt.Errorf("mongotest: start FerretDB: %w", err)
	}
	u, err := url.Parse(db.MongoDBURI())
	if err != nil {
		return fmt.Errorf("mongotest: FerretDB URI: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.addr, f.cancel, f.done = u.Host, cancel, make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		_ = db.Run(ctx)
	}(f.done)
	return nil
}

// stop stops FerretDB and waits for it; idempotent.
func (f *ferret) stop() {
	if f.cancel == nil {
		return
	}
	f.cancel()
	<-f.done
	f.cancel = nil
}

// restart stops FerretDB and starts it on the same SQLite URL. ctx bounds the
// wait for the old one to stop.
func (f *ferret) restart(ctx context.Context) error {
	if f.cancel != nil {
		f.cancel()
		select {
		case <-f.done:
		case <-ctx.Done():
			return fmt.Errorf("mongotest: restart: %w", ctx.Err())
		}
		f.cancel = nil
	}
	return f.start()
}

// minLevel is a slog.Handler passing on records at or above min only; it
// keeps FerretDB's per-connection info and warning logs (an unsupported
// command, a client gone) out of the caller's log.
type minLevel struct {
	min slog.Level
	h   slog.Handler
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.h.Enabled(ctx, l)
}

func (m minLevel) Handle(ctx context.Context, r slog.Record) error { return m.h.Handle(ctx, r) }

func (m minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{m.min, m.h.WithAttrs(as)}
}

func (m minLevel) WithGroup(name string) slog.Handler {
	return minLevel{m.min, m.h.WithGroup(name)}
}
