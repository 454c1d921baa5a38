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
