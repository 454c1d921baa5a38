package server_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

// startSim serves a forge simulator on an httptest.Server closed at cleanup.
func startSim(t *testing.T, opts ...forgesim.Option) (*forgesim.Sim, *httptest.Server) {
	t.Helper()
	sim := forgesim.New(opts...)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return sim, srv
}

// newForge returns a forge client for baseURL sending through next with
// token, counting into reg (may be nil) and logging to logger (may be nil).
func newForge(t *testing.T, baseURL string, next http.RoundTripper, token string, reg prometheus.Registerer, logger *slog.Logger) *forge.Client {
	t.Helper()
	fc, err := forge.New(forge.Config{BaseURL: baseURL, Token: token, Next: next, Registerer: reg, Logger: logger})
	if err != nil {
		t.Fatalf("forge.New: %v", err)
	}
	return fc
}

// pipeNet is an in-memory network of net.Pipe connections: an HTTP server
// and client on it work inside a synctest bubble, where the loopback
// network does not (its waits are not durably blocking).
type pipeNet struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func newPipeNet() *pipeNet {
	return &pipeNet{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept implements net.Listener.
func (p *pipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener.
func (p *pipeNet) Close() error {
	p.closeOnce.Do(func() { close(p.done) })
	return nil
}

// Addr implements net.Listener.
func (p *pipeNet) Addr() net.Addr { return pipeAddr{} }

// dial connects a client to the listener.
func (p *pipeNet) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case p.conns <- server:
		return client, nil
	case <-p.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// serveSimOnPipe serves sim over a pipeNet and returns the transport that
// reaches it; stop ends both, so a synctest bubble can finish.
func serveSimOnPipe(sim *forgesim.Sim) (tr *http.Transport, stop func()) {
	pn := newPipeNet()
	srv := &http.Server{Handler: sim}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(pn) }()
	tr = &http.Transport{DialContext: pn.dial}
	return tr, func() {
		tr.CloseIdleConnections()
		_ = srv.Close()
		<-served
	}
}

// logBuffer is a log sink safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// textLogger logs every level as text into a new logBuffer.
func textLogger() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// rateLimited reports whether err carries a forge rate limit.
func rateLimited(err error) (*forge.RateLimitError, bool) {
	var rl *forge.RateLimitError
	return rl, errors.As(err, &rl)
}

// withField returns a copy of doc with key's value replaced by v, or with
// key left out when v is nil: one malformed variant of a good document.
func withField(doc bson.D, key string, v any) bson.D {
	var d bson.D
	for _, e := range doc {
		if e.Key == key {
			if v == nil {
				continue
			}
			e.Value = v
		}
		d = append(d, e)
	}
	return d
}
