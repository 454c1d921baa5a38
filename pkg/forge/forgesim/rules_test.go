package forgesim_test

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/forge/forgesim"
)

// call serves one request in process (no network, so it runs inside a
// synctest bubble) and returns the recorded answer.
func call(sim *forgesim.Sim, method, path, token string, body io.Reader, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, body)
	if token != "" {
		req.Header.Set("Authorization", "token "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	sim.ServeHTTP(rec, req)
	return rec
}

func remaining(rec *httptest.ResponseRecorder) string {
	return rec.Header().Get("X-Ratelimit-Remaining")
}

// mint returns a fresh installation token for installation id.
func mint(t *testing.T, sim *forgesim.Sim, id int) string {
	t.Helper()
	req := httptest.NewRequest("POST", "/app/installations/"+strconv.Itoa(id)+"/access_tokens", nil)
	req.Header.Set("Authorization", "Bearer "+jwt("42"))
	rec := httptest.NewRecorder()
	sim.ServeHTTP(rec, req)
	tok, ok := strings.CutPrefix(rec.Body.String(), `{"token":"`)
	if rec.Code != 201 || !ok {
		t.Fatalf("minting a token: got %d %s, want 201 with a token", rec.Code, rec.Body)
	}
	tok, _, _ = strings.Cut(tok, `"`)
	return tok
}

func TestPrimaryBudgetIsTheInstallationsOrTheUsers(t *testing.T) {
	sim := forgesim.New(forgesim.WithBudget(10))
	mustOK(t, sim.SeedPull("acme", "app", 1, "sha", "open"))
	mustOK(t, sim.MapToken("pat-1", "alice"))
	mustOK(t, sim.MapToken("pat-2", "alice"))
	steps := []struct {
		why, token, want string
	}{
		{"the first token of installation 7 opens its budget", mint(t, sim, 7), "9"},
		{"a rotated token of installation 7 spends the same budget", mint(t, sim, 7), "8"},
		{"installation 8 has a budget of its own", mint(t, sim, 8), "9"},
		{"alice's first token opens her budget", "pat-1", "9"},
		{"alice's second token spends the same budget", "pat-2", "8"},
		{"an unmapped plain token is its own user", "pat-3", "9"},
	}
	for _, s := range steps {
		if got := remaining(call(sim, "GET", "/repos/acme/app/pulls/1", s.token, nil)); got != s.want {
			t.Errorf("%s: got remaining %s, want %s: the primary budget is per installation, or per user for a plain token", s.why, got, s.want)
		}
	}
	if err := sim.MapToken("", "alice"); err == nil || !strings.Contains(err.Error(), "token") {
		t.Errorf("MapToken with no token: got %v, want an error naming token", err)
	}
	var alice *forgesim.BudgetWindow
	for _, w := range sim.Stats().Budget.Windows {
		if w.Token == "alice" && w.Resource == "core" {
			alice = &w
		}
	}
	if alice == nil || alice.Used != 2 {
		t.Errorf("stats: got alice's window %+v, want one window with 2 used: stats name the principal", alice)
	}
}

func Test304IsFreeOnlyForTheTokenTheETagWasIssuedTo(t *testing.T) {
	sim := forgesim.New(forgesim.WithBudget(10))
	mustOK(t, sim.SeedPull("acme", "app", 1, "sha", "open"))
	mustOK(t, sim.MapToken("a2", "a")) // a's second token: the same user, the same budget
	first := call(sim, "GET", "/repos/acme/app/pulls/1", "a", nil)
	etag := first.Header().Get("ETag")
	if vary := first.Header().Get("Vary"); !strings.Contains(vary, "Authorization") {
		t.Errorf("Vary: got %q, want it to name Authorization, as GitHub's does", vary)
	}
	steps := []struct {
		why, token, inm string
		status          int
		remaining       string
	}{
		{"the same token's ETag: a free 304", "a", etag, 304, "9"},
		{"another token of the same user: its answer varies by Authorization, a charged 200", "a2", etag, 200, "8"},
		{"another user's token: a charged 200 of its own budget", "b", etag, 200, "9"},
	}
	for _, s := range steps {
		rec := call(sim, "GET", "/repos/acme/app/pulls/1", s.token, nil, "If-None-Match", s.inm)
		if rec.Code != s.status || remaining(rec) != s.remaining {
			t.Errorf("%s: got %d remaining %s, want %d remaining %s: a 304 is free only when authorized and the ETag is the token's", s.why, rec.Code, remaining(rec), s.status, s.remaining)
		}
	}
	anon := call(sim, "GET", "/repos/acme/app/pulls/1", "", nil)
	rec := call(sim, "GET", "/repos/acme/app/pulls/1", "", nil, "If-None-Match", anon.Header().Get("ETag"))
	if rec.Code != 304 || remaining(rec) != "8" {
		t.Errorf("anonymous conditional request: got %d remaining %s, want 304 remaining 8: a 304 is free only when authorized", rec.Code, remaining(rec))
	}
}

// TestOnlyAGETOfAnExistingResourceIsAnswered304 pins when a matching
// If-None-Match makes the answer 304. "*" matches any current
// representation, and 304 answers a GET (or HEAD) only (RFC 9110, section
// 13.1.2, If-None-Match): so a GET of an existing pull request is answered
// 304, and neither a GET of a missing one nor a GraphQL POST is.
func TestOnlyAGETOfAnExistingResourceIsAnswered304(t *testing.T) {
	sim := forgesim.New()
	mustOK(t, sim.SeedPull("acme", "app", 1, "sha", "open"))
	for _, tc := range []struct {
		method, path, body string
		want304            bool
	}{
		{"GET", "/repos/acme/app/pulls/1", "", true},
		{"GET", "/repos/acme/app/pulls/2", "", false},
		{"POST", "/graphql", gqlBody(`{ viewer { login } }`), false},
	} {
		rec := call(sim, tc.method, tc.path, "t", strings.NewReader(tc.body), "If-None-Match", "*")
		if got := rec.Code == 304; got != tc.want304 {
			t.Errorf("%s %s, If-None-Match *: got %d, want 304 %v: only a GET of an existing resource is answered 304", tc.method, tc.path, rec.Code, tc.want304)
		}
	}
}

func TestRESTPointsPerEndpointPerMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim := forgesim.New(forgesim.WithMinute(200 * time.Millisecond))
		mustOK(t, sim.SeedPull("acme", "app", 1, "sha", "open"))
		for i := range 900 {
			if rec := call(sim, "GET", "/repos/acme/app/pulls/1", "t", nil); rec.Code != 200 {
				t.Fatalf("GET %d of the minute: got %d, want 200: 900 points a minute per endpoint", i+1, rec.Code)
			}
		}
		rec := call(sim, "GET", "/repos/acme/app/pulls/1", "t", nil)
		if rec.Code != 403 || rec.Header().Get("Retry-After") != "1" || !strings.Contains(rec.Body.String(), "secondary rate limit") {
			t.Errorf("GET 901 of the minute: got %d retry-after %q %s, want 403, retry-after 1 (the rest of the minute, rounded up): 900 points a minute", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
		}
		if rec := call(sim, "GET", "/repos/acme/app/commits/sha/status", "t", nil); rec.Code != 200 {
			t.Errorf("another endpoint in the same minute: got %d, want 200: the limit is per endpoint", rec.Code)
		}
		if rec := call(sim, "GET", "/repos/acme/app/pulls/1", "u", nil); rec.Code != 200 {
			t.Errorf("another user's token: got %d, want 200: the limit is the principal's", rec.Code)
		}
		time.Sleep(200 * time.Millisecond)
		if rec := call(sim, "GET", "/repos/acme/app/pulls/1", "t", nil); rec.Code != 200 {
			t.Errorf("the next (compressed) minute: got %d, want 200: windows follow WithMinute", rec.Code)
		}
	})
}

