package forge_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

const mintRoute = "POST /app/installations/{id}/access_tokens"

// pipeSim is a simulator with installations 1..n, each covering
// org-<i>/repo-1, served on a pipe (synctest's clock runs through it)
// until the test ends, and the transport reaching it.
func pipeSim(t *testing.T, n int, opts ...forgesim.Option) (*forgesim.Sim, http.RoundTripper) {
	t.Helper()
	sim := forgesim.New(opts...)
	mustSim(t, sim.SeedInstallations(n, 1))
	tr, stop := forgetest.ServeSimOnPipe(sim)
	t.Cleanup(stop)
	return sim, tr
}

// pipeApp makes an AppClient of App 42 on tr (a simulator on a pipe) with
// cfg's other fields.
func pipeApp(t *testing.T, tr http.RoundTripper, cfg forge.AppConfig) *forge.AppClient {
	t.Helper()
	cfg.BaseURL, cfg.AppID, cfg.PrivateKey = "http://sim/", 42, forgetest.AppKey(t)
	if cfg.Next == nil {
		cfg.Next = tr
	}
	a, err := forge.NewApp(cfg)
	mustSim(t, err)
	return a
}

// readIssues has installation id's Client of a list its repository's
// issues (org-<id>/repo-1).
func readIssues(a *forge.AppClient, id int64) error {
	c, err := a.Installation(id)
	if err != nil {
		return err
	}
	_, err = c.ListIssues(laneCtx(forge.LaneMergeGateSweeper), fmt.Sprintf("org-%d", id), "repo-1", time.Time{})
	return err
}

// tokensUsed is the installation tokens the simulator's reads of route
// came with, by token.
func tokensUsed(sim *forgesim.Sim, route string) map[string]int64 {
	out := map[string]int64{}
	for _, rc := range sim.Stats().Requests {
		if rc.Route == route && strings.HasPrefix(rc.Token, "ghs_sim_") {
			out[rc.Token] += rc.Count
		}
	}
	return out
}

const issuesRoute = "GET /repos/{owner}/{repo}/issues"

// TestReplicasSharingATokenStoreMintOnce pins the point of a shared
// TokenStore: two AppClients (two replicas) on one store mint one token
// per installation between them and both send with it; without a store
// each mints its own, as before the store.
func TestReplicasSharingATokenStoreMintOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func() forge.TokenStore
		mints int64
		why   string
	}{
		{"shared store", func() forge.TokenStore { return new(forge.MemoryTokenStore) }, 1, "the second replica takes the token the first stored"},
		{"no store", func() forge.TokenStore { return nil }, 2, "each replica keeps its own tokens (a MemoryTokenStore of its own)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sim, tr := pipeSim(t, 2)
				store := tc.store()
				one := pipeApp(t, tr, forge.AppConfig{Tokens: store, Owner: "web-1"})
				two := pipeApp(t, tr, forge.AppConfig{Tokens: store, Owner: "web-2"})
				for _, a := range []*forge.AppClient{one, two, one, two} {
					mustSim(t, a.Relist(context.Background()))
					mustSim(t, readIssues(a, 1))
				}
				if n := sim.Requests(forgesim.Filter{Route: mintRoute}); n != tc.mints {
					t.Errorf("tokens minted for installation 1 by two replicas: %d, want %d: %s", n, tc.mints, tc.why)
				}
				if used := tokensUsed(sim, issuesRoute); int64(len(used)) != tc.mints {
					t.Errorf("tokens the reads came with: %v, want %d distinct", used, tc.mints)
				}
				for _, a := range []*forge.AppClient{one, two} {
					want := int64(1)
					if tc.mints == 1 && a == two {
						want = 0
					}
					if n := appCount(a, forge.LaneAuth, http.StatusCreated, 1); n != want {
						t.Errorf("mints counted on lane auth for installation 1 by a replica: %d, want %d: the mint is charged where it is sent", n, want)
					}
				}
			})
		})
	}
}

