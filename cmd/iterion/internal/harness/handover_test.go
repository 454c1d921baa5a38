package harness

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestHandoverBetweenTellsAHandoverFromASecondHolder pins the cost and
// scale scenarios' rule for a window in which an elected lease moved: a
// step-down with a term begun for it (or none yet) is a handover, measured
// again on fresh replicas and named by replica and reason; a term begun
// with no step-down is a second holder, kept for the one-sweeper check to
// fail on; a window with neither is the steady state.
func TestHandoverBetweenTellsAHandoverFromASecondHolder(t *testing.T) {
	rs := []*replica{{name: "replica-04"}, {name: "replica-05"}, {name: "replica-06"}}
	snap := func(terms int64, downs ...map[string]int64) turns {
		return turns{lease: "merge-gate-sweeper", terms: terms, stepDowns: downs}
	}
	none := map[string]int64{}
	before := snap(1, none, map[string]int64{"ctx_done": 1}, none)
	for _, c := range []struct {
		name  string
		after turns
		want  string // "" when the window is kept
	}{
		{"steady state", snap(1, none, map[string]int64{"ctx_done": 1}, none), ""},
		{"handover", snap(2, map[string]int64{"deadline": 1}, map[string]int64{"ctx_done": 1}, none),
			"merge-gate-sweeper: 1 stepped down (replica-04 deadline 1), 1 began"},
		{"step-down, no term yet", snap(1, none, map[string]int64{"ctx_done": 1}, map[string]int64{"unanswered": 1, "deadline": 1}),
			"2 stepped down (replica-06 deadline 1, unanswered 1), 0 began"},
		{"second holder", snap(2, none, map[string]int64{"ctx_done": 1}, none), ""},
		{"a handover and a second holder", snap(3, map[string]int64{"deadline": 1}, map[string]int64{"ctx_done": 1}, none), ""},
	} {
		err := handoverBetween(rs, before, c.after)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: got %v, want nil: the window is kept", c.name, err)
		case c.want != "" && (!errors.Is(err, errHandover) || !errors.Is(err, ErrMeasure) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want errHandover naming %q", c.name, err, c.want)
		}
	}
}

// TestRemeasuredTriesAgainOnAHandoverOnly pins when a configuration is
// measured again: after a window that measured a handover (errHandover),
// up to measureAttempts times in all, each discarded window's reason kept
// in order; any other error, or a good measurement, ends it at once.
func TestRemeasuredTriesAgainOnAHandoverOnly(t *testing.T) {
	logf := func(string, ...any) {}
	handover := fmt.Errorf("window %w", errHandover)
	for _, c := range []struct {
		name      string
		results   []error
		calls     int
		discarded int
		err       error
	}{
		{"a good window", []error{nil}, 1, 0, nil},
		{"a handover, then a good window", []error{handover, nil}, 2, 1, nil},
		{"a handover in every window", []error{handover, handover, handover, nil}, measureAttempts, measureAttempts - 1, errHandover},
		{"another error", []error{ErrMeasure, nil}, 1, 0, ErrMeasure},
	} {
		calls := 0
		row, discarded, err := remeasured(logf, "what", func() (int, error) {
			calls++
			return calls, c.results[calls-1]
		})
		if calls != c.calls || len(discarded) != c.discarded || !errors.Is(err, c.err) || (c.err == nil && err != nil) || row != calls {
			t.Errorf("%s: got %d measurements (row %d), %d discarded, err %v; want %d, %d discarded, err %v",
				c.name, calls, row, len(discarded), err, c.calls, c.discarded, c.err)
		}
	}
}
