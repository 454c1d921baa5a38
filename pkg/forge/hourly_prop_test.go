package forge_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"pgregory.net/rapid"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

// TestHourlyLinesAccountForEveryRequest drives a Client through random
// request times, lanes and stops, and checks the hourly lines against what
// was sent: every request is reported exactly once, in the line of the UTC
// hour it was counted in; lines come in hour order; a line is written only
// by a request of a later hour or by Close; a line's span lies inside its
// hour, and it says "partial" exactly when the span is not the whole hour.
func TestHourlyLinesAccountForEveryRequest(t *testing.T) {
	// The hourly line is measured here, not the limits: one simulator
	// serves every rapid run, so the secondary limits are switched off.
	sim, srv := startSim(t, forgesim.WithBudget(1<<30), forgesim.WithSecondaryLimits(forgesim.SecondaryLimits{}))
	if err := sim.SeedPull("acme", "app", 1, "sha", "open"); err != nil {
		t.Fatal(err)
	}
	lanes := []string{forge.LaneMergeGateSweeper, forge.LaneWebhook, forge.LaneBoardSync}
	rapid.Check(t, func(rt *rapid.T) {
		start := time.Date(2026, 9, 30, 0, 0, 0, 0, time.UTC).Add(time.Duration(rapid.Int64Range(0, int64(24*time.Hour)).Draw(rt, "start")))
		clk := newTestClock(start)
		logs := &records{}
		c := newClient(t, srv, forge.Config{Token: "prop", Now: clk.Now, Logger: slog.New(logs), ETagCacheBytes: -1})
		sent := map[time.Time]int64{} // by hour end
		var total int64
		lastWrite := map[int]time.Time{} // line index → when it was written
		closes := map[int]bool{}         // line index → written by Close
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for i := range steps {
			clk.Add(time.Duration(rapid.Int64Range(0, int64(150*time.Minute)).Draw(rt, "advance")))
			before := len(logs.all())
			if rapid.IntRange(0, 9).Draw(rt, "op") == 0 {
				c.Close()
				for j := before; j < len(logs.all()); j++ {
					closes[j] = true
				}
			} else {
				lane := lanes[rapid.IntRange(0, len(lanes)-1).Draw(rt, "lane")]
				if _, err := c.GetPull(forge.WithLane(context.Background(), lane), "acme", "app", 1); err != nil {
					rt.Fatalf("step %d: %v", i, err)
				}
				sent[clk.Now().UTC().Truncate(time.Hour).Add(time.Hour)]++
				total++
			}
			for j := before; j < len(logs.all()); j++ {
				lastWrite[j] = clk.Now()
			}
		}
		c.Close()

		reported := map[time.Time]int64{}
		var prevEnd time.Time
		for i, rec := range logs.all() {
			a := map[string]slog.Value{}
			rec.Attrs(func(at slog.Attr) bool { a[at.Key] = at.Value; return true })
			end, from, to := a["hour_end"].Time(), a["from"].Time(), a["to"].Time()
			n := a["requests"].Int64()
			if n <= 0 {
				rt.Fatalf("line %d %q: reports %d requests, want > 0: only hours with requests get a line", i, rec.Message, n)
			}
			reported[end] += n
			if end.Before(prevEnd) {
				rt.Fatalf("line %d ends %v before the previous line's %v: lines come in hour order", i, end, prevEnd)
			}
			prevEnd = end
			if from.Before(end.Add(-time.Hour)) || to.After(end) || to.Before(from) {
				rt.Fatalf("line %d spans %v–%v, want inside the hour ending %v", i, from, to, end)
			}
			if partial := a["partial"].Bool(); partial != (from.After(end.Add(-time.Hour)) || to.Before(end)) {
				rt.Fatalf("line %d partial=%v for span %v–%v of the hour ending %v: partial exactly when the span is not the whole hour", i, partial, from, to, end)
			}
			if w, ok := lastWrite[i]; ok && !closes[i] && w.Before(end) {
				rt.Fatalf("line %d for the hour ending %v written at %v by a request: only a request of a later hour writes it", i, end, w)
			}
		}
		var sum int64
		for end, n := range reported {
			sum += n
			if sent[end] != n {
				rt.Fatalf("hour ending %v: reported %d, sent %d: every request is reported in its hour's line", end, n, sent[end])
			}
		}
		if sum != total {
			rt.Fatalf("reported %d requests in all, sent %d", sum, total)
		}
	})
}
