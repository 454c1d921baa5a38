package forge_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

// rateSetup is a simulator and a Client sharing one test clock.
func rateSetup(t *testing.T, budget int, cfg forge.Config) (*forgesim.Sim, *httptest.Server, *forge.Client, *testClock) {
	t.Helper()
	clk := newTestClock(time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC))
	sim, srv := startSim(t, forgesim.WithClock(clk.Now), forgesim.WithBudget(budget))
	if err := sim.SeedPull("acme", "app", 1, "sha", "open"); err != nil {
		t.Fatal(err)
	}
	cfg.Now = clk.Now
	cfg.ETagCacheBytes = -1 // every read costs budget
	return sim, srv, newClient(t, srv, cfg), clk
}

func laneCtx(lane string) context.Context { return forge.WithLane(context.Background(), lane) }

func TestReserveMakesTheSweeperYield(t *testing.T) {
	sim, _, c, clk := rateSetup(t, 10, forge.Config{Token: "t", Reserves: map[string]int{forge.LaneMergeGateSweeper: 4}})
	reset := clk.Now().Add(time.Hour)

	for i := range 6 {
		if _, err := c.GetPull(laneCtx(forge.LaneMergeGateSweeper), "acme", "app", 1); err != nil {
			t.Fatalf("sweeper read %d with %d left: %v, want success while remaining >= reserve", i+1, 10-i, err)
		}
	}
	// 4 left: still not below the reserve.
	if _, err := c.GetPull(laneCtx(forge.LaneMergeGateSweeper), "acme", "app", 1); err != nil {
		t.Fatalf("sweeper read with 4 left, reserve 4: %v, want success: the lane yields only below its reserve", err)
	}
	sent := sim.Requests(forgesim.Filter{Token: "t"})
	_, err := c.GetPull(laneCtx(forge.LaneMergeGateSweeper), "acme", "app", 1)
	var rle *forge.RateLimitError
	if !errors.As(err, &rle) || !errors.Is(err, forge.ErrRateLimited) {
		t.Fatalf("sweeper read with 3 left, reserve 4: got %v, want a *RateLimitError wrapping ErrRateLimited", err)
	}
	if rle.Cause != forge.CauseReserve || rle.Sent || rle.Remaining != 3 || rle.Reserve != 4 || !rle.Reset.Equal(reset) || rle.Lane != forge.LaneMergeGateSweeper {
		t.Fatalf("error: got %+v, want cause reserve, not sent, 3 remaining, reserve 4, reset %v", rle, reset)
	}
	if got := sim.Requests(forgesim.Filter{Token: "t"}); got != sent {
		t.Fatalf("simulator received %d requests, want %d: a yielding lane sends nothing", got, sent)
	}
	if got := countOf(c, forge.LaneMergeGateSweeper, -1); got != 7 {
		t.Fatalf("sweeper requests counted: got %d, want 7: a request held back is not counted", got)
	}
	for _, lane := range []string{forge.LaneWebhook, forge.LaneAPI, ""} {
		if _, err := c.GetPull(laneCtx(lane), "acme", "app", 1); err != nil {
			t.Fatalf("lane %q read below the sweeper's reserve: %v, want success: the reserve is kept for the other lanes", lane, err)
		}
	}

	clk.Set(reset)
	if _, err := c.GetPull(laneCtx(forge.LaneMergeGateSweeper), "acme", "app", 1); err != nil {
		t.Fatalf("sweeper read at the reset: %v, want success: the lane yields until the reset only", err)
	}
}

