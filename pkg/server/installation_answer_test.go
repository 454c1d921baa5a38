package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/pkg/delivery"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// slowCheck is a latency model in which GitHub takes 9 s to answer
// "Get an installation for the authenticated app", the check of a deleted
// event, and answers everything else at once.
func slowCheck() forgesim.Option {
	return forgesim.WithLatency(forgesim.Latency{REST: map[string]time.Duration{getInstallationRoute: 9 * time.Second}})
}

// TestAppModeASlowInstallationEventIsAnsweredAtTheDeadlineAndStillApplied
// pins that an installation event is answered within
// --webhook-answer-within as a pull_request one is: a deleted whose check
// with GitHub takes 9 s is answered 202 {"processing": id} at the
// deadline, under GitHub's 10 s, and is still applied and recorded once
// GitHub answers, so the same body sent again is a duplicate.
func TestAppModeASlowInstallationEventIsAnsweredAtTheDeadlineAndStillApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newAppCluster(t, 2, false, slowCheck())
		var reg *prometheus.Registry
		startAppReplicas(t, c, next, 1, time.Minute, 2, func(cfg *server.Config) { reg = cfg.Registry })
		r := c.replicas[0]
		defer r.stop()
		synctest.Wait() // the first list of the installations
		if err := c.sim.RemoveInstallation(1); err != nil {
			t.Fatal(err)
		}
		body := installationEvent("deleted", 1)
		start := time.Now()
		w := r.serve("POST", "/webhooks/github", "installation", body)
		if took := time.Since(start); w.Code != http.StatusAccepted || took != server.DefaultWebhookAnswerWithin || !strings.Contains(w.Body.String(), `"processing"`) {
			t.Fatalf("deleted whose check takes 9 s: got %d %s after %v, want 202 processing after %v: an installation event is answered within --webhook-answer-within, under GitHub's 10 s",
				w.Code, w.Body, took, server.DefaultWebhookAnswerWithin)
		}
		time.Sleep(2 * time.Second) // GitHub's answer, and the completion
		synctest.Wait()
		if _, err := r.app.Installation(1); !errors.Is(err, forge.ErrNotInstalled) {
			t.Errorf("installation 1 after the check: %v, want ErrNotInstalled: the processing goes on after the 202 and applies the deletion GitHub confirmed", err)
		}
		for _, o := range []struct {
			outcome string
			want    float64
		}{{"answered_before_processed", 1}, {"processed_after_answer", 1}, {"failed_after_answer", 0}, {"processed", 0}} {
			if got := deliveriesOutcome(t, reg, o.outcome); got != o.want {
				t.Errorf("webhook_deliveries_total{outcome=%q}: got %v, want %v: an installation event answered early is counted as the others are", o.outcome, got, o.want)
			}
		}
		w = r.serve("POST", "/webhooks/github", "installation", body)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"duplicate"`) {
			t.Errorf("same body after its processing: got %d %s, want 200 duplicate: the delivery was recorded after its 202", w.Code, w.Body)
		}
	})
}

// TestAppModeShutdownDrainsTheInstallationEventsBeingProcessed pins that
// an installation event answered 202 is processed on the server's
// deliveries, not on its request: Run waits for it within the shutdown
// timeout, and past it cancels it unapplied and unrecorded, so its claim
// lapses and a redelivery is processed.
func TestAppModeShutdownDrainsTheInstallationEventsBeingProcessed(t *testing.T) {
	cases := []struct {
		name     string
		shutdown time.Duration
		want     delivery.Claim
		outcome  string
		why      string
	}{
		{"within the shutdown timeout", 10 * time.Second, delivery.Done, "processed_after_answer",
			"Run waits for the installation event answered early to be applied and recorded"},
		{"past the shutdown timeout", 3 * time.Second, delivery.Held, "failed_after_answer",
			"Run cancels the check at the shutdown timeout: nothing is applied, and the delivery is not recorded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, next := newAppCluster(t, 2, false, slowCheck())
				deliveries := delivery.NewMemoryStore()
				var reg *prometheus.Registry
				startAppReplicas(t, c, next, 1, time.Minute, 2, func(cfg *server.Config) {
					reg = cfg.Registry
					cfg.Deliveries, cfg.WebhookAnswerWithin, cfg.ShutdownTimeout = deliveries, 2*time.Second, tc.shutdown
				})
				r := c.replicas[0]
				synctest.Wait()
				if err := c.sim.RemoveInstallation(1); err != nil {
					t.Fatal(err)
				}
				body := installationEvent("deleted", 1)
				if w := r.serve("POST", "/webhooks/github", "installation", body); w.Code != http.StatusAccepted {
					t.Errorf("deleted whose check takes 9 s: got %d %s, want 202", w.Code, w.Body) // not Fatal: stop must run
				}
				r.stop()
				got, err := deliveries.Claim(context.Background(), server.ReplayKey([]byte(body)), time.Now(), time.Second)
				if err != nil || got != tc.want {
					t.Errorf("the delivery after Run returned: got %v, %v, want %v: %s", got, err, tc.want, tc.why)
				}
				if got := deliveriesOutcome(t, reg, tc.outcome); got != 1 {
					t.Errorf("webhook_deliveries_total{outcome=%q}: got %v, want 1: %s", tc.outcome, got, tc.why)
				}
			})
		})
	}
}

// TestAppModeALargeRemovalIsApplied pins that a removal of many
// repositories at once can be applied under GitHub's latency (a second a
// request, two a page of 100): an organisation taking 40 repositories off
// the App is checked against one list of the installation's repositories,
// not 40 requests that cannot fit the 10 s the check may take, so it is
// applied and recorded rather than answered 503 at every redelivery;
// the repositories it names that the installation still covers are kept.
func TestAppModeALargeRemovalIsApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newAppCluster(t, 2, false, forgesim.WithLatency(forgesim.Latency{RESTDefault: time.Second, RESTPage: 2 * time.Second}))
		var repos []string
		for i := 2; i <= 42; i++ {
			repos = append(repos, fmt.Sprintf("org-1/repo-%d", i))
		}
		if err := c.sim.AddInstallationRepos(1, repos...); err != nil {
			t.Fatal(err)
		}
		var reg *prometheus.Registry
		startAppReplicas(t, c, next, 1, time.Minute, 2, func(cfg *server.Config) { reg = cfg.Registry })
		r := c.replicas[0]
		defer r.stop()
		time.Sleep(time.Minute) // the first list of the installations, under the latency model
		synctest.Wait()
		removed, kept := repos[:40], repos[40]
		for _, full := range []string{removed[0], kept} {
			owner, name, _ := strings.Cut(full, "/")
			if _, _, err := r.app.ForRepo(context.Background(), owner, name); err != nil {
				t.Fatalf("ForRepo(%s) before the event: %v", full, err)
			}
		}
		if err := c.sim.RemoveInstallationRepos(1, removed...); err != nil {
			t.Fatal(err)
		}
		body := removedEvent(1, append(removed[:40:40], kept)...)
		start := time.Now()
		w := r.serve("POST", "/webhooks/github", "installation_repositories", body)
		if w.Code != http.StatusOK && w.Code != http.StatusAccepted {
			t.Fatalf("removal of 40 repositories: got %d %s after %v, want 200 or 202: it is checked in one list, not 40 requests", w.Code, w.Body, time.Since(start))
		}
		time.Sleep(server.DefaultWebhookAnswerWithin) // a processing answered early ends within the claim's hold
		synctest.Wait()
		if p, late := deliveriesOutcome(t, reg, "processed"), deliveriesOutcome(t, reg, "processed_after_answer"); p+late != 1 {
			t.Errorf("webhook_deliveries_total processed %v, processed_after_answer %v: want one of them 1: the removal was processed", p, late)
		}
		owner, name, _ := strings.Cut(removed[0], "/")
		if _, _, err := r.app.ForRepo(context.Background(), owner, name); !errors.Is(err, forge.ErrNotInstalled) {
			t.Errorf("ForRepo(%s) after the removal: %v, want ErrNotInstalled: the removal GitHub confirmed is applied", removed[0], err)
		}
		owner, name, _ = strings.Cut(kept, "/")
		before := c.sim.Requests(forgesim.Filter{Route: "GET /repos/{owner}/{repo}/installation"})
		if _, id, err := r.app.ForRepo(context.Background(), owner, name); err != nil || id != 1 {
			t.Errorf("ForRepo(%s) after the removal: installation %d, %v; want 1: a repository the installation still covers is kept", kept, id, err)
		}
		if n := c.sim.Requests(forgesim.Filter{Route: "GET /repos/{owner}/{repo}/installation"}); n != before {
			t.Errorf("ForRepo(%s) asked GitHub again (%d requests), want it still cached: a repository GitHub says is covered is not forgotten", kept, n-before)
		}
		w = r.serve("POST", "/webhooks/github", "installation_repositories", body)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"duplicate"`) {
			t.Errorf("same body again: got %d %s, want 200 duplicate: the removal was recorded as processed", w.Code, w.Body)
		}
	})
}

