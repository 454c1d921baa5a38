package harness

import (
	"strings"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/server"
)

// TestScaleGoalIsNeverMetWithoutAPass pins the scale table's goal column:
// a batched configuration meets ceil(N/50)+5 requests a pass only when its
// window held a pass to divide by; a window in which the sweepers offered
// no run measured no pass, and its 0 requests a pass is no figure.
func TestScaleGoalIsNeverMetWithoutAPass(t *testing.T) {
	row := ScaleRow{Mode: server.SweepBatch, Runs: 10, Replicas: 1, Interval: 2 * time.Second, Window: 6 * time.Second}
	for _, c := range []struct {
		name     string
		passes   float64
		requests int64
		want     string
	}{
		{"three passes of 5 requests", 3, 15, "| 6: yes |"},
		{"three passes of 7 requests", 3, 21, "| 6: no |"},
		{"no run offered in the window", 0, 4, "| 6: no |"},
		{"nothing at all in the window", 0, 0, "| 6: no |"},
	} {
		r := row
		r.Passes, r.Requests = c.passes, c.requests
		if got := scaleMarkdown(&Report{Scale: []ScaleRow{r}}); !strings.Contains(got, c.want) {
			t.Errorf("%s: got the row %q, want the goal cell %q", c.name, rowOf(got, "| batch |"), c.want)
		}
	}
}

// rowOf is the line of md that starts with prefix, or "".
func rowOf(md, prefix string) string {
	for line := range strings.Lines(md) {
		if strings.HasPrefix(line, prefix) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// TestScaleFiguresOfARow pins the scale row's derived figures: the goal
// of ceil(N/50)+5 requests a pass is met at it; pass ÷ interval is the
// mean of the timed passes, or, with none timed, the window over the
// passes it offered; per hour is the window's rate times 60 intervals;
// the REST share adds the hour's token rotation, one pass charged as the
// term's first was in place of one at the window's rate.
func TestScaleFiguresOfARow(t *testing.T) {
	iv := 2 * time.Second
	r := ScaleRow{Mode: server.SweepBatch, Runs: 100, Interval: iv, Window: 10 * iv, Passes: 10, Requests: 70}
	if !r.MeetsGoal() {
		t.Errorf("got %.1f requests a pass reported over the goal %d, want met: the goal is inclusive", r.PerPass(r.Requests), ScaleGoal(r.Runs))
	}
	if r.Requests++; r.MeetsGoal() {
		t.Errorf("got %.1f requests a pass reported within the goal %d, want missed", r.PerPass(r.Requests), ScaleGoal(r.Runs))
	}
	r.PassTime, r.PassesTimed = 3*time.Second, 3
	if got := r.Duty(); got != 0.5 {
		t.Errorf("got pass ÷ interval %.2f, want 0.5: 3 passes of 1s each over a 2s interval", got)
	}
	r.PassTime, r.PassesTimed, r.Passes = 0, 0, 0.5
	if got := r.Duty(); got != 20 {
		t.Errorf("got pass ÷ interval %.2f with no pass timed, want 20: the 20s window held half a pass, of a 2s interval", got)
	}
	r = ScaleRow{Interval: iv, Window: 10 * iv, Passes: 10, REST: 100, FirstREST: 60}
	if got := r.PerHour(r.REST); got != 600 {
		t.Errorf("got %.0f REST requests an hour, want 600: 100 over 10 intervals, times 60", got)
	}
	if got, want := r.RESTShare(), (600.0+60-10)/installationBudget; got != want {
		t.Errorf("got a REST share of %.4f, want %.4f: the hour's rotation costs one first pass (60) in place of one at the window's rate (10)", got, want)
	}
}
