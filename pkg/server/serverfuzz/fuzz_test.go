package serverfuzz_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

const (
	apiToken      = "api-secret"
	webhookSecret = "hook-secret"
	headSHA       = "abcdef0123456789abcdef0123456789abcdef01"
	pullClosed    = `{"action": "closed", "number": 12, "pull_request": {"number": 12}, "repository": {"full_name": "acme/app"}}`
)

// sign is GitHub's X-Hub-Signature-256 of body.
func sign(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// fuzzServer is a Server whose forge is unreachable (every offer fails
// fast), so a fuzz input costs no network; the handler is called directly.
func fuzzServer(f *testing.F) (http.Handler, *gaterun.MemoryStore) {
	runs := gaterun.NewMemoryStore()
	fc, err := forge.New(forge.Config{BaseURL: "http://forge.invalid/", Token: "tok", Next: refuseAll{}, Registerer: prometheus.NewRegistry()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(fc.Close)
	srv, err := server.New(server.Config{Runs: runs, Leases: lease.NewMemoryStore(), Forge: fc,
		APIToken: apiToken, WebhookSecret: webhookSecret, Owner: "fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	return srv.Handler(), runs
}

// refuseAll is a transport that never reaches a forge.
type refuseAll struct{}

func (refuseAll) RoundTrip(*http.Request) (*http.Response, error) { return nil, http.ErrServerClosed }

// FuzzRunsAPI pins that POST /api/runs answers every body with 201, 200,
// 400 or 413, with a JSON answer, and that a run it stores passes GitHub's
// rules (repo, head_sha) — never a 5xx, never a panic.
func FuzzRunsAPI(f *testing.F) {
	for _, seed := range []string{
		`{"repo": "acme/app", "pull": 12, "head_sha": "` + headSHA + `", "verdict": "success"}`,
		`{"repo": "acme/app", "pull": 12, "head_sha": "` + headSHA + `", "verdict": "pending", "context": "ci", "description": "d", "target_url": "https://x.example/1"}`,
		`{"repo": "../..", "pull": 1, "head_sha": "abc?x=1", "verdict": "success"}`,
		`{"repo": "acme/app", "pull": 1.5}`,
		`{"pull": "12"}`, `[]`, ``, `{`, `null`, `{"repo": "a/b"}{}`,
		`{"repo": "acme/app", "pull": 99999999999999999999, "head_sha": "` + headSHA + `", "verdict": "error"}`,
	} {
		f.Add(seed)
	}
	h, runs := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest("POST", "/api/runs", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+apiToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusCreated, http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status: got %d (%s), want 201, 200, 400 or 413: the API answers every body", rec.Code, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("answer: got %q, want JSON", rec.Body)
		}
		if rec.Code >= 300 {
			return
		}
		var out struct{ ID string }
		_ = json.Unmarshal(rec.Body.Bytes(), &out)
		run, err := runs.Get(t.Context(), out.ID)
		if err != nil {
			t.Fatalf("run %q answered %d: got %v, want it stored", out.ID, rec.Code, err)
		}
		if _, _, err := forge.ParseRepo(run.Repo); err != nil || (len(run.HeadSHA) != 40 && len(run.HeadSHA) != 64) {
			t.Fatalf("stored run repo %q head %q: want GitHub's shapes", run.Repo, run.HeadSHA)
		}
	})
}

// FuzzWebhook pins that POST /webhooks/github answers any event, body and
// signature with 200, 202, 400, 401 or 413 — never a 5xx, never a panic —
// and that it never answers 200 to a body whose signature is wrong.
func FuzzWebhook(f *testing.F) {
	for _, s := range []struct {
		event, body string
		signed      bool
	}{
		{"pull_request", pullClosed, true},
		{"pull_request", pullClosed, false},
		{"status", `{"sha": "` + headSHA + `", "repository": {"full_name": "acme/app"}}`, true},
		{"status", `{"sha": 1}`, true},
		{"ping", `{}`, true},
		{"pull_request", `{"number": -1, "repository": {"full_name": "../.."}}`, true},
		{"pull_request", `not json`, true},
		{"", ``, false},
	} {
		f.Add(s.event, s.body, s.signed)
	}
	h, _ := fuzzServer(f)
	var deliveries atomic.Int64 // a new X-GitHub-Delivery for each input
	f.Fuzz(func(t *testing.T, event, body string, signed bool) {
		req := httptest.NewRequest("POST", "/webhooks/github", strings.NewReader(body))
		req.Header.Set("X-GitHub-Event", event)
		sig := sign(webhookSecret, body)
		if !signed {
			sig = sign("not-the-secret", body)
		}
		req.Header.Set("X-Hub-Signature-256", sig)
		req.Header.Set("X-GitHub-Delivery", fmt.Sprint(deliveries.Add(1)))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusAccepted, http.StatusBadRequest, http.StatusUnauthorized, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status: got %d (%s), want 200, 202, 400, 401 or 413", rec.Code, rec.Body)
		}
		if !signed && rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrongly signed body: got %d, want 401: an unsigned event is never accepted", rec.Code)
		}
	})
}
