package harness

import (
	"slices"
	"time"

	"iterion.dev/iterion/pkg/forge/forgesim"
)

// The clock scenario's figures, derived from what the simulator and the
// sweepers said, and its report.

// checked fills the runs checked per interval and the longest unchecked
// from reads, the simulator's pull reads of the installation: pull
// requests 1..shallow are the shallow window's, the rest the deep
// window's; skip names pull requests left out (settled in the window).
// The window is passes intervals from t0.
func (r *ClockRow) checked(reads []forgesim.PullReads, shallow int, skip map[int]bool, t0 time.Time, passes int) {
	r.ShallowChecked, r.DeepChecked = make([]int, passes), make([]int, passes)
	t1 := t0.Add(time.Duration(passes) * r.Interval)
	byPull := make(map[int][]time.Time, len(reads))
	for _, pr := range reads {
		if pr.Repo == seedRepo {
			byPull[pr.Number] = pr.At
		}
	}
	for n := 1; n <= r.Runs; n++ {
		if skip[n] {
			continue
		}
		isShallow := n <= shallow
		// The last read before the window, or the one before it in it; a
		// run with no read before the window counts from the window's
		// start, as one never read does.
		last := time.Time{}
		var longest time.Duration
		seen := make([]bool, passes)
		for _, at := range byPull[n] {
			if at.Before(t0) {
				last = at
				continue
			}
			if !at.Before(t1) {
				break
			}
			if k := int(at.Sub(t0) / r.Interval); k < passes {
				seen[k] = true
			}
			if last.IsZero() {
				last = t0
			}
			longest = max(longest, at.Sub(last))
			last = at
		}
		if last.IsZero() {
			last = t0 // never read: unchecked the whole window at least
		}
		longest = max(longest, t1.Sub(last))
		for k, ok := range seen {
			if !ok {
				continue
			}
			if isShallow {
				r.ShallowChecked[k]++
			} else {
				r.DeepChecked[k]++
			}
		}
		if isShallow {
			r.LongestShallow = max(r.LongestShallow, longest)
		} else {
			r.LongestDeep = max(r.LongestDeep, longest)
		}
	}
}

// intervals is d in intervals.
func (r ClockRow) intervals(d time.Duration) float64 { return d.Seconds() / r.Interval.Seconds() }

// MaxGraphQLMinute is the most GraphQL time the simulator charged in any
// of its minutes in the window, GitHub's seconds.
func (r ClockRow) MaxGraphQLMinute() float64 {
	if len(r.GraphQLMinutes) == 0 {
		return 0
	}
	return slices.Max(r.GraphQLMinutes)
}

// PointsPerInterval is the mean GraphQL points an interval.
func (r ClockRow) PointsPerInterval() float64 {
	var n int64
	for _, p := range r.Points {
		n += p
	}
	if len(r.Points) == 0 {
		return 0
	}
	return float64(n) / float64(len(r.Points))
}

// RefusalsTotal is the refusals of every kind.
func (r ClockRow) RefusalsTotal() int64 {
	var n int64
	for _, c := range r.Refusals {
		n += c
	}
	return n
}

// MeanDuty and MaxDuty are the passes' durations over the interval: the
// mean and the longest (0 without a pass).
func (r ClockRow) MeanDuty() float64 {
	if len(r.Passes) == 0 {
		return 0
	}
	var sum time.Duration
	for _, p := range r.Passes {
		sum += p.Took
	}
	return r.intervals(sum) / float64(len(r.Passes))
}

func (r ClockRow) MaxDuty() float64 {
	var m time.Duration
	for _, p := range r.Passes {
		m = max(m, p.Took)
	}
	return r.intervals(m)
}

// BehindPasses is how many passes said they were behind.
func (r ClockRow) BehindPasses() int {
	n := 0
	for _, p := range r.Passes {
		if p.Behind {
			n++
		}
	}
	return n
}

// PointsPerRun is the GraphQL points charged per run checked (a pull
// request delivered) over the window: what a check costs, whoever sent
// it; 0 when no run was checked.
func (r ClockRow) PointsPerRun() float64 {
	var pts int64
	for _, p := range r.Points {
		pts += p
	}
	runs := 0
	for k := range r.ShallowChecked {
		runs += r.ShallowChecked[k] + r.DeepChecked[k]
	}
	if runs == 0 {
		return 0
	}
	return float64(pts) / float64(runs)
}

// ClockRatio is, for runs open runs of which shallow are in the shallow
// window, sweep concurrency conc and no faults, the GraphQL points per run
// checked at the largest replica count over those at the smallest: the ÷N
// ratio with the lease, normalised by the work done, since a sweeper that
// its time budget holds back checks fewer runs an interval whatever the
// replica count (0 when either is missing, or when one replica count was
// measured: a configuration over itself is 1, lease or not).
func ClockRatio(rows []ClockRow, runs, shallow, conc int) float64 {
	var lo, hi *ClockRow
	for i := range rows {
		c := &rows[i]
		if c.Runs != runs || c.Shallow != shallow || c.Concurrency != conc || c.Faults {
			continue
		}
		if lo == nil || c.Replicas < lo.Replicas {
			lo = c
		}
		if hi == nil || c.Replicas > hi.Replicas {
			hi = c
		}
	}
	if lo == nil || hi == nil || lo.Replicas == hi.Replicas || lo.PointsPerRun() == 0 {
		return 0
	}
	return hi.PointsPerRun() / lo.PointsPerRun()
}
