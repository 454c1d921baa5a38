package forge_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

func TestPullStatesReadsABatchInOneCountedQuery(t *testing.T) {
	sim, srv := startSim(t)
	var refs []forge.PullRef
	for i := 1; i <= forge.MaxPullBatch; i++ {
		if err := sim.SeedPull("acme", "app", i, fmt.Sprintf("sha%d", i), "open"); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, forge.PullRef{Owner: "acme", Repo: "app", Number: i})
	}
	if err := sim.Merge("acme", "app", 2); err != nil {
		t.Fatal(err)
	}
	if err := sim.SetStatus("acme", "app", "sha1", forgesim.Status{Context: "iterion/review", State: "failure"}); err != nil {
		t.Fatal(err)
	}
	refs[99] = forge.PullRef{Owner: "acme", Repo: "gone", Number: 7}
	c := newClient(t, srv, forge.Config{Token: "t"})
	got, err := c.PullStates(forge.WithLane(context.Background(), forge.LaneMergeGateSweeper), refs)
	if err != nil {
		t.Fatal(err)
	}
	if p := got[0]; p.Err != nil || p.Pull != (forge.Pull{Number: 1, State: "open", HeadSHA: "sha1"}) ||
		fmt.Sprint(p.Statuses) != "[{iterion/review failure  }]" {
		t.Fatalf("got %+v, want open #1 at sha1 with iterion/review failure: a pull request with its head's statuses, in REST's spelling", p)
	}
	if p := got[1]; p.Pull.State != "closed" || !p.Pull.Merged {
		t.Fatalf("got %+v, want closed and merged: GraphQL's MERGED reads as REST's closed+merged", p.Pull)
	}
	if p := got[99]; !errors.Is(p.Err, forge.ErrNotFound) || got[98].Err != nil {
		t.Fatalf("got %v (and %v before it), want ErrNotFound for the missing repository only: an unreadable pull request fails alone", p.Err, got[98].Err)
	}
	n := sim.Requests(forgesim.Filter{Token: "t", Route: "POST /graphql"})
	var counted, points int64
	for _, k := range c.Counts() {
		if k.API == forge.APIGraphQL && k.Lane == forge.LaneMergeGateSweeper {
			counted += k.N
			points += k.Points
		}
	}
	if n != 1 || counted != 1 || points != 1 {
		t.Fatalf("got %d requests at the simulator, %d counted with %d points, want 1, 1 and 1: 100 pull requests are one GraphQL query of one point, counted on its lane", n, counted, points)
	}
}

func TestPullStatesRefusals(t *testing.T) {
	sim, srv := startSim(t, forgesim.WithBudget(0))
	if err := sim.SeedPull("acme", "app", 1, "sha", "open"); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, srv, forge.Config{Token: "t"})
	ctx := context.Background()
	if _, err := c.PullStates(ctx, nil); !errors.Is(err, forge.ErrInvalidArgument) || !strings.Contains(err.Error(), "refs") {
		t.Fatalf("got %v, want ErrInvalidArgument naming refs: an empty batch is a bad argument", err)
	}
	refs := []forge.PullRef{{Owner: "acme", Repo: "app", Number: 1}}
	var rl *forge.RateLimitError
	if _, err := c.PullStates(ctx, refs); !errors.As(err, &rl) || !rl.Sent || rl.Resource != "graphql" {
		t.Fatalf("got %v, want a sent *RateLimitError on graphql: GitHub's RATE_LIMITED answer stops the call", err)
	}
	if _, err := c.PullStates(ctx, refs); !errors.As(err, &rl) || rl.Sent {
		t.Fatalf("got %v, want a *RateLimitError held back: the gate knows the points are spent", err)
	}
	if n := sim.Requests(forgesim.Filter{Route: "POST /graphql"}); n != 1 {
		t.Fatalf("got %d queries at the simulator, want 1: the held-back one is not sent", n)
	}
}

// TestGraphQL403Or429IsAPrimaryLimitOnlyWithNoBudgetLeft pins how a
// GraphQL query answered 403 or 429 fails, as REST's does: GitHub's
// primary limit is a 403 or 429 with x-ratelimit-remaining 0 ("Rate limits
// for the REST API", Exceeding the rate limit); any other 403 is a
// refusal for want of permission, never a limit that stops the sweep
// until the budget's reset.
func TestGraphQL403Or429IsAPrimaryLimitOnlyWithNoBudgetLeft(t *testing.T) {
	reset := time.Date(2026, 9, 30, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name      string
		status    int
		remaining string
		limit     bool // a primary *RateLimitError
		forbidden bool // ErrForbidden
	}{
		{"403 with budget left is ErrForbidden", 403, "4999", false, true},
		{"429 with budget left is an error, neither a limit nor ErrForbidden", 429, "4999", false, false},
		{"403 with no budget left is the primary limit", 403, "0", true, false},
		{"429 with no budget left is the primary limit", 429, "0", true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := forgeAnswering(t, tc.status, http.Header{
				"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {tc.remaining},
				"X-Ratelimit-Reset": {strconv.FormatInt(reset.Unix(), 10)}, "X-Ratelimit-Resource": {"graphql"},
			}, `{"message":"Resource not accessible by integration","documentation_url":"https://docs.github.com/graphql"}`)
			c := newClient(t, srv, forge.Config{Token: "t", Now: func() time.Time { return reset.Add(-time.Hour) }})
			_, err := c.PullStates(laneCtx(forge.LaneMergeGateSweeper), []forge.PullRef{{Owner: "acme", Repo: "app", Number: 1}})
			var rl *forge.RateLimitError
			limit := errors.As(err, &rl)
			switch {
			case tc.limit && (!limit || rl.Cause != forge.CausePrimary || !rl.Sent || !rl.Reset.Equal(reset)):
				t.Fatalf("got %v, want a sent primary *RateLimitError resetting at %v", err, reset)
			case !tc.limit && limit:
				t.Fatalf("got %v, want no *RateLimitError: budget is left and nothing says secondary limit", err)
			case err == nil || errors.Is(err, forge.ErrForbidden) != tc.forbidden:
				t.Fatalf("got %v, want an error, wrapping ErrForbidden: %v", err, tc.forbidden)
			}
		})
	}
}

