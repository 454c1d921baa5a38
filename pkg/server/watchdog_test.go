package server_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// hangingForge passes requests on to next, except those of the token it
// hangs: they never answer, either until their context ends (a forge that
// holds the request) or, with blind, until release is closed (a request
// that ignores its cancellation).
type hangingForge struct {
	next    http.RoundTripper
	mu      sync.Mutex
	token   string
	blind   bool
	once    bool      // hang one request only
	hungAt  time.Time // when the last hung request was sent
	release chan struct{}
}

func (h *hangingForge) hang(token string, blind bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.token, h.blind, h.release = token, blind, make(chan struct{})
}

func (h *hangingForge) RoundTrip(req *http.Request) (*http.Response, error) {
	h.mu.Lock()
	token, blind, release := h.token, h.blind, h.release
	hang := token != "" && strings.HasSuffix(req.Header.Get("Authorization"), " "+token)
	if hang {
		h.hungAt = time.Now()
		if h.once {
			h.token = ""
		}
	}
	h.mu.Unlock()
	if !hang {
		return h.next.RoundTrip(req)
	}
	if blind {
		<-release
		return nil, errors.New("hung request released")
	}
	<-req.Context().Done()
	return nil, req.Context().Err()
}

// leaderOf is the owner of the last sweeper term elected.
func leaderOf(c *cluster) string {
	events, _ := c.tl.snapshot()
	leader := ""
	for _, e := range events {
		if e.Kind == lease.Elected {
			leader = e.Owner
		}
	}
	return leader
}

func replicaOf(c *cluster, owner string) *replica {
	for _, r := range c.replicas {
		if r.owner == owner {
			return r
		}
	}
	return nil
}

// TestHungForgeRequestEndsTheTerm pins the watchdog in virtual time: when
// every forge request of the leader hangs, each pass is cancelled at its
// deadline (one interval) and counted, and after three such passes the
// leader steps down and stops campaigning for three intervals, so the other replica is
// elected and sweeps; /healthz stays 200, since the leader's work did
// return.
func TestHungForgeRequestEndsTheTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newCluster(t, 3)
		hf := &hangingForge{next: next}
		startReplicas(t, c, hf, 2, time.Minute, nil)
		defer func() {
			for _, r := range c.replicas {
				r.stop()
			}
		}()
		time.Sleep(2*time.Minute + time.Second)
		synctest.Wait()
		leader := leaderOf(c)
		if leader == "" {
			t.Fatal("no leader elected within 2 minutes")
		}
		hung := time.Now()
		hf.hang(replicaOf(c, leader).token, false)
		time.Sleep(6 * time.Minute)
		synctest.Wait()

		events, passes := c.tl.snapshot()
		stepped := false
		for _, e := range events {
			stepped = stepped || e.Kind == lease.SteppedDown && e.Owner == leader
		}
		if !stepped {
			t.Errorf("leader stepped down: got no step-down, want one: a holder whose passes keep failing ends its term")
		}
		successor := leaderOf(c)
		var took time.Duration
		for _, p := range passes {
			if p.Owner == successor && p.Complete && p.At.After(hung) {
				took = p.At.Sub(hung)
				break
			}
		}
		if successor == leader || took == 0 {
			t.Fatalf("after the hang: leader %s, successor %s, first complete pass %v after the hang; want another replica sweeping", leader, successor, took)
		}
		t.Logf("every forge request of the leader hangs: the successor's first complete pass came %v after the hang (interval 1m)", took)
		// Three passes cancelled at their deadline, the release, one retry,
		// and the successor's first pass one interval after its term began.
		if max := 6 * time.Minute; took > max {
			t.Errorf("successor's first complete pass %v after the hang, want at most %v", took, max)
		}
		if got := metricValue(t, replicaOf(c, leader).handler, "iterion_net_pass_timeouts_total"); got < 3 {
			t.Errorf("iterion_net_pass_timeouts_total on the old leader: got %v, want at least 3: each pass cancelled at its deadline is counted", got)
		}
		if got := metricValue(t, replicaOf(c, leader).handler, "iterion_net_stalls_total"); got < 1 {
			t.Errorf("iterion_net_stalls_total on the old leader: got %v, want at least 1: the stalled term is counted", got)
		}
		rr := httptest.NewRecorder()
		replicaOf(c, leader).handler.ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		if rr.Code != http.StatusOK {
			t.Errorf("old leader's /healthz: got %d, want 200: its work returned", rr.Code)
		}
	})
}

