package forge

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// doneTries is how many times a caller whose context has ended meets a
// free gate or turn: a select between the two picks either at random, so
// one try in two would send under that defect, and 200 never miss it.
const doneTries = 200

// TestJWTGateSendsNothingForAContextAlreadyDone pins jwtGate.roundTrip: a
// request whose context has ended when it reaches the App JWT's free gate
// is not sent, fails with the context's error, closes its body (a
// RoundTripper closes the request's body, errors included: net/http's
// RoundTripper doc), and leaves the gate free.
func TestJWTGateSendsNothingForAContextAlreadyDone(t *testing.T) {
	sent := 0
	next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		sent++
		return &http.Response{StatusCode: http.StatusCreated, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
	})
	g := newJWTGate()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range doneTries {
		body := &countedBody{Reader: strings.NewReader("{}")}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://sim/app/installations/1/access_tokens", body)
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := g.roundTrip(next, req); err == nil {
			resp.Body.Close()
		}
		if body.closed != 1 {
			t.Fatalf("the body of a request not sent was closed %d times, want once: a RoundTripper closes it, errors included", body.closed)
		}
		if len(g) != 0 {
			t.Fatal("the gate is held after a request whose context had ended: it must be left free")
		}
	}
	if sent != 0 {
		t.Errorf("requests sent with a context already done: %d of %d, want none: the gate is won, then the context checked", sent, doneTries)
	}
}

// TestTokenTurnMintsNothingForAContextAlreadyDone pins
// installationAuth.token: a request whose context has ended when it gets
// the free turn, with no servable token, neither reads the token store
// nor mints, fails, and leaves the turn free.
func TestTokenTurnMintsNothingForAContextAlreadyDone(t *testing.T) {
	minted := 0
	store := &gettingStore{}
	auth := &installationAuth{id: 1, store: store, turn: make(chan struct{}, 1), logger: slog.New(slog.DiscardHandler),
		mint: func(ctx context.Context, id int64) (InstallationToken, error) {
			minted++
			return InstallationToken{}, ctx.Err()
		}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range doneTries {
		if tok, err := auth.token(ctx, ""); err == nil {
			t.Fatalf("token with a context already done = %q, want an error", tok)
		}
		if len(auth.turn) != 0 {
			t.Fatal("the turn is held after a request whose context had ended: it must be left free")
		}
	}
	if minted != 0 || store.gets != 0 {
		t.Errorf("with a context already done: %d mints and %d store reads of %d tries, want none: the turn is won, then the context checked", minted, store.gets, doneTries)
	}
}

// roundTripFunc is a RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// gettingStore is an empty token store that counts its reads.
type gettingStore struct {
	MemoryTokenStore
	gets int
}

func (s *gettingStore) Get(ctx context.Context, id int64) (InstallationToken, bool, error) {
	s.gets++
	return s.MemoryTokenStore.Get(ctx, id)
}