// TestATokenNearExpiryIsMintedAfresh pins TokenMargin: a token is served
// (by the replica that minted it and, through the store, by the others)
// while it has at least TokenMargin left, and minted afresh once it has
// less; the fresh token reaches the other replica through the store.
func TestATokenNearExpiryIsMintedAfresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 10 * time.Minute
		sim, tr := pipeSim(t, 1, forgesim.WithTokenTTL(ttl))
		store := new(forge.MemoryTokenStore)
		one := pipeApp(t, tr, forge.AppConfig{Tokens: store, Owner: "web-1"})
		two := pipeApp(t, tr, forge.AppConfig{Tokens: store, Owner: "web-2"})
		mustSim(t, one.Relist(context.Background()))
		mustSim(t, two.Relist(context.Background()))
		mints := func() int64 { return sim.Requests(forgesim.Filter{Route: mintRoute}) }
		mustSim(t, readIssues(one, 1))
		time.Sleep(ttl - forge.TokenMargin - time.Second)
		mustSim(t, readIssues(one, 1))
		mustSim(t, readIssues(two, 1))
		if n := mints(); n != 1 {
			t.Fatalf("mints with TokenMargin and a second left: %d, want 1: the token is still served, to both replicas", n)
		}
		time.Sleep(2 * time.Second)
		mustSim(t, readIssues(one, 1))
		if n := mints(); n != 2 {
			t.Fatalf("mints with less than TokenMargin left: %d, want 2: the token is minted afresh", n)
		}
		mustSim(t, readIssues(two, 1))
		if n := mints(); n != 2 {
			t.Fatalf("mints after the other replica's read: %d, want 2: it takes the fresh token from the store", n)
		}
		tok, ok, err := store.Get(context.Background(), 1)
		if err != nil || !ok || tok.MintedBy != "web-1" || !tok.ExpiresAt.After(time.Now().Add(ttl-time.Second)) {
			t.Fatalf("stored token: %v (ok %v, %v), want the fresh one web-1 minted, expiring in %v", tok, ok, err, ttl)
		}
		if !tok.MintedAt.Equal(time.Now().Truncate(time.Millisecond)) {
			t.Fatalf("stored token minted at %v, want %v: MintedAt is when the replica minted it, by its clock", tok.MintedAt, time.Now())
		}
	})
}

// refuseToken answers 401 "Bad credentials", as GitHub answers a revoked
// token, to every request but a mint sent with a token refused holds.
type refuseToken struct {
	next    http.RoundTripper
	mu      sync.Mutex
	refused map[string]bool
}

func (r *refuseToken) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	no := r.refused[strings.TrimPrefix(req.Header.Get("Authorization"), "token ")]
	r.mu.Unlock()
	if !no {
		return r.next.RoundTrip(req)
	}
	return answerJSON(req, http.StatusUnauthorized, `{"message":"Bad credentials"}`), nil
}

// refuse has GitHub refuse tok from now on.
func (r *refuseToken) refuse(tok string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused[tok] = true
}

// answerJSON is an answer to req with status and body as JSON, req's body
// closed: what a RoundTripper standing in for GitHub answers.
func answerJSON(req *http.Request, status int, body string) *http.Response {
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body)), Request: req}
}

// TestARefusedTokenIsDroppedAndMintedAfreshOnce pins the 401 rule: a
// token GitHub refuses is dropped from the replica and the store, one
// fresh token is minted and the request sent once more with it; when the
// installation is gone (the simulator revokes its tokens and mints no
// more), the request fails after that one mint, never looping.
func TestARefusedTokenIsDroppedAndMintedAfreshOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim, tr := pipeSim(t, 2)
		refuse := &refuseToken{next: tr, refused: map[string]bool{}}
		store := new(forge.MemoryTokenStore)
		a := pipeApp(t, tr, forge.AppConfig{Tokens: store, Next: refuse})
		mustSim(t, a.Relist(context.Background()))
		mints := func() int64 { return sim.Requests(forgesim.Filter{Route: mintRoute}) }

		// Revoked while installed: the retry with a fresh token succeeds.
		mustSim(t, readIssues(a, 1))
		first, _, _ := store.Get(context.Background(), 1)
		refuse.refuse(first.Token)
		if err := readIssues(a, 1); err != nil {
			t.Fatalf("a read whose token is refused: %v, want it sent again with a fresh token", err)
		}
		if n := mints(); n != 2 {
			t.Fatalf("mints: %d, want 2: the refused token is replaced once", n)
		}
		if now, _, _ := store.Get(context.Background(), 1); now.Token == first.Token {
			t.Fatalf("the store still holds the refused token, want the fresh one")
		}

		// Uninstalled: the simulator answers its tokens 401 and its mints
		// 404; one mint is tried, then the read fails.
		mustSim(t, readIssues(a, 2))
		before := mints()
		mustSim(t, sim.RemoveInstallation(2))
		if err := readIssues(a, 2); err == nil {
			t.Fatalf("a read of an uninstalled installation succeeded, want its 401")
		}
		if n := mints() - before; n != 1 {
			t.Fatalf("mints after the 401 of an uninstalled installation: %d, want 1: a refused token is minted afresh once, not in a loop", n)
		}
		if _, ok, _ := store.Get(context.Background(), 2); ok {
			t.Fatalf("the store still holds the uninstalled installation's refused token, want it dropped")
		}
	})
}

