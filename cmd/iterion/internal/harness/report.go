package harness

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Report is what one harness run measured: each scenario's rows, which it
// renders as markdown. Scenarios that did not run leave their fields empty.
// It is a plain value, safe to read from several goroutines once Run has
// returned it.
type Report struct {
	Date    time.Time
	Options Options
	// Dir kept the processes' logs; empty once removed, which a run
	// without Options.Dir does on success unless a clean stop did not
	// release its lease (TakeoverResult.Unreleased).
	Dir      string
	Cost     []CostRow
	Budget   []BudgetRow
	Takeover []TakeoverResult
	Faults   []FaultResult
	Load     *LoadResult
	Scale    []ScaleRow
	Clock    []ClockRow
	Group    *GroupResult
	Tenants  *TenantsResult
}

// unreleased reports whether a clean stop of the takeover scenario did
// not release its lease.
func (r *Report) unreleased() bool {
	return slices.ContainsFunc(r.Takeover, func(t TakeoverResult) bool { return len(t.Unreleased) > 0 })
}

// CostRatio is the sweep's request rate at the largest N over the rate at
// the smallest, with or without the lease; 0 when either was not measured,
// or when one replica count was (a rate over itself is 1, lease or not).
func (r *Report) CostRatio(lease bool) float64 {
	return r.ratio(lease, func(c CostRow) float64 { return c.PerMinute })
}

// BoardRatio is the board sync's request rate at the largest N over the
// rate at the smallest, with or without the lease; 0 when either was not
// measured, or when one replica count was.
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
	if lo == nil || hi == nil || lo.Replicas == hi.Replicas || rate(*lo) == 0 {
		return 0
	}
	return rate(*hi) / rate(*lo)
}

// ratioSpan names the replica counts the cost and board ratios divide,
// "N=10 ÷ N=1", and their quotient, about the ratio without the lease
// ("10 ÷ 1"); ok is false when r.Cost holds one replica count, which
// gives no ratio. r.Cost holds a row.
func (r *Report) ratioSpan() (counts, quotient string, ok bool) {
	lo, hi := r.Cost[0].Replicas, r.Cost[0].Replicas
	for _, c := range r.Cost {
		lo, hi = min(lo, c.Replicas), max(hi, c.Replicas)
	}
	return fmt.Sprintf("N=%d ÷ N=%d", hi, lo), fmt.Sprintf("%d ÷ %d", hi, lo), lo != hi
}

// noRatio is the sentence in place of the ratio named what when the cost
// scenario measured one replica count.
func (r *Report) noRatio(what string) string {
	return fmt.Sprintf("%s: none, only N=%d was measured; the ratio divides the rate at the largest replica count by the rate at the smallest (`-n`).",
		what, r.Cost[0].Replicas)
}

