package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/server"
)

// getAPI sends an authorized GET.
func (f *httpFixture) getAPI(t *testing.T, path string) (int, string) {
	t.Helper()
	return f.do(t, "GET", path, map[string]string{"Authorization": "Bearer " + apiToken}, "")
}

func TestGetRunAnswersTheRunWithItsLastOffer(t *testing.T) {
	f := newHTTPFixture(t, atPageNow)
	_, body := f.postRun(t, `{"repo": "acme/app", "pull": 12, "head_sha": "`+headSHA+`", "verdict": "success"}`)
	var id struct{ ID string }
	if err := json.Unmarshal([]byte(body), &id); err != nil {
		t.Fatal(err)
	}
	code, body := f.getAPI(t, "/api/runs/"+id.ID)
	var got server.RunView
	if err := json.Unmarshal([]byte(body), &got); code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/runs/{id} = %d %s (%v), want 200 JSON", code, body, err)
	}
	if got.ID != id.ID || got.Repo != "acme/app" || got.Pull != 12 || got.Verdict != gaterun.VerdictSuccess ||
		got.LastOffer == nil || got.LastOffer.Outcome != string(server.OutcomePublished) || got.LastOffer.Lane != "api" || !got.LastOffer.At.Equal(pageNow) {
		t.Errorf("got %+v (last offer %+v), want the run with its last offer (published on lane api at %v): the run as stored, and what this replica did with it", got, got.LastOffer, pageNow)
	}
	if code, _ := f.getAPI(t, "/api/runs/nope"); code != http.StatusNotFound {
		t.Errorf("GET /api/runs/nope = %d, want 404: an unknown id", code)
	}
	if code, _ := f.do(t, "GET", "/api/runs/"+id.ID, nil, ""); code != http.StatusUnauthorized {
		t.Errorf("GET /api/runs/{id} without a token = %d, want 401: the API needs the bearer token", code)
	}
}

// TestGetRunShowsTheSweepersBatchOfferAsItsLastOffer pins that a run's
// last offer is the answering replica's whatever offered it, the batch
// sweep included (operating.md: the lane is api, webhook or
// merge-gate-sweeper): on the replica whose sweeper just published the
// run's status, GET /api/runs/{id} shows that offer.
func TestGetRunShowsTheSweepersBatchOfferAsItsLastOffer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newCluster(t, 1)
		startReplicas(t, c, next, 1, time.Minute, nil)
		r := c.replicas[0]
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		if posts := c.sim.Requests(forgesim.Filter{Route: statusRoute}); posts != 1 {
			t.Fatalf("status writes: %d, want the sweeper's 1", posts)
		}
		req := httptest.NewRequest("GET", "/api/runs/"+gateRun(1, "sha1", "success").ID, nil)
		req.Header.Set("Authorization", "Bearer a")
		w := httptest.NewRecorder()
		r.handler.ServeHTTP(w, req)
		r.stop()
		var got server.RunView
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != http.StatusOK {
			t.Fatalf("GET /api/runs/{id}: %d %s", w.Code, w.Body)
		}
		if got.LastOffer == nil || got.LastOffer.Lane != "merge-gate-sweeper" || got.LastOffer.Outcome != string(server.OutcomePublished) {
			t.Errorf("last offer: %+v, want the sweeper's (lane merge-gate-sweeper, published): the batch sweep's offers are noted as the API's and webhooks' are", got.LastOffer)
		}
	})
}