// undroppable is a MemoryTokenStore whose Drop fails.
type undroppable struct{ *forge.MemoryTokenStore }

func (undroppable) Drop(context.Context, int64, string) error { return errors.New("store down") }

// rereadOnDrop is a token store that cannot drop a token and, the first
// time it is asked to, has reread run first: another request of the
// installation reading the store meanwhile, which still holds the token
// GitHub refused.
type rereadOnDrop struct {
	undroppable
	once   sync.Once
	reread func()
}

func (s *rereadOnDrop) Drop(ctx context.Context, id int64, token string) error {
	s.once.Do(s.reread)
	return s.undroppable.Drop(ctx, id, token)
}

// TestARefusedTokenTheStoreKeepsIsNotServedAgain pins that a token GitHub
// refused is not served again, neither from a store that failed to drop
// it nor from the replica's own copy when another request of the
// installation read it back from that store meanwhile: the retry mints a
// fresh one.
func TestARefusedTokenTheStoreKeepsIsNotServedAgain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reread bool // another request reads the store while the refused token is dropped
	}{
		{"the store failing to drop it", false},
		{"another request having read it back", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sim, tr := pipeSim(t, 1)
				refuse := &refuseToken{next: tr, refused: map[string]bool{}}
				store := &rereadOnDrop{undroppable: undroppable{new(forge.MemoryTokenStore)}, reread: func() {}}
				a := pipeApp(t, tr, forge.AppConfig{Tokens: store, Next: refuse})
				if tc.reread {
					store.reread = func() {
						if err := a.Mint(context.Background(), 1); err != nil {
							t.Errorf("the other request's Mint: %v", err)
						}
					}
				}
				mustSim(t, a.Relist(context.Background()))
				mustSim(t, readIssues(a, 1))
				first, _, _ := store.Get(context.Background(), 1)
				refuse.refuse(first.Token)
				if err := readIssues(a, 1); err != nil {
					t.Fatalf("a read whose token is refused, %s: %v, want it sent again with a fresh token", tc.name, err)
				}
				if n := sim.Requests(forgesim.Filter{Route: mintRoute}); n != 2 {
					t.Fatalf("mints: %d, want 2: the refused token is not served again, %s", n, tc.name)
				}
			})
		})
	}
}

// failingStore is a TokenStore that cannot be read or written, or whose
// document is malformed.
type failingStore struct{ getErr, putErr error }

func (s failingStore) Get(context.Context, int64) (forge.InstallationToken, bool, error) {
	return forge.InstallationToken{}, false, s.getErr
}
func (s failingStore) Put(context.Context, forge.InstallationToken) error { return s.putErr }
func (s failingStore) Drop(context.Context, int64, string) error          { return nil }

// slowPut is a token store whose Put says when it starts, then takes a
// second, failing if its context ends first: the write of a fresh token
// outlived by the request that minted it.
type slowPut struct {
	forge.MemoryTokenStore
	putting chan struct{}
}

func (s *slowPut) Put(ctx context.Context, tok forge.InstallationToken) error {
	s.putting <- struct{}{}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Second):
		return s.MemoryTokenStore.Put(ctx, tok)
	}
}