func TestContentCreatingRequestsPerMinuteAndHour(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim := forgesim.New()
		mustOK(t, sim.SeedPull("acme", "app", 1, "sha", "open"))
		post := func() *httptest.ResponseRecorder {
			return call(sim, "POST", "/repos/acme/app/statuses/sha", "t", strings.NewReader(`{"state":"success","context":"c"}`))
		}
		var created int
		for range 6 { // 6 minutes of 80 and one refusal each: 480 created
			for range 80 {
				if rec := post(); rec.Code != 201 {
					t.Fatalf("status %d: got %d %s, want 201: 80 content-creating requests a minute", created+1, rec.Code, rec.Body)
				}
				created++
			}
			if rec := post(); rec.Code != 403 || rec.Header().Get("Retry-After") != "60" {
				t.Fatalf("request 81 of a minute: got %d retry-after %q, want 403, retry-after 60: 80 a minute", rec.Code, rec.Header().Get("Retry-After"))
			}
			time.Sleep(time.Minute)
		}
		for range 20 {
			if rec := post(); rec.Code != 201 {
				t.Fatalf("status %d: got %d, want 201: 500 an hour", created+1, rec.Code)
			}
			created++
		}
		rec := post()
		if rec.Code != 403 || rec.Header().Get("Retry-After") != "3240" {
			t.Errorf("status 501 of the hour, minute 7: got %d retry-after %q, want 403, retry-after 3240 (54 minutes left): 500 an hour", rec.Code, rec.Header().Get("Retry-After"))
		}
		if rec := call(sim, "GET", "/repos/acme/app/pulls/1", "t", nil); rec.Code != 200 {
			t.Errorf("a read after the content limit: got %d, want 200: only content-creating requests count", rec.Code)
		}
	})
}

