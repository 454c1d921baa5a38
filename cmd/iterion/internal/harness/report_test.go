package harness

import (
	"strings"
	"testing"
	"time"
)

// TestCostRatioNamesTheReplicaCountsItDivides pins the cost and board
// ratios' sentences: each divides the rate at the largest N by the rate at
// the smallest, so each names both counts, and without the lease it is
// about their quotient, not N, when the smallest is not 1 (bench -n 3,10).
func TestCostRatioNamesTheReplicaCountsItDivides(t *testing.T) {
	var rows []CostRow
	for _, lease := range []bool{false, true} {
		for _, n := range []int{3, 10} {
			rate, board := 60.0, 30.0
			if !lease {
				rate *= float64(n)
				board *= float64(min(n, 5)) // unlike the sweep's, so that each sentence shows its own ratio
			}
			rows = append(rows, CostRow{Replicas: n, Lease: lease, PerMinute: rate, BoardPerMinute: board})
		}
	}
	md := (&Report{Cost: rows}).Markdown("bench -n 3,10")
	for _, want := range []string{
		"Ratio N=10 ÷ N=3: with the lease **1.000** (goal ≤ 1.05); with `--no-lease` **3.33** (≈ 10 ÷ 3)",
		"Board ratio N=10 ÷ N=3: with the lease **1.000** (goal ≤ 1.05); with `--no-lease` **1.67** (≈ 10 ÷ 3)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("got %q, want %q: the ratio names the counts it divides", ratioLines(md), want)
		}
	}
}

// ratioLines are md's lines that state a ratio.
func ratioLines(md string) []string {
	var out []string
	for line := range strings.Lines(md) {
		if strings.Contains(line, "atio ") {
			sentence, _, _ := strings.Cut(strings.TrimSpace(line), ". ")
			out = append(out, sentence)
		}
	}
	return out
}

// TestBudgetReportSaysWhereItsDemandCameFrom pins the budget scenario's
// sizing and its sentence: the demand the budget is sized from is the cost
// scenario's figure at the budget's replica count when it measured one,
// else that count times its one-replica figure, else one point a pass
// each; and the report says which, never "as the cost scenario measured
// it" for a figure it did not measure.
func TestBudgetReportSaysWhereItsDemandCameFrom(t *testing.T) {
	for _, c := range []struct {
		name   string
		demand map[int]float64
		want   float64
		says   string
	}{
		{"measured at 10", map[int]float64{1: 1, 10: 9.5}, 9.5, "as the cost scenario measured it at 10"},
		{"only one replica measured", map[int]float64{1: 1.2}, 12, "10 × the cost scenario's one-replica figure"},
		{"no cost scenario", nil, 10, "10 × one point a pass: the cost scenario did not run"},
	} {
		d, from := budgetScenario{replicas: 10, demand: c.demand}.demandOf()
		if d != c.want || from != c.says {
			t.Errorf("%s: got demand %v %q, want %v %q", c.name, d, from, c.want, c.says)
		}
		md := (&Report{Budget: []BudgetRow{{Replicas: 10, Budget: 1000, Hour: time.Minute, DemandFrom: from}}}).Markdown("bench")
		if !strings.Contains(md, "without the lease ("+c.says+")") {
			t.Errorf("%s: the budget paragraph does not say %q:\n%s", c.name, c.says, md)
		}
	}
}

// TestBudgetSpentAtMinuteIsAMinuteOfTheHour pins the budget row's minute
// as the report prints it: the minute of the hour, 0 to 59, during which
// the budget was seen spent, as a clock reads it (47.8 minutes in is
// minute 47), never 60, which no hour has; a spend seen at the hour's end
// or after it, when the window has reset, is "never".
func TestBudgetSpentAtMinuteIsAMinuteOfTheHour(t *testing.T) {
	hour := time.Minute // the compressed hour of a one-second interval
	for _, c := range []struct {
		why     string
		elapsed time.Duration
		want    string
	}{
		{"the hour's first instant is minute 0", 0, "0"},
		{"half the hour is minute 30", 30 * time.Second, "30"},
		{"47.8 minutes in is still minute 47, as a clock reads it", 47800 * time.Millisecond, "47"},
		{"59.6 minutes in is minute 59, the last: no hour has a minute 60", 59600 * time.Millisecond, "59"},
		{"the hour's end is the reset: not within the hour", hour, "never"},
		{"a poll just past the hour is not within it", hour + 20*time.Millisecond, "never"},
		{"a replica start that ate into the hour does not stretch it", 2 * hour, "never"},
	} {
		row := BudgetRow{Replicas: 3, Budget: 69, Hour: hour, DemandFrom: "test", Points: 69}
		row.Minute, row.RanOut = spentWithin(c.elapsed, hour)
		md := budgetMarkdown([]BudgetRow{row})
		if want := "| 3 | no | 69 | " + c.want + " | 69 |"; !strings.Contains(md, want) {
			t.Errorf("spent %v into a %v hour: the row lacks %q, want it: %s\n%s", c.elapsed, hour, want, c.why, md)
		}
	}
}

