package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/forge/forgesim"
)

// TestClockScenario runs the clock scenario reduced (300 open runs, 100 of
// them in the shallow window for the aged configurations, 1 and 2
// replicas, a 4-s compressed minute, 4 intervals each) on real processes
// against the simulator's latency model, and asserts the rules that hold
// at any size, with margins for the machine's load: no request refused by
// any limit; at most 30 s of GraphQL time in any of the simulator's
// minutes; one replica sweeps; every drifted run repaired, and every
// shallow-window run checked, within 3 intervals; under 1% injected 502s,
// no gate status on a moved head. It logs the ÷N ratio.
//
// The issue's goal is a drift repaired within 2 intervals, which `iterion
// bench` measures at full size. Here the margin is a pass: the 100 shallow
// runs are one query, and draws vary from run to run (the batches' bodies
// do), so a pass whose query and one of its halves both time out spends
// 20 of its 30 s and leaves most of the window to the next pass, as the
// budget must; a CI run met that and repaired the drift in 2.2 intervals.
//
// The minute is 4 s, GitHub's compressed 15×, because compression
// magnifies the machine's stalls too: at 2 s (30×) a loaded CI machine,
// running the server's race tests beside it, stalled one pass for 1.5 s,
// 45 s of GitHub's time, so the pass ran out of its interval and a drift
// waited 2.3 intervals.
func TestClockScenario(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	dir, bin, devMongo := testBinaries(ctx, t)
	o := Options{
		Bin: bin, DevMongoBin: devMongo, Dir: filepath.Join(dir, "run"),
		ClockRuns: []int{300}, ClockReplicas: []int{1, 2}, ClockShallow: 100,
		ClockInterval: 4 * time.Second, ClockPasses: 4, ClockDeepPasses: 4,
		Scenarios: []string{ScenarioClock},
		Progress:  testWriter{t},
	}
	rep, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	md := rep.Markdown("go test ./cmd/iterion/internal/harness -run TestClockScenario")
	t.Log("\n" + md)
	if strings.Contains(md, "seeded gating runs") {
		t.Errorf("a clock-only report describes the shared cluster, which did not run; want only the clock scenario's own cluster")
	}
	if len(rep.Clock) != 5 {
		t.Fatalf("got %d clock rows, want 5: 300 runs all shallow and 100 shallow at 1 and 2 replicas, and faults", len(rep.Clock))
	}
	for _, c := range rep.Clock {
		name := func() string {
			return fmt.Sprintf("%d runs, %d shallow, N=%d, faults %s", c.Runs, c.Shallow, c.Replicas, yesNo(c.Faults))
		}
		if n := c.RefusalsTotal(); n != 0 {
			t.Errorf("%s: %d refusals (%v), want 0: the time budget keeps the sweep under every limit", name(), n, c.Refusals)
		}
		if m := c.MaxGraphQLMinute(); m > 30 || len(c.GraphQLMinutes) == 0 {
			t.Errorf("%s: at most %.1f s of GraphQL in the simulator's minutes %v, want some and never over 30 s", name(), m, c.GraphQLMinutes)
		}
		if c.Sweepers != 1 {
			t.Errorf("%s: %d replicas swept, want 1: the lease elects one", name(), c.Sweepers)
		}
		if c.Repaired != c.Drifted || c.intervals(c.RepairAfter) > 3 {
			t.Errorf("%s: %d of %d drifted runs repaired in %.1f intervals, want all within 3", name(), c.Repaired, c.Drifted, c.intervals(c.RepairAfter))
		}
		if s := c.intervals(c.LongestShallow); s > 3 {
			t.Errorf("%s: a shallow-window run went %.1f intervals unchecked, want at most 3", name(), s)
		}
		if c.Faults && (c.Moved == 0 || c.WrongCommit != 0) {
			t.Errorf("%s: %d of %d moved heads got a gate status, want none of some: no verdict from a wrong commit", name(), c.WrongCommit, c.Moved)
		}
	}
	// The ÷N ratio is reported, not asserted: the simulator's draws per
	// query give both replica counts the same timeouts, but over 4 short
	// intervals where the window falls among the passes moves the runs
	// checked by a tenth; the lease's rule is asserted above, one sweeper.
	for _, shallow := range []int{300, 100} {
		t.Logf("%d shallow: ÷N ratio (points per run checked, 2 replicas over 1) %.3f", shallow, ClockRatio(rep.Clock, 300, shallow, 1))
	}
}

// TestCheckedCountsEveryGapOfTheWindow pins how long a run went unchecked
// in the clock scenario's window, from synthetic reads: from its last read
// before the window, or from the window's start when it had none, to its
// first read in it; between reads; and from its last read to the window's
// end. A run read only late in the window went unchecked from its start.
func TestCheckedCountsEveryGapOfTheWindow(t *testing.T) {
	iv := time.Second
	t0 := time.Unix(1_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	for _, tc := range []struct {
		name  string
		reads []time.Time
		want  time.Duration
	}{
		{"read before the window, then every interval", []time.Time{at(-500 * time.Millisecond), at(500 * time.Millisecond), at(1500 * time.Millisecond), at(2500 * time.Millisecond), at(3500 * time.Millisecond)}, time.Second},
		{"read before the window, then late in it", []time.Time{at(-200 * time.Millisecond), at(3 * time.Second)}, 3200 * time.Millisecond},
		{"not read before the window, then late in it", []time.Time{at(3 * time.Second), at(3500 * time.Millisecond)}, 3 * time.Second},
		{"read early, then not again", []time.Time{at(-100 * time.Millisecond), at(500 * time.Millisecond)}, 3500 * time.Millisecond},
		{"never read", nil, 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ClockRow{Runs: 1, Interval: iv}
			r.checked([]forgesim.PullReads{{Repo: seedRepo, Number: 1, At: tc.reads}}, 1, nil, t0, 4)
			if r.LongestShallow != tc.want {
				t.Errorf("got the run unchecked %v at most, want %v: every gap of the window counts, its first and last included", r.LongestShallow, tc.want)
			}
		})
	}
}