// TestGraphQLRateLimitErrorHoldsGraphQLUntilTheReset pins how PullStates
// takes GitHub's refusal of a query for the primary limit, a 200 whose
// errors say so: a sent primary *RateLimitError resetting at the budget's
// x-ratelimit-reset (a minute from now when the answer gives none), and
// every query until then held back unsent, whatever x-ratelimit-remaining
// said.
func TestGraphQLRateLimitErrorHoldsGraphQLUntilTheReset(t *testing.T) {
	start := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	window := func(remaining string) http.Header {
		return http.Header{"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {remaining},
			"X-Ratelimit-Reset": {strconv.FormatInt(start.Add(time.Hour).Unix(), 10)}, "X-Ratelimit-Resource": {"graphql"}}
	}
	cases := []struct {
		name   string
		header http.Header
		body   string
		reset  time.Time
	}{
		{"RATE_LIMITED with points left (a query costing more than is left) holds until the reset",
			window("1"), `{"errors":[{"type":"RATE_LIMITED","message":"API rate limit exceeded for installation ID 1."}]}`, start.Add(time.Hour)},
		{"RATE_LIMIT, the type GitHub also answers (githubkit#271), is the same refusal",
			window("0"), `{"errors":[{"type":"RATE_LIMIT","code":"graphql_rate_limit","message":"API rate limit already exceeded for installation ID 1."}]}`, start.Add(time.Hour)},
		{"a refusal without x-ratelimit-* headers holds a minute",
			nil, `{"errors":[{"type":"RATE_LIMITED","message":"API rate limit exceeded for installation ID 1."}]}`, start.Add(time.Minute)},
	}
	refs := []forge.PullRef{{Owner: "acme", Repo: "app", Number: 1}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newTestClock(start)
			srv, n := forgeAnswering(t, http.StatusOK, tc.header, tc.body)
			c := newClient(t, srv, forge.Config{Token: "t", Now: clk.Now})
			_, err := c.PullStates(laneCtx(forge.LaneMergeGateSweeper), refs)
			var rl *forge.RateLimitError
			if !errors.As(err, &rl) || !rl.Sent || rl.Cause != forge.CausePrimary || !rl.Reset.Equal(tc.reset) {
				t.Fatalf("got %v, want a sent primary *RateLimitError resetting at %v", err, tc.reset)
			}
			clk.Set(tc.reset.Add(-time.Second))
			if _, err := c.PullStates(laneCtx(forge.LaneMergeGateSweeper), refs); !errors.As(err, &rl) || rl.Sent || !rl.Reset.Equal(tc.reset) || n.Load() != 1 {
				t.Fatalf("a second before the reset: got %v with %d queries sent, want a *RateLimitError held back until %v and 1 query", err, n.Load(), tc.reset)
			}
			clk.Set(tc.reset)
			_, _ = c.PullStates(laneCtx(forge.LaneMergeGateSweeper), refs)
			if n.Load() != 2 {
				t.Fatalf("at the reset: %d queries sent, want 2: the hold ends there", n.Load())
			}
		})
	}
}

