package forge_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

// TestPullStatesStatusesOfAnotherCommit pins that statuses count only when
// their commit is the pull request's head: an answer whose last commit's
// oid is not headRefOid gives that pull request ErrStaleHead and no
// statuses, never the other commit's.
func TestPullStatesStatusesOfAnotherCommit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"data": {"p0": {"pullRequest": {"number": 12, "state": "OPEN", "merged": false, "headRefOid": "new",
			"commits": {"nodes": [{"commit": {"oid": "old", "status": {"contexts": [{"context": "iterion/review", "state": "SUCCESS"}]}}}]}}},
			"rateLimit": {"cost": 1}}}`))
	}))
	t.Cleanup(srv.Close)
	fc := newClient(t, srv, forge.Config{Token: "t"})
	states, err := fc.PullStates(laneCtx(forge.LaneMergeGateSweeper), []forge.PullRef{{Owner: "acme", Repo: "app", Number: 12}})
	if err != nil {
		t.Fatal(err)
	}
	if st := states[0]; !errors.Is(st.Err, forge.ErrStaleHead) || len(st.Statuses) != 0 || errors.Is(st.Err, forge.ErrNotFound) {
		t.Fatalf("got %+v, want ErrStaleHead, no statuses, not ErrNotFound: statuses of commit old say nothing of head new", st)
	}
}

// TestPullStatesSecondaryLimitAnswered200 pins that a secondary limit
// answered 200 with GitHub's message in the errors array stops the call as
// the 403 shape does: a sent *RateLimitError of cause secondary, reset at
// the retry-after, and the gate holds the next query back unsent.
func TestPullStatesSecondaryLimitAnswered200(t *testing.T) {
	sim, srv := startSim(t, forgesim.WithGraphQLLimitAnswer(forgesim.GraphQLLimit200))
	if err := sim.SeedPull("acme", "app", 1, "sha", "open"); err != nil {
		t.Fatal(err)
	}
	if err := sim.SecondaryLimit("", 120*time.Second, 1); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, srv, forge.Config{Token: "t"})
	refs := []forge.PullRef{{Owner: "acme", Repo: "app", Number: 1}}
	before := time.Now()
	var rl *forge.RateLimitError
	_, err := c.PullStates(laneCtx(forge.LaneMergeGateSweeper), refs)
	if !errors.As(err, &rl) || !rl.Sent || rl.Cause != forge.CauseSecondary || rl.Reset.Before(before.Add(119*time.Second)) {
		t.Fatalf("got %v, want a sent secondary *RateLimitError until the retry-after (120 s): a 200 that says secondary limit is a limit", err)
	}
	if _, err := c.PullStates(laneCtx(forge.LaneMergeGateSweeper), refs); !errors.As(err, &rl) || rl.Sent || rl.Cause != forge.CauseSecondary {
		t.Fatalf("got %v, want a held-back secondary *RateLimitError: the gate learnt the limit from the 200", err)
	}
	if n := sim.Requests(forgesim.Filter{Route: "POST /graphql"}); n != 1 {
		t.Fatalf("got %d queries at the simulator, want 1: the held-back one is not sent", n)
	}
}

// TestPullStatesTimeoutIsErrQueryTimeout pins that a GraphQL query GitHub
// stops at its 10 s timeout (502 or 504) fails with ErrQueryTimeout beside
// ErrServer, which tells the sweeper a smaller batch may pass.
func TestPullStatesTimeoutIsErrQueryTimeout(t *testing.T) {
	lat := forgesim.GitHubLatency()
	lat.Tail, lat.GraphQLPerNode = 0, time.Second // 2 nodes a pull: any batch is past 10 s
	sim, srv := startSim(t, forgesim.WithLatency(lat), forgesim.WithMinute(60*time.Millisecond))
	if err := sim.SeedPull("acme", "app", 1, "sha", "open"); err != nil {
		t.Fatal(err)
	}
	var refs []forge.PullRef
	for range 10 {
		refs = append(refs, forge.PullRef{Owner: "acme", Repo: "app", Number: 1})
	}
	c := newClient(t, srv, forge.Config{Token: "t"})
	_, err := c.PullStates(laneCtx(forge.LaneMergeGateSweeper), refs)
	if !errors.Is(err, forge.ErrQueryTimeout) || !errors.Is(err, forge.ErrServer) {
		t.Fatalf("got %v, want ErrQueryTimeout and ErrServer: GitHub stopped the query at its timeout", err)
	}
}

// TestPullStatesSecondaryLimitAnswered200DoublesItsBackOff pins that a
// secondary limit GitHub answers 200 (its message in the errors array) is
// a strike like a 403's: without retry-after the back-off starts at a
// minute and doubles while the limit keeps being hit ("Best practices for
// using the REST API", Handle rate limit errors appropriately:
// https://docs.github.com/rest/using-the-rest-api/best-practices-for-using-the-rest-api#handle-rate-limit-errors-appropriately).
// The 200 is not a success that clears the strikes.
func TestPullStatesSecondaryLimitAnswered200DoublesItsBackOff(t *testing.T) {
	clk := newTestClock(time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC))
	sim, srv := startSim(t, forgesim.WithClock(clk.Now), forgesim.WithGraphQLLimitAnswer(forgesim.GraphQLLimit200))
	if err := sim.SeedPull("acme", "app", 1, "sha", "open"); err != nil {
		t.Fatal(err)
	}
	if err := sim.SecondaryLimit("t", 0, 3); err != nil { // no retry-after
		t.Fatal(err)
	}
	c := newClient(t, srv, forge.Config{Token: "t", Now: clk.Now})
	refs := []forge.PullRef{{Owner: "acme", Repo: "app", Number: 1}}
	for _, wait := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute} {
		at := clk.Now()
		var rl *forge.RateLimitError
		_, err := c.PullStates(laneCtx(forge.LaneMergeGateSweeper), refs)
		if !errors.As(err, &rl) || !rl.Sent || rl.Cause != forge.CauseSecondary || !rl.Reset.Equal(at.Add(wait)) {
			t.Fatalf("secondary limit answered 200 without retry-after: got %v, want a sent secondary *RateLimitError with Reset = now + %v: the back-off doubles while the limit is hit", err, wait)
		}
		clk.Set(rl.Reset)
	}
	if _, err := c.PullStates(laneCtx(forge.LaneMergeGateSweeper), refs); err != nil {
		t.Fatalf("after the back-off: %v, want success", err)
	}
}