// The stores of TestAppModeAnInstallationEventsClaimHoldsUntilItsCompletion,
// each answering one step of an installation event's processing just
// within the store timeout (lag, slept in virtual time before the call
// is passed on); of the claims, only the first.
type (
	slowClaims struct {
		delivery.Store
		lag  time.Duration
		once atomic.Bool
	}
	slowNews struct {
		*lease.MemoryStore
		lag time.Duration
	}
	slowMoves struct {
		gaterun.Store
		lag time.Duration
	}
)

func (s *slowClaims) Claim(ctx context.Context, id string, now time.Time, hold time.Duration) (delivery.Claim, error) {
	if s.once.CompareAndSwap(false, true) {
		time.Sleep(s.lag)
	}
	return s.Store.Claim(ctx, id, now, hold)
}

func (s *slowClaims) Complete(ctx context.Context, id string, now time.Time, window time.Duration) error {
	time.Sleep(s.lag)
	return s.Store.Complete(ctx, id, now, window)
}

func (s *slowNews) Acquire(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (bool, error) {
	if strings.HasPrefix(name, "app-installations-changed/") {
		time.Sleep(s.lag)
	}
	return s.MemoryStore.Acquire(ctx, name, owner, now, ttl)
}

func (s *slowMoves) List(ctx context.Context, q gaterun.Query) ([]gaterun.Run, error) {
	if q.Repo != "" { // the runs of an added repository (moveRuns), not a sweep's
		time.Sleep(s.lag)
	}
	return s.Store.List(ctx, q)
}

// TestAppModeAnInstallationEventsClaimHoldsUntilItsCompletion pins that
// a delivery's claim holds for all of an installation_repositories
// event's processing, each step answered just within its bound: the
// claim, GitHub's check of a removed repository (the offer timeout), the
// news lease, the runs of an added repository moved, and the completion.
// A redelivery reaching another replica before the completion is held
// (503), never processed beside it.
func TestAppModeAnInstallationEventsClaimHoldsUntilItsCompletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const storeTimeout, offerTimeout, margin = 3 * time.Second, 10 * time.Second, time.Millisecond
		c, next := newAppCluster(t, 2, false, forgesim.WithLatency(forgesim.Latency{REST: map[string]time.Duration{
			"GET /repos/{owner}/{repo}/installation": offerTimeout - margin}}))
		claims := &slowClaims{Store: delivery.NewMemoryStore(), lag: storeTimeout - margin}
		news := &slowNews{MemoryStore: c.leases, lag: storeTimeout - margin}
		moves := &slowMoves{Store: c.runs, lag: storeTimeout - margin}
		startAppReplicas(t, c, next, 2, time.Minute, 2, func(cfg *server.Config) {
			cfg.Deliveries, cfg.Leases, cfg.Runs = claims, news, moves
			cfg.StoreTimeout, cfg.OfferTimeout = storeTimeout, offerTimeout
		})
		a, b := c.replicas[0], c.replicas[1]
		defer a.stop()
		defer b.stop()
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := c.sim.AddInstallationRepos(2, "org-1/repo-1"); err != nil { // GitHub moves it from installation 1
			t.Fatal(err)
		}
		if err := c.sim.AddInstallationRepos(1, "org-1/repo-2"); err != nil {
			t.Fatal(err)
		}
		// The payload has both lists; the server processes both.
		body := `{"action":"removed","installation":{"id":1,"account":{"login":"org-1"}},"repository_selection":"selected",` +
			`"repositories_added":[{"full_name":"org-1/repo-2"}],"repositories_removed":[{"full_name":"org-1/repo-1"}]}`
		processing := 4*(storeTimeout-margin) + offerTimeout - margin
		// past three store timeouts and the offer timeout, before the completion
		sentAgainWhileProcessed(t, a, b, "installation_repositories", body, processing-2*time.Second)
	})
}