func TestListRunsFiltersAndPages(t *testing.T) {
	f := newHTTPFixture(t, atPageNow)
	for i := range 5 {
		sha := fmt.Sprintf("%040x", i+1)
		pull := 12 + i%2 // pulls 12 and 13
		if code, body := f.postRun(t, fmt.Sprintf(`{"repo": "acme/app", "pull": %d, "head_sha": %q, "verdict": "success"}`, pull, sha)); code != http.StatusCreated {
			t.Fatalf("POST /api/runs = %d %s", code, body)
		}
	}
	// Pull 12's forge head is headSHA, so offering its runs settled them;
	// pull 13 does not exist on the forge, so its runs stay unsettled.
	list := func(query string) (server.RunsPage, int, string) {
		t.Helper()
		code, body := f.getAPI(t, "/api/runs"+query)
		var p server.RunsPage
		if code == http.StatusOK {
			if err := json.Unmarshal([]byte(body), &p); err != nil {
				t.Fatalf("GET /api/runs%s: %v", query, err)
			}
		}
		return p, code, body
	}
	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		p, code, body := list("?limit=2&cursor=" + cursor)
		if code != http.StatusOK {
			t.Fatalf("GET /api/runs?limit=2 = %d %s", code, body)
		}
		pages++
		for _, r := range p.Runs {
			if seen[r.ID] {
				t.Errorf("run %s listed twice: the cursor resumes after the last run", r.ID)
			}
			seen[r.ID] = true
		}
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	if len(seen) != 5 || pages != 3 {
		t.Errorf("got %d runs in %d pages, want 5 in 3: limit 2 pages through every run once", len(seen), pages)
	}
	p, _, _ := list("?repo=acme/app&pull=13&state=unsettled")
	if len(p.Runs) != 2 || p.Next != "" {
		t.Errorf("got %d runs (next %q), want pull 13's 2 unsettled runs and no next page: filters", len(p.Runs), p.Next)
	}
	if p, _, _ := list("?repo=acme/app&pull=13&state=unsettled&limit=2"); len(p.Runs) != 2 || p.Next != "" {
		t.Errorf("limit 2 with 2 runs: got %d runs (next %q), want 2 and no next page: next is absent on the last page, even a full one", len(p.Runs), p.Next)
	}
	for _, r := range p.Runs {
		if r.Pull != 13 || r.Settled {
			t.Errorf("got %+v, want only pull 13, unsettled", r)
		}
	}
	p, _, _ = list("?state=settled")
	if len(p.Runs) != 3 {
		t.Errorf("got %d settled runs, want pull 12's 3: state=settled", len(p.Runs))
	}
	for _, bad := range []struct{ query, field string }{
		{"?pull=x", "pull"}, {"?pull=0", "pull"}, {"?state=open", "state"}, {"?repo=app", "repo"},
		{"?limit=0", "limit"}, {"?limit=1001", "limit"}, {"?cursor=%21%21", "cursor"},
		{"?installation=0", "installation"}, // 0 would list every installation's runs
		{"?cursor=MTIzIA", "cursor"},        // base64url of "123 ": an instant without a run id
	} {
		if _, code, body := list(bad.query); code != http.StatusBadRequest || !strings.Contains(body, bad.field) {
			t.Errorf("GET /api/runs%s = %d %s, want 400 naming %s", bad.query, code, body, bad.field)
		}
	}
	if code, _ := f.do(t, "GET", "/api/runs", nil, ""); code != http.StatusUnauthorized {
		t.Errorf("GET /api/runs without a token = %d, want 401", code)
	}
}

// TestListsRefuseAParameterTheyDoNotTake pins that the JSON lists with
// parameters answer 400 naming one they do not take, with the one it
// resembles, rather than ignore it: ?stat=settled would otherwise list
// every run as if unfiltered.
func TestListsRefuseAParameterTheyDoNotTake(t *testing.T) {
	f := newHTTPFixture(t, atPageNow)
	for _, c := range []struct{ path, want, why string }{
		{"/api/runs?stat=settled", `unknown parameter \"stat\" (did you mean \"state\"?); the parameters are repo, pull, installation, state, limit, cursor`,
			"a misspelt filter is refused, not dropped"},
		{"/api/runs?state=settled&Repo=acme/app", `unknown parameter \"Repo\" (did you mean \"repo\"?)`, "names are case-sensitive"},
		{"/api/runs?repo=acme/app&token=x", `unknown parameter \"token\"; the parameters are`, "no suggestion when none is close"},
		{"/leases?fromat=json", `unknown parameter \"fromat\" (did you mean \"format\"?); the parameters are format`, "the leases' JSON view too"},
	} {
		if code, body := f.do(t, "GET", c.path, pageAuth, ""); code != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("GET %s = %d %s, want 400 with %s: %s", c.path, code, body, c.want, c.why)
		}
	}
	for _, path := range []string{"/api/runs?repo=acme/app&pull=1&installation=1&state=settled&limit=1", "/leases?format=json"} {
		if code, body := f.do(t, "GET", path, pageAuth, ""); code != http.StatusOK {
			t.Errorf("GET %s = %d %s, want 200: every parameter the list takes is known", path, code, body)
		}
	}
}

