package server

import "testing"

// TestDeepSpacingAfterAWindowThatTookLong pins the spacing of deep windows
// docs/design.md gives: DeepEvery-deepSlack (23) intervals after the last
// began, or DeepEvery less 1.3 times the intervals it took when that is
// sooner (after 11, 16), and, after a window of 14 intervals or more, a
// spacing no longer than the window: the next begins as it ends.
func TestDeepSpacingAfterAWindowThatTookLong(t *testing.T) {
	for _, c := range []struct {
		took, want int
		why        string
	}{
		{1, DeepEvery - deepSlack, "a window of a pass: deepSlack short of the period"},
		{5, DeepEvery - deepSlack, "a short window: deepSlack short of the period"},
		{11, 16, "a window that took 11 intervals: 30 less 1.3 times 11"},
		{14, 12, "a window that took 14: 12, sooner than it ended, so the next begins as it ends"},
	} {
		if got := deepSpacing(c.took); got != c.want {
			t.Errorf("deepSpacing(%d) = %d, want %d: %s", c.took, got, c.want, c.why)
		}
	}
}

// TestPaceBehindOnceTheWindowBeforeWasDone pins paceBehind past the end of
// the window before: that window was done at the end of its interval 2
// (three marks), so the current one, judged deepSlack-paceAhead (3)
// intervals earlier into its span, stands behind it from its interval 6
// whatever its cursor, and is not behind before its interval 3, where
// there is nothing to keep up with.
func TestPaceBehindOnceTheWindowBeforeWasDone(t *testing.T) {
	st := &sweepTerm{lastPace: []paceMark{{}, {}, {done: true}}}
	for age, want := range []bool{false, false, false} {
		if got := st.paceBehind(age); got != want {
			t.Errorf("paceBehind(%d) = %v, want %v: a window's first intervals have nothing to keep up with", age, got, want)
		}
	}
	for _, age := range []int{6, 7, 20} {
		if !st.paceBehind(age) {
			t.Errorf("paceBehind(%d) = false, want true: the window before was done by then", age)
		}
	}
}