func TestTokenMintsAreNotContentCreating(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim := forgesim.New()
		for i := range 100 { // past 80 a minute, within 900 REST points (5 each)
			mint(t, sim, 7+i%3) // fails the test unless 201
		}
		// The App's content limit is untouched: a content-creating write
		// by its JWT is refused only by its route, not by the limit.
		if rec := call(sim, "POST", "/repos/acme/app/statuses/sha", "", nil, "Authorization", "Bearer "+jwt("42")); rec.Code == 403 {
			t.Errorf("a write after 100 mints: got 403 %s, want no secondary limit: minting an installation token creates no content", rec.Body)
		}
	})
}

func TestGraphQLPointsPerMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim := forgesim.New(forgesim.WithBudget(100_000))
		query := func(q string) int {
			return call(sim, "POST", "/graphql", "t", strings.NewReader(`{"query":"`+q+`"}`)).Code
		}
		for i := range 400 {
			if code := query("mutation { x }"); code == 403 {
				t.Fatalf("mutation %d: got 403, want an answer: 400 mutations of 5 points fill 2,000", i+1)
			}
		}
		if code := query("{ viewer { login } }"); code != 403 {
			t.Errorf("a query after 2,000 points: got %d, want 403: 2,000 GraphQL points a minute, a mutation 5", code)
		}
		time.Sleep(time.Minute)
		if code := query("{ viewer { login } }"); code != 200 {
			t.Errorf("the next minute: got %d, want 200", code)
		}
	})
}

func TestGraphQLPrimaryRefusalsCostNoSecondaryPoints(t *testing.T) {
	lim := forgesim.GitHubSecondaryLimits
	lim.GraphQLPointsPerMinute = 3
	sim := forgesim.New(forgesim.WithBudget(1), forgesim.WithSecondaryLimits(lim))
	query := func() *httptest.ResponseRecorder {
		return call(sim, "POST", "/graphql", "t", strings.NewReader(gqlBody(`{ viewer { login } }`)))
	}
	query() // spends the budget of 1 and 1 of the minute's 3 points
	for i := range 2 {
		if rec := query(); !strings.Contains(rec.Body.String(), `"type":"RATE_LIMITED"`) {
			t.Fatalf("query %d over a spent budget: got %d %s, want RATE_LIMITED", i+2, rec.Code, rec.Body)
		}
	}
	mustOK(t, sim.SetBudget("t", 100))
	if rec := query(); rec.Code != 200 {
		t.Errorf("a query once the budget has room: got %d %s, want 200: the two RATE_LIMITED answers cost none of the minute's 3 points", rec.Code, rec.Body)
	}
}