// lateReads is a transport to the simulator that, while on, holds each
// request for path until margin before its context's deadline, then
// passes it on: GitHub answering it just within the caller's bound. The
// hold is slept in virtual time; a request whose context ends first is
// not sent.
type lateReads struct {
	next   http.RoundTripper
	path   string
	margin time.Duration
	on     atomic.Bool
}

func (l *lateReads) RoundTrip(req *http.Request) (*http.Response, error) {
	if deadline, ok := req.Context().Deadline(); ok && l.on.Load() && req.URL.Path == l.path {
		t := time.NewTimer(time.Until(deadline) - l.margin)
		defer t.Stop()
		select {
		case <-t.C:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return l.next.RoundTrip(req)
}

// TestAppModeAPullRequestsClaimHoldsThroughASuspensionCheck pins the
// claim's hold, five store timeouts and two offer timeouts, against the
// longest processing it counts: a pull_request delivery in App mode whose
// offer meets a suspension whose webhook was lost, each step answered just
// within its bound. The claim, the runs lookup, the offer (its re-read of
// the run and its read GitHub refuses for the suspension, together just
// within the offer timeout), GitHub's check of the installation (just
// within an offer timeout of its own: offerAll's checkRefused), the two
// news leases of an installation gone and suspended, and the completion.
// The body sent again to another replica while the completion is on its
// way, a second before it ends, is held (503), never claimed and processed
// beside it: a hold a store timeout or an offer timeout shorter has
// lapsed by then.
func TestAppModeAPullRequestsClaimHoldsThroughASuspensionCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const storeTimeout, offerTimeout, margin = 3 * time.Second, 10 * time.Second, time.Millisecond
		// Passes every 10 minutes: the next comes 5 minutes after the
		// delivery, so neither replica sweeps or reads the news while it is
		// being processed.
		const interval = 10 * time.Minute
		c, sim := newAppCluster(t, 2, true)
		next := &lateReads{next: sim, path: "/repos/org-1/repo-1/pulls/2", margin: margin}
		claims := &slowClaims{Store: delivery.NewMemoryStore(), lag: storeTimeout - margin}
		news := &slowNews{MemoryStore: c.leases, lag: storeTimeout - margin}
		startAppReplicas(t, c, next, 2, interval, 2, func(cfg *server.Config) {
			cfg.Deliveries, cfg.Leases, cfg.Runs = claims, news, slowRuns{Store: c.runs, d: storeTimeout - margin}
			cfg.StoreTimeout, cfg.OfferTimeout = storeTimeout, offerTimeout
		})
		defer c.stopAll()
		time.Sleep(3*interval + interval/2)
		synctest.Wait()
		// a sweeps installation 1, so holds a token minted before the
		// suspension; b learns of the suspension only from the news.
		a, b := holderOf(t, c, 2, 1), notSweeping(t, c, 2, 1)
		event := seedSecondPull(t, c)
		if err := c.sim.SuspendInstallation(1); err != nil { // no webhook is set: it is lost
			t.Fatal(err)
		}
		if err := c.sim.SetLatency(forgesim.Latency{REST: map[string]time.Duration{getInstallationRoute: offerTimeout - margin}}); err != nil {
			t.Fatal(err)
		}
		next.on.Store(true)
		processing := 5*(storeTimeout-margin) + 2*(offerTimeout-margin)
		sentAgainWhileProcessed(t, a, b, "pull_request", event, processing-time.Second) // the completion is on its way
		if s := a.app.Suspended(); len(s) != 1 || s[0].ID != 1 {
			t.Errorf("Suspended() = %+v, want installation 1: the offer's refused read had GitHub asked", s)
		}
		if n := requestsBy(c.sim, 1, "GET /repos/{owner}/{repo}/pulls/{number}", http.StatusForbidden); n != 1 {
			t.Errorf("reads of the pull refused for the suspension: %d, want 1: the offer's read reached GitHub, late, and was refused", n)
		}
	})
}

