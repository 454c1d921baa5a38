package harness

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Report is what one harness run measured. Scenarios that did not run leave
// their fields empty. It is a plain value, safe to read from several
// goroutines once Run has returned it.
type Report struct {
	Date    time.Time
	Options Options
	// Dir kept the processes' logs; empty once removed.
	Dir      string
	Cost     []CostRow
	Budget   []BudgetRow
	Takeover []TakeoverResult
	Faults   []FaultResult
	Load     *LoadResult
	Scale    []ScaleRow
}

// CostRatio is the sweep's request rate at the largest N over the rate at
// the smallest, with or without the lease; 0 when either was not measured.
func (r *Report) CostRatio(lease bool) float64 {
	return r.ratio(lease, func(c CostRow) float64 { return c.PerMinute })
}

// BoardRatio is the board sync's request rate at the largest N over the
// rate at the smallest, with or without the lease; 0 when either was not
// measured.
func (r *Report) BoardRatio(lease bool) float64 {
	return r.ratio(lease, func(c CostRow) float64 { return c.BoardPerMinute })
}

func (r *Report) ratio(lease bool, rate func(CostRow) float64) float64 {
	var lo, hi *CostRow
	for i := range r.Cost {
		c := &r.Cost[i]
		if c.Lease != lease {
			continue
		}
		if lo == nil || c.Replicas < lo.Replicas {
			lo = c
		}
		if hi == nil || c.Replicas > hi.Replicas {
			hi = c
		}
	}
	if lo == nil || hi == nil || rate(*lo) == 0 {
		return 0
	}
	return rate(*hi) / rate(*lo)
}