// TestAFreshTokenIsStoredWhenTheRequestEndsFirst pins that a fresh token
// is stored even when the request that minted it ends (its deadline, a
// caller giving up) while it is being stored: the mint is GitHub's time on
// the App's JWT, and a token not stored is minted again by every replica.
func TestAFreshTokenIsStoredWhenTheRequestEndsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim, tr := pipeSim(t, 1)
		store := &slowPut{putting: make(chan struct{}, 1)}
		a := pipeApp(t, tr, forge.AppConfig{Tokens: store, Owner: "web-1"})
		mustSim(t, a.Relist(context.Background()))
		c, err := a.Installation(1)
		mustSim(t, err)
		ctx, cancel := context.WithCancel(laneCtx(forge.LaneMergeGateSweeper))
		done := make(chan error, 1)
		go func() {
			_, err := c.ListIssues(ctx, "org-1", "repo-1", time.Time{})
			done <- err
		}()
		<-store.putting
		cancel()
		<-done
		if tok, ok, err := store.Get(context.Background(), 1); err != nil || !ok || tok.Token == "" {
			t.Fatalf("stored token after the request ended mid-write: ok %v, %v; want the fresh token stored", ok, err)
		}
		b := pipeApp(t, tr, forge.AppConfig{Tokens: store, Owner: "web-2"})
		mustSim(t, b.Relist(context.Background()))
		mustSim(t, readIssues(b, 1))
		if n := sim.Requests(forgesim.Filter{Route: mintRoute}); n != 1 {
			t.Errorf("mints: %d, want 1: the second replica takes the token the first stored", n)
		}
	})
}

// TestAStoreThatFailsIsMintedAroundAndNoTokenIsLogged pins that a store
// failing to read (a malformed document, a database down) or to write
// never fails a forge request: the replica mints, logs the store's error
// by name, and keeps its token; and that no token appears in a log record,
// an error or a metric on any path.
func TestAStoreThatFailsIsMintedAroundAndNoTokenIsLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim, tr := pipeSim(t, 1)
		logger, logs := forgetest.TextLogger()
		reg := prometheus.NewRegistry()
		malformed := fmt.Errorf("%w: installation 1: token is int32, want a string", forge.ErrMalformedToken)
		store := failingStore{getErr: malformed, putErr: errors.New("store down")}
		a := pipeApp(t, tr, forge.AppConfig{Tokens: store, Logger: logger, Registerer: reg})
		mustSim(t, a.Relist(context.Background()))
		for range 2 {
			if err := readIssues(a, 1); err != nil {
				t.Fatalf("a read with the store failing: %v, want it sent: the store never fails a forge request", err)
			}
		}
		if n := sim.Requests(forgesim.Filter{Route: mintRoute}); n != 1 {
			t.Errorf("mints: %d, want 1: the replica keeps the token it minted", n)
		}
		if !strings.Contains(logs.String(), "malformed installation token") || !strings.Contains(logs.String(), "store down") {
			t.Errorf("logs:\n%s\nwant the malformed document and the failed write reported", logs)
		}
		// The uninstalled path logs and errs too.
		mustSim(t, sim.RemoveInstallation(1))
		err := readIssues(a, 1)
		a.Close()
		var metrics strings.Builder
		mfs, gerr := reg.Gather()
		mustSim(t, gerr)
		for _, mf := range mfs {
			_, _ = expfmt.MetricFamilyToText(&metrics, mf)
		}
		for where, text := range map[string]string{"logs": logs.String(), "error": fmt.Sprint(err), "metrics": metrics.String()} {
			if strings.Contains(text, "ghs_") {
				t.Errorf("%s carry an installation token:\n%s", where, text)
			}
		}
	})
}

