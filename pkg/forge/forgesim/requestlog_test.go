package forgesim_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/forge/forgesim"
)

// httpServer serves sim until the test ends.
func httpServer(t *testing.T, sim *forgesim.Sim) *httptest.Server {
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return srv
}

func TestRequestLogKeepsEachInstallationsSendersByInterval(t *testing.T) {
	c := &clock{t: t0}
	sim := forgesim.New(forgesim.WithClock(c.Now), forgesim.WithMinute(10*time.Second))
	srv := httpServer(t, sim)
	mustOK(t, sim.SeedInstallations(2, 1))
	_, tok1 := mintFor(t, srv, "1")
	_, tok1b := mintFor(t, srv, "1")
	_, tok2 := mintFor(t, srv, "2")
	read := func(tok, repo, agent string) {
		do(t, srv, "GET", "/repos/"+repo+"/issues", tok, "", "User-Agent", agent)
	}
	read(tok1, "org-1/repo-1", "iterion (a)")
	c.t = t0.Add(3 * time.Second)
	read(tok1, "org-1/repo-1", "iterion (a)")
	read(tok1b, "org-1/repo-1", "iterion (b)")
	read(tok2, "org-2/repo-1", "iterion (a)")
	read(tok2, "org-1/repo-1", "iterion (a)") // a repository installation 2 does not cover: 404
	c.t = t0.Add(12 * time.Second)
	read(tok1, "org-1/repo-1", "iterion (a)")
	read("ghp_plain", "org-1/repo-1", "iterion (a)") // not an installation token: not logged
	do(t, srv, "GET", "/app/installations", jwt("42"), "", "User-Agent", "iterion (a)")

	log := sim.RequestLog(time.Time{}, 0)
	if log.Interval != 10*time.Second {
		t.Errorf("got interval %v, want the simulator's minute, 10s: the log's buckets default to its minute", log.Interval)
	}
	type key struct {
		id     int64
		sender string
	}
	got := map[key][]forgesim.RequestBucket{}
	for _, sr := range log.Series {
		got[key{sr.Installation, sr.Sender}] = sr.Buckets
	}
	if len(got) != 3 {
		t.Fatalf("got %d series %v, want 3: installation 1 from a and b, installation 2 from a; plain tokens and JWTs are not logged", len(got), log.Series)
	}
	a1 := got[key{1, "iterion (a)"}]
	if len(a1) != 2 || a1[0].Requests != 2 || a1[1].Requests != 1 {
		t.Fatalf("installation 1 from a: got %+v, want 2 requests in the first interval and 1 in the second", a1)
	}
	if !a1[0].Start.Equal(t0) || !a1[0].First.Equal(t0) || !a1[0].Last.Equal(t0.Add(3*time.Second)) || !a1[1].Start.Equal(t0.Add(10*time.Second)) {
		t.Errorf("installation 1 from a: got %+v, want the interval starts and first and last arrivals on the simulator's clock", a1)
	}
	if b1 := got[key{1, "iterion (b)"}]; len(b1) != 1 || b1[0].Requests != 1 {
		t.Errorf("installation 1 from b: got %+v, want its one request: senders are told apart by User-Agent", b1)
	}
	if a2 := got[key{2, "iterion (a)"}]; len(a2) != 1 || a2[0].Requests != 2 || a2[0].Failed != 1 || a2[0].Limited != 0 {
		t.Errorf("installation 2 from a: got %+v, want 2 requests, 1 failed (404), none limited", a2)
	}
	if since := sim.RequestLog(t0.Add(11*time.Second), 1); len(since.Series) != 1 || len(since.Series[0].Buckets) != 1 {
		t.Errorf("since the second interval, installation 1: got %+v, want only a's second bucket", since.Series)
	}
}

func TestRequestLogCountsRefusalsAndRevokedTokensApart(t *testing.T) {
	sim, srv := start(t)
	mustOK(t, sim.SeedInstallations(2, 1))
	_, tok1 := mintFor(t, srv, "1")
	_, tok2 := mintFor(t, srv, "2")
	do(t, srv, "GET", "/repos/org-1/repo-1/issues", tok1, "", "User-Agent", "x")
	mustOK(t, sim.SecondaryLimit(tok1, time.Minute, 1))
	if resp, _ := do(t, srv, "GET", "/repos/org-1/repo-1/issues", tok1, "", "User-Agent", "x"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a read under an injected secondary limit: %d, want 403", resp.StatusCode)
	}
	mustOK(t, sim.RemoveInstallation(2))
	if resp, _ := do(t, srv, "GET", "/repos/org-2/repo-1/issues", tok2, "", "User-Agent", "x"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a removed installation's token: %d, want 401", resp.StatusCode)
	}
	log := sim.RequestLog(time.Time{}, 0)
	if len(log.Series) != 2 {
		t.Fatalf("got %d series, want 2", len(log.Series))
	}
	if b := log.Series[0].Buckets[0]; b.Requests != 2 || b.Limited != 1 || b.Failed != 0 {
		t.Errorf("installation 1: got %+v, want 2 requests, 1 limited: a secondary-limit refusal counts as limited", b)
	}
	if b := log.Series[1].Buckets[0]; b.Requests != 1 || b.Limited != 0 || b.Failed != 1 {
		t.Errorf("installation 2 after its removal: got %+v, want 1 request, failed, not limited: a revoked token is logged against its installation", b)
	}
}