// TestCostGraphQLPerIntervalSpansTheReadsThatCountedIt pins the cost
// scenario's GraphQL figure: the points between two reads of the
// simulator's counts, of the configuration's tokens only, per interval of
// the time between those two reads.
func TestCostGraphQLPerIntervalSpansTheReadsThatCountedIt(t *testing.T) {
	q := func(token string, points int64) simRequests {
		return simRequests{Token: token, Method: "POST", Route: graphqlRoute, Status: 200, Count: points, Points: points}
	}
	a := simStats{Requests: []simRequests{q("r1", 4), q("r2", 1), q("other", 50)}}
	b := simStats{Requests: []simRequests{q("r1", 14), q("r2", 11), q("other", 500),
		{Token: "r1", Method: "GET", Route: "/repos/acme/app/issues", Status: 200, Count: 9}}}
	iv := 100 * time.Millisecond
	if got, want := graphQLPerInterval(a, b, []string{"r1", "r2"}, 10*iv, iv), 2.0; got != want {
		t.Errorf("got %v GraphQL points per interval, want %v: 20 points of the two tokens over the 10 intervals between the reads; other tokens and REST do not count", got, want)
	}
	if got := graphQLPerInterval(a, b, []string{"r1"}, 0, iv); got != 0 {
		t.Errorf("got %v points per interval over no time, want 0: no span, no rate", got)
	}
}

// TestLoadReportNamesAP99OfFewProbesMax pins the load report's percentile
// names: percentile's nearest-rank p99 of fewer than 100 values is the
// largest, so the report calls it max; from 100 on it is a p99.
func TestLoadReportNamesAP99OfFewProbesMax(t *testing.T) {
	for _, c := range []struct {
		why                    string
		probes, answered       int
		slowHeader, runsHeader string
	}{
		{"2 probes and 2 runs: each p99 is the largest", 2, 2,
			"| unloaded p50 / max | with slow connections p50 / max | max ratio |", "| API p50 / max | end-to-end max |"},
		{"99 of each: still the largest", 99, 99,
			"| unloaded p50 / max | with slow connections p50 / max | max ratio |", "| API p50 / max | end-to-end max |"},
		{"100 probes, 2,000 runs: p99s", 100, 2000,
			"| unloaded p50 / p99 | with slow connections p50 / p99 | p99 ratio |", "| API p50 / p99 | end-to-end p99 |"},
	} {
		md := loadMarkdown(&LoadResult{Probes: c.probes, Requests: c.answered, Created: c.answered - 1, Repeated: 1})
		for _, want := range []string{c.slowHeader, c.runsHeader} {
			if !strings.Contains(md, want) {
				t.Errorf("%s: the load report lacks %q:\n%s", c.why, want, md)
			}
		}
	}
	for _, c := range []struct {
		p, n int
		want string
	}{{99, 1, "max"}, {50, 1, "max"}, {50, 2, "p50"}, {99, 100, "p99"}} {
		if got := percentileName(c.p, c.n); got != c.want {
			t.Errorf("percentileName(%d, %d) = %q, want %q: max exactly when the nearest rank is the last of n", c.p, c.n, got, c.want)
		}
	}
}

// TestRatiosNeedTwoReplicaCounts pins that a ÷N ratio is measured only
// across two replica counts: a cost run of one count (bench -n 10) divides
// a rate by itself, 1 with the lease or without it, so it reports no ratio
// rather than one that meets the goal of ≤ 1.05 whatever the lease does;
// so does the clock scenario's at one replica count.
func TestRatiosNeedTwoReplicaCounts(t *testing.T) {
	var rows []CostRow
	for _, lease := range []bool{false, true} {
		rate := 60.0
		if !lease {
			rate *= 10 // every replica sweeps: no ratio can tell
		}
		rows = append(rows, CostRow{Replicas: 10, Lease: lease, PerMinute: rate, BoardPerMinute: rate})
	}
	r := &Report{Cost: rows}
	for _, got := range []struct {
		name  string
		ratio float64
	}{
		{"cost with the lease", r.CostRatio(true)}, {"cost without", r.CostRatio(false)},
		{"board with the lease", r.BoardRatio(true)}, {"board without", r.BoardRatio(false)},
	} {
		if got.ratio != 0 {
			t.Errorf("%s: got ratio %.3f of one replica count, want 0 (not measured): a rate over itself says nothing of N", got.name, got.ratio)
		}
	}
	md := r.Markdown("bench -n 10")
	for _, want := range []string{"Ratio: none, only N=10 was measured", "Board ratio: none, only N=10 was measured"} {
		if !strings.Contains(md, want) {
			t.Errorf("got %q, want %q: the report says there is no ratio", ratioLines(md), want)
		}
	}
	if strings.Contains(md, "**1.000**") {
		t.Errorf("got a ratio of 1.000 in %q, want none: one replica count gives no ratio", ratioLines(md))
	}
	clock := []ClockRow{{Runs: 100, Shallow: 100, Replicas: 10, Points: []int64{5}, ShallowChecked: []int{100}, DeepChecked: []int{0}}}
	if got := ClockRatio(clock, 100, 100, 0); got != 0 {
		t.Errorf("clock: got ratio %.3f of one replica count, want 0 (not measured)", got)
	}
}