func TestHourlyLineShowsGraphQLPoints(t *testing.T) {
	c, clk, logs, host := hourlySetup(t, time.Date(2026, 9, 30, 14, 0, 0, 0, time.UTC))
	ctx := forge.WithLane(context.Background(), forge.LaneMergeGateSweeper)
	for range 2 {
		if _, err := c.PullStates(ctx, []forge.PullRef{{Owner: "acme", Repo: "app", Number: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.GetPull(forge.WithLane(context.Background(), forge.LaneWebhook), "acme", "app", 1); err != nil {
		t.Fatal(err)
	}
	clk.Set(time.Date(2026, 9, 30, 15, 0, 0, 0, time.UTC))
	c.Close()
	want := "forge HTTP: 3 requests (2 GraphQL points) in the hour ending 2026-09-30T15:00Z — " +
		host + " GraphQL merge-gate-sweeper 2 (2 points), " + host + " REST webhook 1"
	got := logs.messages()
	if len(got) != 1 || got[0] != want {
		t.Fatalf("got %q, want %q: GraphQL points beside REST requests", got, want)
	}
	var pts int64 = -1
	logs.all()[0].Attrs(func(a slog.Attr) bool {
		if a.Key == "graphql_points" {
			pts = a.Value.Int64()
		}
		return true
	})
	if pts != 2 {
		t.Fatalf("got graphql_points %d, want 2: the attribute carries the line's points", pts)
	}
}

// TestGraphQLFailuresAreTold pins how PullStates tells the failures a
// caller acts on apart: a query GitHub stopped at its 10 s timeout (502 or
// 504, both named by "Rate limits and query limits for the GraphQL API",
// Timeouts:
// https://docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api#timeouts)
// is ErrQueryTimeout beside ErrServer, so the sweeper halves its batch;
// a secondary limit answered 403 is a sent *RateLimitError of cause
// secondary, never ErrForbidden; a FORBIDDEN error on one alias is that
// pull request's ErrForbidden, never ErrNotFound.
func TestGraphQLFailuresAreTold(t *testing.T) {
	refs := []forge.PullRef{{Owner: "acme", Repo: "app", Number: 1}}
	for _, status := range []int{http.StatusBadGateway, http.StatusGatewayTimeout} {
		srv, _ := forgeAnswering(t, status, nil, `{"message":"We couldn't respond to your request in time. Sorry about that."}`)
		_, err := newClient(t, srv, forge.Config{Token: "t"}).PullStates(laneCtx(forge.LaneMergeGateSweeper), refs)
		if !errors.Is(err, forge.ErrQueryTimeout) || !errors.Is(err, forge.ErrServer) {
			t.Errorf("%d: got %v, want ErrQueryTimeout and ErrServer: GitHub stopped the query at its timeout", status, err)
		}
	}

	srv, _ := forgeAnswering(t, http.StatusForbidden, http.Header{"Retry-After": {"60"}, "X-Ratelimit-Remaining": {"4000"}},
		`{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`)
	_, err := newClient(t, srv, forge.Config{Token: "t"}).PullStates(laneCtx(forge.LaneMergeGateSweeper), refs)
	var rl *forge.RateLimitError
	if !errors.As(err, &rl) || rl.Cause != forge.CauseSecondary || !rl.Sent || errors.Is(err, forge.ErrForbidden) {
		t.Errorf("403 secondary limit: got %v, want a sent secondary *RateLimitError, not ErrForbidden", err)
	}

	states, err := answering(t, `{"data": {"p0": null, "rateLimit": {"cost": 1}}, "errors": [{"type": "FORBIDDEN", "path": ["p0"], "message": "Resource not accessible by integration"}]}`).
		PullStates(laneCtx(forge.LaneMergeGateSweeper), refs)
	if err != nil || len(states) != 1 || !errors.Is(states[0].Err, forge.ErrForbidden) || errors.Is(states[0].Err, forge.ErrNotFound) {
		t.Errorf("FORBIDDEN on p0: got %v, %+v, want the pull request's Err to wrap ErrForbidden, not ErrNotFound", err, states)
	}
}

// TestGraphQLClientTimeoutIsErrQueryTimeout pins that a query the Client
// gave up on at its own Config.Timeout is ErrQueryTimeout too: GitHub
// would have stopped it and charged it alike, and a smaller one may pass.
func TestGraphQLClientTimeoutIsErrQueryTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	c := newClient(t, srv, forge.Config{Token: "t", Timeout: 20 * time.Millisecond})
	_, err := c.PullStates(laneCtx(forge.LaneMergeGateSweeper), []forge.PullRef{{Owner: "acme", Repo: "app", Number: 1}})
	if !errors.Is(err, forge.ErrQueryTimeout) {
		t.Fatalf("got %v, want ErrQueryTimeout: the Client's own deadline ran out", err)
	}
}

// TestPullStatesTakesAnExpectedStatus pins that a context GraphQL reports
// EXPECTED (a required status not reported yet; GitHub's StatusState has
// it, REST's statuses do not) is read as state "expected", never as a
// malformed answer that fails the pull request's read.
func TestPullStatesTakesAnExpectedStatus(t *testing.T) {
	states, err := answering(t, `{"data": {"p0": {"pullRequest": {"number": 1, "state": "OPEN", "merged": false, "headRefOid": "sha",
		"commits": {"nodes": [{"commit": {"oid": "sha", "status": {"contexts": [{"context": "ci", "state": "EXPECTED"}]}}}]}}}, "rateLimit": {"cost": 1}}}`).
		PullStates(laneCtx(forge.LaneMergeGateSweeper), []forge.PullRef{{Owner: "acme", Repo: "app", Number: 1}})
	if err != nil || len(states) != 1 || states[0].Err != nil || len(states[0].Statuses) != 1 || states[0].Statuses[0].State != "expected" {
		t.Fatalf("got %v, %+v, want one status of state expected and no error", err, states)
	}
}