func TestRequestLogCountsPrimaryRefusalsOfEitherAPIAsLimited(t *testing.T) {
	sim := forgesim.New()
	mustOK(t, sim.AddInstallation(7, "acme", "acme/app"))
	tok := mint(t, sim, 7)
	mustOK(t, sim.SetBudget(tok, 0))
	if rec := call(sim, "POST", "/graphql", tok, strings.NewReader(gqlBody(`{ viewer { login } }`))); !strings.Contains(rec.Body.String(), `"type":"RATE_LIMITED"`) {
		t.Fatalf("GraphQL over a spent budget: got %d %s, want a 200 RATE_LIMITED answer", rec.Code, rec.Body)
	}
	if rec := call(sim, "GET", "/repos/acme/app/pulls/1", tok, nil); rec.Code != http.StatusForbidden {
		t.Fatalf("REST over a spent budget: got %d, want 403", rec.Code)
	}
	if b := sim.RequestLog(time.Time{}, 7).Series[0].Buckets[0]; b.Requests != 2 || b.Limited != 2 || b.Failed != 0 {
		t.Errorf("got %+v, want 2 requests, both limited: the primary limit refused both, GraphQL's with a 200", b)
	}
}

func TestRequestLogKeepsABoundedNumberOfIntervals(t *testing.T) {
	c := &clock{t: t0}
	sim := forgesim.New(forgesim.WithClock(c.Now), forgesim.WithRequestLog(time.Second, 3))
	srv := httpServer(t, sim)
	mustOK(t, sim.SeedInstallations(2, 1))
	_, tok1 := mintFor(t, srv, "1")
	_, tok2 := mintFor(t, srv, "2")
	do(t, srv, "GET", "/repos/org-2/repo-1/issues", tok2, "", "User-Agent", "gone")
	tokens := []string{tok1}
	for i := range 10 {
		c.t = t0.Add(time.Duration(i) * time.Second)
		if i == 5 {
			_, tok := mintFor(t, srv, "1")
			tokens = append(tokens, tok)
		}
		do(t, srv, "GET", "/repos/org-1/repo-1/issues", tokens[len(tokens)-1], "", "User-Agent", "kept")
	}
	log := sim.RequestLog(time.Time{}, 0)
	if len(log.Series) != 1 {
		t.Fatalf("got %d series %+v, want 1: a sender whose every bucket aged out is dropped", len(log.Series), log.Series)
	}
	sr := log.Series[0]
	if len(sr.Buckets) != 3 || !sr.Buckets[0].Start.Equal(t0.Add(7*time.Second)) {
		t.Errorf("got buckets %+v, want the last 3 intervals (from t0+7s): the log keeps `keep` intervals", sr.Buckets)
	}
	if sr.Tokens != 2 {
		t.Errorf("got %d tokens, want 2: the sender changed token once", sr.Tokens)
	}
}

func TestRequestLogControlEndpoint(t *testing.T) {
	sim, srv := start(t)
	mustOK(t, sim.SeedInstallations(1, 1))
	_, tok := mintFor(t, srv, "1")
	do(t, srv, "GET", "/repos/org-1/repo-1/issues", tok, "", "User-Agent", "iterion (r1)")
	resp, body := do(t, srv, "GET", "/_sim/installations/requests?installation=1&since="+url.QueryEscape(t0.Format(time.RFC3339Nano)), "", "")
	var log forgesim.RequestLog
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &log) != nil {
		t.Fatalf("GET /_sim/installations/requests: %d %s", resp.StatusCode, body)
	}
	if len(log.Series) != 1 || log.Series[0].Sender != "iterion (r1)" || log.Series[0].Buckets[0].Requests != 1 {
		t.Errorf("got %s, want installation 1's one request from iterion (r1)", body)
	}
	for _, q := range []struct{ query, field string }{
		{"since=yesterday", "since"},
		{"installation=-3", "installation"},
	} {
		resp, body := do(t, srv, "GET", "/_sim/installations/requests?"+q.query, "", "")
		var e struct {
			Field string `json:"field"`
		}
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Field != q.field {
			t.Errorf("?%s: got %d %s, want 400 naming field %q", q.query, resp.StatusCode, body, q.field)
		}
	}
}