// TestATakeoverFindsItsInstallationsTokensMinted pins the cost the shared
// store removes, at a small scale: R replicas each sending requests for
// all I installations mint I tokens between them (R×I without the store),
// and a fresh replica taking over (a dead one's successor) mints none
// while the tokens have TokenMargin left.
func TestATakeoverFindsItsInstallationsTokensMinted(t *testing.T) {
	const replicas, installations = 4, 12
	for _, tc := range []struct {
		name                string
		shared              bool
		mints, takeoverMint int64
	}{
		{"shared", true, installations, 0},
		{"per replica", false, replicas * installations, installations},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sim, tr := pipeSim(t, installations)
				var store forge.TokenStore
				if tc.shared {
					store = new(forge.MemoryTokenStore)
				}
				touchAll := func(a *forge.AppClient) {
					mustSim(t, a.Relist(context.Background()))
					for id := int64(1); id <= installations; id++ {
						mustSim(t, readIssues(a, id))
					}
				}
				for range replicas {
					touchAll(pipeApp(t, tr, forge.AppConfig{Tokens: store}))
				}
				mints := func() int64 { return sim.Requests(forgesim.Filter{Route: mintRoute}) }
				if n := mints(); n != tc.mints {
					t.Fatalf("mints by %d replicas over %d installations: %d, want %d", replicas, installations, n, tc.mints)
				}
				time.Sleep(30 * time.Minute)
				touchAll(pipeApp(t, tr, forge.AppConfig{Tokens: store}))
				if n := mints() - tc.mints; n != tc.takeoverMint {
					t.Fatalf("mints by a replica taking over half an hour later: %d, want %d", n, tc.takeoverMint)
				}
			})
		})
	}
}

// stallingStore is a MemoryTokenStore that, while stalled, answers no
// call: each waits until its context ends, as a database that accepts
// the connection and never answers.
type stallingStore struct {
	forge.MemoryTokenStore
	stalled atomic.Bool
}

func (s *stallingStore) stall(ctx context.Context) error {
	if !s.stalled.Load() {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (s *stallingStore) Get(ctx context.Context, id int64) (forge.InstallationToken, bool, error) {
	if err := s.stall(ctx); err != nil {
		return forge.InstallationToken{}, false, err
	}
	return s.MemoryTokenStore.Get(ctx, id)
}

func (s *stallingStore) Put(ctx context.Context, tok forge.InstallationToken) error {
	if err := s.stall(ctx); err != nil {
		return err
	}
	return s.MemoryTokenStore.Put(ctx, tok)
}

func (s *stallingStore) Drop(ctx context.Context, id int64, token string) error {
	if err := s.stall(ctx); err != nil {
		return err
	}
	return s.MemoryTokenStore.Drop(ctx, id, token)
}

// TestAStoreThatStallsIsMintedAroundWithinTheRequestsDeadline pins that a
// token store that stalls (it never answers) delays a request that needs
// a token by a bounded wait, not by the request's whole deadline: the
// replica mints its own token and the request is sent, as when the store
// cannot be reached at all; and a token GitHub refuses is dropped and
// minted afresh within the deadline too.
func TestAStoreThatStallsIsMintedAroundWithinTheRequestsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim, tr := pipeSim(t, 1)
		refuse := &refuseToken{next: tr, refused: map[string]bool{}}
		store := new(stallingStore)
		store.stalled.Store(true)
		const deadline = 15 * time.Second // forge.RequestTimeout's most
		a := pipeApp(t, tr, forge.AppConfig{Tokens: store, Next: refuse, Timeout: deadline})
		mustSim(t, a.Relist(context.Background()))
		mints := func() int64 { return sim.Requests(forgesim.Filter{Route: mintRoute}) }
		start := time.Now()
		if err := readIssues(a, 1); err != nil {
			t.Fatalf("a read with the token store stalled: %v, want it sent with a token the replica minted", err)
		}
		if took := time.Since(start); took >= deadline {
			t.Errorf("the read took %v, want less than its deadline %v: the store is waited for a bounded time", took, deadline)
		}
		if n := mints(); n != 1 {
			t.Fatalf("mints: %d, want 1", n)
		}
		for tok := range tokensUsed(sim, issuesRoute) {
			refuse.mu.Lock()
			refuse.refused[tok] = true
			refuse.mu.Unlock()
		}
		if err := readIssues(a, 1); err != nil {
			t.Fatalf("a read whose token GitHub refuses, the store stalled: %v, want it sent again with a fresh token within its deadline", err)
		}
		if n := mints(); n != 2 {
			t.Fatalf("mints: %d, want 2: the refused token is replaced once", n)
		}
	})
}

// crossedStore is a token store that answers installation id's Get with
// installation id+1's token: a store that mixed its documents up.
type crossedStore struct{ *forge.MemoryTokenStore }

