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
			rate := 60.0
			if !lease {
				rate *= float64(n)
			}
			rows = append(rows, CostRow{Replicas: n, Lease: lease, PerMinute: rate, BoardPerMinute: rate})
		}
	}
	md := (&Report{Cost: rows}).Markdown("bench -n 3,10")
	for _, want := range []string{
		"Ratio N=10 ÷ N=3: with the lease **1.000** (goal ≤ 1.05); with `--no-lease` **3.33** (≈ 10 ÷ 3)",
		"Board ratio N=10 ÷ N=3: with the lease **1.000** (goal ≤ 1.05); with `--no-lease` **3.33** (≈ 10 ÷ 3)",
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
