package forgesim_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/forge/forgesim"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

var t0 = time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)

// start serves a simulator whose clock stands at t0 (moved with Advance).
func start(t *testing.T, opts ...forgesim.Option) (*forgesim.Sim, *httptest.Server) {
	t.Helper()
	c := &clock{t: t0}
	sim := forgesim.New(append([]forgesim.Option{forgesim.WithClock(c.Now)}, opts...)...)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return sim, srv
}

// do sends one request with a plain http.Client (redirects not followed)
// and returns the answer with its body read.
func do(t *testing.T, srv *httptest.Server, method, path, token, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "token "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestCombinedStatusFollowsGitHubsRule(t *testing.T) {
	cases := []struct {
		name     string
		statuses []forgesim.Status
		want     string
		contexts int
	}{
		{"no statuses is pending", nil, "pending", 0},
		{"all success", []forgesim.Status{{Context: "a", State: "success"}, {Context: "b", State: "success"}}, "success", 2},
		{"any pending is pending", []forgesim.Status{{Context: "a", State: "success"}, {Context: "b", State: "pending"}}, "pending", 2},
		{"any failure is failure", []forgesim.Status{{Context: "a", State: "pending"}, {Context: "b", State: "failure"}}, "failure", 2},
		{"error is failure", []forgesim.Status{{Context: "a", State: "success"}, {Context: "b", State: "error"}}, "failure", 2},
		{"the latest status of a context wins", []forgesim.Status{{Context: "a", State: "failure"}, {Context: "a", State: "success"}}, "success", 1},
		{"no context is default", []forgesim.Status{{State: "success"}, {Context: "default", State: "pending"}}, "pending", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sim, srv := start(t)
			mustOK(t, sim.SeedPull("acme", "app", 1, "sha", "open"))
			for _, st := range tc.statuses {
				mustOK(t, sim.SetStatus("acme", "app", "sha", st))
			}
			resp, body := do(t, srv, "GET", "/repos/acme/app/commits/sha/status", "t", "")
			var got struct {
				State      string `json:"state"`
				SHA        string `json:"sha"`
				TotalCount int    `json:"total_count"`
				Statuses   []struct {
					Context, State string
				} `json:"statuses"`
			}
			if resp.StatusCode != 200 || json.Unmarshal(body, &got) != nil {
				t.Fatalf("got %d %s, want 200 and a combined status", resp.StatusCode, body)
			}
			if got.State != tc.want || len(got.Statuses) != tc.contexts || got.TotalCount != tc.contexts || got.SHA != "sha" {
				t.Fatalf("got state %q with %d statuses, want %q with %d: %s", got.State, len(got.Statuses), tc.want, tc.contexts, tc.name)
			}
		})
	}
}

func TestStatusesEndpoint(t *testing.T) {
	sim, srv := start(t)
	mustOK(t, sim.SeedPull("acme", "app", 1, "sha", "open"))
	cases := []struct {
		path, body string
		want       int
		rule       string
	}{
		{"/repos/acme/app/statuses/sha", `{"state":"success","context":"ci","description":"d","target_url":"https://x"}`, 201, "a valid status is created"},
		{"/repos/acme/app/statuses/sha", `{"state":"green"}`, 422, "an unknown state fails validation"},
		{"/repos/acme/app/statuses/nosuch", `{"state":"success"}`, 422, "a commit the repository lacks fails validation"},
		{"/repos/acme/nosuch/statuses/sha", `{"state":"success"}`, 404, "an unknown repository is 404"},
		{"/repos/acme/app/statuses/sha", `{`, 400, "a body that is not JSON is 400"},
	}
	for _, tc := range cases {
		resp, body := do(t, srv, "POST", tc.path, "t", tc.body)
		if resp.StatusCode != tc.want {
			t.Errorf("POST %s %s: got %d %s, want %d: %s", tc.path, tc.body, resp.StatusCode, body, tc.want, tc.rule)
		}
	}
	_, body := do(t, srv, "GET", "/repos/acme/app/commits/sha/status", "t", "")
	if !strings.Contains(string(body), `"context":"ci"`) || !strings.Contains(string(body), `"description":"d"`) || !strings.Contains(string(body), `"state":"success"`) {
		t.Fatalf("combined status after POST: got %s, want the created status", body)
	}
}