func (s crossedStore) Get(ctx context.Context, id int64) (forge.InstallationToken, bool, error) {
	return s.MemoryTokenStore.Get(ctx, id+1)
}

// TestAStoredTokenThatIsNotGitHubsIsMintedAround pins that a token the
// store answers is served only when it can be GitHub's token of the
// installation asked: one whose expiry is further ahead than GitHub's
// tokens live (an hour, and the drift an App JWT allows) would be sent
// past its real expiry, and another installation's would be sent for this
// one (GitHub answers such reads 404, which drops no token). Each is
// logged, and the replica mints its own.
func TestAStoredTokenThatIsNotGitHubsIsMintedAround(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(forge.TokenStore) forge.TokenStore // the second replica's view of the shared store
		spoil func(*testing.T, forge.TokenStore)      // what becomes of installation 1's stored token
		log   string
	}{
		{"an expiry a day ahead", func(s forge.TokenStore) forge.TokenStore { return s }, func(t *testing.T, s forge.TokenStore) {
			tok, _, _ := s.Get(context.Background(), 1)
			tok.ExpiresAt = time.Now().Add(24 * time.Hour)
			mustSim(t, s.Put(context.Background(), tok))
		}, "expires further ahead than GitHub's tokens live"},
		{"another installation's", func(s forge.TokenStore) forge.TokenStore {
			return crossedStore{s.(*forge.MemoryTokenStore)}
		}, func(*testing.T, forge.TokenStore) {}, "another installation's token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sim, tr := pipeSim(t, 2)
				shared := new(forge.MemoryTokenStore)
				one := pipeApp(t, tr, forge.AppConfig{Tokens: shared, Owner: "web-1"})
				mustSim(t, one.Relist(context.Background()))
				mustSim(t, readIssues(one, 1))
				mustSim(t, readIssues(one, 2))
				tc.spoil(t, shared)
				logger, logs := forgetest.TextLogger()
				two := pipeApp(t, tr, forge.AppConfig{Tokens: tc.store(shared), Owner: "web-2", Logger: logger})
				mustSim(t, two.Relist(context.Background()))
				if err := readIssues(two, 1); err != nil {
					t.Fatalf("a read of installation 1 with %s token stored: %v, want it sent with a token the replica minted", tc.name, err)
				}
				if n := sim.Requests(forgesim.Filter{Route: mintRoute}); n != 3 {
					t.Errorf("mints: %d, want 3: the stored token is not served, the second replica mints its own", n)
				}
				if !strings.Contains(logs.String(), tc.log) || !strings.Contains(logs.String(), "installation=1") {
					t.Errorf("logs:\n%s\nwant installation 1's stored token reported (%q)", logs, tc.log)
				}
				if strings.Contains(logs.String(), "ghs_") {
					t.Errorf("logs carry a token:\n%s", logs)
				}
			})
		})
	}
}

// TestAMintedTokenIsServedForAtMostAnHour pins that a token whose mint
// answer says it lives longer than GitHub's tokens do is served for
// tokenMaxAhead less TokenMargin, then minted afresh, and meanwhile served
// to every request without a mint each.
func TestAMintedTokenIsServedForAtMostAnHour(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim, tr := pipeSim(t, 1, forgesim.WithTokenTTL(3*time.Hour))
		a := pipeApp(t, tr, forge.AppConfig{})
		mustSim(t, a.Relist(context.Background()))
		mints := func() int64 { return sim.Requests(forgesim.Filter{Route: mintRoute}) }
		for range 3 {
			mustSim(t, readIssues(a, 1))
		}
		if n := mints(); n != 1 {
			t.Fatalf("mints after three reads: %d, want 1: a long-lived token is served, not minted each request", n)
		}
		time.Sleep(time.Hour + 5*time.Minute - forge.TokenMargin + time.Second)
		mustSim(t, readIssues(a, 1))
		if n := mints(); n != 2 {
			t.Fatalf("mints an hour on: %d, want 2: a token is served for an hour and GitHub's drift at most", n)
		}
	})
}