func TestSpentBudgetIsATypedErrorWithTheReset(t *testing.T) {
	sim, srv, c, clk := rateSetup(t, 3, forge.Config{Token: "t"})
	reset := clk.Now().Add(time.Hour)
	for range 3 {
		if _, err := c.GetPull(laneCtx(forge.LaneWebhook), "acme", "app", 1); err != nil {
			t.Fatal(err)
		}
	}
	// The client saw remaining 0 on the third answer, so it does not send a
	// fourth; a fresh client (which has seen no header) is refused by GitHub.
	fresh := newClient(t, srv, forge.Config{Token: "t", Now: clk.Now})
	_, err := fresh.GetPull(laneCtx(forge.LaneWebhook), "acme", "app", 1)
	var rle *forge.RateLimitError
	if !errors.As(err, &rle) || rle.Cause != forge.CausePrimary || !rle.Sent || !rle.Reset.Equal(reset) || rle.Remaining != 0 || rle.Limit != 3 {
		t.Fatalf("read on a spent budget: got %v (%+v), want a sent primary *RateLimitError resetting at %v", err, rle, reset)
	}
	if got := countOf(fresh, forge.LaneWebhook, 403); got != 1 {
		t.Fatalf("403s counted: got %d, want 1: a refused answer is counted", got)
	}

	before := sim.Requests(forgesim.Filter{Token: "t"})
	for _, cl := range []*forge.Client{c, fresh} {
		_, err = cl.GetPull(laneCtx(forge.LaneWebhook), "acme", "app", 1)
		if !errors.As(err, &rle) || rle.Cause != forge.CausePrimary || rle.Sent || !rle.Reset.Equal(reset) {
			t.Fatalf("read after the budget is known spent: got %v, want a primary *RateLimitError not sent, resetting at %v", err, reset)
		}
	}
	if got := sim.Requests(forgesim.Filter{Token: "t"}); got != before {
		t.Fatalf("simulator received %d, want %d: a budget known spent is not spent on refusals", got, before)
	}

	clk.Set(reset)
	if _, err := c.GetPull(laneCtx(forge.LaneWebhook), "acme", "app", 1); err != nil {
		t.Fatalf("read at the reset: %v, want success", err)
	}
}

func TestSecondaryLimitBacksOff(t *testing.T) {
	sim, _, c, clk := rateSetup(t, 100, forge.Config{Token: "t"})
	if err := sim.SecondaryLimit("t", 30*time.Second, 1); err != nil {
		t.Fatal(err)
	}
	start := clk.Now()
	_, err := c.GetPull(laneCtx(forge.LaneWebhook), "acme", "app", 1)
	var rle *forge.RateLimitError
	if !errors.As(err, &rle) || rle.Cause != forge.CauseSecondary || !rle.Sent || !rle.Reset.Equal(start.Add(30*time.Second)) {
		t.Fatalf("secondary limit: got %v, want a sent secondary *RateLimitError with Reset = now + retry-after (30s)", err)
	}
	clk.Add(29 * time.Second)
	before := sim.Requests(forgesim.Filter{Token: "t"})
	_, err = c.GetPull(laneCtx(forge.LaneAPI), "acme", "app", 1)
	if !errors.As(err, &rle) || rle.Cause != forge.CauseSecondary || rle.Sent {
		t.Fatalf("within retry-after: got %v, want a secondary *RateLimitError, not sent: GitHub says not to retry before retry-after", err)
	}
	if got := sim.Requests(forgesim.Filter{Token: "t"}); got != before {
		t.Fatalf("simulator received %d, want %d during the back-off", got, before)
	}
	clk.Add(time.Second)
	if _, err := c.GetPull(laneCtx(forge.LaneAPI), "acme", "app", 1); err != nil {
		t.Fatalf("after retry-after: %v, want success", err)
	}

	// Without retry-after, GitHub says to wait at least a minute, longer
	// each time the limit is hit again.
	if err := sim.SecondaryLimit("t", 0, 2); err != nil {
		t.Fatal(err)
	}
	for _, wait := range []time.Duration{time.Minute, 2 * time.Minute} {
		at := clk.Now()
		_, err := c.GetPull(laneCtx(forge.LaneAPI), "acme", "app", 1)
		if !errors.As(err, &rle) || rle.Cause != forge.CauseSecondary || !rle.Reset.Equal(at.Add(wait)) {
			t.Fatalf("secondary limit without retry-after: got %v, want Reset = now + %v", err, wait)
		}
		clk.Set(rle.Reset)
	}
	if _, err := c.GetPull(laneCtx(forge.LaneAPI), "acme", "app", 1); err != nil {
		t.Fatalf("after the back-off: %v, want success", err)
	}
}