// Markdown renders the report as a docs/benchmarks.md section body; command is
// the command line that reproduces it.
func (r *Report) Markdown(command string) string {
	var b strings.Builder
	o := r.Options
	fmt.Fprintf(&b, "Measured %s on this project's 2-core machine with:\n\n    %s\n\n", r.Date.Format("2006-01-02 15:04 MST"), command)
	// The shared cluster's sentence, when a scenario ran on it; the clock
	// and tenants scenarios run clusters of their own and describe them.
	shared := len(r.Cost)+len(r.Budget)+len(r.Takeover)+len(r.Faults)+len(r.Scale) > 0 || r.Load != nil || r.Group != nil
	if shared || (r.Tenants == nil && len(r.Clock) == 0) {
		fmt.Fprintf(&b, "Real processes: `dev-mongo`, `iterion forge-sim` and `iterion serve` replicas on loopback, "+
			"each replica with its own forge token so the simulator's counts (`GET /_sim/stats`) attribute every request. "+
			"Sweep interval %v (the compressed minute), so the lease's TTL is %v and its retry %v; %d seeded gating runs.\n\n",
			o.Interval, o.ttl(), o.retry(), o.Runs)
	}
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
		counts, quotient, ok := r.ratioSpan()
		ratio := fmt.Sprintf("Ratio %s: with the lease **%.3f** (goal ≤ 1.05); with `--no-lease` **%.2f** (≈ %s).", counts, r.CostRatio(true), r.CostRatio(false), quotient)
		if !ok {
			ratio = r.noRatio("Ratio")
		}
		fmt.Fprintf(&b, "\n%s Simulator and transport are each configuration's "+
			"sweeper requests over the replicas' whole lives, counted by the simulator per token and by the replicas' transports "+
			"(`forge_http_requests_total{lane=\"merge-gate-sweeper\"}`), read at one quiet instant. The batched sweep reads with one "+
			"GraphQL query a pass (a POST, which no ETag makes conditional) and sends REST only to write a drifted run's status, so "+
			"REST reads answered 304 (the goal ≥ 90%% of the per-run REST sweep's ETag reads) have none to count.\n\n",
			ratio)
		for _, c := range r.Cost {
			what := fmt.Sprintf("%d replicas with the lease", c.Replicas)
			if !c.Lease {
				what = fmt.Sprintf("%d replicas without the lease, `--no-lease`", c.Replicas)
			}
			b.WriteString(discardedMarkdown(what, c.Discarded))
		}
		b.WriteString(boardMarkdown(r))
	}
	if len(r.Budget) > 0 {
		b.WriteString(budgetMarkdown(r.Budget))
	}
	if len(r.Takeover) > 0 {
		b.WriteString("**Takeover.** The leader is stopped at a random phase of its interval; the delay runs to the successor's first " +
			"sweeper request as the simulator counted it, polled every " + pollEvery.String() + " (a delay is seen up to that much late). After SIGTERM it is measured from the stopped " +
			"leader's release (the ADR's clean stop: the sending of the last poll, every " + pollEvery.String() + ", of a follower's GET /leases?format=json " +
			"that still named it, so the delay errs long), and shown from the signal too, which adds the process's " +
			"own shutdown; after SIGKILL, from the signal. A SIGTERM whose lease went to the successor only once it expired " +
			"was not released: it is counted, and measured from the signal. A fresh replica replaces each stopped one.\n\n")
		b.WriteString("| signal | stops | median | max | bound | within bound (+ polling) | from the signal: median / max | double sweeps | not released |\n|:---|---:|---:|---:|---:|:---|---:|---:|---:|\n")
		for _, t := range r.Takeover {
			unreleased := "–"
			if t.Signal == sigName(syscall.SIGTERM) {
				unreleased = fmt.Sprint(len(t.Unreleased))
				if len(t.Unreleased) > 0 {
					unreleased += " (" + strings.Join(t.Unreleased, ", ") + ")"
				}
			}
			fmt.Fprintf(&b, "| %s | %d | %v | %v | %v | %s | %v / %v | %d | %s |\n", t.Signal, len(t.FromSignal),
				t.Median().Round(time.Millisecond), t.Max().Round(time.Millisecond), t.Bound, yesNo(t.Within()),
				median(t.FromSignal).Round(time.Millisecond), maxOf(t.FromSignal).Round(time.Millisecond), t.Doubles, unreleased)
		}
		b.WriteString("\nBounds: SIGTERM retry + one tick; SIGKILL TTL + retry + one tick.\n\n")
	}
	if len(r.Scale) > 0 {
		b.WriteString(scaleMarkdown(r))
	}
	if len(r.Clock) > 0 {
		b.WriteString(clockMarkdown(r))
	}
	if r.Group != nil {
		b.WriteString(groupMarkdown(*r.Group))
	}
	if r.Tenants != nil {
		b.WriteString(tenantsMarkdown(*r.Tenants))
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
	counts, quotient, ok := r.ratioSpan()
	ratio := fmt.Sprintf("Board ratio %s: with the lease **%.3f** (goal ≤ 1.05); with `--no-lease` **%.2f** (≈ %s).", counts, r.BoardRatio(true), r.BoardRatio(false), quotient)
	if !ok {
		ratio = r.noRatio("Board ratio")
	}
	fmt.Fprintf(&b, "\n%s Transport: "+
		"`forge_http_requests_total{lane=\"forge-board-sync\"}`, read at the same quiet instant as the sweeper's.\n\n", ratio)
	return b.String()
}

// budgetMarkdown renders the budget scenario's rows.
func budgetMarkdown(rows []BudgetRow) string {
	var b strings.Builder
	r0 := rows[0]
	fmt.Fprintf(&b, "**Budget.** The compressed hour lasts %v. All replicas share one forge token, as the ADR's "+
		"share one App installation, with the ETag cache off as in the incident. The batched sweep reads with one GraphQL "+
		"query a pass and writes REST only for drifted runs, so the budget it spends is the GraphQL point budget. "+
		"The simulator's budget is %d an hour, for REST requests and for GraphQL points each: the same share of %d replicas' "+
		"GraphQL demand without the lease (%s) as the ADR's 12k of its 11.7k–19.4k at ten "+
		"replicas (%.0f%%).\n\n", r0.Hour, r0.Budget, r0.Replicas, r0.DemandFrom, 100*adrBudgetShare)
	b.WriteString("| replicas | lease | budget/hour | spent at minute | GraphQL points | REST charged | REST refused (403) |\n|---:|:---|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		when := "never"
		if r.RanOut {
			when = fmt.Sprint(r.Minute)
		}
		fmt.Fprintf(&b, "| %d | %s | %d | %s | %d | %d | %d |\n", r.Replicas, yesNo(r.Lease), r.Budget, when, r.Points, r.REST, r.Refused)
	}
	b.WriteString("\nGoal: with the lease, never.\n\n")
	return b.String()
}

