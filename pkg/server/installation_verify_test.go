package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/server"
)

// getInstallationRoute is the simulator's route of "Get an installation
// for the authenticated app", the check of a deleted or suspend event.
const getInstallationRoute = "GET /app/installations/{id}"

// unreachable fails every request with a transport error while on, as a
// forge the replica cannot reach does, and passes them to next otherwise.
type unreachable struct {
	next http.RoundTripper
	on   atomic.Bool
}

func (u *unreachable) RoundTrip(req *http.Request) (*http.Response, error) {
	if !u.on.Load() {
		return u.next.RoundTrip(req)
	}
	if req.Body != nil {
		req.Body.Close()
	}
	return nil, errors.New("dial tcp: connection refused")
}

// removedEvent is the installation_repositories "removed" payload taking
// repos off installation id.
func removedEvent(id int64, repos ...string) string {
	refs := make([]string, len(repos))
	for i, full := range repos {
		refs[i] = fmt.Sprintf(`{"full_name":%q}`, full)
	}
	return fmt.Sprintf(`{"action":"removed","installation":{"id":%d,"account":{"login":"org-%d"}},"repository_selection":"selected",`+
		`"repositories_added":[],"repositories_removed":[%s]}`, id, id, strings.Join(refs, ","))
}

// TestAppModeADestructiveInstallationEventIsCheckedWithGitHub pins that
// an installation event that would make the server forget something is
// applied only once GitHub confirms it: a captured "deleted" or
// "suspend" sent again while GitHub still has the installation, or a
// "removed" while the installation still covers the repository, is
// answered 200 with not_applied and changes nothing; one GitHub confirms
// is applied; one GitHub was not reached for is 503 with Retry-After and
// changes nothing.
func TestAppModeADestructiveInstallationEventIsCheckedWithGitHub(t *testing.T) {
	cases := []struct {
		name string
		// gone makes what the event says true at the simulator.
		gone    func(*forgesim.Sim) error
		event   string
		body    string
		down    bool
		code    int
		applied bool
		why     string
	}{
		{"deleted replayed", nil, "installation", installationEvent("deleted", 1), false, http.StatusOK, false,
			"GitHub still has the installation: a replayed deleted is not applied"},
		{"suspend replayed", nil, "installation", installationEvent("suspend", 1), false, http.StatusOK, false,
			"GitHub has the installation, not suspended: a replayed suspend is not applied"},
		{"deleted for real", func(s *forgesim.Sim) error { return s.RemoveInstallation(1) }, "installation", installationEvent("deleted", 1), false, http.StatusOK, true,
			"GitHub answers 404 for the installation: the deletion is applied"},
		{"deleted, GitHub unreachable", func(s *forgesim.Sim) error { return s.RemoveInstallation(1) }, "installation", installationEvent("deleted", 1), true, http.StatusServiceUnavailable, false,
			"an unverified deletion is never applied; GitHub's redelivery retries it"},
		{"removed replayed", nil, "installation_repositories", removedEvent(1, appRepo(1)), false, http.StatusOK, false,
			"the installation still covers the repository: a replayed removed is not applied"},
		{"removed for real", func(s *forgesim.Sim) error { return s.RemoveInstallationRepos(1, appRepo(1)) }, "installation_repositories", removedEvent(1, appRepo(1)), false, http.StatusOK, true,
			"no installation covers the repository: the removal is applied"},
		{"removed, GitHub unreachable", func(s *forgesim.Sim) error { return s.RemoveInstallationRepos(1, appRepo(1)) }, "installation_repositories", removedEvent(1, appRepo(1)), true, http.StatusServiceUnavailable, false,
			"an unverified removal is never applied"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, next := newAppCluster(t, 2, false)
				down := &unreachable{next: next}
				var reg *prometheus.Registry
				const storeTimeout, offerTimeout = server.DefaultStoreTimeout, 10 * time.Second // the defaults, named
				startAppReplicas(t, c, down, 1, time.Minute, 2, func(cfg *server.Config) {
					reg, cfg.StoreTimeout, cfg.OfferTimeout = cfg.Registry, storeTimeout, offerTimeout
				})
				r := c.replicas[0]
				defer r.stop()
				synctest.Wait() // the first list of the installations
				owner, name, _ := strings.Cut(appRepo(1), "/")
				if _, _, err := r.app.ForRepo(context.Background(), owner, name); err != nil {
					t.Fatalf("ForRepo(%s) before the event: %v", appRepo(1), err)
				}
				if tc.gone != nil {
					if err := tc.gone(c.sim); err != nil {
						t.Fatal(err)
					}
				}
				down.on.Store(tc.down)
				w := r.serve("POST", "/webhooks/github", tc.event, tc.body)
				down.on.Store(false)
				if w.Code != tc.code {
					t.Errorf("got %d %s, want %d: %s", w.Code, w.Body, tc.code, tc.why)
				}
				// Nothing was applied, and the claim holds until its hold
				// lapses: a redelivery sooner would be held again.
				hold := strconv.Itoa(int(server.ClaimHold(storeTimeout, offerTimeout).Seconds()))
				if got := w.Header().Get("Retry-After"); tc.code == http.StatusServiceUnavailable && got != hold {
					t.Errorf("503 with Retry-After %q, want %s, the claim's hold: %s", got, hold, tc.why)
				}
				outcome := "processed"
				if tc.code == http.StatusServiceUnavailable {
					outcome = "unavailable"
				}
				if got := deliveriesOutcome(t, reg, outcome); got != 1 {
					t.Errorf("webhook_deliveries_total{outcome=%q}: got %v, want 1: an installation event counts its outcome", outcome, got)
				}
				if said := strings.Contains(w.Body.String(), "not_applied"); tc.code == http.StatusOK && said == tc.applied {
					t.Errorf("answer %s: not_applied said %v, want %v: %s", w.Body, said, !tc.applied, tc.why)
				}
				var forgot bool
				if tc.event == "installation" {
					_, err := r.app.Installation(1)
					forgot = err != nil
				} else {
					// A repository still resolved to installation 1 is
					// served from the cache, with no request.
					before := c.sim.Requests(forgesim.Filter{Route: "GET /repos/{owner}/{repo}/installation"})
					_, _, err := r.app.ForRepo(context.Background(), owner, name)
					after := c.sim.Requests(forgesim.Filter{Route: "GET /repos/{owner}/{repo}/installation"})
					forgot = after != before || errors.Is(err, forge.ErrNotInstalled)
				}
				if forgot != tc.applied {
					t.Errorf("forgotten: %v, want %v: %s", forgot, tc.applied, tc.why)
				}
				if told := newsLeases(t, c); (len(told) > 0) != tc.applied {
					t.Errorf("news told the other replicas: %v, want some only when the event was applied: %s", told, tc.why)
				}
			})
		})
	}
}