// TestSecondaryBackOffDoublesUpTo16MinutesAndRestartsAfterAnAnswer pins
// the back-off from secondary limits without retry-after: a minute,
// doubling while the limit keeps being hit, at most 16 minutes
// (maxSecondaryBackoff), and a minute again once an answer that is no
// limit came between two ("Best practices for using the REST API", Handle
// rate limit errors appropriately:
// https://docs.github.com/rest/using-the-rest-api/best-practices-for-using-the-rest-api#handle-rate-limit-errors-appropriately).
func TestSecondaryBackOffDoublesUpTo16MinutesAndRestartsAfterAnAnswer(t *testing.T) {
	sim, _, c, clk := rateSetup(t, 100, forge.Config{Token: "t"})
	hit := func(wait time.Duration, why string) {
		t.Helper()
		at := clk.Now()
		var rle *forge.RateLimitError
		_, err := c.GetPull(laneCtx(forge.LaneAPI), "acme", "app", 1)
		if !errors.As(err, &rle) || rle.Cause != forge.CauseSecondary || !rle.Sent || !rle.Reset.Equal(at.Add(wait)) {
			t.Fatalf("secondary limit without retry-after: got %v, want a sent secondary *RateLimitError with Reset = now + %v: %s", err, wait, why)
		}
		clk.Set(rle.Reset)
	}
	if err := sim.SecondaryLimit("t", 0, 7); err != nil {
		t.Fatal(err)
	}
	for _, wait := range []time.Duration{1, 2, 4, 8, 16} {
		hit(wait*time.Minute, "a minute, doubling while the limit keeps being hit")
	}
	hit(16*time.Minute, "the doubling stops at 16 minutes")
	hit(16*time.Minute, "the doubling stops at 16 minutes")
	if _, err := c.GetPull(laneCtx(forge.LaneAPI), "acme", "app", 1); err != nil {
		t.Fatalf("after the back-off: %v, want success", err)
	}
	if err := sim.SecondaryLimit("t", 0, 1); err != nil {
		t.Fatal(err)
	}
	hit(time.Minute, "an answer that is no limit ends the run of strikes: the next back-off is a minute again")
}

// TestSecondaryLimitKnownByItsDocumentationURLBacksOff pins that a 403
// go-github takes for a secondary limit by its documentation URL alone (no
// retry-after, a message the gate does not know as a limit's) backs off
// as a secondary limit without retry-after does: Reset a minute from now,
// never in the past, and the next request held back unsent until then.
func TestSecondaryLimitKnownByItsDocumentationURLBacksOff(t *testing.T) {
	clk := newTestClock(time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC))
	srv, n := forgeAnswering(t, http.StatusForbidden, nil,
		`{"message":"You have triggered an abuse detection mechanism. Please wait a few minutes before you try again.",`+
			`"documentation_url":"https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`)
	c := newClient(t, srv, forge.Config{Token: "t", Now: clk.Now})
	start := clk.Now()
	_, err := c.GetPull(laneCtx(forge.LaneWebhook), "acme", "app", 1)
	var rle *forge.RateLimitError
	if !errors.As(err, &rle) || rle.Cause != forge.CauseSecondary || !rle.Sent || !rle.Reset.Equal(start.Add(time.Minute)) {
		t.Fatalf("403 with the secondary limit's documentation URL: got %v, want a sent secondary *RateLimitError with Reset = now + a minute: GitHub says to wait at least a minute", err)
	}
	clk.Add(59 * time.Second)
	if _, err := c.GetPull(laneCtx(forge.LaneWebhook), "acme", "app", 1); !errors.As(err, &rle) || rle.Sent || n.Load() != 1 {
		t.Fatalf("within the minute: got %v with %d requests sent, want a *RateLimitError held back and 1 request: the gate backs off too", err, n.Load())
	}
}