func TestConcurrentRequestsOverTheLimitAre429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim := forgesim.New(forgesim.WithSecondaryLimits(forgesim.SecondaryLimits{Concurrent: 2}))
		var wg sync.WaitGroup
		var writers []*io.PipeWriter
		for range 2 { // two requests in flight: their bodies are still coming
			pr, pw := io.Pipe()
			writers = append(writers, pw)
			wg.Go(func() { call(sim, "POST", "/graphql", "t", pr) })
		}
		synctest.Wait()
		rec := call(sim, "GET", "/repos/acme/app/pulls/1", "t", nil)
		if rec.Code != 429 || rec.Header().Get("Retry-After") == "" {
			t.Errorf("a third concurrent request: got %d retry-after %q, want 429 with retry-after: at most Concurrent in flight, REST and GraphQL together", rec.Code, rec.Header().Get("Retry-After"))
		}
		if rec := call(sim, "GET", "/repos/acme/app/pulls/1", "u", nil); rec.Code != 404 {
			t.Errorf("another user's request: got %d, want 404 (no such pull): the limit is the principal's", rec.Code)
		}
		for _, pw := range writers {
			pw.Close()
		}
		wg.Wait()
		if rec := call(sim, "GET", "/repos/acme/app/pulls/1", "t", nil); rec.Code != 404 {
			t.Errorf("after the two ended: got %d, want 404 (no such pull): finished requests leave the count", rec.Code)
		}
	})
}

func TestInjectedSecondaryLimitIsSpentOnlyByARequestThatReachesIt(t *testing.T) {
	sim := forgesim.New()
	mustOK(t, sim.AddInstallation(7, "acme", "acme/app"))
	mustOK(t, sim.SeedPull("acme", "app", 1, "sha", "open"))
	old := mint(t, sim, 7)
	mustOK(t, sim.RemoveInstallation(7))
	mustOK(t, sim.SecondaryLimit("", time.Minute, 1))
	if rec := call(sim, "GET", "/repos/acme/app/pulls/1", old, nil); rec.Code != 401 {
		t.Fatalf("a removed installation's token: got %d, want 401 Bad credentials", rec.Code)
	}
	if rec := call(sim, "GET", "/repos/acme/app/pulls/1", "pat", nil); rec.Code != 403 {
		t.Errorf("the next request, after a 401: got %d, want 403: SecondaryLimit(\"\", 1m, 1) refuses the first request that reaches the limits, after the token and concurrency checks", rec.Code)
	}
	if rec := call(sim, "GET", "/repos/acme/app/pulls/1", "pat", nil); rec.Code != 200 {
		t.Errorf("the request after it: got %d, want 200: the injected limit was for one request", rec.Code)
	}
}

func TestSecondaryLimitsSwitchOff(t *testing.T) {
	sim := forgesim.New(forgesim.WithSecondaryLimits(forgesim.SecondaryLimits{}))
	mustOK(t, sim.SeedPull("acme", "app", 1, "sha", "open"))
	for i := range 1000 {
		if rec := call(sim, "GET", "/repos/acme/app/pulls/1", "t", nil); rec.Code != 200 {
			t.Fatalf("GET %d: got %d, want 200: a zero SecondaryLimits switches every limit off", i+1, rec.Code)
		}
	}
}

func TestStatusContextsAreCaseInsensitive(t *testing.T) {
	sim := forgesim.New()
	mustOK(t, sim.SetStatus("acme", "app", "sha", forgesim.Status{Context: "CI/Review", State: "success"}))
	call(sim, "POST", "/repos/acme/app/statuses/sha", "t", strings.NewReader(`{"state":"failure","context":"ci/review"}`))
	rec := call(sim, "GET", "/repos/acme/app/commits/sha/status", "t", nil)
	if !strings.Contains(rec.Body.String(), `"state":"failure"`) || !strings.Contains(rec.Body.String(), `"total_count":1`) {
		t.Errorf("got %s, want one context, failure: a context differing only in case is the same context", rec.Body)
	}
}

