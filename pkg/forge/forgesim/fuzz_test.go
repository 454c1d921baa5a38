package forgesim_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/forge/forgesim"
)

// FuzzHandler drives a fresh simulator with one arbitrary request, then
// checks the rules its HTTP surface promises whatever it is sent:
//   - it never panics, and never answers 5xx (a 500 is an error nobody
//     named; the GraphQL fault injection is off);
//   - a refused control request answers 4xx, and a 400 names its field in
//     both "field" and the message;
//   - an accepted /_sim/clock/advance moves the clock by exactly the
//     duration asked;
//   - an accepted /_sim/secondary refuses the token's next request with
//     exactly the retry-after asked;
//   - an accepted /_sim/budget is the limit the next request reports, and
//     what remains is never negative nor above it.
func FuzzHandler(f *testing.F) {
	seeds := []struct{ method, path, body string }{
		{"POST", "/_sim/repos/acme/app/pulls", `{"number":12,"head_sha":"s1","state":"open"}`},
		{"POST", "/_sim/repos/acme/app/pulls/12/head", `{"head_sha":"s2"}`},
		{"POST", "/_sim/repos/acme/app/pulls/12/close", ``},
		{"POST", "/_sim/repos/acme/app/pulls/12/merge", ``},
		{"POST", "/_sim/repos/acme/app/statuses/s2", `{"context":"ci","state":"failure"}`},
		{"POST", "/_sim/repos/acme/app/issues", `{"number":3,"title":"bug","labels":["p1"]}`},
		{"DELETE", "/_sim/repos/acme/app/issues/3", ``},
		{"POST", "/_sim/repos/acme/app/issues/3/transfer", `{"repository":"acme/web"}`},
		{"POST", "/_sim/budget", `{"limit":5,"token":"t"}`},
		{"POST", "/_sim/budget", `{"limit":-1}`},
		{"POST", "/_sim/tokens", `{"token":"t","user":"u"}`},
		{"POST", "/_sim/repos/acme/app/refs", `{"ref":"heads/main","sha":"s1"}`},
		{"POST", "/_sim/clock/advance", `{"duration":"90m"}`},
		{"POST", "/_sim/clock/advance", `{"duration":"2562047h"}`},
		{"POST", "/_sim/hour/reset", ``},
		{"POST", "/_sim/secondary", `{"token":"t","retry_after_seconds":60}`},
		{"POST", "/_sim/secondary", `{"token":"t","retry_after_seconds":9300000000}`},
		{"POST", "/_sim/secondary", `{"count":-1}`},
		{"POST", "/_sim/secondary", `{"retry_after_seconds":-9300000000}`},
		{"POST", "/_sim/installations", `{"id":7,"account":"acme","repositories":["acme/app"]}`},
		{"POST", "/_sim/installations", `{"installations":3,"repos_per_installation":2}`},
		{"POST", "/_sim/installations/7/repos", `{"add":["acme/web"]}`},
		{"POST", "/_sim/installations/7/suspend", ``},
		{"POST", "/_sim/installations/7/refuse-mints", `{"refuse":true}`},
		{"DELETE", "/_sim/installations/7", ``},
		{"GET", "/_sim/installations/requests?since=2026-09-30T09:00:00Z&installation=7", ``},
		{"GET", "/_sim/stats", ``},
		{"POST", "/_sim/stats/reset", ``},
		{"GET", "/_sim/reads?principal=t", ``},
		{"POST", "/_sim/faults", `{"bad_gateway_share":0.01,"seed":1}`},
		{"GET", "/_sim/redirect/2/repos/acme/app/pulls/12?x=1", ``},
		{"GET", "/repos/acme/app/pulls/12", ``},
		{"GET", "/repos/acme/app/commits/s1/status", ``},
		{"GET", "/repos/acme/app/issues?state=all&per_page=1&page=2", ``},
		{"POST", "/repos/acme/app/statuses/s1", `{"state":"success","context":"ci"}`},
		{"POST", "/graphql", `{"query":"query { repository(owner:\"acme\", name:\"app\") { pullRequest(number: 12) { headRefOid } } }"}`},
		{"POST", "/app/installations/7/access_tokens", ``},
		{"GET", "/installation/repositories", ``},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.body)
	}
	f.Fuzz(func(t *testing.T, method, path, body string) {
		if !strings.HasPrefix(path, "/") || strings.HasPrefix(path, "/_sim/webhook") || strings.HasPrefix(path, "/_sim/faults") {
			// A webhook would send requests off the machine, and injected
			// faults answer 502 by design.
			t.Skip()
		}
		if seedsTooMany(path, body) {
			t.Skip()
		}
		c := &clock{t: t0}
		sim := forgesim.New(forgesim.WithClock(c.Now), forgesim.WithBudget(100))
		mustOK(t, sim.SeedPull("acme", "app", 12, "s1", "open"))
		req, err := http.NewRequest(method, "http://sim"+path, strings.NewReader(body))
		if err != nil {
			t.Skip()
		}
		req.Header.Set("Authorization", "token t")
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, req)
		got := rec.Result()
		if got.StatusCode >= 500 {
			t.Fatalf("%s %s %s: got %d %s, want no 5xx: an input is refused with a 4xx or answered", method, path, body, got.StatusCode, rec.Body)
		}
		isControl := strings.HasPrefix(req.URL.Path, "/_sim/")
		if isControl && got.StatusCode == http.StatusBadRequest {
			var e struct{ Message, Field string }
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Field == "" || !strings.Contains(e.Message, e.Field) {
				t.Fatalf("%s %s %s: got 400 %s, want the field named: a refused control request names its field", method, path, body, rec.Body)
			}
		}
		if !isControl || method != "POST" || got.StatusCode != http.StatusNoContent {
			return
		}
		switch req.URL.Path {
		case "/_sim/clock/advance":
			var b struct{ Duration string }
			mustOK(t, readBody(body, &b))
			d, err := time.ParseDuration(b.Duration)
			mustOK(t, err)
			if moved := sim.Now().Sub(t0); moved != d {
				t.Fatalf("advance %q: the clock moved %v, want %v: an accepted advance moves the clock by what was asked", b.Duration, moved, d)
			}
			// Again: a harness advances the clock many times.
			req := httptest.NewRequest("POST", "http://sim/_sim/clock/advance", strings.NewReader(body))
			rec := httptest.NewRecorder()
			sim.ServeHTTP(rec, req)
			if rec.Code == http.StatusBadRequest {
				if !strings.Contains(rec.Body.String(), `"field":"duration"`) {
					t.Fatalf("advance %q twice: got 400 %s, want the field duration named", b.Duration, rec.Body)
				}
				return
			}
			if moved := sim.Now().Sub(t0); rec.Code != http.StatusNoContent || moved != 2*d || moved < d {
				t.Fatalf("advance %q twice: got %d, the clock moved %v, want 204 and %v or a 400 naming duration: an accepted advance moves the clock by what was asked", b.Duration, rec.Code, moved, 2*d)
			}
		case "/_sim/secondary":
			var b struct {
				Token             string
				RetryAfterSeconds int `json:"retry_after_seconds"`
			}
			mustOK(t, readBody(body, &b))
			tok := b.Token
			if tok == "" {
				tok = "t"
			}
			resp := get(sim, tok)
			want := ""
			if b.RetryAfterSeconds > 0 {
				want = strconv.Itoa(b.RetryAfterSeconds)
			}
			if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Retry-After") != want {
				t.Fatalf("secondary %s: got %d retry-after %q, want 403 retry-after %q: an accepted retry-after is the one answered", body, resp.StatusCode, resp.Header.Get("Retry-After"), want)
			}
		case "/_sim/budget":
			var b struct {
				Token string
				Limit int
			}
			mustOK(t, readBody(body, &b))
			if b.Token == "" {
				b.Token = "t"
			}
			resp := get(sim, b.Token)
			limit, _ := strconv.Atoi(resp.Header.Get("X-Ratelimit-Limit"))
			left, _ := strconv.Atoi(resp.Header.Get("X-Ratelimit-Remaining"))
			if limit != b.Limit || left < 0 || left > limit {
				t.Fatalf("budget %s: got limit %d remaining %d, want limit %d and 0 <= remaining <= limit: the budget asked is the one kept", body, limit, left, b.Limit)
			}
		}
	})
}

// readBody reads body as the control endpoints do: blank is {}.
func readBody(body string, v any) error {
	if strings.TrimSpace(body) == "" {
		return nil
	}
	return json.Unmarshal([]byte(body), v)
}

// get sends GET /repos/acme/app/pulls/12 with tok to sim.
func get(sim *forgesim.Sim, tok string) *http.Response {
	req := httptest.NewRequest("GET", "http://sim/repos/acme/app/pulls/12", nil)
	req.Header.Set("Authorization", "token "+tok)
	rec := httptest.NewRecorder()
	sim.ServeHTTP(rec, req)
	return rec.Result()
}

// seedsTooMany tells a request seeding more installations or repositories
// than a fuzz run can hold: the simulator makes as many as it is asked.
func seedsTooMany(path, body string) bool {
	if !strings.HasPrefix(path, "/_sim/installations") {
		return false
	}
	var b struct {
		Installations        int `json:"installations"`
		ReposPerInstallation int `json:"repos_per_installation"`
	}
	_ = json.Unmarshal([]byte(body), &b)
	return b.Installations > 1000 || b.ReposPerInstallation > 1000 || b.Installations*b.ReposPerInstallation > 10000
}
