package harness

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"
)

// staircase samples a token sweeping `perPass` requests every `every`, polled
// every `poll` for `dur`, starting at a phase offset into a pass.
func staircase(perPass int64, every, poll, dur, phase time.Duration) []sample {
	t0 := time.Unix(1_000_000, 0)
	var ss []sample
	for at := time.Duration(0); at <= dur; at += poll {
		passes := int64((at + phase) / every)
		ss = append(ss, sample{at: t0.Add(at), counts: map[string]int64{"a": passes * perPass}})
	}
	return ss
}

// TestSlopeMeasuresRateOfAStaircase: the least-squares rate of a sweep's
// stepwise counts is within 5% of the true rate over 30 passes, whatever
// the phase of the window against the passes — unlike a difference of two
// samples, which is off by up to one pass.
func TestSlopeMeasuresRateOfAStaircase(t *testing.T) {
	const perPass = 40
	every := 250 * time.Millisecond
	want := perPass / every.Seconds()
	for _, phase := range []time.Duration{0, every / 4, every / 2, 3 * every / 4, every - time.Millisecond} {
		ss := staircase(perPass, every, 20*time.Millisecond, 30*every, phase)
		got := slopePerSecond(ss, []string{"a"})
		if math.Abs(got-want)/want > 0.05 {
			t.Errorf("phase %v: got %.1f requests/s, want %.1f ± 5%%: the slope measures the rate", phase, got, want)
		}
	}
}

// TestActiveInAndShare304: activeIn names the tokens whose counts grew in a
// window and no others; share304 is the share of GETs answered 304.
func TestActiveInAndShare304(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	ss := []sample{
		{at: t0, counts: map[string]int64{"a": 1, "b": 5}},
		{at: t0.Add(time.Second), counts: map[string]int64{"a": 2, "b": 5}},
		{at: t0.Add(2 * time.Second), counts: map[string]int64{"a": 2, "b": 6}},
	}
	if got := activeIn(ss, t0, t0.Add(1500*time.Millisecond), nil); len(got) != 1 || got[0] != "a" {
		t.Errorf("got %v active in the first 1.5s, want [a]: only a's count grew", got)
	}
	if got := activeIn(ss, t0, t0.Add(2*time.Second), []string{"b"}); len(got) != 1 || got[0] != "b" {
		t.Errorf("got %v active among [b], want [b]: the filter keeps b", got)
	}
	a := simStats{Requests: []simRequests{{Token: "a", Method: "GET", Status: 200, Count: 10}}}
	b := simStats{Requests: []simRequests{
		{Token: "a", Method: "GET", Status: 200, Count: 11},
		{Token: "a", Method: "GET", Status: 304, Count: 9},
		{Token: "z", Method: "GET", Status: 304, Count: 100},
		{Token: "a", Method: "POST", Status: 201, Count: 7},
		{Token: "a", Method: "GET", Route: boardRoute, Status: 304, Count: 40},
	}}
	if got := share304(a, b, []string{"a"}); math.Abs(got-0.9) > 1e-9 {
		t.Errorf("got 304 share %.3f, want 0.900: 9 of a's 10 new GETs were 304s; other tokens, POSTs and the board sync's GETs do not count", got)
	}
	if got := share304(b, b, []string{"a"}); !math.IsNaN(got) {
		t.Errorf("got 304 share %.3f with no new GET, want NaN: no REST read to count (the batched sweep reads through GraphQL)", got)
	}
}

// TestMedianAndMax: the median of an even count is the mean of the middle
// two; max is the largest.
func TestMedianAndMax(t *testing.T) {
	ds := []time.Duration{4, 1, 3, 2}
	if got := median(ds); got != 2 {
		t.Errorf("got median %v, want 2: mean of 2 and 3, truncated", got)
	}
	if got := maxOf(ds); got != 4 {
		t.Errorf("got max %v, want 4", got)
	}
	if got := median(nil); got != 0 {
		t.Errorf("got median %v of nothing, want 0", got)
	}
}