func TestBudget(t *testing.T) {
	sim, srv := start(t, forgesim.WithBudget(2))
	mustOK(t, sim.SeedPull("acme", "app", 1, "sha", "open"))
	reset := strconv.FormatInt(t0.Add(time.Hour).Unix(), 10)
	for i, wantRemaining := range []string{"1", "0"} {
		resp, _ := do(t, srv, "GET", "/repos/acme/app/pulls/1", "a", "")
		h := resp.Header
		if resp.StatusCode != 200 || h.Get("X-Ratelimit-Limit") != "2" || h.Get("X-Ratelimit-Remaining") != wantRemaining ||
			h.Get("X-Ratelimit-Reset") != reset || h.Get("X-Ratelimit-Resource") != "core" || h.Get("X-Ratelimit-Used") != strconv.Itoa(i+1) {
			t.Fatalf("request %d: got %d %v, want 200 with limit 2, remaining %s, reset %s: GitHub's headers on every answer", i+1, resp.StatusCode, h, wantRemaining, reset)
		}
	}
	resp, body := do(t, srv, "GET", "/repos/acme/app/pulls/1", "a", "")
	if resp.StatusCode != 403 || resp.Header.Get("X-Ratelimit-Remaining") != "0" || !strings.Contains(string(body), "API rate limit exceeded") {
		t.Fatalf("over budget: got %d %s, want 403 'API rate limit exceeded' with remaining 0", resp.StatusCode, body)
	}
	resp, _ = do(t, srv, "GET", "/repos/acme/app/pulls/1", "b", "")
	if resp.StatusCode != 200 || resp.Header.Get("X-Ratelimit-Remaining") != "1" {
		t.Fatalf("another token: got %d remaining %s, want 200 with 1 left: each token has its own budget", resp.StatusCode, resp.Header.Get("X-Ratelimit-Remaining"))
	}
	mustOK(t, sim.Advance(time.Hour))
	resp, _ = do(t, srv, "GET", "/repos/acme/app/pulls/1", "a", "")
	if resp.StatusCode != 200 || resp.Header.Get("X-Ratelimit-Remaining") != "1" {
		t.Fatalf("after the reset: got %d remaining %s, want 200 with 1 left: the budget refills at the reset", resp.StatusCode, resp.Header.Get("X-Ratelimit-Remaining"))
	}
	mustOK(t, sim.SetBudget("a", 10))
	resp, _ = do(t, srv, "GET", "/repos/acme/app/pulls/1", "a", "")
	if resp.Header.Get("X-Ratelimit-Limit") != "10" || resp.Header.Get("X-Ratelimit-Remaining") != "8" {
		t.Fatalf("after SetBudget: got limit %s remaining %s, want 10 and 8", resp.Header.Get("X-Ratelimit-Limit"), resp.Header.Get("X-Ratelimit-Remaining"))
	}
	sim.ResetHour()
	resp, _ = do(t, srv, "GET", "/repos/acme/app/pulls/1", "a", "")
	if resp.Header.Get("X-Ratelimit-Remaining") != "9" {
		t.Fatalf("after ResetHour: got remaining %s, want 9: a fresh window", resp.Header.Get("X-Ratelimit-Remaining"))
	}
	resp, _ = do(t, srv, "POST", "/graphql", "a", `{"query":"{ viewer { login } }"}`)
	if resp.Header.Get("X-Ratelimit-Resource") != "graphql" || resp.Header.Get("X-Ratelimit-Remaining") != "9" {
		t.Fatalf("graphql: got resource %s remaining %s, want graphql with 9 left: GraphQL has its own budget", resp.Header.Get("X-Ratelimit-Resource"), resp.Header.Get("X-Ratelimit-Remaining"))
	}
}

func TestAnonymousRequestsHaveSixtyAnHour(t *testing.T) {
	sim := forgesim.New()
	mustOK(t, sim.SeedPull("acme", "app", 1, "sha", "open"))
	for i := range forgesim.AnonymousBudget {
		rec := call(sim, "GET", "/repos/acme/app/pulls/1", "", nil)
		if rec.Code != 200 || rec.Header().Get("X-Ratelimit-Limit") != "60" {
			t.Fatalf("anonymous request %d: got %d limit %s, want 200 limit 60: GitHub's primary limit for unauthenticated requests", i+1, rec.Code, rec.Header().Get("X-Ratelimit-Limit"))
		}
	}
	if rec := call(sim, "GET", "/repos/acme/app/pulls/1", "", nil); rec.Code != 403 || remaining(rec) != "0" {
		t.Errorf("anonymous request 61: got %d remaining %s, want 403 remaining 0", rec.Code, remaining(rec))
	}
	if rec := call(sim, "GET", "/repos/acme/app/pulls/1", "t", nil); rec.Code != 200 || rec.Header().Get("X-Ratelimit-Limit") != "5000" {
		t.Errorf("a token's request: got %d limit %s, want 200 limit 5000: the anonymous hour is apart", rec.Code, rec.Header().Get("X-Ratelimit-Limit"))
	}
	low := forgesim.New(forgesim.WithBudget(2))
	if rec := call(low, "GET", "/repos/acme/app/pulls/1", "", nil); rec.Header().Get("X-Ratelimit-Limit") != "2" {
		t.Errorf("anonymous under WithBudget(2): got limit %s, want 2: a lower default budget binds anonymous requests too", rec.Header().Get("X-Ratelimit-Limit"))
	}
}

