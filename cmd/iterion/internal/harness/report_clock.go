package harness

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// clockMarkdown renders the clock scenario: one summary row per
// configuration, then each configuration's intervals.
func clockMarkdown(r *Report) string {
	var b strings.Builder
	iv := r.Options.ClockInterval
	fmt.Fprintf(&b, "**GitHub's clock.** The batched sweep with its time budget on, against `forge-sim --latency` as it ships "+
		"(a 100-pull query's median 1.5 s, 2%% past GitHub's 10 s timeout, seed %d), with the lease and App auth (an installation per "+
		"configuration). Simulator minute %v (GitHub's minute, compressed %.0f×: a 1.5 s query answers in %v), the replicas' `--forge-minute` the same; sweep interval %v. "+
		"Runs in the shallow window were updated in the last hour, the others %v ago. Each configuration is measured over whole intervals "+
		"once its first pass has offered every run; %d shallow-window runs had their gate status set to `failure` as the window opened. "+
		"The faults configuration adds %.0f%% of GraphQL queries answered 502 over its window and pushes %d pull requests to a new head. "+
		"GraphQL seconds are the simulator's own per-minute figure (GitHub's seconds); checked runs and the longest time unchecked come from "+
		"when the simulator delivered each pull request to the installation; passes from the sweepers' logs.\n\n",
		clockSeed, iv, float64(time.Minute)/float64(iv), time.Duration(float64(1500*time.Millisecond)*float64(iv)/float64(time.Minute)),
		iv*time.Duration(max(r.Options.ClockSweepMinutes, 1)),
		clockAge, clockDrifted, 100*clockFaultShare, clockMoved)
	if share := r.Options.ClockTimeShare; share > 0 {
		fmt.Fprintf(&b, "The replicas' time share: `--sweep-time-share %v` (%.0f s of GitHub's 60 s of GraphQL a minute).\n\n", share, 60*share)
	}
	b.WriteString("| open runs | shallow | replicas | in flight | faults | intervals | GraphQL s/min max (mean) | points/interval | refusals | " +
		"runs checked/interval shallow + deep | longest unchecked shallow / deep (intervals) | drift repaired | pass ÷ interval mean / max | " +
		"passes behind | sweeping | wrong commit |\n")
	b.WriteString("|---:|---:|---:|---:|:---|---:|---:|---:|:---|---:|---:|:---|---:|---:|---:|---:|\n")
	for _, c := range r.Clock {
		fmt.Fprintf(&b, "| %d | %d | %d | %d | %s | %d | %.1f (%.1f) | %.1f | %s | %.0f + %.0f | %.1f / %s | %d/%d in %.1f intervals | %.2f / %.2f | %d of %d | %d | %s |\n",
			c.Runs, c.Shallow, c.Replicas, max(c.Concurrency, 1), yesNo(c.Faults), len(c.Points), c.MaxGraphQLMinute(), mean(c.GraphQLMinutes), c.PointsPerInterval(),
			refusalList(c.Refusals), meanInts(c.ShallowChecked), meanInts(c.DeepChecked), c.intervals(c.LongestShallow), deepFigure(c),
			c.Repaired, c.Drifted, c.intervals(c.RepairAfter), c.MeanDuty(), c.MaxDuty(), c.BehindPasses(), len(c.Passes), c.Sweepers, wrongCommit(c))
	}
	fmt.Fprintf(&b, "\n÷N ratio (GraphQL points per run checked, largest N over smallest, with the lease):")
	seen := map[[3]int]bool{}
	for _, c := range r.Clock {
		k := [3]int{c.Runs, c.Shallow, c.Concurrency}
		if seen[k] || c.Faults {
			continue
		}
		seen[k] = true
		if ratio := ClockRatio(r.Clock, c.Runs, c.Shallow, c.Concurrency); ratio > 0 {
			fmt.Fprintf(&b, " %d runs (%d shallow, %d in flight) %.3f;", c.Runs, c.Shallow, max(c.Concurrency, 1), ratio)
		}
	}
	b.WriteString("\n\nPer interval (points; shallow + deep runs checked; the GraphQL seconds of the simulator's minutes in order):\n\n")
	for _, c := range r.Clock {
		fmt.Fprintf(&b, "- %d runs, %d shallow, N=%d, %d in flight, faults %s: points %v; checked", c.Runs, c.Shallow, c.Replicas, max(c.Concurrency, 1), yesNo(c.Faults), c.Points)
		for k := range c.Points {
			fmt.Fprintf(&b, " %d+%d", c.ShallowChecked[k], c.DeepChecked[k])
		}
		b.WriteString("; GraphQL s/min")
		for _, m := range c.GraphQLMinutes {
			fmt.Fprintf(&b, " %.1f", m)
		}
		b.WriteString("; passes (runs offered, forge s, waited s, ÷ interval, batch after, behind)")
		for _, p := range c.Passes {
			fmt.Fprintf(&b, " [%d, %.2f, %.2f, %.2f, %d, %s]", p.Offered, p.ForgeTime.Seconds(), p.Waited.Seconds(), c.intervals(p.Took), p.Batch, yesNo(p.Behind))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	for _, c := range r.Clock {
		b.WriteString(discardedMarkdown(fmt.Sprintf("%d runs, %d shallow, N=%d, %d in flight, faults %s", c.Runs, c.Shallow, c.Replicas, max(c.Concurrency, 1), yesNo(c.Faults)), c.Discarded))
	}
	return b.String()
}

// deepFigure is the longest a deep-window run went unchecked, or "–"
// when every run is in the shallow window.
func deepFigure(c ClockRow) string {
	if c.Shallow >= c.Runs {
		return "–"
	}
	return fmt.Sprintf("%.1f", c.intervals(c.LongestDeep))
}

// wrongCommit is the gate statuses found on moved heads, of how many, or
// "–" without faults.
func wrongCommit(c ClockRow) string {
	if !c.Faults {
		return "–"
	}
	return fmt.Sprintf("%d of %d", c.WrongCommit, c.Moved)
}

// refusalList names each kind of refusal counted, or "0".
func refusalList(m map[string]int64) string {
	var out []string
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}) {
		if m[k] != 0 {
			out = append(out, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	if len(out) == 0 {
		return "0"
	}
	return strings.Join(out, ", ")
}

// mean is the mean of v (0 when empty).
func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// meanInts is the mean of v (0 when empty).
func meanInts(v []int) float64 {
	f := make([]float64, len(v))
	for i, x := range v {
		f[i] = float64(x)
	}
	return mean(f)
}