// TestCheckedCountsEachIntervalsRuns pins the clock scenario's runs
// checked per interval: a run counts once in each interval of the window
// in which its pull request was read, however often; in the shallow
// window when its number is at most shallow, else in the deep one; runs
// left out (skip) and reads of other repositories not at all.
func TestCheckedCountsEachIntervalsRuns(t *testing.T) {
	iv := time.Second
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	reads := []forgesim.PullReads{
		{Repo: seedRepo, Number: 1, At: []time.Time{at(-300), at(100), at(200), at(1100), at(2100)}}, // shallow, every interval, twice in the first
		{Repo: seedRepo, Number: 2, At: []time.Time{at(500), at(2500)}},                              // shallow: the first and last
		{Repo: seedRepo, Number: 3, At: []time.Time{at(1500)}},                                       // deep: the second
		{Repo: seedRepo, Number: 4, At: []time.Time{at(100), at(1100), at(2100)}},                    // left out
		{Repo: "acme/other", Number: 3, At: []time.Time{at(100), at(2100)}},                          // another repository
	}
	r := ClockRow{Runs: 4, Shallow: 2, Interval: iv}
	r.checked(reads, 2, map[int]bool{4: true}, t0, 3)
	if want := []int{2, 1, 2}; !slices.Equal(r.ShallowChecked, want) {
		t.Errorf("got shallow runs checked %v, want %v: runs 1 and 2 once an interval each read in it", r.ShallowChecked, want)
	}
	if want := []int{0, 1, 0}; !slices.Equal(r.DeepChecked, want) {
		t.Errorf("got deep runs checked %v, want %v: run 3 in the second interval only; run 4 is left out, acme/other's 3 is not the seeded repository's", r.DeepChecked, want)
	}
	if want := 1500 * time.Millisecond; r.LongestDeep != want {
		t.Errorf("got run 3 unchecked %v at most, want %v: from its read to the window's end", r.LongestDeep, want)
	}
}

// TestClockFiguresOfARow pins the clock row's derived figures: the
// busiest of the simulator's GraphQL minutes, the mean and longest pass
// over the interval, the passes behind, and the points per run checked,
// which the ÷N ratio divides, deep runs included.
func TestClockFiguresOfARow(t *testing.T) {
	iv := 2 * time.Second
	r := ClockRow{Interval: iv, GraphQLMinutes: []float64{12, 30, 18}, Points: []int64{6, 6},
		ShallowChecked: []int{2, 1}, DeepChecked: []int{0, 1},
		Passes: []passLog{{Took: time.Second}, {Took: 3 * time.Second, Behind: true}, {Took: 2 * time.Second}}}
	if got := r.MaxGraphQLMinute(); got != 30 {
		t.Errorf("got %v GraphQL seconds in the busiest minute, want 30", got)
	}
	if got := r.MeanDuty(); got != 1 {
		t.Errorf("got a mean pass of %.2f intervals, want 1: 6s over 3 passes of a 2s interval", got)
	}
	if got := r.MaxDuty(); got != 1.5 {
		t.Errorf("got the longest pass %.2f intervals, want 1.5", got)
	}
	if got := r.BehindPasses(); got != 1 {
		t.Errorf("got %d passes behind, want 1", got)
	}
	if got := r.PointsPerRun(); got != 3 {
		t.Errorf("got %.2f points per run checked, want 3: 12 points over 4 runs checked, shallow and deep", got)
	}
}

// TestClockRatioLeavesTheFaultsOut pins the clock scenario's ÷N ratio:
// the points per run checked at the largest replica count over the
// smallest, of the configuration asked for; a configuration with injected
// faults, whose retries cost points, is not the steady state and counts
// in neither.
func TestClockRatioLeavesTheFaultsOut(t *testing.T) {
	row := func(n int, points int64, faults bool) ClockRow {
		return ClockRow{Runs: 100, Shallow: 100, Concurrency: 1, Replicas: n, Faults: faults,
			Points: []int64{points}, ShallowChecked: []int{100}, DeepChecked: []int{0}}
	}
	rows := []ClockRow{row(1, 100, false), row(3, 105, false), row(5, 400, true)}
	if got := ClockRatio(rows, 100, 100, 1); got != 1.05 {
		t.Errorf("got ratio %.3f, want 1.050: N=3 over N=1; the faults configuration at N=5 is left out", got)
	}
	rows[1].ShallowChecked = []int{50}
	if got := ClockRatio(rows, 100, 100, 1); got != 2.1 {
		t.Errorf("got ratio %.3f with half the runs checked at N=3, want 2.100: per run checked, not per interval", got)
	}
}