// TestAnonymousBudgetIsEachClientIPs: the 60 requests an hour without a
// token are each client IP address's, as GitHub keeps them: one address
// spending its 60 (from any port) leaves another's whole.
func TestAnonymousBudgetIsEachClientIPs(t *testing.T) {
	sim := forgesim.New()
	mustOK(t, sim.SeedPull("acme", "app", 1, "sha", "open"))
	from := func(addr string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/repos/acme/app/pulls/1", nil)
		req.RemoteAddr = addr
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, req)
		return rec
	}
	for i := range forgesim.AnonymousBudget {
		from(fmt.Sprintf("192.0.2.1:%d", 1000+i)) // a new connection each time
	}
	for _, c := range []struct {
		why, addr string
		status    int
		remaining string
	}{
		{"the address that spent its 60, from yet another port, is refused", "192.0.2.1:9999", 403, "0"},
		{"another address has its own 60", "198.51.100.7:1000", 200, "59"},
		{"an IPv6 address has its own 60 too", "[2001:db8::1]:1000", 200, "59"},
	} {
		if rec := from(c.addr); rec.Code != c.status || remaining(rec) != c.remaining {
			t.Errorf("%s: got %d remaining %s, want %d remaining %s: GitHub keeps unauthenticated requests' limit per originating IP address", c.addr, rec.Code, remaining(rec), c.status, c.remaining)
		}
	}
}

func TestOnlyAnonymousCallersAreToldToAuthenticate(t *testing.T) {
	const hint = "Authenticated requests get a higher rate limit"
	sim := forgesim.New(forgesim.WithBudget(0))
	for _, c := range []struct {
		token string
		hint  bool
	}{{"", true}, {"t", false}} {
		rec := call(sim, "GET", "/repos/acme/app/pulls/1", c.token, nil)
		if rec.Code != 403 || !strings.Contains(rec.Body.String(), "API rate limit exceeded") || strings.Contains(rec.Body.String(), hint) != c.hint {
			t.Errorf("token %q over its budget: got %d %s, want 403 'API rate limit exceeded', with %q %v: GitHub tells only unauthenticated callers to authenticate", c.token, rec.Code, rec.Body, hint, c.hint)
		}
	}
}

// TestAnonymousRefusalNamesTheClientAddress: GitHub's primary-limit refusal
// of an unauthenticated request names the IP address whose limit is spent
// ("API rate limit exceeded for xxx.xxx.xxx.xxx."), not the port and not
// a token, IPv6 included.
func TestAnonymousRefusalNamesTheClientAddress(t *testing.T) {
	sim := forgesim.New(forgesim.WithBudget(0))
	for _, c := range []struct{ remote, want string }{
		{"192.0.2.1:1234", "API rate limit exceeded for 192.0.2.1. "},
		{"[2001:db8::1]:1000", "API rate limit exceeded for 2001:db8::1. "},
	} {
		req := httptest.NewRequest("GET", "/repos/acme/app/pulls/1", nil)
		req.RemoteAddr = c.remote
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, req)
		var body struct{ Message string }
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != 403 || !strings.HasPrefix(body.Message, c.want) {
			t.Errorf("from %s over the budget: got %d %s, want 403 with a message starting %q: GitHub names the caller's address", c.remote, rec.Code, rec.Body, c.want)
		}
	}
}

func TestETagAnd304CostNoBudget(t *testing.T) {
	sim, srv := start(t, forgesim.WithBudget(10))
	mustOK(t, sim.SeedPull("acme", "app", 1, "sha", "open"))
	resp, _ := do(t, srv, "GET", "/repos/acme/app/pulls/1", "a", "")
	etag := resp.Header.Get("ETag")
	if etag == "" {
		t.Fatal("GET: got no ETag, want one")
	}
	for _, inm := range []string{etag, strings.TrimPrefix(etag, "W/"), `"x", ` + etag} {
		resp, body := do(t, srv, "GET", "/repos/acme/app/pulls/1", "a", "", "If-None-Match", inm)
		if resp.StatusCode != 304 || len(body) != 0 || resp.Header.Get("X-Ratelimit-Remaining") != "9" || resp.Header.Get("ETag") != etag {
			t.Fatalf("If-None-Match %s: got %d remaining %s, want 304, no body, 9 remaining: a 304 costs no budget", inm, resp.StatusCode, resp.Header.Get("X-Ratelimit-Remaining"))
		}
	}
	mustOK(t, sim.PushHead("acme", "app", 1, "sha2"))
	resp, _ = do(t, srv, "GET", "/repos/acme/app/pulls/1", "a", "", "If-None-Match", etag)
	if resp.StatusCode != 200 || resp.Header.Get("ETag") == etag {
		t.Fatalf("after a push: got %d etag %s, want 200 with a new ETag", resp.StatusCode, resp.Header.Get("ETag"))
	}
}

