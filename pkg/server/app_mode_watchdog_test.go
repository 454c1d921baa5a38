package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/server"
)

// blindInstallations passes requests on to next, except the GraphQL
// queries of the installations it hangs: those ignore their cancellation
// and answer only once release is closed.
type blindInstallations struct {
	next    http.RoundTripper
	release chan struct{}

	mu     sync.Mutex
	hung   map[int64]bool
	hungAt map[int64]time.Time // when each hung installation's first query was sent
}

func (b *blindInstallations) hang(ids ...int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range ids {
		b.hung[id] = true
	}
}

func (b *blindInstallations) sentAt(id int64) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.hungAt[id]
}

func (b *blindInstallations) RoundTrip(req *http.Request) (*http.Response, error) {
	_, tok, _ := strings.Cut(req.Header.Get("Authorization"), " ")
	id := installationTokenOf(tok)
	b.mu.Lock()
	hang := b.hung[id] && strings.HasSuffix(req.URL.Path, "/graphql")
	if hang && b.hungAt[id].IsZero() {
		b.hungAt[id] = time.Now()
	}
	b.mu.Unlock()
	if !hang {
		return b.next.RoundTrip(req)
	}
	<-b.release
	return nil, fmt.Errorf("installation %d: hung query released", id)
}

// healthzOf is r's GET /healthz: its status and body.
func healthzOf(r *replica) (int, string) {
	rr := httptest.NewRecorder()
	r.handler.ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	return rr.Code, rr.Body.String()
}

// TestAppModeAPassIgnoringItsCancellationFailsHealthz pins /healthz in
// App mode (docs/design.md, "The watchdog, per installation";
// docs/operating.md, GET /healthz): an installation's pass that ignores
// its cancellation fails the replica's liveness check once it is past its
// deadline (one interval from its start) by the time a mint may take to
// return after it (forge.MintOverrun) and TTL/6, as a token-mode
// sweeper's or a board sync's pass does, and not before; the check names
// every such installation, of every shard the replica holds.
func TestAppModeAPassIgnoringItsCancellationFailsHealthz(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, shards, bound = time.Minute, 2, 30 * time.Second // bound: TTL/6
		c, next := newAppCluster(t, 4, true)
		bf := &blindInstallations{next: next, release: make(chan struct{}), hung: map[int64]bool{}, hungAt: map[int64]time.Time{}}
		startAppReplicas(t, c, bf, 1, interval, shards, nil)
		r := c.replicas[0]
		defer r.stop()
		defer close(bf.release) // first: the hung passes return, then the replica stops
		time.Sleep(2*interval + time.Second)
		synctest.Wait()
		var ids []int64 // the first installation of each shard
		for shard := range shards {
			for id := int64(1); id <= 4; id++ {
				if server.InstallationShard(id, shards) == shard {
					ids = append(ids, id)
					break
				}
			}
		}
		if len(ids) != shards {
			t.Fatalf("installations 1..4 fill shards %v alone, want one in each of %d", ids, shards)
		}
		bf.hang(ids...)
		time.Sleep(interval)
		synctest.Wait()
		first, last := bf.sentAt(ids[0]), bf.sentAt(ids[1])
		if first.IsZero() || last.IsZero() {
			t.Fatalf("hung installations %v: queries sent at %v and %v, want both within an interval", ids, first, last)
		}
		if last.Before(first) {
			first, last = last, first
		}

		time.Sleep(time.Until(first.Add(interval + forge.MintOverrun + bound - 5*time.Second)))
		synctest.Wait()
		if code, body := healthzOf(r); code != http.StatusOK {
			t.Errorf("/healthz within the bound after the hung passes' deadlines: got %d %s, want 200", code, body)
		}
		time.Sleep(time.Until(last.Add(interval + forge.MintOverrun + bound + 5*time.Second)))
		synctest.Wait()
		code, body := healthzOf(r)
		if code != http.StatusServiceUnavailable {
			t.Errorf("/healthz past the hung passes' deadlines plus the bound: got %d %s, want 503: a pass ignoring its cancellation fails the liveness check", code, body)
		}
		for _, id := range ids {
			if !strings.Contains(body, fmt.Sprintf("installation %d", id)) {
				t.Errorf("/healthz %s: does not name installation %d, whose pass is stuck: every shard's installations are checked", body, id)
			}
		}
	})
}