// TestSecondaryLimitRetryAfterMayBeAnHTTPDate pins that a retry-after
// given as an HTTP-date (RFC 9110, section 10.2.3) rather than in
// seconds is waited for to that date, not a one-minute default.
func TestSecondaryLimitRetryAfterMayBeAnHTTPDate(t *testing.T) {
	clk := newTestClock(time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC))
	until := clk.Now().Add(5 * time.Minute)
	srv, n := forgeAnswering(t, http.StatusTooManyRequests, http.Header{"Retry-After": {until.Format(http.TimeFormat)}},
		`{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`)
	c := newClient(t, srv, forge.Config{Token: "t", Now: clk.Now})
	_, err := c.GetPull(laneCtx(forge.LaneWebhook), "acme", "app", 1)
	var rle *forge.RateLimitError
	if !errors.As(err, &rle) || rle.Cause != forge.CauseSecondary || !rle.Reset.Equal(until) {
		t.Fatalf("429 with retry-after %s: got %v, want a secondary *RateLimitError resetting at that date", until.Format(http.TimeFormat), err)
	}
	clk.Set(until.Add(-time.Second))
	if _, err := c.GetPull(laneCtx(forge.LaneWebhook), "acme", "app", 1); !errors.As(err, &rle) || rle.Sent || n.Load() != 1 {
		t.Fatalf("a second before the date: got %v with %d requests sent, want a *RateLimitError held back and 1 request", err, n.Load())
	}
}

// TestSecondaryLimitRetryAfterDateInThePastIsNow pins that a retry-after
// HTTP-date already past (a clock ahead of GitHub's) is a wait of 0: the
// error's Reset is now, never in the past, and the next request is sent.
func TestSecondaryLimitRetryAfterDateInThePastIsNow(t *testing.T) {
	clk := newTestClock(time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC))
	srv, n := forgeAnswering(t, http.StatusForbidden, http.Header{"Retry-After": {clk.Now().Add(-5 * time.Minute).Format(http.TimeFormat)}},
		`{"message":"You have exceeded a secondary rate limit.","documentation_url":"https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`)
	c := newClient(t, srv, forge.Config{Token: "t", Now: clk.Now})
	_, err := c.GetPull(laneCtx(forge.LaneWebhook), "acme", "app", 1)
	var rle *forge.RateLimitError
	if !errors.As(err, &rle) || rle.Cause != forge.CauseSecondary || !rle.Reset.Equal(clk.Now()) {
		t.Fatalf("403 with a retry-after date 5 minutes ago: got %v, want a secondary *RateLimitError with Reset now: a date past is a wait of 0", err)
	}
	c.GetPull(laneCtx(forge.LaneWebhook), "acme", "app", 1)
	if n.Load() != 2 {
		t.Fatalf("got %d requests sent, want 2: nothing holds the next request back", n.Load())
	}
}

