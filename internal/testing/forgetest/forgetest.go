// Package forgetest is what the tests of the forge's nets (the merge gate in
// pkg/server, the board sync in pkg/board) share: the forge simulator served
// on loopback or on an in-memory network a synctest bubble can wait on, a
// counting forge client on it, and a log sink whose lines a test can count.
// It is for tests only.
package forgetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

// StartSim serves a forge simulator on an httptest.Server closed at cleanup.
func StartSim(t testing.TB, opts ...forgesim.Option) (*forgesim.Sim, *httptest.Server) {
	t.Helper()
	sim := forgesim.New(opts...)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return sim, srv
}

// NewForge returns a forge client for baseURL sending through next with
// token, counting into reg (may be nil) and logging to logger (may be nil).
func NewForge(t *testing.T, baseURL string, next http.RoundTripper, token string, reg prometheus.Registerer, logger *slog.Logger) *forge.Client {
	t.Helper()
	fc, err := forge.New(forge.Config{BaseURL: baseURL, Token: token, Next: next, Registerer: reg, Logger: logger})
	if err != nil {
		t.Fatalf("forge.New: %v", err)
	}
	return fc
}

// AppKey returns a fresh PEM-encoded RSA private key, as a GitHub App's:
// the simulator trusts every App, so any key mints installation tokens.
func AppKey(t testing.TB) []byte {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

// LaneCount sums c's counts on lane that got code (0: any).
func LaneCount(c *forge.Client, lane string, code int) int64 {
	var n int64
	for _, k := range c.Counts() {
		if k.Lane == lane && (code == 0 || k.Code == code) {
			n += k.N
		}
	}
	return n
}

// PipeNet is an in-memory network of net.Pipe connections, a net.Listener
// whose clients connect with Dial: an HTTP server and client on it work
// inside a synctest bubble, where the loopback network does not (its waits
// are not durably blocking). Safe for concurrent use.
type PipeNet struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

// NewPipeNet returns an open PipeNet.
func NewPipeNet() *PipeNet {
	return &PipeNet{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept implements net.Listener.
func (p *PipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener; Accept and Dial then fail with
// net.ErrClosed.
func (p *PipeNet) Close() error {
	p.closeOnce.Do(func() { close(p.done) })
	return nil
}

// Addr implements net.Listener.
func (p *PipeNet) Addr() net.Addr { return pipeAddr{} }

// Dial connects a client to the listener; it has the signature of
// http.Transport's DialContext.
func (p *PipeNet) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
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

// ServeSimOnPipe serves sim over a PipeNet and returns the transport that
// reaches it; stop ends both, so a synctest bubble can finish.
func ServeSimOnPipe(sim *forgesim.Sim) (tr *http.Transport, stop func()) {
	pn := NewPipeNet()
	srv := &http.Server{Handler: sim}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(pn) }()
	tr = &http.Transport{DialContext: pn.Dial}
	return tr, func() {
		tr.CloseIdleConnections()
		_ = srv.Close()
		<-served
	}
}

// LogBuffer is a log sink safe for concurrent use.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Logged is how many text records written to b have the message msg,
// exactly: msg is looked for as the text handler writes it, quoted only when
// it must be ("msg=sync", "msg=\"sync done\"").
func (b *LogBuffer) Logged(msg string) int {
	var one bytes.Buffer
	slog.New(slog.NewTextHandler(&one, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key != slog.MessageKey {
			return slog.Attr{}
		}
		return a
	}})).Info(msg)
	field := " " + strings.TrimSpace(one.String()) + " "
	n := 0
	for line := range strings.Lines(b.String()) {
		if strings.Contains(" "+strings.TrimSuffix(line, "\n")+" ", field) {
			n++
		}
	}
	return n
}

// TextLogger logs every level as text into a new LogBuffer.
func TextLogger() (*slog.Logger, *LogBuffer) {
	b := &LogBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// NotOnce returns the text records written to b that do not carry attr
// (as "key=value") exactly once: none when every record carries it once.
func (b *LogBuffer) NotOnce(attr string) []string {
	var bad []string
	for line := range strings.Lines(b.String()) {
		if strings.Count(line, " "+attr) != 1 {
			bad = append(bad, strings.TrimSpace(line))
		}
	}
	return bad
}