func TestCombinedStatusAcceptsABranchOrATag(t *testing.T) {
	sim := forgesim.New()
	mustOK(t, sim.SetStatus("acme", "app", "abc123", forgesim.Status{Context: "c", State: "success"}))
	mustOK(t, sim.SetRef("acme", "app", "heads/main", "abc123"))
	ctl := call(sim, "POST", "/_sim/repos/acme/app/refs", "", strings.NewReader(`{"ref":"tags/v1.0","sha":"abc123"}`))
	if ctl.Code != 204 {
		t.Fatalf("POST /_sim/repos/acme/app/refs: got %d %s, want 204", ctl.Code, ctl.Body)
	}
	for _, ref := range []string{"abc123", "main", "v1.0"} {
		rec := call(sim, "GET", "/repos/acme/app/commits/"+ref+"/status", "t", nil)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"sha":"abc123"`) {
			t.Errorf("ref %s: got %d %s, want 200 for sha abc123: the ref can be a SHA, a branch or a tag", ref, rec.Code, rec.Body)
		}
	}
	if rec := call(sim, "GET", "/repos/acme/app/commits/nope/status", "t", nil); rec.Code != 404 {
		t.Errorf("unknown ref: got %d, want 404", rec.Code)
	}
	bad := call(sim, "POST", "/_sim/repos/acme/app/refs", "", strings.NewReader(`{"ref":"main","sha":"abc123"}`))
	if bad.Code != 400 || !strings.Contains(bad.Body.String(), `"field":"ref"`) {
		t.Errorf("a ref without heads/ or tags/: got %d %s, want 400 naming ref", bad.Code, bad.Body)
	}
}

func TestIssuesSinceIsAfterTheGivenTime(t *testing.T) {
	c := &clock{t: t0}
	sim := forgesim.New(forgesim.WithClock(c.Now))
	mustOK(t, sim.SeedIssue("acme", "app", forgesim.Issue{Number: 1, Title: "x", State: "open"}))
	for _, tc := range []struct {
		since time.Time
		want  bool
	}{{t0.Add(-time.Second), true}, {t0, false}} {
		rec := call(sim, "GET", "/repos/acme/app/issues?since="+tc.since.Format(time.RFC3339), "t", nil)
		if got := strings.Contains(rec.Body.String(), `"number":1`); got != tc.want {
			t.Errorf("since %s, issue updated %s: got listed %v, want %v: only issues updated after since", tc.since.Format(time.RFC3339), t0.Format(time.RFC3339), got, tc.want)
		}
	}
}

func TestMapTokenControl(t *testing.T) {
	sim := forgesim.New()
	for _, tc := range []struct {
		body  string
		code  int
		field string
	}{
		{`{"token":"t1","user":"alice"}`, 204, ""},
		{`{"user":"alice"}`, 400, "token"},
		{`{"token":"t1"}`, 400, "user"},
	} {
		rec := call(sim, "POST", "/_sim/tokens", "", strings.NewReader(tc.body))
		if rec.Code != tc.code || (tc.field != "" && !strings.Contains(rec.Body.String(), `"field":"`+tc.field+`"`)) {
			t.Errorf("POST /_sim/tokens %s: got %d %s, want %d naming %q", tc.body, rec.Code, rec.Body, tc.code, tc.field)
		}
	}
}

// TestPerPageIsAtMost100 pins GitHub's page size bound: per_page asks for
// at most 100 (List repository issues, parameter per_page, "max 100":
// https://docs.github.com/rest/issues/issues#list-repository-issues),
// so a larger one answers a page of 100 and a next page.
func TestPerPageIsAtMost100(t *testing.T) {
	sim := forgesim.New()
	for i := 1; i <= 101; i++ {
		mustOK(t, sim.SeedIssue("acme", "app", forgesim.Issue{Number: i, Title: "t", State: "open"}))
	}
	rec := call(sim, "GET", "/repos/acme/app/issues?per_page=101", "t", nil)
	var page []json.RawMessage
	mustOK(t, json.Unmarshal(rec.Body.Bytes(), &page))
	if len(page) != 100 || !strings.Contains(rec.Header().Get("Link"), `rel="next"`) {
		t.Errorf("per_page=101 of 101 issues: got %d issues, Link %q, want 100 and a next page: per_page is at most 100", len(page), rec.Header().Get("Link"))
	}
}