// TestWatchBracketsEachChange pins what a watch's change promises, in
// virtual time (testing/synctest): the value changed after since and by
// at. Each poll here spends 2 ms reaching the replica and 3 ms coming back,
// and reads the value in between; a change that lands while a poll's
// answer is on its way back is read only by the next poll, so the poll
// before the change bounds it from below by its sending, not by its
// answer. The takeover's delay from a clean stop is measured from since,
// and errs long only if since is never after the change.
func TestWatchBracketsEachChange(t *testing.T) {
	const every = 10 * time.Millisecond
	// The polls are sent at 0, 15, 30, 45 ms... and read the value 2 ms
	// after each sending; their answers come back 5 ms after it.
	for _, tc := range []struct {
		name   string
		change time.Duration // from the first poll's sending
	}{
		{"while the poll before it comes back", 18 * time.Millisecond},
		{"while the poll that reads it goes out", 31 * time.Millisecond},
		{"between two polls", 25 * time.Millisecond},
		{"as the poll before it reads", 17*time.Millisecond + time.Nanosecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				changed := time.Now().Add(tc.change)
				read := func(ctx context.Context) (string, error) {
					time.Sleep(2 * time.Millisecond)
					v := "leader"
					if !time.Now().Before(changed) {
						v = ""
					}
					time.Sleep(3 * time.Millisecond)
					return v, nil
				}
				w := startWatch(t.Context(), every, read)
				time.Sleep(100 * time.Millisecond)
				cs := w.stop()
				c, ok := firstChange(cs, changed.Add(-time.Nanosecond), func(v string) bool { return v == "" })
				if !ok {
					t.Fatalf("got changes %+v, want one to \"\"", cs)
				}
				if !c.since.Before(changed) || c.at.Before(changed) {
					t.Errorf("got the change bracketed by (%v, %v] from the start, want it to hold the change at %v: since is before the change, at after it",
						c.since.Sub(changed.Add(-tc.change)), c.at.Sub(changed.Add(-tc.change)), tc.change)
				}
			})
		})
	}
}

// TestSampleCountsTheSweepAndTheBoardApart pins which requests each of a
// sample's counts holds: counts the sweeper's (every route but the board
// sync's issue list), board the board sync's alone. The cost ratio and
// the replicas sweeping are computed from counts, so a board request
// there would make a board-syncing replica a sweeper.
func TestSampleCountsTheSweepAndTheBoardApart(t *testing.T) {
	st := simStats{Requests: []simRequests{
		{Token: "a", Method: "POST", Route: graphqlRoute, Status: 200, Count: 3},
		{Token: "a", Method: "GET", Route: boardRoute, Status: 200, Count: 5},
		{Token: "b", Method: "GET", Route: boardRoute, Status: 200, Count: 7},
	}}
	s := sampleOf(time.Unix(1_000_000, 0), st)
	if s.counts["a"] != 3 || s.counts["b"] != 0 {
		t.Errorf("got sweeper counts %v, want a 3 and b none: the board's issue list is not the sweeper's", s.counts)
	}
	if s.board["a"] != 5 || s.board["b"] != 7 {
		t.Errorf("got board counts %v, want a 5 and b 7: the board sync's issue-list requests alone", s.board)
	}
}

// TestGrownNamesTheFollowersThatSwept pins how the takeover and fault
// scenarios tell a successor: a follower whose sweeper requests grew
// since the stop, never one whose count stood still (else a takeover
// would be seen at once), nor one that only synced the board.
func TestGrownNamesTheFollowersThatSwept(t *testing.T) {
	base := simStats{Requests: []simRequests{
		{Token: "a", Route: graphqlRoute, Count: 4}, {Token: "b", Route: graphqlRoute, Count: 9}, {Token: "c", Route: boardRoute, Count: 1},
	}}
	after := simStats{Requests: []simRequests{
		{Token: "a", Route: graphqlRoute, Count: 5}, {Token: "b", Route: graphqlRoute, Count: 9}, {Token: "c", Route: boardRoute, Count: 2},
		{Token: "z", Route: graphqlRoute, Count: 50},
	}}
	if got := grown(base, after, []string{"a", "b", "c"}); len(got) != 1 || got[0] != "a" {
		t.Errorf("got %v grown, want [a]: b's count stood still, c synced the board only, z is not among the followers", got)
	}
	if got := grown(base, base, []string{"a", "b", "c"}); len(got) != 0 {
		t.Errorf("got %v grown with no request since, want none: no successor yet", got)
	}
}

// TestFirstChangeIsAfterTheInstant pins firstChange, which the partition
// fault's check of "stepped down before the successor was elected" reads:
// a change at or before the instant (the successor holding the lease in
// an earlier term) is not the change after it.
func TestFirstChangeIsAfterTheInstant(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	cs := []change[string]{{at: t0.Add(-time.Second), v: "b"}, {at: t0, v: "a"}, {at: t0.Add(300 * time.Millisecond), v: ""}, {at: t0.Add(time.Second), v: "b"}}
	c, ok := firstChange(cs, t0, func(v string) bool { return v == "b" })
	if !ok || !c.at.Equal(t0.Add(time.Second)) {
		t.Errorf("got %+v (found %v), want b's change 1s after the instant: its earlier term does not count", c, ok)
	}
	if _, ok := firstChange(cs, t0.Add(time.Second), func(v string) bool { return v == "b" }); ok {
		t.Errorf("got a change at the instant itself, want none after it")
	}
}
