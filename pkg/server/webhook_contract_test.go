package server_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/internal/testing/githubcontract"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/server"
)

// postTyped posts body as a delivery of event in contentType, signed
// over body as sent.
func (f *httpFixture) postTyped(t *testing.T, event, contentType, body string) (int, string) {
	t.Helper()
	return f.do(t, "POST", "/webhooks/github", map[string]string{
		"X-GitHub-Event": event, "Content-Type": contentType, "X-Hub-Signature-256": sign(webhookSecret, body),
		"X-GitHub-Delivery": rand.Text(),
	}, body)
}

// formBody is a form-encoded delivery of payload, as a repository webhook
// of content type application/x-www-form-urlencoded sends it.
func formBody(payload string) string { return url.Values{"payload": {payload}}.Encode() }

// TestWebhookFormEncodedDelivery pins GitHub's second content type: the
// JSON payload in the form parameter payload, the signature over the body
// as sent (the form), the event read from the decoded payload.
func TestWebhookFormEncodedDelivery(t *testing.T) {
	payload := `{"action": "synchronize", "number": 12, "pull_request": {"number": 12}, "repository": {"full_name": "acme/app"}}`
	t.Run("signed form is processed", func(t *testing.T) {
		f := newHTTPFixture(t)
		f.putRun(t, gaterun.VerdictSuccess)
		code, resp := f.postTyped(t, "pull_request", "application/x-www-form-urlencoded", formBody(payload))
		if code != http.StatusOK || !strings.Contains(resp, `"offered":1`) {
			t.Fatalf("got %d %s, want 200 offered 1: a form-encoded delivery's payload parameter is the event", code, resp)
		}
		if st := gateState(t, f.forge, headSHA); st != "success" {
			t.Errorf("gate context %q, want success: the offered run was published", st)
		}
	})
	t.Run("signature over the decoded payload is refused", func(t *testing.T) {
		f := newHTTPFixture(t)
		f.putRun(t, gaterun.VerdictSuccess)
		code, _ := f.do(t, "POST", "/webhooks/github", map[string]string{
			"X-GitHub-Event": "pull_request", "Content-Type": "application/x-www-form-urlencoded",
			"X-Hub-Signature-256": sign(webhookSecret, payload), "X-GitHub-Delivery": rand.Text(),
		}, formBody(payload))
		if code != http.StatusUnauthorized {
			t.Errorf("status %d, want 401: GitHub signs the body as sent, the form, not the payload inside it", code)
		}
		if n := f.sim.Requests(forgesim.Filter{}); n != 0 {
			t.Errorf("forge requests %d, want 0: a wrongly signed delivery offers nothing", n)
		}
	})
	t.Run("form without payload is a bad request, counted invalid", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		f := newHTTPFixture(t, func(c *server.Config) { c.Registry = reg })
		code, resp := f.postTyped(t, "pull_request", "application/x-www-form-urlencoded", "data="+url.QueryEscape(payload))
		if code != http.StatusBadRequest || !strings.Contains(resp, "payload") {
			t.Errorf("got %d %s, want 400 naming the payload parameter", code, resp)
		}
		if got := deliveriesOutcome(t, reg, "invalid"); got != 1 {
			t.Errorf("webhook_deliveries_total{outcome=\"invalid\"}: got %v, want 1: a payload the server cannot read is counted invalid, whatever its encoding", got)
		}
	})
}

// TestWebhookOtherContentTypesAre415 pins that a delivery in any content
// type but GitHub's two is refused with 415, naming the accepted ones, and
// offers nothing.
func TestWebhookOtherContentTypesAre415(t *testing.T) {
	body := `{"action": "closed", "number": 12, "pull_request": {"number": 12}, "repository": {"full_name": "acme/app"}}`
	for _, ct := range []string{"text/plain", "application/xml", "multipart/form-data; boundary=x", "application/json-seq", "not a type"} {
		t.Run(ct, func(t *testing.T) {
			f := newHTTPFixture(t)
			f.putRun(t, gaterun.VerdictSuccess)
			code, resp := f.postTyped(t, "pull_request", ct, body)
			if code != http.StatusUnsupportedMediaType || !strings.Contains(resp, "application/json") || !strings.Contains(resp, "application/x-www-form-urlencoded") {
				t.Errorf("got %d %s, want 415 naming application/json and application/x-www-form-urlencoded", code, resp)
			}
			if n := f.sim.Requests(forgesim.Filter{}); n != 0 {
				t.Errorf("forge requests %d, want 0: a refused delivery offers nothing", n)
			}
		})
	}
	t.Run("parameters of JSON are accepted", func(t *testing.T) {
		f := newHTTPFixture(t)
		f.putRun(t, gaterun.VerdictSuccess)
		if code, resp := f.postTyped(t, "pull_request", "application/json; charset=utf-8", body); code != http.StatusOK {
			t.Errorf("got %d %s, want 200: application/json with a charset is JSON", code, resp)
		}
	})
}