// scaleMarkdown renders the scale scenario's rows.
func scaleMarkdown(r *Report) string {
	var b strings.Builder
	iv := r.Options.ScaleInterval
	fmt.Fprintf(&b, "**Scale.** The per-run REST sweep (`--sweep-mode rest`, kept for this comparison) and the batched sweep "+
		"(`batch`, the default) side by side, with the lease, at each population of open runs and replica count. Sweep interval "+
		"%v (GitHub's minute, compressed), so a compressed hour is %v. App auth: each configuration is an installation of its own "+
		"whose tokens the simulator mints, living a compressed hour (`--token-ttl` %v: ghinstallation refreshes a minute early), "+
		"and the ETag cache is on. GitHub's secondary limits are on per compressed minute; the primary budgets are not enforced, "+
		"so each configuration's spend is measured and shown as a share of a 5,000/h installation budget. Each configuration is "+
		"measured over %d intervals after its first pass; %s runs had their gate status set to `failure` as the window opened.\n\n",
		iv, 60*iv, 60*iv+time.Minute, r.Options.ScalePasses, "up to 5 (1%)")
	b.WriteString("| sweep | open runs | replicas | passes | requests/pass | goal ≤ ceil(N/50)+5 | REST/pass | GraphQL points/pass | " +
		"requests/hour | REST % of 5,000/h | GraphQL % of 5,000/h | secondary refusals/hour | pass ÷ interval | sweeping | drift repaired | token mints |\n")
	b.WriteString("|:---|---:|---:|---:|---:|:---|---:|---:|---:|---:|---:|---:|---:|---:|:---|---:|\n")
	for _, s := range r.Scale {
		goal := fmt.Sprintf("%d: %s", ScaleGoal(s.Runs), yesNo(s.MeetsGoal()))
		fmt.Fprintf(&b, "| %s | %d | %d | %.2f | %.1f | %s | %.1f | %.1f | %.0f | %.1f%% | %.1f%% | %.0f | %.2f | %d | %d/%d in %v | %d |\n",
			s.Mode, s.Runs, s.Replicas, s.Passes, s.PerPass(s.Requests), goal, s.PerPass(s.REST), s.PerPass(s.Points),
			s.PerHour(s.Requests), 100*s.RESTShare(), 100*s.BudgetShare(s.Points), s.PerHour(s.Refused), s.Duty(),
			s.Sweepers, s.Repaired, s.Drifted, s.RepairAfter.Round(time.Millisecond), s.Mints)
	}
	b.WriteString("\nPasses are the runs the sweepers offered (`gate_offers_total{lane=\"merge-gate-sweeper\"}`) over the population; " +
		"per hour is the window's rate times a compressed hour; the REST share adds the hour's token rotation: one pass charged as " +
		"the term's first was, on fresh tokens whose ETags answer no 304, in place of one at the window's rate. " +
		"REST counts charged requests (a 304 and a refusal are free), " +
		"GraphQL the points the simulator charged. Pass ÷ interval is the mean duration of the passes that ended in the window " +
		"(the sweepers' `iterion_net_pass_duration_seconds`: listing, forge reads and writes, from the tick to the pass's end) over the interval; " +
		"when no pass ended in the window, the window over the share of a pass offered.\n\n")
	for _, s := range r.Scale {
		b.WriteString(discardedMarkdown(fmt.Sprintf("%s sweep, %d runs, %d replicas", s.Mode, s.Runs, s.Replicas), s.Discarded))
	}
	return b.String()
}

// discardedMarkdown is a paragraph for each discarded measurement of the
// configuration what, saying why (errHandover); "" when there is none.
func discardedMarkdown(what string, discarded []string) string {
	var b strings.Builder
	for _, why := range discarded {
		fmt.Fprintf(&b, "Discarded and measured again on fresh replicas (%s): %s.\n\n", what, why)
	}
	return b.String()
}