// TestSecondaryBackOffIsNeverShortenedByALaterAnswer pins that answers to
// concurrent requests, arriving out of order, only ever extend the
// secondary back-off: a retry-after of 30 s that comes after one of 120 s
// leaves the 120 s, so no request goes out before GitHub said it may.
func TestSecondaryBackOffIsNeverShortenedByALaterAnswer(t *testing.T) {
	clk := newTestClock(time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC))
	arrived := make(chan chan string, 2) // each request's channel for its retry-after
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		ra := make(chan string)
		arrived <- ra
		w.Header().Set("Retry-After", <-ra)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"message":"You have exceeded a secondary rate limit."}`))
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, srv, forge.Config{Token: "t", Now: clk.Now})
	done := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := c.GetPull(laneCtx(forge.LaneWebhook), "acme", "app", 1)
			done <- err
		}()
	}
	first, second := <-arrived, <-arrived // both in flight
	first <- "120"
	<-done
	second <- "30"
	<-done
	_, err := c.GetPull(laneCtx(forge.LaneWebhook), "acme", "app", 1)
	var rle *forge.RateLimitError
	if !errors.As(err, &rle) || rle.Sent || !rle.Reset.Equal(clk.Now().Add(120*time.Second)) || sent.Load() != 2 {
		t.Fatalf("after retry-after 120 then 30: got %v with %d sent, want a held-back *RateLimitError until now + 120 s and 2 sent: a later, shorter retry-after does not shorten the back-off", err, sent.Load())
	}
}

// TestSpentCoreBudgetHoldsBackOnlyCore pins that a 403 with
// x-ratelimit-remaining 0 is the primary limit of its resource, even when
// it carries retry-after: it holds REST back until the reset, and is no
// secondary limit holding back GraphQL, whose points are a budget of
// their own ("Rate limits for the REST API", Exceeding the primary rate
// limit:
// https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#exceeding-the-primary-rate-limit).
func TestSpentCoreBudgetHoldsBackOnlyCore(t *testing.T) {
	clk := newTestClock(time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC))
	reset := clk.Now().Add(time.Hour)
	var graphql atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/graphql" {
			graphql.Add(1)
			w.Write([]byte(`{"data": {"p0": {"pullRequest": {"number": 1, "state": "OPEN", "merged": false, "headRefOid": "sha", "commits": {"nodes": []}}}, "rateLimit": {"cost": 1}}}`))
			return
		}
		for k, v := range map[string]string{"Retry-After": "60", "X-Ratelimit-Limit": "5000", "X-Ratelimit-Remaining": "0",
			"X-Ratelimit-Reset": fmt.Sprint(reset.Unix()), "X-Ratelimit-Resource": "core"} {
			w.Header().Set(k, v)
		}
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"message":"API rate limit exceeded for user ID 1."}`))
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, srv, forge.Config{Token: "t", Now: clk.Now})
	_, err := c.GetPull(laneCtx(forge.LaneWebhook), "acme", "app", 1)
	var rle *forge.RateLimitError
	if !errors.As(err, &rle) || rle.Cause != forge.CausePrimary || !rle.Reset.Equal(reset) {
		t.Fatalf("403 with remaining 0: got %v, want a primary *RateLimitError until the reset", err)
	}
	if _, err := c.PullStates(laneCtx(forge.LaneMergeGateSweeper), []forge.PullRef{{Owner: "acme", Repo: "app", Number: 1}}); err != nil || graphql.Load() != 1 {
		t.Fatalf("a GraphQL query after the core budget is spent: got %v with %d sent, want it sent and answered: a spent core budget is no secondary limit", err, graphql.Load())
	}
}

// TestANewWindowsFiguresReplaceTheOld pins that the budget figures of a
// new window (another x-ratelimit-reset) replace the last window's, though
// more is left in it: only within one window is the smallest remaining
// the latest.
func TestANewWindowsFiguresReplaceTheOld(t *testing.T) {
	_, _, c, clk := rateSetup(t, 10, forge.Config{Token: "t"})
	get := func() {
		t.Helper()
		if _, err := c.GetPull(laneCtx(forge.LaneAPI), "acme", "app", 1); err != nil {
			t.Fatal(err)
		}
	}
	core := func() forge.RateLimit {
		for _, rl := range c.RateLimits() {
			if rl.Resource == "core" {
				return rl
			}
		}
		return forge.RateLimit{}
	}
	for range 3 {
		get()
	}
	if rl := core(); rl.Remaining != 7 {
		t.Fatalf("after 3 of 10: got %+v, want 7 remaining", rl)
	}
	clk.Add(time.Hour + time.Second)
	get()
	if rl := core(); rl.Remaining != 9 || !rl.Reset.After(clk.Now()) {
		t.Fatalf("first request of the next window: got %+v, want 9 remaining and a reset ahead: a new window's figures replace the old", rl)
	}
}