// TestARequestWaitingForAnothersMintGivesUpAtItsDeadline pins that a
// request of an installation whose token another request is fetching (a
// store that stalls, a mint, the fresh token's write) waits for it only
// until its own deadline, and that the other request's token then serves.
// (A wait that ignores the deadline, on a sync.Mutex, is not durably
// blocked in synctest's terms: virtual time then stands still and the
// test hangs until go test's -timeout.)
func TestARequestWaitingForAnothersMintGivesUpAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim, tr := pipeSim(t, 1)
		store := new(stallingStore)
		store.stalled.Store(true)
		a := pipeApp(t, tr, forge.AppConfig{Tokens: store, Timeout: 15 * time.Second})
		mustSim(t, a.Relist(context.Background()))
		c, err := a.Installation(1)
		mustSim(t, err)
		first := make(chan error, 1)
		go func() { first <- readIssues(a, 1) }()
		synctest.Wait() // the first read waits on the stalled store
		const deadline = time.Second
		ctx, cancel := context.WithTimeout(laneCtx(forge.LaneMergeGateSweeper), deadline)
		defer cancel()
		start := time.Now()
		_, err = c.ListIssues(ctx, "org-1", "repo-1", time.Time{})
		if took := time.Since(start); err == nil || took > deadline {
			t.Errorf("a read waiting for another's token, deadline %v: returned after %v (%v), want its deadline's error at %v", deadline, took, err, deadline)
		}
		if err := <-first; err != nil {
			t.Fatalf("the read fetching the token: %v, want it served", err)
		}
		mustSim(t, readIssues(a, 1))
		if n := sim.Requests(forgesim.Filter{Route: mintRoute}); n != 1 {
			t.Errorf("mints: %d, want 1: the token the first read minted serves the next", n)
		}
	})
}

// TestAnHoursTokenIsServedForItsFirst59Minutes pins TokenMargin's size as
// its doc and docs/operating.md give it: a token of GitHub's hour is
// served for its first 59 minutes, to every request without a mint each,
// and minted afresh once a minute or less of it is left.
func TestAnHoursTokenIsServedForItsFirst59Minutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim, tr := pipeSim(t, 1) // tokens live an hour, as GitHub's
		a := pipeApp(t, tr, forge.AppConfig{})
		mustSim(t, a.Relist(context.Background()))
		mints := func() int64 { return sim.Requests(forgesim.Filter{Route: mintRoute}) }
		mustSim(t, readIssues(a, 1))
		time.Sleep(59*time.Minute - time.Second)
		mustSim(t, readIssues(a, 1))
		if n := mints(); n != 1 {
			t.Fatalf("mints 59 minutes less a second into the token's hour: %d, want 1: it is still served", n)
		}
		time.Sleep(2 * time.Second)
		mustSim(t, readIssues(a, 1))
		if n := mints(); n != 2 {
			t.Fatalf("mints 59 minutes and a second into the token's hour: %d, want 2: with a minute or less left it is minted afresh", n)
		}
	})
}

// mintAnswer answers every token mint 201 with body, whatever the
// installation: an answer GitHub's schema does not allow.
type mintAnswer struct {
	next http.RoundTripper
	body string
}

func (m mintAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/access_tokens") {
		return m.next.RoundTrip(req)
	}
	return answerJSON(req, http.StatusCreated, m.body), nil
}

// TestAMintAnswerWithoutItsTokenOrExpiryIsRefused pins that a mint whose
// answer lacks the token or its expiry fails the request with
// ErrMalformedToken, naming the installation and the field and never the
// token, and that nothing is stored or sent with it: a token without an
// expiry would be served for ever, and an empty one sends the request
// unauthenticated.
func TestAMintAnswerWithoutItsTokenOrExpiryIsRefused(t *testing.T) {
	for _, tc := range []struct{ name, body, field string }{
		{"no expiry", `{"token":"ghs_unexpiring"}`, "expires_at"},
		{"no token", `{"expires_at":"2000-01-01T01:00:00Z"}`, "token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sim, tr := pipeSim(t, 1)
				store := new(forge.MemoryTokenStore)
				a := pipeApp(t, tr, forge.AppConfig{Tokens: store, Next: mintAnswer{next: tr, body: tc.body}})
				mustSim(t, a.Relist(context.Background()))
				err := readIssues(a, 1)
				if !errors.Is(err, forge.ErrMalformedToken) {
					t.Fatalf("a read whose mint answer has %s: %v, want ErrMalformedToken", tc.name, err)
				}
				if msg := err.Error(); !strings.Contains(msg, "installation 1") || !strings.Contains(msg, tc.field) || strings.Contains(msg, "ghs_") {
					t.Errorf("error %q: want it to name installation 1 and the field %s, and no token", msg, tc.field)
				}
				if n := sim.Requests(forgesim.Filter{Route: issuesRoute}); n != 0 {
					t.Errorf("reads sent: %d, want 0: nothing is sent without a token GitHub's answer vouches for", n)
				}
				if tok, ok, _ := store.Get(context.Background(), 1); ok {
					t.Errorf("stored: %v, want nothing", tok)
				}
			})
		})
	}
}