// sentAgainWhileProcessed serves hook delivery body to replica a and, after
// after, the same body to replica b, while a's processing goes on: b's
// answer must be 503 (a's claim holds), and a's 202 (its processing
// outlasts --webhook-answer-within).
func sentAgainWhileProcessed(t *testing.T, a, b *replica, hook, body string, after time.Duration) {
	t.Helper()
	start := time.Now()
	var first *httptest.ResponseRecorder
	served := make(chan struct{})
	go func() {
		defer close(served)
		first = a.serve("POST", "/webhooks/github", hook, body)
	}()
	time.Sleep(after)
	at := time.Since(start)
	if w := b.serve("POST", "/webhooks/github", hook, body); w.Code != http.StatusServiceUnavailable {
		t.Errorf("the body sent again to another replica %v after the claim, the first still being processed: got %d %s, want 503: a claim holds until its processing ends, so one delivery is never processed twice at once",
			at, w.Code, w.Body)
	}
	<-served
	time.Sleep(time.Minute)
	synctest.Wait()
	if first.Code != http.StatusAccepted {
		t.Errorf("first delivery: got %d %s, want 202: its processing outlasts --webhook-answer-within", first.Code, first.Body)
	}
}

// TestAppModeAnUnreadablePayloadIsCountedInvalid pins App mode's 400 for
// a signed payload it cannot read: each is counted once in
// webhook_deliveries_total{outcome="invalid"}, as a pull_request or status
// payload the token mode cannot read is, and nothing else is counted.
func TestAppModeAnUnreadablePayloadIsCountedInvalid(t *testing.T) {
	cases := []struct {
		event, body, why string
	}{
		{"installation", `{"action":"created","installation":"seven"}`, "an installation whose installation is not an object"},
		{"installation_repositories", `{"action":"added","repositories_added":"all"}`, "an installation_repositories event whose repositories are not a list"},
		{"pull_request", `{"action":"closed","installation":{"id":"one"}}`, "a pull_request whose installation id is not a number"},
		{"status", `{"sha":7}`, "a status whose sha is not a string"},
	}
	f := newViewFixture(t, 1)
	for _, c := range cases {
		t.Run(c.event, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			r := f.replica(t, "replica-a", func(cfg *server.Config) { cfg.Registry, cfg.WebhookSecret = reg, webhookSecret })
			code, body := (&httpFixture{url: r.url}).postHook(t, c.event, sign(webhookSecret, c.body), c.body)
			if code != http.StatusBadRequest {
				t.Fatalf("%s: got %d %s, want 400", c.why, code, body)
			}
			for _, o := range []string{"invalid", "processed", "duplicate", "held", "unavailable"} {
				want := 0.0
				if o == "invalid" {
					want = 1
				}
				if got := deliveriesOutcome(t, reg, o); got != want {
					t.Errorf("webhook_deliveries_total{outcome=%q}: got %v, want %v: %s is a 400, counted invalid once", o, got, want, c.why)
				}
			}
		})
	}
}