// TestWebhookNamesDifferingInCase pins GitHub's rule that owner and
// repository names are not case sensitive: a delivery naming ACME/App
// offers the run registered for acme/app.
func TestWebhookNamesDifferingInCase(t *testing.T) {
	for _, c := range []struct{ event, body string }{
		{"pull_request", `{"action": "synchronize", "number": 12, "pull_request": {"number": 12}, "repository": {"full_name": "ACME/App"}}`},
		{"status", `{"sha": "` + strings.ToUpper(headSHA) + `", "state": "success", "context": "ci", "repository": {"full_name": "Acme/APP"}}`},
	} {
		t.Run(c.event, func(t *testing.T) {
			f := newHTTPFixture(t)
			f.putRun(t, gaterun.VerdictSuccess)
			code, resp := f.postTyped(t, c.event, "application/json", c.body)
			if code != http.StatusOK || !strings.Contains(resp, `"offered":1`) {
				t.Fatalf("got %d %s, want 200 offered 1: the run of acme/app is the run of the delivery's repository", code, resp)
			}
			if st := gateState(t, f.forge, headSHA); st != "success" {
				t.Errorf("gate context %q, want success: the offered run was published", st)
			}
		})
	}
}

// genuine is one of GitHub's recorded payloads and what it names.
type genuine struct {
	event, action string
	body          string
	repo          string // repository.full_name
	pull          int
	sha           string // the pull request's head, or the status's commit
}

