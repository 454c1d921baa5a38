package server_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

const (
	apiToken      = "api-secret"
	webhookSecret = "hook-secret"
	headSHA       = "abcdef0123456789abcdef0123456789abcdef01"
)

// httpFixture is a Server's handler on an httptest.Server, in front of a
// forge simulator with pull acme/app#12 open at headSHA.
type httpFixture struct {
	url    string
	runs   *gaterun.MemoryStore
	leases *lease.MemoryStore
	sim    *forgesim.Sim
	forge  *forge.Client
	srv    *server.Server
}

// newHTTPFixture builds the fixture; each opt adjusts the server's Config.
func newHTTPFixture(t *testing.T, opts ...func(*server.Config)) *httpFixture {
	t.Helper()
	sim, simSrv := startSim(t)
	if err := sim.SeedPull("acme", "app", 12, headSHA, "open"); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	f := &httpFixture{runs: gaterun.NewMemoryStore(), leases: lease.NewMemoryStore(), sim: sim,
		forge: newForge(t, simSrv.URL, nil, "tok", reg, nil)}
	cfg := server.Config{Runs: f.runs, Leases: f.leases, Forge: f.forge,
		APIToken: apiToken, WebhookSecret: webhookSecret, Owner: "replica-a", Registry: reg}
	for _, opt := range opts {
		opt(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	f.srv = srv
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	f.url = hs.URL
	return f
}

// pageAuth opens the pages: the API token as a bearer token.
var pageAuth = map[string]string{"Authorization": "Bearer " + apiToken}

// do sends a request and returns the status and body.
func (f *httpFixture) do(t *testing.T, method, path string, header map[string]string, body string) (int, string) {
	t.Helper()
	code, _, b := f.doHeader(t, method, path, header, body)
	return code, b
}

// doHeader sends a request and returns the status, the headers and the
// body.
func (f *httpFixture) doHeader(t *testing.T, method, path string, header map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func (f *httpFixture) postRun(t *testing.T, body string) (int, string) {
	return f.do(t, "POST", "/api/runs", map[string]string{"Authorization": "Bearer " + apiToken}, body)
}

// stored is every unsettled run in the store.
func (f *httpFixture) stored(t *testing.T) []gaterun.Run {
	t.Helper()
	runs, err := f.runs.Unsettled(context.Background(), time.Time{}, gaterun.Cursor{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// lanes sums the forge client's counts by lane, the tests' own aside.
func lanes(fc *forge.Client) map[string]int64 {
	out := map[string]int64{}
	for _, c := range fc.Counts() {
		if c.Lane != testLane {
			out[c.Lane] += c.N
		}
	}
	return out
}

func TestAPIRejectsBadInputNamingTheField(t *testing.T) {
	valid := map[string]any{"repo": "acme/app", "pull": 12, "head_sha": headSHA, "verdict": "success"}
	with := func(k string, v any) string {
		m := map[string]any{}
		for kk, vv := range valid {
			m[kk] = vv
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	for _, c := range []struct {
		name, body, field string
	}{
		{"malformed JSON", `{"repo": "acme/app",`, "malformed JSON"},
		{"empty body", ``, "malformed JSON"},
		{"two objects", with("pull", 12) + `{}`, "malformed JSON"},
		{"a stray closing brace after the object", with("pull", 12) + `}`, "malformed JSON"},
		{"not an object", `[1, 2]`, "malformed JSON"},
		{"repo missing", with("repo", nil), "repo"},
		{"repo not owner/name", with("repo", "acme"), "repo"},
		{"pull missing", with("pull", nil), "pull"},
		{"pull a string", with("pull", "12"), "pull: got a JSON string, want a JSON integer"},
		{"pull negative", with("pull", -3), "pull"},
		{"head_sha missing", with("head_sha", nil), "head_sha"},
		{"head_sha with a space", with("head_sha", "abc def"), "head_sha"},
		{"verdict missing", with("verdict", nil), "verdict"},
		{"verdict unknown", with("verdict", "approved"), "verdict"},
		{"verdict a number", with("verdict", 1), "verdict"},
		{"target_url not http", with("target_url", "ftp://ci.example/1"), "target_url"},
		{"description too long", with("description", strings.Repeat("x", 141)), "description"},
		// Input that is never a GitHub repository or commit.
		{"repo a path up", with("repo", "../.."), "repo"},
		{"repo owner a dot", with("repo", "./x"), "repo"},
		{"repo name dot-dot", with("repo", "acme/.."), "repo"},
		{"repo owner with a leading hyphen", with("repo", "-acme/app"), "repo"},
		{"repo owner of 40 characters", with("repo", strings.Repeat("a", 40)+"/app"), "repo"},
		{"repo name of 101 characters", with("repo", "acme/"+strings.Repeat("n", 101)), "repo"},
		{"head_sha with a query", with("head_sha", "abc?x=1"), "head_sha"},
		{"head_sha with NUL", with("head_sha", strings.Repeat("a", 39)+"\x00"), "head_sha"},
		{"head_sha with a control character", with("head_sha", strings.Repeat("a", 39)+"\x1b"), "head_sha"},
		{"head_sha of 60 KB", with("head_sha", strings.Repeat("a", 60<<10)), "head_sha"},
		{"head_sha of 41 hex digits", with("head_sha", headSHA+"0"), "head_sha"},
		{"head_sha short", with("head_sha", "abcdef0"), "head_sha"},
		{"pull fractional", with("pull", 1.5), "pull: got a JSON number 1.5, want a JSON integer"},
		{"pull zero", `{"repo": "acme/app", "pull": 0, "head_sha": "` + headSHA + `", "verdict": "success"}`, "pull"},
		{"context too long", with("context", strings.Repeat("c", 256)), "context"},
		{"context with a newline", with("context", "iterion\nreview"), "context"},
		{"description with a control character", with("description", "ok\x07"), "description"},
		{"target_url too long", with("target_url", "https://ci.example/"+strings.Repeat("u", 2048)), "target_url"},
		// A field the body does not define is refused, not dropped: the
		// client meant something by it.
		{"target_url spelt targetUrl", with("targetUrl", "https://ci.example/9"), `unknown field "targetUrl" (did you mean "target_url"?)`},
		{"an unknown field", with("state", "success"), `unknown field "state"; the fields are repo, pull, head_sha, verdict, context, description, target_url`},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newHTTPFixture(t)
			code, body := f.postRun(t, c.body)
			if code != http.StatusBadRequest {
				t.Errorf("status %d, want 400: a body the API cannot use is a bad request", code)
			}
			var e struct{ Error string }
			if err := json.Unmarshal([]byte(body), &e); err != nil || !strings.Contains(e.Error, c.field) {
				t.Errorf("error %q, want one naming %q: the message names the field", body, c.field)
			}
			if runs := f.stored(t); len(runs) != 0 {
				t.Errorf("stored %d runs, want 0: nothing is stored on error", len(runs))
			}
			if n := f.sim.Requests(forgesim.Filter{}); n != 0 {
				t.Errorf("forge requests %d, want 0: nothing is offered on error", n)
			}
		})
	}
}

func TestAPIRequiresTheBearerToken(t *testing.T) {
	body := `{"repo": "acme/app", "pull": 12, "head_sha": "` + headSHA + `", "verdict": "success"}`
	for _, c := range []struct{ name, auth string }{
		{"no header", ""},
		{"wrong token", "Bearer nope"},
		{"token prefix", "Bearer " + apiToken[:3]},
		{"basic scheme", "Basic " + apiToken},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newHTTPFixture(t)
			code, _ := f.do(t, "POST", "/api/runs", map[string]string{"Authorization": c.auth}, body)
			if code != http.StatusUnauthorized {
				t.Errorf("status %d, want 401: the API requires its bearer token", code)
			}
			if runs := f.stored(t); len(runs) != 0 {
				t.Errorf("stored %d runs, want 0: an unauthorized call stores nothing", len(runs))
			}
		})
	}
}

// TestAPIBearerSchemeIsCaseInsensitive pins RFC 9110's rule that an
// authentication scheme name is case-insensitive.
func TestAPIBearerSchemeIsCaseInsensitive(t *testing.T) {
	body := `{"repo": "acme/app", "pull": 12, "head_sha": "` + headSHA + `", "verdict": "success"}`
	f := newHTTPFixture(t)
	code, resp := f.do(t, "POST", "/api/runs", map[string]string{"Authorization": "bearer " + apiToken}, body)
	if code != http.StatusCreated {
		t.Errorf("status %d %s, want 201: the scheme \"bearer\" is \"Bearer\"", code, resp)
	}
}

func TestAPIRecordsTheVerdictAndOffersIt(t *testing.T) {
	f := newHTTPFixture(t)
	code, body := f.postRun(t, `{"repo": "acme/app", "pull": 12, "head_sha": "`+headSHA+`", "verdict": "pending", "description": "reviewing"}`)
	wantID := gaterun.ID("github.com", "acme/app", 12, headSHA)
	if code != http.StatusCreated || body != `{"id":"`+wantID+`"}`+"\n" {
		t.Fatalf("got %d %s, want 201 {\"id\":%q}: a new run is created", code, body, wantID)
	}
	if st := gateState(t, f.forge, headSHA); st != "pending" {
		t.Errorf("gate context %q, want pending: the API offers the run at once", st)
	}
	code, body = f.postRun(t, `{"repo": "acme/app", "pull": 12, "head_sha": "`+headSHA+`", "verdict": "success", "context": "iterion/review", "target_url": "https://ci.example/9"}`)
	if code != http.StatusOK || !strings.Contains(body, wantID) {
		t.Fatalf("got %d %s, want 200 with the same id: the same repo, pull and head is an update", code, body)
	}
	if st := gateState(t, f.forge, headSHA); st != "success" {
		t.Errorf("gate context %q, want success: an update is offered at once", st)
	}
	got := lanes(f.forge)
	if got[forge.LaneAPI] == 0 || len(got) != 1 {
		t.Errorf("forge requests by lane %v, want only lane %q: the API path charges its own lane", got, forge.LaneAPI)
	}
}

// TestAPIStoresEveryFieldItKnows pins that refusing unknown fields keeps
// every field the body defines: a body with all seven is stored as sent.
func TestAPIStoresEveryFieldItKnows(t *testing.T) {
	f := newHTTPFixture(t)
	code, body := f.postRun(t, `{"repo": "acme/app", "pull": 12, "head_sha": "`+headSHA+`", "verdict": "failure",
		"context": "ci/review", "description": "two findings", "target_url": "https://ci.example/9"}`)
	if code != http.StatusCreated {
		t.Fatalf("got %d %s, want 201: every field of the body is one the API knows", code, body)
	}
	runs := f.stored(t)
	if len(runs) != 1 {
		t.Fatalf("stored %d runs, want 1", len(runs))
	}
	r := runs[0]
	if r.Repo != "acme/app" || r.Pull != 12 || r.HeadSHA != headSHA || r.Verdict != gaterun.VerdictFailure ||
		r.Context != "ci/review" || r.Description != "two findings" || r.TargetURL != "https://ci.example/9" {
		t.Errorf("stored %+v, want each field as sent", r)
	}
}

// sign is GitHub's X-Hub-Signature-256 of body.
func sign(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func (f *httpFixture) postHook(t *testing.T, event, sig, body string) (int, string) {
	h := map[string]string{"X-GitHub-Event": event, "Content-Type": "application/json", "X-GitHub-Delivery": rand.Text()}
	if sig != "" {
		h["X-Hub-Signature-256"] = sig
	}
	return f.do(t, "POST", "/webhooks/github", h, body)
}

func (f *httpFixture) putRun(t *testing.T, verdict gaterun.Verdict) gaterun.Run {
	t.Helper()
	r := gateRun(12, headSHA, verdict)
	if _, err := f.runs.Put(context.Background(), r, time.Now()); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestWebhookSignature(t *testing.T) {
	body := `{"action": "closed", "number": 12, "pull_request": {"number": 12}, "repository": {"full_name": "acme/app"}}`
	for _, c := range []struct{ name, sig string }{
		{"missing", ""},
		{"wrong secret", sign("other", body)},
		{"not hex", "sha256=zz"},
		{"sha1 only", "sha1=" + strings.Repeat("0", 40)},
		{"signature of another body", sign(webhookSecret, body+" ")},
		// The right MAC, without the sha256= naming its algorithm: the
		// header's form is sha256=<64 hex digits>, nothing looser.
		{"no sha256= prefix", strings.TrimPrefix(sign(webhookSecret, body), "sha256=")},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newHTTPFixture(t)
			f.putRun(t, gaterun.VerdictSuccess)
			if code, _ := f.postHook(t, "pull_request", c.sig, body); code != http.StatusUnauthorized {
				t.Errorf("status %d, want 401: a missing or wrong X-Hub-Signature-256 is refused", code)
			}
			if n := f.sim.Requests(forgesim.Filter{}); n != 0 {
				t.Errorf("forge requests %d, want 0: an unsigned event offers nothing", n)
			}
		})
	}
}

func TestWebhookEventsOfferTheAffectedRuns(t *testing.T) {
	t.Run("pull_request closed settles", func(t *testing.T) {
		f := newHTTPFixture(t)
		r := f.putRun(t, gaterun.VerdictSuccess)
		if err := f.sim.Close("acme", "app", 12); err != nil {
			t.Fatal(err)
		}
		body := `{"action": "closed", "number": 12, "pull_request": {"number": 12, "state": "closed"}, "repository": {"full_name": "acme/app"}}`
		code, resp := f.postHook(t, "pull_request", sign(webhookSecret, body), body)
		if code != http.StatusOK || !strings.Contains(resp, `"offered":1`) {
			t.Fatalf("got %d %s, want 200 offered 1: a pull_request event offers the pull's runs", code, resp)
		}
		if got, _ := f.runs.Get(context.Background(), r.ID); !got.Settled {
			t.Errorf("run unsettled, want settled: the offer saw the closed pull request")
		}
	})
	t.Run("pull_request names its pull request by its top-level number too", func(t *testing.T) {
		f := newHTTPFixture(t)
		f.putRun(t, gaterun.VerdictSuccess)
		// Only the payload's top-level number, no pull_request object.
		body := `{"action": "synchronize", "number": 12, "repository": {"full_name": "acme/app"}}`
		if code, resp := f.postHook(t, "pull_request", sign(webhookSecret, body), body); code != http.StatusOK || !strings.Contains(resp, `"offered":1`) {
			t.Errorf("got %d %s, want 200 offered 1: a payload without pull_request.number is read by its number", code, resp)
		}
	})
	t.Run("status repairs the gate context", func(t *testing.T) {
		f := newHTTPFixture(t)
		f.putRun(t, gaterun.VerdictFailure)
		if err := f.sim.SetStatus("acme", "app", headSHA, forgesim.Status{Context: gaterun.DefaultContext, State: "success"}); err != nil {
			t.Fatal(err)
		}
		body := `{"sha": "` + headSHA + `", "state": "success", "context": "iterion/review", "repository": {"full_name": "acme/app"}}`
		code, resp := f.postHook(t, "status", sign(webhookSecret, body), body)
		if code != http.StatusOK || !strings.Contains(resp, `"offered":1`) {
			t.Fatalf("got %d %s, want 200 offered 1: a status event offers the head's runs", code, resp)
		}
		if st := gateState(t, f.forge, headSHA); st != "failure" {
			t.Errorf("gate context %q, want failure: the offer restores the verdict", st)
		}
		if got := lanes(f.forge); got[forge.LaneWebhook] == 0 || len(got) != 1 {
			t.Errorf("forge requests by lane %v, want only %q: the event path charges its own lane", got, forge.LaneWebhook)
		}
	})
	t.Run("other events are ignored", func(t *testing.T) {
		f := newHTTPFixture(t)
		f.putRun(t, gaterun.VerdictSuccess)
		body := `{"zen": "Keep it logically awesome."}`
		if code, _ := f.postHook(t, "ping", sign(webhookSecret, body), body); code != http.StatusAccepted {
			t.Errorf("status %d, want 202: events the gate does not use are acknowledged and ignored", code)
		}
		if n := f.sim.Requests(forgesim.Filter{}); n != 0 {
			t.Errorf("forge requests %d, want 0: an ignored event offers nothing", n)
		}
	})
	t.Run("malformed payload", func(t *testing.T) {
		f := newHTTPFixture(t)
		for _, body := range []string{`{"number": 12,`, `{"action": "opened", "repository": {"full_name": "acme/app"}}`} {
			if code, resp := f.postHook(t, "pull_request", sign(webhookSecret, body), body); code != http.StatusBadRequest {
				t.Errorf("body %s: got %d %s, want 400: a signed payload the gate cannot read is a bad request", body, code, resp)
			}
		}
	})
}

func TestWebhooksAreOffWithoutASecret(t *testing.T) {
	fc := newForge(t, "http://127.0.0.1:1/", nil, "tok", nil, nil)
	srv, err := server.New(server.Config{Runs: gaterun.NewMemoryStore(), Leases: lease.NewMemoryStore(), Forge: fc, APIToken: "a"})
	if err != nil {
		t.Fatalf("New without a webhook secret = %v, want nil: webhooks are optional", err)
	}
	body := `{"sha": "abc", "repository": {"full_name": "acme/app"}}`
	for _, sig := range []string{"", sign("", body)} {
		req := httptest.NewRequest("POST", "/webhooks/github", strings.NewReader(body))
		req.Header.Set("X-GitHub-Event", "status")
		req.Header.Set("X-Hub-Signature-256", sig)
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusNotFound {
			t.Errorf("signature %q: status %d, want 404: without a secret no event is accepted, signed with \"\" or not", sig, rec.Code)
		}
	}
}

func TestHealthzMetricsAndLeases(t *testing.T) {
	f := newHTTPFixture(t)
	if code, body := f.do(t, "GET", "/healthz", nil, ""); code != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
		t.Errorf("GET /healthz = %d %s, want 200 ok", code, body)
	}
	expires := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
	if ok, err := f.leases.Acquire(context.Background(), server.MergeGateSweeper().Name, "replica-b", expires.Add(-time.Minute), time.Minute); !ok || err != nil {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	code, body := f.do(t, "GET", "/leases?format=json", pageAuth, "")
	var got []map[string]any
	if err := json.Unmarshal([]byte(body), &got); code != http.StatusOK || err != nil {
		t.Fatalf("GET /leases?format=json = %d %s (%v), want 200 JSON", code, body, err)
	}
	if len(got) != 1 || len(got[0]) != 4 || got[0]["name"] != "merge-gate-sweeper" || got[0]["owner"] != "replica-b" || got[0]["expired"] != false {
		t.Errorf("leases %v, want [{name merge-gate-sweeper, owner replica-b, expires, expired false}]: the wire contract, and expired as the CLI's", got)
	}
	if at, err := time.Parse(time.RFC3339, got[0]["expires"].(string)); err != nil || !at.Equal(expires) {
		t.Errorf("expires %q (%v), want RFC 3339 %v", got[0]["expires"], err, expires)
	}
	code, body = f.do(t, "GET", "/leases", pageAuth, "")
	if code != http.StatusOK || !strings.Contains(body, "<table>") || !strings.Contains(body, "replica-b") || !strings.Contains(body, "merge-gate-sweeper") {
		t.Errorf("GET /leases = %d %s, want an HTML page naming the lease and its holder", code, body)
	}
	if code, body = f.do(t, "GET", "/leases?format=xml", pageAuth, ""); code != http.StatusBadRequest || !strings.Contains(body, "xml") {
		t.Errorf("GET /leases?format=xml = %d %s, want 400 naming the format: only json and html exist", code, body)
	}

	f.postRun(t, `{"repo": "acme/app", "pull": 12, "head_sha": "`+headSHA+`", "verdict": "success"}`)
	code, body = f.do(t, "GET", "/metrics", nil, "")
	for _, want := range []string{`gate_offers_total{lane="api",outcome="published"} 1`, `forge_http_requests_total`} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET /metrics = %d, lacks %q: /metrics serves the server's registry", code, want)
		}
	}
}

func TestNewRejectsBadConfigNamingTheField(t *testing.T) {
	fc := newForge(t, "http://127.0.0.1:1/", nil, "tok", nil, nil)
	good := server.Config{Runs: gaterun.NewMemoryStore(), Leases: lease.NewMemoryStore(), Forge: fc, APIToken: "a", WebhookSecret: "w"}
	app, err := forge.NewApp(forge.AppConfig{BaseURL: "http://127.0.0.1:1/", AppID: 1, PrivateKey: forgetest.AppKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		field string
		mod   func(*server.Config)
	}{
		{"Runs", func(c *server.Config) { c.Runs = nil }},
		{"Leases", func(c *server.Config) { c.Leases = nil }},
		{"Forge", func(c *server.Config) { c.Forge = nil }},
		{"APIToken", func(c *server.Config) { c.APIToken = " " }},
		{"SweepInterval", func(c *server.Config) { c.SweepInterval = -time.Second }},
		// No pass could begin a batch: one may wait GitHub's 10 s timeout.
		{"SweepInterval", func(c *server.Config) { c.SweepInterval = 10 * time.Second }},
		{"SweepShards", func(c *server.Config) { c.SweepShards = -1 }},
		{"InstallationConcurrency", func(c *server.Config) { c.InstallationConcurrency = -1 }},
		{"App", func(c *server.Config) { c.App = app }},
		{"WebhookAnswerWithin", func(c *server.Config) { c.WebhookAnswerWithin = -time.Second }},
		// GitHub has given up by then: the answer must come before.
		{"WebhookAnswerWithin", func(c *server.Config) { c.WebhookAnswerWithin = server.GitHubWebhookTimeout }},
		{"MaxConnections", func(c *server.Config) { c.Limits.MaxConnections = -1 }},
		{"LargeWebhookReadsPerAddress", func(c *server.Config) { c.Limits.LargeWebhookReadsPerAddress = -1 }},
		{"LargeWebhookReadsPerAddress", func(c *server.Config) { c.Limits.LargeWebhookReads, c.Limits.LargeWebhookReadsPerAddress = 2, 3 }},
		// The default of 2 slots, and 3 for one address.
		{"LargeWebhookReadsPerAddress", func(c *server.Config) { c.Limits.LargeWebhookReadsPerAddress = 3 }},
	} {
		cfg := good
		c.mod(&cfg)
		if _, err := server.New(cfg); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("New with a bad %s = %v, want an error naming it", c.field, err)
		}
	}
	if _, err := server.New(good); err != nil {
		t.Errorf("New(good) = %v, want nil", err)
	}
}

func TestLeaseNamesAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, l := range server.Leases() {
		if seen[l.Name] {
			t.Errorf("lease %q declared twice: two nets never share a name", l.Name)
		}
		seen[l.Name] = true
	}
	sw := server.MergeGateSweeper()
	if sw.TTL(time.Minute) != 3*time.Minute || sw.Retry(time.Minute) != time.Minute {
		t.Errorf("sweeper TTL %v retry %v at a 1m interval, want 3m and 1m (docs/design.md, decision 5)", sw.TTL(time.Minute), sw.Retry(time.Minute))
	}
}