// TestAppModeSlowPassesWaitingForASlotAreNeitherCutNorStuck pins what the
// watchdog of an installation's pass does not count (docs/design.md, "The
// watchdog, per installation"): the wait for one of its shard's
// --installation-concurrency slots. Ten installations share one shard and
// one slot, and every GitHub query takes 9 s, short of GitHub's 10 s
// timeout: 90 s of passes an interval, so passes wait up to an interval
// for the slot (those that would wait longer are skipped). None is cut at
// its deadline, none parked, every installation's passes complete, and
// /healthz answers 200 throughout.
func TestAppModeSlowPassesWaitingForASlotAreNeitherCutNorStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, n = time.Minute, 10
		c, next := newAppCluster(t, n, true, forgesim.WithLatency(forgesim.Latency{GraphQLBase: 9 * time.Second}))
		startAppReplicas(t, c, next, 1, interval, 1, func(cfg *server.Config) { cfg.InstallationConcurrency = 1 })
		r, start := c.replicas[0], time.Now()
		for range 12 {
			time.Sleep(interval / 2)
			synctest.Wait()
			if code, body := healthzOf(r); code != http.StatusOK {
				t.Errorf("/healthz at %v: got %d %s, want 200: no pass is stuck, only slow", time.Since(start), code, body)
			}
		}
		timeouts, stalls := metricValue(t, r.handler, "iterion_net_pass_timeouts_total"), metricValue(t, r.handler, "iterion_net_stalls_total")
		r.stop()
		if timeouts != 0 || stalls != 0 {
			t.Errorf("pass timeouts %v, stalls %v; want none: a pass's deadline counts from its slot, and each pass takes 9 s", timeouts, stalls)
		}
		for id := int64(1); id <= n; id++ {
			complete := 0
			for _, p := range sweptBy(c, id) {
				if p.Complete {
					complete++
				}
			}
			if complete == 0 {
				t.Errorf("installation %d: no complete pass in 6 intervals, want its passes complete, however long they waited for the slot", id)
			}
		}
	})
}

// blindMints passes requests on to next, except the token mints of the
// installations in hung, made from the start: those ignore their
// cancellation and answer only once release is closed.
type blindMints struct {
	next    http.RoundTripper
	hung    map[int64]bool
	release chan struct{}

	mu     sync.Mutex
	sentAt time.Time // when the first hung mint was sent
}

func (b *blindMints) RoundTrip(req *http.Request) (*http.Response, error) {
	var id int64
	_, err := fmt.Sscanf(req.URL.Path, "/app/installations/%d/access_tokens", &id)
	if err != nil || req.Method != http.MethodPost || !b.hung[id] {
		return b.next.RoundTrip(req)
	}
	b.mu.Lock()
	if b.sentAt.IsZero() {
		b.sentAt = time.Now()
	}
	b.mu.Unlock()
	<-b.release
	return nil, fmt.Errorf("installation %d: hung mint released", id)
}

func (b *blindMints) sent() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sentAt
}

// TestAppModeAMintIgnoringItsCancellationFailsHealthz pins /healthz in App
// mode (docs/operating.md, GET /healthz; docs/design.md, "The watchdog,
// per installation"): an installation's token mint, made before its pass
// has a slot, that ignores its cancellation fails the replica's liveness
// check once past its deadline (one interval, and the time a mint sent
// may take to return after it, forge.MintOverrun) by TTL/6, and not
// before, naming the installation. Such a mint holds the App JWT's gate,
// so every mint of the replica waits and fails, and every pass of its
// installations is skipped once their tokens expire, which neither the
// pass timeouts nor the stalls count.
func TestAppModeAMintIgnoringItsCancellationFailsHealthz(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, bound = time.Minute, 30 * time.Second // bound: TTL/6
		const hung = int64(2)
		c, next := newAppCluster(t, 4, true)
		bm := &blindMints{next: next, hung: map[int64]bool{hung: true}, release: make(chan struct{})}
		startAppReplicas(t, c, bm, 1, interval, 1, nil)
		r := c.replicas[0]
		defer r.stop()
		defer close(bm.release) // first: the hung mint returns, then the replica stops
		time.Sleep(interval / 2)
		synctest.Wait()
		sent := bm.sent()
		if sent.IsZero() {
			t.Fatalf("installation %d's token not asked for in half an interval, want it minted ahead of its first pass", hung)
		}
		time.Sleep(time.Until(sent.Add(interval + forge.MintOverrun + bound - 5*time.Second)))
		synctest.Wait()
		if code, body := healthzOf(r); code != http.StatusOK {
			t.Errorf("/healthz within the bound after the hung mint's deadline: got %d %s, want 200", code, body)
		}
		time.Sleep(time.Until(sent.Add(3 * interval)))
		synctest.Wait()
		code, body := healthzOf(r)
		if code != http.StatusServiceUnavailable {
			t.Errorf("/healthz %v after a mint that ignores its cancellation: got %d %s, want 503", time.Since(sent), code, body)
		}
		if !strings.Contains(body, fmt.Sprintf("installation %d", hung)) {
			t.Errorf("/healthz %s: does not name installation %d, whose mint is stuck", body, hung)
		}
	})
}