func TestStatsJSON(t *testing.T) {
	sim, srv := start(t, forgesim.WithBudget(7))
	mustOK(t, sim.SeedPull("acme", "app", 1, "sha", "open"))
	do(t, srv, "GET", "/repos/acme/app/pulls/1", "a", "")
	do(t, srv, "GET", "/repos/acme/app/pulls/1", "a", "")
	do(t, srv, "GET", "/repos/acme/app/pulls/2", "a", "")
	do(t, srv, "GET", "/nowhere", "", "")
	_, body := do(t, srv, "GET", "/_sim/stats", "", "")
	var got struct {
		Requests []map[string]any `json:"requests"`
		Budget   struct {
			DefaultLimit int `json:"default_limit"`
			Windows      []struct {
				Token     string `json:"token"`
				Resource  string `json:"resource"`
				Limit     int    `json:"limit"`
				Used      int    `json:"used"`
				Remaining int    `json:"remaining"`
			} `json:"windows"`
		} `json:"budget"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("stats: %v in %s", err, body)
	}
	want := []string{
		`map[count:1 method:GET points:1 route:unmatched status:404 token:]`,
		`map[count:2 method:GET points:2 route:GET /repos/{owner}/{repo}/pulls/{number} status:200 token:a]`,
		`map[count:1 method:GET points:1 route:GET /repos/{owner}/{repo}/pulls/{number} status:404 token:a]`,
	}
	if fmt.Sprint(got.Requests) != "["+strings.Join(want, " ")+"]" {
		t.Fatalf("stats requests:\ngot  %v\nwant %v\nrule: every request counted by token, method, route pattern and status, with the budget units charged (the stats read itself is counted after it answers)", got.Requests, want)
	}
	if got.Budget.DefaultLimit != 7 || len(got.Budget.Windows) != 2 || got.Budget.Windows[0].Token != "a" || got.Budget.Windows[0].Used != 3 || got.Budget.Windows[0].Remaining != 4 ||
		got.Budget.Windows[1].Token != "ip:127.0.0.1" || got.Budget.Windows[1].Used != 1 {
		t.Fatalf("stats budget: got %+v, want default 7, token a with 3 used, 4 remaining, and the tokenless request's client ip:127.0.0.1 with 1 used", got.Budget)
	}
	if n := sim.Requests(forgesim.Filter{Token: "a", Status: 200}); n != 2 {
		t.Fatalf("Requests(token a, 200): got %d, want 2", n)
	}
}

func TestControlEndpoints(t *testing.T) {
	sim, srv := start(t, forgesim.WithBudget(100))
	ctl := func(path, body string) {
		t.Helper()
		if resp, b := do(t, srv, "POST", path, "", body); resp.StatusCode != 204 {
			t.Fatalf("POST %s %s: got %d %s, want 204", path, body, resp.StatusCode, b)
		}
	}
	pull := func() (state string, merged bool, sha string) {
		t.Helper()
		_, b := do(t, srv, "GET", "/repos/acme/app/pulls/12", "t", "")
		var p struct {
			State  string
			Merged bool
			Head   struct{ SHA string }
		}
		mustOK(t, json.Unmarshal(b, &p))
		return p.State, p.Merged, p.Head.SHA
	}
	ctl("/_sim/repos/acme/app/pulls", `{"number":12,"head_sha":"s1","state":"open"}`)
	if st, m, sha := pull(); st != "open" || m || sha != "s1" {
		t.Fatalf("seeded pull: got %s %v %s, want open, unmerged, s1", st, m, sha)
	}
	ctl("/_sim/repos/acme/app/pulls/12/head", `{"head_sha":"s2"}`)
	if _, _, sha := pull(); sha != "s2" {
		t.Fatalf("after push: got head %s, want s2", sha)
	}
	ctl("/_sim/repos/acme/app/pulls/12/close", "")
	if st, m, _ := pull(); st != "closed" || m {
		t.Fatalf("after close: got %s merged %v, want closed, unmerged", st, m)
	}
	ctl("/_sim/repos/acme/app/pulls", `{"number":12,"head_sha":"s2","state":"open"}`)
	ctl("/_sim/repos/acme/app/pulls/12/merge", "")
	if st, m, _ := pull(); st != "closed" || !m {
		t.Fatalf("after merge: got %s merged %v, want closed and merged", st, m)
	}
	ctl("/_sim/repos/acme/app/statuses/s2", `{"context":"ci","state":"failure"}`)
	if _, b := do(t, srv, "GET", "/repos/acme/app/commits/s2/status", "t", ""); !strings.Contains(string(b), `"state":"failure"`) {
		t.Fatalf("after set status: got %s, want state failure", b)
	}
	ctl("/_sim/repos/acme/app/issues", `{"number":3,"title":"bug","labels":["p1"]}`)
	if _, b := do(t, srv, "GET", "/repos/acme/app/issues?state=all", "t", ""); !strings.Contains(string(b), `"title":"bug"`) || !strings.Contains(string(b), `"pull_request":{`) {
		t.Fatalf("issues: got %s, want the seeded issue and the pull request with its pull_request key", b)
	}
	ctl("/_sim/budget", `{"limit":5,"token":"t"}`)
	resp, _ := do(t, srv, "GET", "/repos/acme/app/pulls/12", "t", "")
	if resp.Header.Get("X-Ratelimit-Limit") != "5" {
		t.Fatalf("after /_sim/budget: got limit %s, want 5", resp.Header.Get("X-Ratelimit-Limit"))
	}
	ctl("/_sim/clock/advance", `{"duration":"90m"}`)
	if got := sim.Now(); !got.Equal(t0.Add(90 * time.Minute)) {
		t.Fatalf("after /_sim/clock/advance: got %v, want t0+90m", got)
	}
	resp, _ = do(t, srv, "GET", "/repos/acme/app/pulls/12", "t", "")
	if resp.Header.Get("X-Ratelimit-Remaining") != "4" {
		t.Fatalf("after the hour passed: got remaining %s, want 4: a new window", resp.Header.Get("X-Ratelimit-Remaining"))
	}
	ctl("/_sim/hour/reset", "")
	ctl("/_sim/secondary", `{"token":"t","retry_after_seconds":60}`)
	resp, b := do(t, srv, "GET", "/repos/acme/app/pulls/12", "t", "")
	if resp.StatusCode != 403 || resp.Header.Get("Retry-After") != "60" || !strings.Contains(string(b), "secondary rate limit") {
		t.Fatalf("after /_sim/secondary: got %d retry-after %q %s, want 403 with retry-after 60", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	resp, _ = do(t, srv, "GET", "/repos/acme/app/pulls/12", "t", "")
	if resp.StatusCode != 200 || resp.Header.Get("X-Ratelimit-Remaining") != "4" {
		t.Fatalf("after the secondary limit: got %d remaining %s, want 200 with 4 left: a fresh window after /_sim/hour/reset, the refusal cost nothing", resp.StatusCode, resp.Header.Get("X-Ratelimit-Remaining"))
	}
	ctl("/_sim/stats/reset", "")
	if n := sim.Requests(forgesim.Filter{Token: "t"}); n != 0 {
		t.Fatalf("after /_sim/stats/reset: got %d requests, want 0", n)
	}
}

func TestMalformedControlBodiesNameTheField(t *testing.T) {
	cases := []struct {
		path, body, field string
	}{
		{"/_sim/repos/acme/app/pulls", `{"number":0,"head_sha":"s"}`, "number"},
		{"/_sim/repos/acme/app/pulls", `{"number":"12","head_sha":"s"}`, "number"},
		{"/_sim/repos/acme/app/pulls", `{"number":12}`, "head_sha"},
		{"/_sim/repos/acme/app/pulls", `{"number":12,"head_sha":"s","state":"merged"}`, "state"},
		{"/_sim/repos/acme/app/pulls", `{"number":12,"head":"s"}`, "head"},
		{"/_sim/repos/acme/app/pulls", `{"number":12,`, "body"},
		{"/_sim/repos/acme/app/pulls", `{"number":12,"head_sha":"s"} {}`, "body"},
		{"/_sim/repos/acme/app/pulls", `0`, "body"},
		{"/_sim/budget", `[{"limit":1}]`, "body"},
		{"/_sim/tokens", `{"":"u"}`, "body"},
		{"/_sim/budget", `{"limit":5}}`, "body"},
		{"/_sim/budget", `{"limit":1,"token":" "}`, "token"},
		{"/_sim/secondary", `{"token":"t "}`, "token"},
		{"/_sim/tokens", `{"token":" t","user":"u"}`, "token"},
		{"/_sim/budget", `{"limit":5}]`, "body"},
		{"/_sim/repos/acme/app/pulls/x/head", `{"head_sha":"s"}`, "number"},
		{"/_sim/repos/acme/app/pulls/1/head", `{}`, "head_sha"},
		{"/_sim/repos/acme/app/statuses/s", `{"state":"green"}`, "state"},
		{"/_sim/repos/acme/app/issues", `{"number":1}`, "title"},
		{"/_sim/budget", `{}`, "limit"},
		{"/_sim/budget", `{"limit":-1}`, "limit"},
		{"/_sim/clock/advance", `{"duration":"soon"}`, "duration"},
		{"/_sim/clock/advance", `{"duration":"-1h"}`, "duration"},
		{"/_sim/secondary", `{"count":-1}`, "count"},
		{"/_sim/secondary", `{"retry_after_seconds":18446744074}`, "retry_after_seconds"},
		{"/_sim/secondary", `{"retry_after_seconds":-9300000000}`, "retry_after_seconds"},
		{"/_sim/redirect/0/x", ``, "hops"},
	}
	for _, tc := range cases {
		t.Run(tc.path+" "+tc.body, func(t *testing.T) {
			_, srv := start(t)
			method := "POST"
			if strings.HasPrefix(tc.path, "/_sim/redirect") {
				method = "GET"
			}
			resp, body := do(t, srv, method, tc.path, "", tc.body)
			var got struct{ Message, Field string }
			_ = json.Unmarshal(body, &got)
			if resp.StatusCode != 400 || got.Field != tc.field || !strings.Contains(got.Message, tc.field) {
				t.Fatalf("got %d %s, want 400 naming field %q: a malformed control body names the field", resp.StatusCode, body, tc.field)
			}
		})
	}
}

func TestSecondaryRetryAfterPastADurationIsRefusedNotWrapped(t *testing.T) {
	// 18446744074 s is 2^64 ns and 0.29 s over: multiplied by a second it
	// wrapped to 0.29 s, and a retry-after of 584 years was answered as 1.
	_, srv := start(t)
	resp, b := do(t, srv, "POST", "/_sim/secondary", "", `{"token":"t","retry_after_seconds":18446744074}`)
	if resp.StatusCode != 400 || !strings.Contains(string(b), `"field":"retry_after_seconds"`) {
		t.Fatalf("got %d %s, want 400 naming retry_after_seconds: a retry-after past a time.Duration is refused, not wrapped", resp.StatusCode, b)
	}
	if resp, _ := do(t, srv, "GET", "/repos/acme/app/pulls/1", "t", ""); resp.StatusCode == 403 {
		t.Fatalf("got 403 after a refused /_sim/secondary, want no injected limit: a refused control request changes nothing")
	}
}

func TestAdvancePastADurationIsRefusedNotWrapped(t *testing.T) {
	sim, srv := start(t)
	max := time.Duration(1<<63 - 1)
	mustOK(t, sim.Advance(max-time.Hour))
	resp, b := do(t, srv, "POST", "/_sim/clock/advance", "", `{"duration":"2h"}`)
	if resp.StatusCode != 400 || !strings.Contains(string(b), `"field":"duration"`) {
		t.Fatalf("advance past the range: got %d %s, want 400 naming duration: the advances together stay within a time.Duration", resp.StatusCode, b)
	}
	if got := sim.Now(); !got.Equal(t0.Add(max - time.Hour)) {
		t.Fatalf("after a refused advance: got %v, want %v: a refused advance moves nothing (it wrapped the clock back before)", got, t0.Add(max-time.Hour))
	}
	if err := sim.Advance(time.Hour); err != nil {
		t.Fatalf("advance to the end of the range: got %v, want nil", err)
	}
}

func TestControlOfAMissingPullIs404(t *testing.T) {
	_, srv := start(t)
	for _, op := range []string{"close", "merge"} {
		if resp, _ := do(t, srv, "POST", "/_sim/repos/acme/app/pulls/5/"+op, "", ""); resp.StatusCode != 404 {
			t.Fatalf("%s of a pull never seeded: got %d, want 404", op, resp.StatusCode)
		}
	}
}

func TestIssuesPaginateWithLinkHeaders(t *testing.T) {
	sim, srv := start(t)
	for n := 1; n <= 65; n++ {
		mustOK(t, sim.SeedIssue("acme", "app", forgesim.Issue{Number: n, Title: "i", State: "open"}))
	}
	resp, body := do(t, srv, "GET", "/repos/acme/app/issues?state=all&per_page=30", "t", "")
	var page []struct{ Number int }
	mustOK(t, json.Unmarshal(body, &page))
	link := links(t, resp.Header.Get("Link"))
	if len(page) != 30 || page[0].Number != 65 || fmt.Sprint(link) != "map[last:3 next:2]" {
		t.Fatalf("page 1: got %d issues from #%d, Link %v, want 30 from #65 with next 2 and last 3", len(page), page[0].Number, link)
	}
	resp, body = do(t, srv, "GET", "/repos/acme/app/issues?state=all&per_page=30&page=3", "t", "")
	mustOK(t, json.Unmarshal(body, &page))
	link = links(t, resp.Header.Get("Link"))
	if len(page) != 5 || fmt.Sprint(link) != "map[first:1 prev:2]" {
		t.Fatalf("page 3: got %d issues, Link %v, want 5 with first 1, prev 2 and no next", len(page), link)
	}
	if resp, b := do(t, srv, "GET", "/repos/acme/app/issues?since="+t0.Add(time.Hour).Format(time.RFC3339), "t", ""); string(b) != "[]\n" || resp.StatusCode != 200 {
		t.Fatalf("since after every update: got %d %s, want 200 []", resp.StatusCode, b)
	}
}

// links parses a Link header into rel → page, checking each URL keeps the
// other query parameters.
func links(t *testing.T, h string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, part := range strings.Split(h, ", ") {
		u, rel, ok := strings.Cut(part, ">; rel=")
		if !ok {
			t.Fatalf("Link part %q: want <url>; rel=\"…\"", part)
		}
		parsed, err := url.Parse(strings.TrimPrefix(u, "<"))
		if err != nil || parsed.Query().Get("state") != "all" || parsed.Query().Get("per_page") != "30" {
			t.Fatalf("Link URL %q: want the request's query with another page", u)
		}
		n, _ := strconv.Atoi(parsed.Query().Get("page"))
		out[strings.Trim(rel, `"`)] = n
	}
	return out
}