// TestSecondaryLimitMessageIsToldWhateverItsCase pins that GitHub's
// secondary-limit message is known without regard to case, in a 403 that
// has neither retry-after nor the documentation URL: it backs off a
// minute as a secondary limit, never ErrForbidden.
func TestSecondaryLimitMessageIsToldWhateverItsCase(t *testing.T) {
	clk := newTestClock(time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC))
	srv, _ := forgeAnswering(t, http.StatusForbidden, nil, `{"message":"You have exceeded a Secondary Rate Limit."}`)
	_, err := newClient(t, srv, forge.Config{Token: "t", Now: clk.Now}).GetPull(laneCtx(forge.LaneWebhook), "acme", "app", 1)
	var rle *forge.RateLimitError
	if !errors.As(err, &rle) || rle.Cause != forge.CauseSecondary || !rle.Reset.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("403 \"Secondary Rate Limit\": got %v, want a secondary *RateLimitError a minute from now", err)
	}
}

// TestNoAnswerHoldsTheClientBackPastAnHour pins that no rate-limit
// header makes the client wait past GitHub's window, an hour, nor skip a
// back-off: a retry-after of more seconds than a Duration holds (which
// overflowed to a negative wait, so the next request went out at once), or
// far ahead, or a reset years ahead (which held every request for them),
// holds requests back an hour; and a negative figure is no figure.
func TestNoAnswerHoldsTheClientBackPastAnHour(t *testing.T) {
	t0 := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	secondary := `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`
	for _, c := range []struct {
		name   string
		status int
		header http.Header
		body   string
		held   bool // the next request is held back an hour
	}{
		{"retry-after past a Duration's range", http.StatusForbidden, http.Header{"Retry-After": {"9999999999"}}, secondary, true},
		{"retry-after of a year", http.StatusTooManyRequests, http.Header{"Retry-After": {"31536000"}}, secondary, true},
		{"retry-after a date years ahead", http.StatusTooManyRequests, http.Header{"Retry-After": {t0.AddDate(100, 0, 0).Format(http.TimeFormat)}}, secondary, true},
		{"reset years ahead", http.StatusForbidden, http.Header{"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"0"},
			"X-Ratelimit-Reset": {strconv.FormatInt(t0.AddDate(300, 0, 0).Unix(), 10)}}, `{"message":"API rate limit exceeded"}`, true},
		{"a negative remaining", http.StatusOK, http.Header{"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"-1"},
			"X-Ratelimit-Reset": {strconv.FormatInt(t0.Add(30*time.Minute).Unix(), 10)}}, `{}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := newTestClock(t0)
			srv, n := forgeAnswering(t, c.status, c.header, c.body)
			fc := newClient(t, srv, forge.Config{Token: "t", Now: clk.Now, Reserves: map[string]int{forge.LaneMergeGateSweeper: 100}})
			fc.GetPull(laneCtx(forge.LaneMergeGateSweeper), "acme", "app", 1)
			_, err := fc.GetPull(laneCtx(forge.LaneMergeGateSweeper), "acme", "app", 1)
			var rle *forge.RateLimitError
			switch {
			case !c.held && errors.As(err, &rle):
				t.Fatalf("after the answer: got %v, want the request sent: a negative figure is no figure", err)
			case c.held && (!errors.As(err, &rle) || rle.Sent || !rle.Reset.Equal(t0.Add(time.Hour))):
				t.Fatalf("after the answer: got %v with %d requests sent, want a *RateLimitError held back until %v, an hour on", err, n.Load(), t0.Add(time.Hour))
			}
			if c.held {
				clk.Set(t0.Add(time.Hour))
				if _, err := fc.GetPull(laneCtx(forge.LaneMergeGateSweeper), "acme", "app", 1); errors.As(err, &rle) && !rle.Sent {
					t.Fatalf("an hour on: got %v, want the request sent", err)
				}
			}
		})
	}
}

// TestRateLimitGaugesFollowTheLatestAnswer pins the rate-limit gauges: after
// each answer, forge_rate_limit_remaining, _limit and _reset_timestamp_seconds
// hold that answer's x-ratelimit-* figures for its host and
// x-ratelimit-resource (core and graphql apart), and forge_rate_limit_reserve
// holds each lane's configured reserve from the start.
func TestRateLimitGaugesFollowTheLatestAnswer(t *testing.T) {
	reg := prometheus.NewRegistry()
	sim, srv, c, clk := rateSetup(t, 10, forge.Config{Token: "t", Registerer: reg, Reserves: map[string]int{forge.LaneMergeGateSweeper: 4}})
	host := strings.TrimPrefix(srv.URL, "http://")
	reset := clk.Now().Add(time.Hour).Unix()
	gauges := []string{"forge_rate_limit_remaining", "forge_rate_limit_limit", "forge_rate_limit_reset_timestamp_seconds", "forge_rate_limit_reserve"}
	reserveOnly := `
# HELP forge_rate_limit_reserve Budget a lane leaves to the others (Config.Reserves): the lane yields while the remaining budget is below it.
# TYPE forge_rate_limit_reserve gauge
forge_rate_limit_reserve{lane="merge-gate-sweeper"} 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(reserveOnly), gauges...); err != nil {
		t.Fatalf("before any answer: %v: want only the reserve, no budget figure is known yet", err)
	}

	for range 3 {
		if _, err := c.GetPull(laneCtx(forge.LaneWebhook), "acme", "app", 1); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := c.HTTPClient().Post(srv.URL+"/graphql", "application/json", strings.NewReader(`{"query":"{ viewer { login } }"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	want := fmt.Sprintf(`
# HELP forge_rate_limit_limit Requests allowed in the forge's rate-limit window (x-ratelimit-limit), by host and resource.
# TYPE forge_rate_limit_limit gauge
forge_rate_limit_limit{host=%[1]q,resource="core"} 10
forge_rate_limit_limit{host=%[1]q,resource="graphql"} 10
# HELP forge_rate_limit_remaining Requests left in the forge's rate-limit window, as the latest answer's x-ratelimit-remaining said, by host and x-ratelimit-resource.
# TYPE forge_rate_limit_remaining gauge
forge_rate_limit_remaining{host=%[1]q,resource="core"} 7
forge_rate_limit_remaining{host=%[1]q,resource="graphql"} %[3]d
# HELP forge_rate_limit_reset_timestamp_seconds When the forge's rate-limit window resets (x-ratelimit-reset, Unix seconds), by host and resource.
# TYPE forge_rate_limit_reset_timestamp_seconds gauge
forge_rate_limit_reset_timestamp_seconds{host=%[1]q,resource="core"} %[2]d
forge_rate_limit_reset_timestamp_seconds{host=%[1]q,resource="graphql"} %[2]d
`, host, reset, simRemaining(t, sim, "t", "graphql")) + reserveOnly
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), gauges...); err != nil {
		t.Fatalf("after 3 REST reads and 1 GraphQL query on a budget of 10: %v: the gauges hold the latest answer's figures per host and resource", err)
	}
}

// simRemaining is the budget the simulator has left for token and resource.
func simRemaining(t *testing.T, sim *forgesim.Sim, token, resource string) int {
	t.Helper()
	for _, w := range sim.Stats().Budget.Windows {
		if w.Token == token && w.Resource == resource {
			return w.Remaining
		}
	}
	t.Fatalf("simulator budget windows %+v: want one for token %q, resource %q", sim.Stats().Budget.Windows, token, resource)
	return 0
}

// A limit error tells only the budget figures it knows: a secondary limit
// GitHub answered in a GraphQL 200 has none, and "0 of 0 left" would send an
// operator after a spent budget that is not.
func TestRateLimitErrorTellsOnlyTheFiguresItKnows(t *testing.T) {
	reset := time.Date(2026, 12, 4, 19, 0, 0, 0, time.UTC)
	known := (&forge.RateLimitError{Reset: reset, Cause: forge.CausePrimary, Sent: true, Lane: "sweep", Resource: "graphql", Limit: 5000, Remaining: 0}).Error()
	if !strings.Contains(known, "graphql budget 0 of 5000 left") {
		t.Errorf("known figures: %q, want the budget told", known)
	}
	unknown := (&forge.RateLimitError{Reset: reset, Cause: forge.CauseSecondary, Sent: true, Lane: "sweep", Resource: "graphql"}).Error()
	if strings.Contains(unknown, "budget") {
		t.Errorf("no figures known: %q, want no budget figures", unknown)
	}
}
