package forge_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

// testClock is a clock the test moves; the simulator and the client share
// one so budget resets line up.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock(t time.Time) *testClock { return &testClock{t: t} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// startSim serves a simulator on an httptest.Server closed at cleanup.
func startSim(t *testing.T, opts ...forgesim.Option) (*forgesim.Sim, *httptest.Server) {
	t.Helper()
	sim := forgesim.New(opts...)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return sim, srv
}

// newClient makes a Client on the simulator at srv with cfg's other fields.
func newClient(t *testing.T, srv *httptest.Server, cfg forge.Config) *forge.Client {
	t.Helper()
	cfg.BaseURL = srv.URL + "/"
	if cfg.Next == nil {
		cfg.Next = srv.Client().Transport
	}
	c, err := forge.New(cfg)
	if err != nil {
		t.Fatalf("forge.New: %v", err)
	}
	return c
}

// answering is a Client on a server that answers every request 200 with
// body as JSON, whatever it asks: a forge's malformed or empty answer.
func answering(t *testing.T, body string) *forge.Client {
	t.Helper()
	srv, _ := forgeAnswering(t, http.StatusOK, nil, body)
	return newClient(t, srv, forge.Config{Token: "t"})
}

// forgeAnswering is a server, closed at cleanup, that answers every
// request with status, header and body as JSON, whatever it asks, and
// counts the requests it got: an answer GitHub gives that the simulator
// does not.
func forgeAnswering(t *testing.T, status int, header http.Header, body string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		for k, v := range header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// records collects log records; safe for concurrent use.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func (r *records) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.recs {
		out = append(out, rec.Message)
	}
	return out
}

func (r *records) all() []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.recs)
}

// countOf sums the Client's counts matching lane and code (code -1: any).
func countOf(c *forge.Client, lane string, code int) int64 {
	var n int64
	for _, k := range c.Counts() {
		if (lane == "" || k.Lane == lane) && (code == -1 || k.Code == code) {
			n += k.N
		}
	}
	return n
}