func jwt(iss string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(`{"iss":"`+iss+`"}`)) + ".sig"
}

func TestInstallationTokens(t *testing.T) {
	_, srv := start(t, forgesim.WithTokenTTL(10*time.Minute))
	resp, _ := do(t, srv, "POST", "/app/installations/7/access_tokens", "plain", "")
	if resp.StatusCode != 401 {
		t.Fatalf("without an App JWT: got %d, want 401", resp.StatusCode)
	}
	resp, body := do(t, srv, "POST", "/app/installations/7/access_tokens", "", "", "Authorization", "Bearer "+jwt("42"))
	var tok struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if resp.StatusCode != 201 || json.Unmarshal(body, &tok) != nil || !strings.HasPrefix(tok.Token, "ghs_") || !tok.ExpiresAt.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("with an App JWT: got %d %s, want 201 with a ghs_ token expiring at now+TTL", resp.StatusCode, body)
	}
}

func TestInstallationTokenIsRefusedFromItsExpiresAt(t *testing.T) {
	c := &clock{t: t0.Add(500 * time.Millisecond)}
	sim := forgesim.New(forgesim.WithClock(c.Now))
	mustOK(t, sim.SeedPull("acme", "app", 1, "sha", "open"))
	tok := mint(t, sim, 7) // expires_at t0+1h: GitHub's time is to the second
	steps := []struct {
		why     string
		advance time.Duration
		fresh   bool // a token minted now, not tok
		want    int
	}{
		{"a second before its expires_at the token works", time.Hour - 1500*time.Millisecond, false, 200},
		{"at its expires_at (Advance moves the simulator's clock) it is Bad credentials", time.Second, false, 401},
		{"an hour later still", time.Hour, false, 401},
		{"a token minted afresh works", 0, true, 200},
	}
	for _, st := range steps {
		mustOK(t, sim.Advance(st.advance))
		token := tok
		if st.fresh {
			token = mint(t, sim, 7)
		}
		rec := call(sim, "GET", "/repos/acme/app/pulls/1", token, nil)
		if rec.Code != st.want || (st.want == 401 && !strings.Contains(rec.Body.String(), "Bad credentials")) {
			t.Errorf("got %d %s, want %d: %s; an installation token lives an hour", rec.Code, rec.Body, st.want, st.why)
		}
	}
}