// loadMarkdown renders the load scenario's figures.
func loadMarkdown(l *LoadResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**Open network.** %d fresh replicas on dev-mongo, `--sweep-interval 1m` (no sweep during the scenario), "+
		"`--read-timeout %v`.\n\n", loadReplicas, l.ReadTimeout)
	fmt.Fprintf(&b, "*Slow connections:* %d sequential `POST /api/runs` on one keep-alive connection to the first replica, "+
		"then %d more while %d unauthenticated connections trickle a declared %d-byte body at a byte a second.\n\n",
		l.Probes, l.Probes, l.SlowConns, slowBodyBytes)
	probes := percentileName(99, l.Probes)
	fmt.Fprintf(&b, "| unloaded p50 / %[1]s | with slow connections p50 / %[1]s | %[1]s ratio | probes done before the read timeout | slow connections still open read timeout + 5 s later | answered | closed without an answer |\n", probes)
	b.WriteString("|---:|---:|---:|:---|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| %v / %v | %v / %v | **%.2f** | %s | **%d of %d** | %d | %d |\n\n",
		ms(l.UnloadedP50), ms(l.UnloadedP99), ms(l.LoadedP50), ms(l.LoadedP99), l.P99Ratio(), yesNo(l.ProbedWithin),
		l.SlowOpen, l.SlowConns, l.SlowAnswered, l.SlowClosedNoReply)
	codes := slices.Sorted(func(yield func(int) bool) {
		for c := range l.Answers {
			if !yield(c) {
				return
			}
		}
	})
	var answers []string
	for _, c := range codes {
		name := strconv.Itoa(c)
		if c == 0 {
			name = "no answer"
		}
		answers = append(answers, fmt.Sprintf("%d × %s", l.Answers[c], name))
	}
	fmt.Fprintf(&b, "*Unsigned large webhooks:* %d concurrent `POST /webhooks/github` of %d bytes of zeros with `X-Hub-Signature-256: sha256=` + 64 zeros "+
		"to the first replica; its peak RSS (`VmHWM`) %.1f MB before, %.1f MB after: growth **%.1f MB**; answers %s.\n\n",
		l.Webhooks, webhookBytes, mb(l.HWMBefore), mb(l.HWMAfter), mb(l.HWMGrowth()), strings.Join(answers, ", "))
	fmt.Fprintf(&b, "*Runs under load:* %d distinct `POST /api/runs` at concurrency %d, round-robin over both replicas; dev-mongo "+
		"killed (SIGKILL) when half were sent and started again on the same address and files %v later (down %v in all). "+
		"A 503 or a connection error is retried with the same body on the other replica after `Retry-After` (200 ms without one), at most %d attempts.\n\n",
		l.Requests, l.Concurrency, l.Outage, l.MongoDown.Round(time.Millisecond), maxAttempts)
	answered := percentileName(99, l.Created+l.Repeated)
	fmt.Fprintf(&b, "| runs | 201 | 200 (a retry of a landed put) | failed | 503 answers | connection errors | retries | API p50 / %[1]s | end-to-end %[1]s | elapsed | listed | duplicates | unlisted | lost |\n", answered)
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| %d | %d | %d | %d | %d | %d | %d | %v / %v | %v | %v | %d | %d | %d | **%d** |\n\n",
		l.Requests, l.Created, l.Repeated, l.Failed, l.Unavailable, l.ConnErrors, l.Retries, ms(l.P50), ms(l.P99),
		ms(l.EndToEndP99), l.Elapsed.Round(time.Millisecond), l.Stored, l.Duplicates, l.Unlisted, l.Lost)
	return b.String()
}

// ms is d in milliseconds, two decimals.
func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// groupMarkdown renders the group scenario: its goals, each with what was
// measured.
func groupMarkdown(g GroupResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**Lease group.** %d replicas serve the measurement group (`iterion serve --measure-group-shards %d`) at sweep interval %v "+
		"(group TTL %v, retry %v). Holders and hand-overs come from each replica's logged shard terms (election to step-down; a killed "+
		"replica's terms end at its SIGKILL); store calls from `measure_group_store_calls_total` over %d replicas in steady state. "+
		"The scenario settles %d replicas, measures the store cost, kills one with SIGKILL, restores %d, stops half with SIGTERM together "+
		"and starts them again. Phases settled: %s.\n\n",
		g.Replicas, g.Shards, g.Interval, g.TTL, g.Retry, g.Replicas, g.Replicas, g.Replicas, settledList(g.Settled))
	b.WriteString("| goal | measured | met |\n|:---|:---|:---|\n")
	for _, gl := range g.Goals() {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", gl.Goal, gl.Measured, yesNo(gl.Met))
	}
	ops := slices.Sorted(maps.Keys(g.OpsByOp))
	b.WriteString("\nStore calls per minute by operation:")
	for _, op := range ops {
		fmt.Fprintf(&b, " %s %.0f;", op, g.OpsByOp[op])
	}
	fmt.Fprintf(&b, " in the window. Terms that stepped down at their deadline over the run (renewals the store did not answer in time): %d.\n\n", g.Deadlines)
	return b.String()
}

// settledList names each phase and whether it settled.
func settledList(m map[string]bool) string {
	var out []string
	for _, p := range []string{phaseBalance, phaseKill, phaseStop, phaseUp} {
		if v, ok := m[p]; ok {
			out = append(out, p+" "+yesNo(v))
		}
	}
	return strings.Join(out, ", ")
}