// TestStalledPassFailsHealthz pins that /healthz fails when a pass ignores
// its cancellation: past its deadline plus the health bound (TTL/6).
func TestStalledPassFailsHealthz(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newCluster(t, 3)
		hf := &hangingForge{next: next}
		startReplicas(t, c, hf, 1, time.Minute, nil)
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		r := c.replicas[0]
		hf.hang(r.token, true)
		healthz := func() int {
			rr := httptest.NewRecorder()
			r.handler.ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			return rr.Code
		}
		// The pass at 2m hangs; its deadline is 3m, the bound 30s.
		time.Sleep(2*time.Minute + 20*time.Second)
		synctest.Wait()
		if got := healthz(); got != http.StatusOK {
			t.Errorf("/healthz within the bound after the deadline: got %d, want 200", got)
		}
		time.Sleep(15 * time.Second)
		synctest.Wait()
		if got := healthz(); got != http.StatusServiceUnavailable {
			t.Errorf("/healthz past the deadline plus the bound: got %d, want 503: a stalled pass fails the liveness check", got)
		}
		close(hf.release)
		r.stop()
	})
}

// metricValue is the sum of the samples of metric name that h's /metrics
// serves (0 when there are none).
func metricValue(t *testing.T, h http.Handler, name string) float64 {
	t.Helper()
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	sum := 0.0
	for line := range strings.Lines(rr.Body.String()) {
		f := strings.Fields(line)
		if len(f) != 2 || (f[0] != name && !strings.HasPrefix(f[0], name+"{")) {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			t.Fatalf("/metrics: %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// TestOneHungRequestStallsTheNetNoLongerThanItsTimeout pins the forge
// request deadline in virtual time: with the default --forge-timeout of a
// one-minute net (15 s), one request that never answers is cut off, and the
// net's next complete pass ends within the request timeout plus one
// interval of that request's start.
func TestOneHungRequestStallsTheNetNoLongerThanItsTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newCluster(t, 3)
		hf := &hangingForge{next: next}
		timeout := forge.RequestTimeout(time.Minute)
		startReplicas(t, c, hf, 1, time.Minute, func(cfg *server.Config) {
			fc, err := forge.New(forge.Config{BaseURL: "http://sim/", Token: "token-1", Next: hf, Timeout: timeout})
			if err != nil {
				t.Fatal(err)
			}
			cfg.Forge = fc
		})
		r := c.replicas[0]
		defer r.stop()
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		hf.mu.Lock()
		hf.token, hf.once = r.token, true
		hf.mu.Unlock()
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		hf.mu.Lock()
		hungAt := hf.hungAt
		hf.mu.Unlock()
		if hungAt.IsZero() {
			t.Fatal("no request hung")
		}
		var resumed time.Time
		for _, p := range passesOf(c) {
			if p.Complete && p.At.After(hungAt) {
				resumed = p.At
				break
			}
		}
		stall := resumed.Sub(hungAt)
		t.Logf("one hung forge request (timeout %v): the next complete pass began %v after it was sent (interval 1m)", timeout, stall)
		if resumed.IsZero() || stall > timeout+time.Minute {
			t.Errorf("next complete pass %v after the hung request, want at most the request timeout plus one interval (%v)", stall, timeout+time.Minute)
		}
	})
}
