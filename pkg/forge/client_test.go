package forge_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

func TestClientReadsAndWritesThroughGoGitHub(t *testing.T) {
	sim, srv := startSim(t)
	c := newClient(t, srv, forge.Config{Token: "t1"})
	defer c.Close()
	ctx := forge.WithLane(context.Background(), forge.LaneAPI)
	if err := sim.SeedPull("acme", "app", 12, "sha1", "open"); err != nil {
		t.Fatal(err)
	}

	pr, err := c.GetPull(ctx, "acme", "app", 12)
	if want := (forge.Pull{Number: 12, State: "open", HeadSHA: "sha1"}); err != nil || pr != want {
		t.Fatalf("GetPull: got %+v, %v, want %+v: the pull request as seeded", pr, err, want)
	}
	cs, err := c.CombinedStatus(ctx, "acme", "app", "sha1")
	if err != nil || cs.State != "pending" || len(cs.Statuses) != 0 {
		t.Fatalf("CombinedStatus: got %+v, %v, want pending with no statuses: GitHub's state for a commit without statuses", cs, err)
	}
	st := forge.Status{Context: "iterion/review", State: "success", Description: "ok", TargetURL: "https://x/1"}
	if err := c.CreateStatus(ctx, "acme", "app", "sha1", st); err != nil {
		t.Fatalf("CreateStatus: %v", err)
	}
	cs, err = c.CombinedStatus(ctx, "acme", "app", "sha1")
	if err != nil || cs.State != "success" || len(cs.Statuses) != 1 || cs.Statuses[0] != st {
		t.Fatalf("CombinedStatus after CreateStatus: got %+v, %v, want success with %+v: the status written is read back", cs, err, st)
	}

	if err := sim.Merge("acme", "app", 12); err != nil {
		t.Fatal(err)
	}
	pr, err = c.GetPull(ctx, "acme", "app", 12)
	if err != nil || pr.State != "closed" || !pr.Merged {
		t.Fatalf("GetPull after merge: got %+v, %v, want closed and merged", pr, err)
	}

	_, err = c.GetPull(ctx, "acme", "app", 99)
	if !errors.Is(err, forge.ErrNotFound) {
		t.Fatalf("GetPull of a missing pull: got %v, want ErrNotFound: a 404 is reported as forge.ErrNotFound", err)
	}
}