// TestARetryRefusedForTheSuspensionFailsWithErrSuspended pins the
// suspension rule on the 401 rule's retry: a request whose token GitHub
// refused, sent again with the token another replica stored since, which
// GitHub refuses for the installation's suspension, fails with
// ErrSuspended, and that token is dropped from the store too.
func TestARetryRefusedForTheSuspensionFailsWithErrSuspended(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim, tr := pipeSim(t, 1)
		refuse := &refuseToken{next: tr, refused: map[string]bool{}}
		shared := new(forge.MemoryTokenStore)
		one := pipeApp(t, tr, forge.AppConfig{Tokens: shared, Next: refuse, Owner: "web-1"})
		mustSim(t, one.Relist(context.Background()))
		mustSim(t, readIssues(one, 1))
		first, _, _ := shared.Get(context.Background(), 1)
		own := new(forge.MemoryTokenStore)
		two := pipeApp(t, tr, forge.AppConfig{Tokens: own, Owner: "web-2"})
		mustSim(t, two.Relist(context.Background()))
		mustSim(t, two.Mint(context.Background(), 1))
		second, _, _ := own.Get(context.Background(), 1)
		mustSim(t, shared.Put(context.Background(), second))
		mustSim(t, sim.SuspendInstallation(1))
		refuse.refuse(first.Token)
		err := readIssues(one, 1)
		if !errors.Is(err, forge.ErrSuspended) {
			t.Errorf("a read refused 401, its retry refused for the suspension: %v, want ErrSuspended", err)
		}
		if tok, ok, _ := shared.Get(context.Background(), 1); ok {
			t.Errorf("stored after the retry's refusal: %v, want the token dropped", tok)
		}
	})
}

// forbidReads answers 403 with message to every read of an issues list.
type forbidReads struct {
	next    http.RoundTripper
	message string
}

func (f forbidReads) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(req.URL.Path, "/issues") {
		return f.next.RoundTrip(req)
	}
	return answerJSON(req, http.StatusForbidden, fmt.Sprintf(`{"message":%q,"documentation_url":"https://docs.github.com/rest"}`, f.message)), nil
}

// TestAForbiddenReadIsNotTakenForASuspension pins suspendedAnswer's
// narrowness: only GitHub's 403 "This installation has been suspended" is
// a suspension. Any other 403 (a permission the App was not granted) is
// the caller's ErrForbidden, and the token stays, in the replica and the
// store: the next read mints nothing.
func TestAForbiddenReadIsNotTakenForASuspension(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim, tr := pipeSim(t, 1)
		store := new(forge.MemoryTokenStore)
		a := pipeApp(t, tr, forge.AppConfig{Tokens: store, Next: forbidReads{next: tr, message: "Resource not accessible by integration"}})
		mustSim(t, a.Relist(context.Background()))
		for range 2 {
			if err := readIssues(a, 1); errors.Is(err, forge.ErrSuspended) || !errors.Is(err, forge.ErrForbidden) {
				t.Errorf("a read refused 403 for a permission: %v, want ErrForbidden, not ErrSuspended", err)
			}
		}
		if n := sim.Requests(forgesim.Filter{Route: mintRoute}); n != 1 {
			t.Errorf("mints: %d, want 1: a 403 that is not the suspension's drops no token", n)
		}
		if _, ok, _ := store.Get(context.Background(), 1); !ok {
			t.Errorf("the store lost the token, want it kept")
		}
	})
}