func loadGenuine(t *testing.T, event, action string) genuine {
	t.Helper()
	b, err := githubcontract.Payload(event, action)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Number      int    `json:"number"`
		SHA         string `json:"sha"`
		PullRequest struct {
			Head struct {
				SHA string `json:"sha"`
			} `json:"head"`
		} `json:"pull_request"`
		Repository struct {
			FullName string `json:"full_name"`
		} `json:"repository"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	g := genuine{event: event, action: action, body: string(b), repo: p.Repository.FullName, pull: p.Number, sha: p.SHA}
	if event == "pull_request" {
		g.sha = p.PullRequest.Head.SHA
	}
	return g
}

// TestWebhookGenuinePayloads posts GitHub's own recorded payloads (from
// octokit/webhooks), signed, as JSON and as a form: the pull_request and
// status ones are accepted and offer the matching run, registered under
// the repository's name in another case; the installation ones are
// accepted and ignored.
func TestWebhookGenuinePayloads(t *testing.T) {
	for _, name := range [][2]string{{"pull_request", "opened"}, {"pull_request", "synchronize"}, {"pull_request", "closed"}, {"status", ""}} {
		g := loadGenuine(t, name[0], name[1])
		if g.repo == "" || g.sha == "" || (g.event == "pull_request" && g.pull == 0) {
			t.Fatalf("%s %s: repository, head or number missing from the recorded payload", g.event, g.action)
		}
		owner, repo, _ := strings.Cut(strings.ToLower(g.repo), "/")
		pull := g.pull
		if pull == 0 {
			pull = 1 // a status names a commit; the run is of the pull request at that head
		}
		for _, ct := range []string{"application/json", "application/x-www-form-urlencoded"} {
			t.Run(g.event+"."+g.action+"/"+ct, func(t *testing.T) {
				f := newHTTPFixture(t)
				if err := f.sim.SeedPull(owner, repo, pull, g.sha, "open"); err != nil {
					t.Fatal(err)
				}
				closed := g.action == "closed"
				if closed {
					if err := f.sim.Close(owner, repo, pull); err != nil {
						t.Fatal(err)
					}
				}
				run := gaterun.Run{ID: gaterun.ID("github.com", owner+"/"+repo, pull, g.sha), Host: "github.com",
					Repo: owner + "/" + repo, Pull: pull, HeadSHA: g.sha, Context: gaterun.DefaultContext, Verdict: gaterun.VerdictSuccess}
				if _, err := f.runs.Put(context.Background(), run, time.Now()); err != nil {
					t.Fatal(err)
				}
				body := g.body
				if ct != "application/json" {
					body = formBody(g.body)
				}
				code, resp := f.postTyped(t, g.event, ct, body)
				if code != http.StatusOK || !strings.Contains(resp, `"offered":1`) {
					t.Fatalf("got %d %s, want 200 offered 1: GitHub's payload names %s, the run's repository in another case", code, resp, g.repo)
				}
				got, err := f.runs.Get(context.Background(), run.ID)
				if err != nil {
					t.Fatal(err)
				}
				if closed != got.Settled {
					t.Errorf("run settled = %v, want %v: the offer acted on the pull request's state", got.Settled, closed)
				}
				if closed {
					return
				}
				cs, err := f.forge.CombinedStatus(forge.WithLane(context.Background(), testLane), owner, repo, g.sha)
				if err != nil {
					t.Fatal(err)
				}
				published := false
				for _, st := range cs.Statuses {
					published = published || (st.Context == gaterun.DefaultContext && st.State == "success")
				}
				if !published {
					t.Errorf("statuses %+v, want %s success: the offered run was published", cs.Statuses, gaterun.DefaultContext)
				}
			})
		}
	}
	for _, name := range [][2]string{{"installation", "created"}, {"installation", "deleted"}, {"installation_repositories", "added"}, {"installation_repositories", "removed"}} {
		t.Run(name[0]+"."+name[1], func(t *testing.T) {
			b, err := githubcontract.Payload(name[0], name[1])
			if err != nil {
				t.Fatal(err)
			}
			f := newHTTPFixture(t)
			if code, resp := f.postTyped(t, name[0], "application/json", string(b)); code != http.StatusAccepted {
				t.Errorf("got %d %s, want 202: an event the gate does not read is accepted and ignored", code, resp)
			}
		})
	}
}

// recordedFor is GitHub's recorded payload of event and action, its
// installation's id set to id.
func recordedFor(t *testing.T, event, action string, id int64) string {
	t.Helper()
	b, err := githubcontract.Payload(event, action)
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	p["installation"].(map[string]any)["id"] = id
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestAppModeReadsGitHubsRecordedInstallationPayloads pins App mode's
// installation webhooks to GitHub's own payloads (octokit/webhooks'
// recordings, their installation's id set to one the simulator has), each
// checked with GitHub and applied as the hand-written ones of the App mode
// tests are: created makes the installation known, on the account the
// payload names; installation_repositories added and removed are applied;
// suspend and deleted drop it, unsuspend brings it back.
func TestAppModeReadsGitHubsRecordedInstallationPayloads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newAppCluster(t, 2, true)
		startAppReplicas(t, c, next, 1, time.Minute, 4, nil)
		r := c.replicas[0]
		defer r.stop()
		synctest.Wait() // the first list of the installations
		const id = 3
		known := func() bool { _, err := r.app.Installation(id); return err == nil }
		post := func(event, action string) {
			t.Helper()
			code, resp := r.call(t, "POST", "/webhooks/github", event, recordedFor(t, event, action, id))
			if code != http.StatusOK || !strings.Contains(resp, fmt.Sprintf(`"installation":%d`, id)) || !strings.Contains(resp, `"action":"`+action+`"`) || strings.Contains(resp, "not_applied") {
				t.Fatalf("GitHub's recorded %s %s: %d %s, want 200 naming installation %d and %s, applied", event, action, code, resp, id, action)
			}
		}
		mustOK := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		mustOK(c.sim.AddInstallation(id, "Codertocat", "Codertocat/Hello-World"))
		post("installation", "created")
		if !slices.Contains(r.app.Installations(), forge.Installation{ID: id, Account: "Codertocat"}) {
			t.Errorf("installations after GitHub's created = %v, want %d on Codertocat", r.app.Installations(), id)
		}
		mustOK(c.sim.AddInstallationRepos(id, "Codertocat/Space"))
		post("installation_repositories", "added")
		mustOK(c.sim.RemoveInstallationRepos(id, "octocat/Hello-World"))
		post("installation_repositories", "removed")
		mustOK(c.sim.SuspendInstallation(id))
		post("installation", "suspend")
		if known() {
			t.Errorf("installation %d known after GitHub's suspend, want it dropped", id)
		}
		mustOK(c.sim.UnsuspendInstallation(id))
		post("installation", "unsuspend")
		if !known() {
			t.Errorf("installation %d not known after GitHub's unsuspend, want it back", id)
		}
		mustOK(c.sim.RemoveInstallation(id))
		post("installation", "deleted")
		if known() {
			t.Errorf("installation %d known after GitHub's deleted, want it dropped", id)
		}
	})
}