func TestRunsPageShowsUnsettledRunsAndTheirLastOffer(t *testing.T) {
	f := newHTTPFixture(t, atPageNow)
	if code, body := f.postRun(t, `{"repo": "acme/app", "pull": 99, "head_sha": "`+headSHA+`", "verdict": "failure"}`); code != http.StatusCreated {
		t.Fatalf("POST /api/runs = %d %s", code, body)
	}
	code, body := f.do(t, "GET", "/runs", pageAuth, "")
	if code != http.StatusOK {
		t.Fatalf("GET /runs = %d", code)
	}
	wantAll(t, "GET /runs", body, "an unsettled run with its last offer's outcome, lane and time, and the backoff",
		"1 unsettled run,", "acme/app#99", `class="bad"`, "unreadable</span> (api)", `title="2026-09-30T15:00:00.000Z">now</time>`, "<th>backoff</th>", "the sweeper backs off")
}

// TestRunsAPIShowsWhenEachVerdictWasReported pins reported_at on GET
// /api/runs/{id} and GET /api/runs: the store's Reported, which decides
// which run of a commit sets its status, not Updated, which a move to
// another installation changes without a report. A store that keeps no
// report time gives none, and the field is absent.
func TestRunsAPIShowsWhenEachVerdictWasReported(t *testing.T) {
	ctx := context.Background()
	reported, moved := pageNow.Add(-time.Hour), pageNow.Add(-time.Minute)
	run := gateRun(12, headSHA, "success")
	stored := func(t *testing.T, runs gaterun.Store) gaterun.Run {
		t.Helper()
		if _, err := runs.Put(ctx, run, reported); err != nil {
			t.Fatal(err)
		}
		if ok, err := runs.Move(ctx, run.ID, 0, 5, moved); !ok || err != nil {
			t.Fatalf("Move = %v, %v; want the run moved", ok, err)
		}
		got, err := runs.Get(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// fields reads the run from both endpoints as raw JSON objects.
	fields := func(t *testing.T, f *httpFixture) []map[string]any {
		t.Helper()
		var one map[string]any
		var list struct{ Runs []map[string]any }
		for path, v := range map[string]any{"/api/runs/" + run.ID: &one, "/api/runs?repo=acme/app": &list} {
			code, body := f.getAPI(t, path)
			if err := json.Unmarshal([]byte(body), v); code != http.StatusOK || err != nil {
				t.Fatalf("GET %s = %d %s (%v), want 200 JSON", path, code, body, err)
			}
		}
		if len(list.Runs) != 1 {
			t.Fatalf("GET /api/runs listed %d runs, want 1", len(list.Runs))
		}
		return []map[string]any{one, list.Runs[0]}
	}

	t.Run("the store's report time", func(t *testing.T) {
		f := newHTTPFixture(t, atPageNow)
		want := stored(t, f.runs)
		if !want.Reported.Equal(reported) || !want.Updated.Equal(moved) {
			t.Fatalf("stored reported %v, updated %v; want %v and %v", want.Reported, want.Updated, reported, moved)
		}
		for i, v := range fields(t, f) {
			s, _ := v["reported_at"].(string)
			got, err := time.Parse(time.RFC3339Nano, s)
			if err != nil || !got.Equal(want.Reported) {
				t.Errorf("answer %d: reported_at %v, want %s (RFC 3339): the store's Reported, not Updated %s", i, v["reported_at"], want.Reported.Format(time.RFC3339Nano), want.Updated.Format(time.RFC3339Nano))
			}
		}
	})
	t.Run("no report time kept", func(t *testing.T) {
		runs := unreportedRuns{gaterun.NewMemoryStore()}
		f := newHTTPFixture(t, atPageNow, func(c *server.Config) { c.Runs = runs })
		stored(t, runs)
		for i, v := range fields(t, f) {
			if got, ok := v["reported_at"]; ok {
				t.Errorf("answer %d: reported_at %v, want it absent: a run with no report time has none to show", i, got)
			}
		}
	})
}

// unreportedRuns is a run store that keeps no report time: its runs read
// with a zero Reported.
type unreportedRuns struct{ gaterun.Store }

func (s unreportedRuns) Get(ctx context.Context, id string) (gaterun.Run, error) {
	r, err := s.Store.Get(ctx, id)
	r.Reported = time.Time{}
	return r, err
}

func (s unreportedRuns) List(ctx context.Context, q gaterun.Query) ([]gaterun.Run, error) {
	runs, err := s.Store.List(ctx, q)
	for i := range runs {
		runs[i].Reported = time.Time{}
	}
	return runs, err
}