func TestListIssuesFollowsEveryPageAndSince(t *testing.T) {
	clk := newTestClock(time.Date(2026, 9, 30, 14, 0, 0, 0, time.UTC))
	sim, srv := startSim(t, forgesim.WithClock(clk.Now))
	c := newClient(t, srv, forge.Config{Token: "t1", Now: clk.Now})
	ctx := forge.WithLane(context.Background(), forge.LaneBoardSync)
	for n := 1; n <= 230; n++ {
		if err := sim.SeedIssue("acme", "app", forgesim.Issue{Number: n, Title: fmt.Sprint("title ", n), State: "open", Labels: []string{"bug"}}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Add(time.Minute)
	since := clk.Now()
	clk.Add(time.Second) // GitHub lists issues updated after since
	if err := sim.SeedPull("acme", "app", 231, "sha", "open"); err != nil {
		t.Fatal(err)
	}

	all, err := c.ListIssues(ctx, "acme", "app", time.Time{})
	if err != nil || len(all) != 231 {
		t.Fatalf("ListIssues: got %d issues, %v, want 231: every page is followed", len(all), err)
	}
	if got := sim.Requests(forgesim.Filter{Route: "GET /repos/{owner}/{repo}/issues"}); got != 3 {
		t.Fatalf("issue pages requested: got %d, want 3: 231 issues at 100 a page", got)
	}
	recent, err := c.ListIssues(ctx, "acme", "app", since)
	if err != nil || len(recent) != 1 || recent[0].Number != 231 || !recent[0].PullRequest {
		t.Fatalf("ListIssues since: got %+v, %v, want only pull request 231: since filters by update time, and pull requests are issues", recent, err)
	}
	if last := all[len(all)-1]; last.Number != 1 || !slices.Equal(last.Labels, []string{"bug"}) || last.PullRequest {
		t.Fatalf("oldest issue: got %+v, want number 1 labelled bug, not a pull request: newest first, as GitHub lists them", last)
	}
}

// TestGetIssueTellsDeletedAndTransferredIssues pins GetIssue on GitHub's
// answers for an issue no longer in its repository
// (https://docs.github.com/rest/issues/issues#get-an-issue): a transferred
// one's 301 is followed, and the issue comes back in its new repository; a
// deleted one's 410 is ErrGone; a missing one's 404 ErrNotFound.
func TestGetIssueTellsDeletedAndTransferredIssues(t *testing.T) {
	sim, srv := startSim(t)
	c := newClient(t, srv, forge.Config{Token: "t1"})
	ctx := forge.WithLane(context.Background(), forge.LaneBoardSync)
	for n := 1; n <= 3; n++ {
		if err := sim.SeedIssue("Acme", "App", forgesim.Issue{Number: n, Title: fmt.Sprint("title ", n), State: "open"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sim.DeleteIssue("acme", "app", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.TransferIssue("acme", "app", 2, "acme", "lib"); err != nil {
		t.Fatal(err)
	}
	if is, err := c.GetIssue(ctx, "acme", "app", 3); err != nil || is.Repo != "Acme/App" || is.Number != 3 || is.Title != "title 3" {
		t.Errorf("GetIssue of an issue still there: got %+v, %v, want number 3 of Acme/App, the forge's spelling", is, err)
	}
	if is, err := c.GetIssue(ctx, "acme", "app", 2); err != nil || is.Repo != "acme/lib" || is.Number != 1 {
		t.Errorf("GetIssue of a transferred issue: got %+v, %v, want number 1 of acme/lib: the 301 is followed to its new repository", is, err)
	}
	if _, err := c.GetIssue(ctx, "acme", "app", 1); !errors.Is(err, forge.ErrGone) || errors.Is(err, forge.ErrNotFound) {
		t.Errorf("GetIssue of a deleted issue: got %v, want ErrGone: a 410 is reported as forge.ErrGone", err)
	}
	if _, err := c.GetIssue(ctx, "acme", "app", 9); !errors.Is(err, forge.ErrNotFound) {
		t.Errorf("GetIssue of an issue that never was: got %v, want ErrNotFound", err)
	}
}

func TestNewRejectsBadConfigNamingTheField(t *testing.T) {
	cases := []struct {
		name  string
		cfg   forge.Config
		field string
	}{
		{"token and app", forge.Config{Token: "x", App: &forge.AppAuth{AppID: 1, InstallationID: 1}}, "Token and App"},
		{"app id", forge.Config{App: &forge.AppAuth{AppID: 0, InstallationID: 1}}, "App.AppID"},
		{"installation id", forge.Config{App: &forge.AppAuth{AppID: 1, InstallationID: -2}}, "App.InstallationID"},
		{"private key", forge.Config{App: &forge.AppAuth{AppID: 1, InstallationID: 2, PrivateKey: []byte("nope")}}, "App.PrivateKey"},
		{"negative reserve", forge.Config{Reserves: map[string]int{forge.LaneMergeGateSweeper: -1}}, "Reserves"},
		{"relative base URL", forge.Config{BaseURL: "api.github.com"}, "BaseURL"},
		{"negative timeout", forge.Config{Timeout: -time.Second}, "Timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := forge.New(tc.cfg)
			if !errors.Is(err, forge.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("got %v, want ErrInvalidConfig naming %s: bad input names the field", err, tc.field)
			}
		})
	}
}

// urlRecorder passes requests to next and records each URL it sent.
type urlRecorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	urls []*url.URL
}

func (r *urlRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.urls = append(r.urls, req.URL)
	r.mu.Unlock()
	return r.next.RoundTrip(req)
}

func TestListIssuesSendsSinceAndIsConditional(t *testing.T) {
	clk := newTestClock(time.Date(2026, 9, 30, 14, 0, 0, 0, time.UTC))
	sim, srv := startSim(t, forgesim.WithClock(clk.Now))
	rec := &urlRecorder{next: srv.Client().Transport}
	c := newClient(t, srv, forge.Config{Token: "t1", Now: clk.Now, Next: rec})
	ctx := forge.WithLane(context.Background(), forge.LaneBoardSync)
	if err := sim.SeedIssue("acme", "app", forgesim.Issue{Number: 1, Title: "one", State: "open", Assignees: []string{"ana"}}); err != nil {
		t.Fatal(err)
	}
	updated := clk.Now()
	since := updated.Add(-time.Second) // GitHub lists issues updated after since
	for range 2 {
		got, err := c.ListIssues(ctx, "acme", "app", since)
		if err != nil || len(got) != 1 || !slices.Equal(got[0].Assignees, []string{"ana"}) || !got[0].UpdatedAt.Equal(updated) {
			t.Fatalf("ListIssues: got %+v, %v, want the issue numbered 1 assigned to ana, updated at %v: an issue updated after since is listed", got, err, updated)
		}
	}
	q := rec.urls[0].Query()
	if q.Get("since") != "2026-09-30T13:59:59Z" || q.Get("state") != "all" {
		t.Fatalf("query: got %v, want since=2026-09-30T13:59:59Z and state=all: ListIssues sends since in RFC 3339 and asks for every state", q)
	}
	if got := countOf(c, forge.LaneBoardSync, 304); got != 1 {
		t.Fatalf("304s on lane %s: got %d, want 1: the second identical list is conditional and answered Not Modified", forge.LaneBoardSync, got)
	}
	if got := sim.Requests(forgesim.Filter{Route: "GET /repos/{owner}/{repo}/issues", Status: 304}); got != 1 {
		t.Fatalf("simulator 304s: got %d, want 1: the client's count matches the server's", got)
	}
}

// TestRequestTimeoutIsGitHubsTimeoutPlusFiveSecondsAtMostAQuarterInterval
// pins the default Config.Timeout: GitHub's 10 s ServerTimeout plus 5 s
// for the answer to arrive, at most a quarter of the shortest interval.
func TestRequestTimeoutIsGitHubsTimeoutPlusFiveSecondsAtMostAQuarterInterval(t *testing.T) {
	for _, c := range []struct {
		interval, want time.Duration
		why            string
	}{
		{time.Minute, 15 * time.Second, "a minute's quarter is GitHub's 10 s plus 5 s"},
		{10 * time.Minute, 15 * time.Second, "waiting past 15 s only waits for a request GitHub gave up on"},
		{40 * time.Second, 10 * time.Second, "a quarter of the interval leaves the pass time to go on"},
	} {
		if got := forge.RequestTimeout(c.interval); got != c.want {
			t.Errorf("RequestTimeout(%v): got %v, want %v: %s", c.interval, got, c.want, c.why)
		}
	}
}

// TestCombinedStatusReadsEveryPage pins that CombinedStatus follows the
// pages of a ref's statuses: a commit with more contexts than a page
// holds (100) is read whole, so no context's verdict is missed.
func TestCombinedStatusReadsEveryPage(t *testing.T) {
	sim, srv := startSim(t)
	for i := range 101 {
		if err := sim.SetStatus("acme", "app", "sha", forgesim.Status{Context: fmt.Sprintf("ci-%d", i), State: "success"}); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := newClient(t, srv, forge.Config{Token: "t"}).CombinedStatus(laneCtx(forge.LaneAPI), "acme", "app", "sha")
	if err != nil || len(cs.Statuses) != 101 {
		t.Fatalf("got %d statuses (%v), want 101: every page is read", len(cs.Statuses), err)
	}
}