// Markdown renders the report as a docs/benchmarks.md section body; command is
// the command line that reproduces it.
func (r *Report) Markdown(command string) string {
	var b strings.Builder
	o := r.Options
	fmt.Fprintf(&b, "Measured %s on this project's 2-core machine with:\n\n    %s\n\n", r.Date.Format("2006-01-02 15:04 MST"), command)
	fmt.Fprintf(&b, "Real processes: `dev-mongo`, `iterion forge-sim` and `iterion serve` replicas on loopback, "+
		"each replica with its own forge token so the simulator's counts (`GET /_sim/stats`) attribute every request. "+
		"Sweep interval %v (the compressed minute), so the lease's TTL is %v and its retry %v; %d seeded gating runs.\n\n",
		o.Interval, o.ttl(), o.retry(), o.Runs)
	if len(r.Cost) > 0 {
		b.WriteString("**Cost.** Sweeper-lane requests, the least-squares rate of the simulator's counts over " +
			fmt.Sprintf("%v per configuration; all configurations in one run.\n\n", o.Window))
		b.WriteString("| replicas | lease | requests/min | requests/interval | GraphQL points/interval | replicas sweeping | REST reads answered 304 | simulator | transport | agree |\n")
		b.WriteString("|---:|:---|---:|---:|---:|---:|---:|---:|---:|:---|\n")
		for _, c := range r.Cost {
			share := "none sent"
			if !math.IsNaN(c.Share304) {
				share = fmt.Sprintf("%.1f%%", 100*c.Share304)
			}
			fmt.Fprintf(&b, "| %d | %s | %.0f | %.1f | %.1f | %d | %s | %d | %d | %s |\n",
				c.Replicas, yesNo(c.Lease), c.PerMinute, c.PerInterval, c.GraphQLPerInterval, c.Sweepers, share, c.Sim, c.Transport, yesNo(c.Agree()))
		}
		fmt.Fprintf(&b, "\nRatio largest N / N=1: with the lease **%.3f** (goal ≤ 1.05); with `--no-lease` **%.2f** (≈ N). Simulator and transport are each configuration's "+
			"sweeper requests over the replicas' whole lives, counted by the simulator per token and by the replicas' transports "+
			"(`forge_http_requests_total{lane=\"merge-gate-sweeper\"}`), read at one quiet instant. The batched sweep reads with one "+
			"GraphQL query a pass (a POST, which no ETag makes conditional) and sends REST only to write a drifted run's status, so "+
			"REST reads answered 304 (the goal ≥ 90%% of the per-run REST sweep's ETag reads) have none to count.\n\n",
			r.CostRatio(true), r.CostRatio(false))
		b.WriteString(boardMarkdown(r))
	}
	if len(r.Budget) > 0 {
		b.WriteString(budgetMarkdown(r.Budget))
	}
	if len(r.Takeover) > 0 {
		b.WriteString("**Takeover.** The leader is stopped at a random phase of its interval; the delay runs to the successor's first " +
			"sweeper request as the simulator counted it, polled every " + pollEvery.String() + " (a delay is seen up to that much late). After SIGTERM it is measured from the stopped " +
			"leader's release (the ADR's clean stop: the last poll, every " + pollEvery.String() + ", of a follower's GET /leases?format=json " +
			"that still named it, so the delay errs long), and shown from the signal too, which adds the process's " +
			"own shutdown; after SIGKILL, from the signal. A fresh replica replaces each stopped one.\n\n")
		b.WriteString("| signal | stops | median | max | bound | within bound (+ polling) | from the signal: median / max | double sweeps |\n|:---|---:|---:|---:|---:|:---|---:|---:|\n")
		for _, t := range r.Takeover {
			fmt.Fprintf(&b, "| %s | %d | %v | %v | %v | %s | %v / %v | %d |\n", t.Signal, len(t.FromSignal),
				t.Median().Round(time.Millisecond), t.Max().Round(time.Millisecond), t.Bound, yesNo(t.Within()),
				median(t.FromSignal).Round(time.Millisecond), maxOf(t.FromSignal).Round(time.Millisecond), t.Doubles)
		}
		b.WriteString("\nBounds: SIGTERM retry + one tick; SIGKILL TTL + retry + one tick.\n\n")
	}
	if len(r.Scale) > 0 {
		b.WriteString(scaleMarkdown(r))
	}
	if len(r.Faults) > 0 {
		b.WriteString("**Faults.** During each fault the harness sets the gate status of a quarter of the runs to `failure` " +
			"behind the replicas' backs; after it, every one must agree with its verdict again within one deep pass.\n\n")
		b.WriteString("| fault | drifted | repaired | after the fault | bound | takeover (bound) | checks |\n|:---|---:|---:|---:|---:|---:|:---|\n")
		for _, f := range r.Faults {
			var cs []string
			for _, c := range f.Checks {
				mark := "ok"
				if !c.OK {
					mark = "FAILED"
				}
				cs = append(cs, fmt.Sprintf("%s: %s (%s)", mark, c.Rule, c.Detail))
			}
			takeover := "–"
			if f.TakeoverBound > 0 {
				takeover = fmt.Sprintf("%v (%v)", f.Takeover.Round(time.Millisecond), f.TakeoverBound)
			}
			fmt.Fprintf(&b, "| %s | %d | %d | %v | %v | %s | %s |\n", f.Name, f.Drifted, f.Repaired,
				f.RepairAfter.Round(time.Millisecond), f.Bound, takeover, strings.Join(cs, "; "))
		}
		b.WriteString("\n")
	}
	if r.Load != nil {
		b.WriteString(loadMarkdown(r.Load))
	}
	return b.String()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// boardMarkdown renders the cost scenario's board sync figures.
func boardMarkdown(r *Report) string {
	var b strings.Builder
	b.WriteString("**Board sync.** The same replicas also run the forge board sync, the second elected net (lease " +
		"`forge-board-sync`), with `--board-repos " + boardRepo + "` and `--board-interval` the sweep interval, on " +
		fmt.Sprintf("%d seeded issues: its requests (the simulator's issue-list route, lane `forge-board-sync`), ", boardIssues) +
		"measured as the sweeper's over the same windows.\n\n")
	b.WriteString("| replicas | lease | requests/min | requests/interval | replicas syncing | simulator | transport | agree |\n")
	b.WriteString("|---:|:---|---:|---:|---:|---:|---:|:---|\n")
	for _, c := range r.Cost {
		fmt.Fprintf(&b, "| %d | %s | %.0f | %.2f | %d | %d | %d | %s |\n",
			c.Replicas, yesNo(c.Lease), c.BoardPerMinute, c.BoardPerInterval, c.BoardSyncers, c.BoardSim, c.BoardTransport, yesNo(c.BoardAgree()))
	}
	fmt.Fprintf(&b, "\nBoard ratio largest N / N=1: with the lease **%.3f** (goal ≤ 1.05); with `--no-lease` **%.2f** (≈ N). Transport: "+
		"`forge_http_requests_total{lane=\"forge-board-sync\"}`, read at the same quiet instant as the sweeper's.\n\n",
		r.BoardRatio(true), r.BoardRatio(false))
	return b.String()
}