// healthyThroughLateAnswers runs one App-mode replica over installations
// 1 and 2 at a 15 s interval and forge minute (TTL/6: 7.5 s, under
// forge.MintOverrun; GitHub's 10 s timeout: 2.5 s), its forge transport
// wrap(next), for 6 intervals, and fails the test at the first /healthz
// that is not 200, saying why it should be. The caller stops the replica.
func healthyThroughLateAnswers(t *testing.T, wrap func(next http.RoundTripper) http.RoundTripper, why string) (*cluster, *replica) {
	t.Helper()
	const interval, minute = 15 * time.Second, 15 * time.Second
	c, next := newAppCluster(t, 2, true, forgesim.WithMinute(minute))
	startAppReplicas(t, c, wrap(next), 1, interval, 1, func(cfg *server.Config) { cfg.ForgeMinute = minute })
	r := c.replicas[0]
	for range 6 * interval / time.Second {
		time.Sleep(time.Second)
		synctest.Wait()
		if code, body := healthzOf(r); code != http.StatusOK {
			r.stop()
			t.Fatalf("/healthz: got %d %s, want 200: %s", code, body, why)
		}
	}
	return c, r
}

// slowMints passes requests on to next, except the token mints of
// installation id: those are answered only once their context ends, as
// late as a mint that heeds its cancellation can return.
type slowMints struct {
	next http.RoundTripper
	id   int64
}

func (s slowMints) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || req.URL.Path != fmt.Sprintf("/app/installations/%d/access_tokens", s.id) {
		return s.next.RoundTrip(req)
	}
	<-req.Context().Done()
	return nil, context.Cause(req.Context())
}

// TestAppModeAMintAnsweredLateIsNotStuck pins what the watchdog of an
// installation's token mint allows (docs/design.md, "The watchdog, per
// installation"): a mint GitHub was sent returns up to forge.MintOverrun
// after its deadline (the App JWT's gate waits for its answer), which is
// no mint ignoring its cancellation. With a TTL/6 (7.5 s) under that
// overrun, a mint answered as late as it can be never fails /healthz.
func TestAppModeAMintAnsweredLateIsNotStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, r := healthyThroughLateAnswers(t, func(next http.RoundTripper) http.RoundTripper { return slowMints{next: next, id: 2} },
			"a mint answered at its cancellation heeds it")
		defer r.stop()
		if requestsBy(c.sim, 1, "", 0) == 0 {
			t.Errorf("installation 1: no request in 6 intervals, want it swept while installation 2's mints are slow")
		}
	})
}

// lateQueries passes requests on to next, except installation id's
// GraphQL queries: those are answered only late after their context
// ends, as a request of a pass that needed a token mint returns when the
// App JWT's gate waits for GitHub's answer to that mint past the
// request's cancellation (forge.MintOverrun).
type lateQueries struct {
	next http.RoundTripper
	id   int64
	late time.Duration
}

func (l lateQueries) RoundTrip(req *http.Request) (*http.Response, error) {
	_, tok, _ := strings.Cut(req.Header.Get("Authorization"), " ")
	if installationTokenOf(tok) != l.id || !strings.HasSuffix(req.URL.Path, "/graphql") {
		return l.next.RoundTrip(req)
	}
	<-req.Context().Done()
	time.Sleep(l.late)
	return nil, context.Cause(req.Context())
}

// TestAppModeAPassAnsweredWithinTheMintOverrunIsNotStuck pins what the
// watchdog of an installation's pass allows (docs/design.md, "The
// watchdog, per installation"): in App mode any request of a pass may
// mint its installation's token (a token GitHub refused 401 is dropped
// and the request sent again with a fresh one), and the App JWT's gate
// waits for a mint GitHub was sent up to forge.MintOverrun past its
// cancellation, so a pass returning that late heeds its cancellation.
// With a TTL/6 (7.5 s) under that overrun, passes whose queries return
// 12 s after their deadline never fail /healthz.
func TestAppModeAPassAnsweredWithinTheMintOverrunIsNotStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, r := healthyThroughLateAnswers(t, func(next http.RoundTripper) http.RoundTripper {
			return lateQueries{next: next, id: 2, late: 12 * time.Second}
		}, "a pass returning within forge.MintOverrun of its deadline heeds its cancellation")
		defer r.stop()
		if n := metricValue(t, r.handler, "iterion_net_pass_timeouts_total"); n == 0 {
			t.Errorf("pass timeouts: %v, want installation 2's passes cut at their deadline and counted", n)
		}
	})
}
