package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/pkg/delivery"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
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

// removedManyEvent is the installation_repositories "removed" payload
// taking repos off installation id.
func removedManyEvent(id int64, repos []string) string {
	refs := make([]string, len(repos))
	for i, full := range repos {
		refs[i] = fmt.Sprintf(`{"full_name":%q}`, full)
	}
	return fmt.Sprintf(`{"action":"removed","installation":{"id":%d,"account":{"login":"org-%d"}},"repository_selection":"selected",`+
		`"repositories_added":[],"repositories_removed":[%s]}`, id, id, strings.Join(refs, ","))
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
		body := removedManyEvent(1, append(removed[:40:40], kept))
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