// TestCostDiscardedNotesNameTheLeaseAsMeasured pins the notes about the
// cost scenario's discarded measurements: each names its configuration as
// measured, with the lease or without it (--no-lease), never "with the
// lease" for a row that ran without it.
func TestCostDiscardedNotesNameTheLeaseAsMeasured(t *testing.T) {
	rows := []CostRow{
		{Replicas: 3, Lease: false, Discarded: []string{"why without"}},
		{Replicas: 3, Lease: true, Discarded: []string{"why with"}},
	}
	md := (&Report{Cost: rows}).Markdown("bench -n 3")
	for _, want := range []string{
		"Discarded and measured again on fresh replicas (3 replicas without the lease, `--no-lease`): why without.",
		"Discarded and measured again on fresh replicas (3 replicas with the lease): why with.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q, want it: a discarded measurement's note names its configuration as measured", want)
		}
	}
}

// TestCostTableSaysWhetherTheCountsAgree pins the cost tables' agree
// column: yes only when the replicas' transports counted exactly the
// requests the simulator did, for the sweeper and the board sync each.
func TestCostTableSaysWhetherTheCountsAgree(t *testing.T) {
	rows := []CostRow{
		{Replicas: 1, Lease: true, Sim: 40, Transport: 40, BoardSim: 8, BoardTransport: 7},
		{Replicas: 3, Lease: true, Sim: 41, Transport: 40, BoardSim: 8, BoardTransport: 8},
	}
	md := (&Report{Cost: rows}).Markdown("bench -n 1,3")
	for _, want := range []string{
		"| 40 | 40 | yes |\n", "| 41 | 40 | no |\n", // the sweeper's table
		"| 8 | 7 | no |\n", "| 8 | 8 | yes |\n", // the board sync's
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the cost report lacks %q, want it: counts agree when the transport's equal the simulator's\n%s", want, md)
		}
	}
}

// TestBudgetLimitIsTheADRsShareOfTheDemand pins the budget the budget
// scenario sets: the ADR's 12k of its 11.7k–19.4k (their mean) of the
// demand without the lease, over the compressed hour's intervals; so
// without the lease the budget runs out within the hour, and one
// replica's share fits it.
func TestBudgetLimitIsTheADRsShareOfTheDemand(t *testing.T) {
	iv := 100 * time.Millisecond
	if got, want := budgetLimit(10, 60*iv, iv), 463; got != want {
		t.Errorf("got a budget of %d, want %d: 12,000 ÷ 15,550 of 10 points an interval over 60 intervals", got, want)
	}
}

// TestGoalTablesPrintEachVerdict pins the goal tables of the group and
// tenants scenarios: a missed goal is printed "no" beside its figure,
// never "yes", and a replica count that did not settle says so in place
// of a settling time.
func TestGoalTablesPrintEachVerdict(t *testing.T) {
	g := GroupResult{Shards: 64, Replicas: 10, Interval: time.Second, TTL: 3 * time.Second, Retry: time.Second,
		Settled: map[string]bool{phaseBalance: true}, MaxHeld: 8, Fair: 7, Terms: 1}
	if md := groupMarkdown(g); !strings.Contains(md, "| balance: most shards any replica holds ≤ ceil(S/N) | 8 ≤ 7 | no |") {
		t.Errorf("the group's goals lack the missed balance, want it printed no:\n%s", md)
	}
	tr := completeTenants()
	tr.Overlaps = 2
	tr.Rows[1].Settled = false
	md := tenantsMarkdown(tr)
	for _, want := range []string{"| 2 overlaps, longest 0s | no |", "| 3 | did not settle |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the tenants report lacks %q:\n%s", want, md)
		}
	}
}

// TestClockTableShowsNoDeepFigureWithoutDeepRuns pins the clock table's
// longest-unchecked column: a configuration whose every run is in the
// shallow window has no deep run to be unchecked, shown "–", not a
// longest of 0.0 intervals it never measured.
func TestClockTableShowsNoDeepFigureWithoutDeepRuns(t *testing.T) {
	row := ClockRow{Runs: 100, Shallow: 100, Replicas: 1, Interval: time.Second, Points: []int64{5},
		ShallowChecked: []int{100}, DeepChecked: []int{0}, LongestShallow: time.Second}
	if got := deepFigure(row); got != "–" {
		t.Errorf("got the deep figure %q with every run shallow, want –", got)
	}
	row.Shallow, row.LongestDeep = 40, 2500*time.Millisecond
	if got := deepFigure(row); got != "2.5" {
		t.Errorf("got the deep figure %q, want 2.5 intervals", got)
	}
}