// TestAppModeAnInstallationEventIsProcessedOncePerBody pins that an
// installation event is deduplicated by its body, as pull_request and
// status events are: the same signed body sent again within the delivery
// window, under a fresh delivery id, is 200 {"duplicate": id} and neither
// asks GitHub again nor applies anything.
func TestAppModeAnInstallationEventIsProcessedOncePerBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newAppCluster(t, 2, false)
		var reg *prometheus.Registry
		startAppReplicas(t, c, next, 1, time.Minute, 2, func(cfg *server.Config) { reg = cfg.Registry })
		r := c.replicas[0]
		defer r.stop()
		synctest.Wait()
		body := installationEvent("deleted", 1)
		if w := r.serve("POST", "/webhooks/github", "installation", body); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "not_applied") {
			t.Fatalf("first delivery: %d %s, want 200 not_applied", w.Code, w.Body)
		}
		checks := c.sim.Requests(forgesim.Filter{Route: getInstallationRoute})
		if checks != 1 {
			t.Errorf("checks of installation 1 with GitHub: %d, want 1", checks)
		}
		if err := c.sim.RemoveInstallation(1); err != nil {
			t.Fatal(err)
		}
		w := r.serve("POST", "/webhooks/github", "installation", body)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"duplicate"`) {
			t.Errorf("same body again: %d %s, want 200 duplicate: a body processed within the window is not processed again", w.Code, w.Body)
		}
		if n := c.sim.Requests(forgesim.Filter{Route: getInstallationRoute}); n != checks {
			t.Errorf("checks after the duplicate: %d, want %d: a duplicate asks GitHub nothing", n, checks)
		}
		if _, err := r.app.Installation(1); err != nil {
			t.Errorf("installation 1 after the duplicate: %v, want known: a duplicate applies nothing", err)
		}
		if p, d := deliveriesOutcome(t, reg, "processed"), deliveriesOutcome(t, reg, "duplicate"); p != 1 || d != 1 {
			t.Errorf("webhook_deliveries_total processed %v, duplicate %v: want 1 and 1", p, d)
		}
	})
}

// TestAppModeRepositoriesAddedAreAppliedOnlyWhereGitHubSaysTheyAreCovered
// pins the check of an installation_repositories event that adds: its body
// is signed once and can be sent again long after (a redelivery, a
// replay), when the repositories it adds were removed since. Each added
// repository is checked with GitHub: one the installation covers is
// added and its unsettled runs move to the installation; one it does not
// cover is named in not_applied {"not_covered": [...]}, stays unresolved
// (the next ForRepo asks GitHub, which says no installation covers it),
// and its runs stay where they are. When GitHub does not answer, an
// event that only adds is applied unchecked, so an outage loses no
// genuine addition.
func TestAppModeRepositoriesAddedAreAppliedOnlyWhereGitHubSaysTheyAreCovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newAppCluster(t, 2, false)
		down := &unreachable{next: next}
		startAppReplicas(t, c, down, 1, time.Minute, 2, nil)
		r := c.replicas[0]
		defer r.stop()
		synctest.Wait() // the first list of the installations
		const added, removed, unchecked = "org-1/added", "org-1/removed", "org-1/unchecked"
		for _, repo := range []string{added, removed, unchecked} {
			if err := c.sim.AddInstallationRepos(1, repo); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.sim.RemoveInstallationRepos(1, removed); err != nil { // the replay comes after this
			t.Fatal(err)
		}
		runOf := func(repo string) gaterun.Run {
			return gaterun.Run{ID: gaterun.ID("github.com", repo, 1, "sha-x"), Host: "github.com", Repo: repo, Pull: 1, HeadSHA: "sha-x",
				Context: gaterun.DefaultContext, Verdict: gaterun.VerdictSuccess, Installation: 2}
		}
		for _, repo := range []string{added, removed} {
			if _, err := c.runs.Put(context.Background(), runOf(repo), time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		addedEvent := func(repos ...string) string {
			refs := make([]string, len(repos))
			for i, full := range repos {
				refs[i] = fmt.Sprintf(`{"full_name":%q}`, full)
			}
			return fmt.Sprintf(`{"action":"added","installation":{"id":1,"account":{"login":"org-1"}},"repository_selection":"selected",`+
				`"repositories_added":[%s],"repositories_removed":[]}`, strings.Join(refs, ","))
		}
		resolvedTo := func(repo string) (int64, error) {
			owner, name, _ := strings.Cut(repo, "/")
			_, id, err := r.app.ForRepo(context.Background(), owner, name)
			return id, err
		}

		code, body := r.call(t, "POST", "/webhooks/github", "installation_repositories", addedEvent(added, removed))
		var answer struct {
			RunsMoved  int `json:"runs_moved"`
			NotApplied struct {
				NotCovered []string `json:"not_covered"`
			} `json:"not_applied"`
		}
		if err := json.Unmarshal([]byte(body), &answer); code != http.StatusOK || err != nil ||
			fmt.Sprint(answer.NotApplied.NotCovered) != "["+removed+"]" || answer.RunsMoved != 1 {
			t.Errorf("added %s and %s, GitHub covering only the first: %d %s; want 200, runs_moved 1, not_applied {\"not_covered\": [%s]}: a repository GitHub says the installation does not cover is not added",
				added, removed, code, body, removed)
		}
		for _, tc := range []struct {
			repo  string
			under int64
			rule  string
		}{
			{added, 1, "the run of a repository GitHub says the installation covers moves to it"},
			{removed, 2, "the run of a repository not added stays where it is"},
		} {
			got, err := c.runs.Get(context.Background(), runOf(tc.repo).ID)
			if err != nil || got.Installation != tc.under {
				t.Errorf("run of %s: installation %d, %v; want %d: %s", tc.repo, got.Installation, err, tc.under, tc.rule)
			}
		}
		if id, err := resolvedTo(removed); !errors.Is(err, forge.ErrNotInstalled) {
			t.Errorf("ForRepo(%s) after the replayed addition = %d, %v; want ErrNotInstalled: GitHub says no installation covers it", removed, id, err)
		}

		down.on.Store(true)
		code, body = r.call(t, "POST", "/webhooks/github", "installation_repositories", addedEvent(unchecked))
		down.on.Store(false)
		if code != http.StatusOK || strings.Contains(body, "not_applied") {
			t.Errorf("added %s while GitHub is unreachable: %d %s; want 200 without not_applied: an addition GitHub did not answer for is applied unchecked", unchecked, code, body)
		}
		checks := c.sim.Requests(forgesim.Filter{Route: "GET /repos/{owner}/{repo}/installation"})
		if id, err := resolvedTo(unchecked); err != nil || id != 1 ||
			c.sim.Requests(forgesim.Filter{Route: "GET /repos/{owner}/{repo}/installation"}) != checks {
			t.Errorf("ForRepo(%s) after the unchecked addition = %d, %v; want 1 from the cache, without a request: it was applied", unchecked, id, err)
		}
	})
}
