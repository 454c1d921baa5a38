package harness

import (
	"strings"
	"testing"
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