func TestRedirectAndUnmatchedRoutes(t *testing.T) {
	sim, srv := start(t)
	resp, _ := do(t, srv, "GET", "/_sim/redirect/2/repos/acme/app/pulls/1?x=1", "", "")
	if resp.StatusCode != 307 || resp.Header.Get("Location") != "/_sim/redirect/1/repos/acme/app/pulls/1?x=1" {
		t.Fatalf("redirect hop: got %d to %q, want 307 to the next hop", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, _ = do(t, srv, "GET", "/_sim/redirect/1/repos/acme/app/pulls/1", "", "")
	if resp.Header.Get("Location") != "/repos/acme/app/pulls/1" {
		t.Fatalf("last hop: got %q, want the target", resp.Header.Get("Location"))
	}
	resp, _ = do(t, srv, "DELETE", "/repos/acme/app/pulls/1", "t", "")
	if resp.StatusCode != 404 || sim.Requests(forgesim.Filter{Route: forgesim.RouteUnmatched}) != 1 {
		t.Fatalf("unsimulated route: got %d, want 404 counted as %q", resp.StatusCode, forgesim.RouteUnmatched)
	}
}

func TestIssuesCarryLabelsAndAssignees(t *testing.T) {
	sim, srv := start(t)
	mustOK(t, sim.SeedIssue("acme", "app", forgesim.Issue{Number: 4, Title: "t", State: "open", Labels: []string{"bug"}, Assignees: []string{"ana", "bo"}}))
	ctl := func(path, body string) {
		if resp, b := do(t, srv, "POST", path, "", body); resp.StatusCode != 204 {
			t.Fatalf("POST %s: got %d %s, want 204", path, resp.StatusCode, b)
		}
	}
	ctl("/_sim/repos/acme/app/issues", `{"number":5,"title":"u","assignees":["cy"]}`)
	_, body := do(t, srv, "GET", "/repos/acme/app/issues?state=all", "t", "")
	var got []struct {
		Number    int
		Labels    []struct{ Name string }
		Assignees []struct{ Login string }
	}
	mustOK(t, json.Unmarshal(body, &got))
	if len(got) != 2 || fmt.Sprint(got[0].Assignees) != "[{cy}]" || fmt.Sprint(got[1].Assignees) != "[{ana} {bo}]" || fmt.Sprint(got[1].Labels) != "[{bug}]" {
		t.Fatalf("got %+v, want #5 assigned to cy and #4 labelled bug assigned to ana and bo: seeded assignees are listed as GitHub users", got)
	}
}

// TestDeletedAndTransferredIssuesAnswerAsOnGitHub pins Get an issue's
// answers for an issue no longer in its repository
// (https://docs.github.com/rest/issues/issues#get-an-issue): 301 with
// Location its new address when transferred, 410 when deleted, 404 when
// there never was one; neither is listed by its old repository, and the
// transferred one is listed by its new one under its next number.
func TestDeletedAndTransferredIssuesAnswerAsOnGitHub(t *testing.T) {
	sim, srv := start(t)
	for n := 1; n <= 3; n++ {
		mustOK(t, sim.SeedIssue("acme", "app", forgesim.Issue{Number: n, Title: "t", State: "open"}))
	}
	mustOK(t, sim.SeedIssue("acme", "lib", forgesim.Issue{Number: 8, Title: "lib's own", State: "open"}))
	if err := sim.DeleteIssue("acme", "app", 1); err != nil {
		t.Fatal(err)
	}
	moved, err := sim.TransferIssue("acme", "app", 2, "acme", "lib")
	if err != nil || moved != 9 {
		t.Fatalf("TransferIssue = %d, %v, want 9: the next number of the new repository", moved, err)
	}
	for _, c := range []struct {
		path     string
		code     int
		location string
		why      string
	}{
		{"/repos/acme/app/issues/1", http.StatusGone, "", "a deleted issue answers 410 Gone"},
		{"/repos/acme/app/issues/2", http.StatusMovedPermanently, srv.URL + "/repos/acme/lib/issues/9", "a transferred issue answers 301 to its new address"},
		{"/repos/acme/app/issues/3", http.StatusOK, "", "an issue still there answers 200"},
		{"/repos/acme/lib/issues/9", http.StatusOK, "", "the transferred issue answers at its new address"},
		{"/repos/acme/app/issues/4", http.StatusNotFound, "", "an issue that never was answers 404"},
	} {
		resp, body := do(t, srv, "GET", c.path, "t", "")
		if resp.StatusCode != c.code || resp.Header.Get("Location") != c.location {
			t.Errorf("GET %s: got %d Location %q %s, want %d Location %q: %s", c.path, resp.StatusCode, resp.Header.Get("Location"), body, c.code, c.location, c.why)
		}
	}
	numbers := func(repo string) string {
		_, body := do(t, srv, "GET", "/repos/"+repo+"/issues?state=all", "t", "")
		var got []struct{ Number int }
		mustOK(t, json.Unmarshal(body, &got))
		return fmt.Sprint(got)
	}
	if got := numbers("acme/app"); got != "[{3}]" {
		t.Errorf("acme/app's list: got %s, want [{3}]: a deleted or transferred issue leaves its repository's list", got)
	}
	if got := numbers("acme/lib"); got != "[{9} {8}]" {
		t.Errorf("acme/lib's list: got %s, want [{9} {8}]: the transferred issue is listed by its new repository", got)
	}
	if err := sim.DeleteIssue("acme", "app", 1); !errors.Is(err, forgesim.ErrNotFound) {
		t.Errorf("DeleteIssue of a deleted issue = %v, want ErrNotFound", err)
	}
}

// TestNamesMatchWithoutCase pins GitHub's rule that owner and repository
// names are not case sensitive: every repository operation, and the GraphQL
// repository field, serve acme/app when asked for ACME/App, and the answer
// shows the repository's own spelling.
func TestNamesMatchWithoutCase(t *testing.T) {
	sim, srv := start(t)
	if err := sim.SeedPull("acme", "app", 3, "abc", "open"); err != nil {
		t.Fatal(err)
	}
	if err := sim.SeedIssue("acme", "app", forgesim.Issue{Number: 1, Title: "bug", State: "open"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/repos/ACME/App/pulls/3", ""},
		{"GET", "/repos/Acme/APP/commits/abc/status", ""},
		{"POST", "/repos/ACME/app/statuses/abc", `{"state":"success","context":"ci"}`},
		{"GET", "/repos/ACME/App/issues", ""},
	} {
		resp, body := do(t, srv, c.method, c.path, "tok", c.body)
		if resp.StatusCode/100 != 2 {
			t.Errorf("%s %s = %d %s, want 2xx: names are not case sensitive", c.method, c.path, resp.StatusCode, body)
			continue
		}
		if strings.Contains(string(body), "ACME") {
			t.Errorf("%s %s shows the asked spelling: %s; want the repository's own, acme/app", c.method, c.path, body)
		}
	}
	resp, body := do(t, srv, "POST", "/graphql", "tok", `{"query":"{ repository(owner: \"ACME\", name: \"App\") { nameWithOwner pullRequest(number: 3) { headRefOid } } }"}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"nameWithOwner":"acme/app"`) || !strings.Contains(string(body), `"headRefOid":"abc"`) {
		t.Errorf("GraphQL repository(owner: ACME, name: App) = %d %s, want acme/app with pull 3", resp.StatusCode, body)
	}
}
