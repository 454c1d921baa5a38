package harness

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTenantsScenario runs the tenants scenario small (40 installations of
// 5 runs, at 1 and 3 replicas) on real processes and asserts its goals
// with margins for the small size and a loaded 2-core machine.
func TestTenantsScenario(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute) // cold builds of both commands included
	defer cancel()
	dir, bin, devMongo := testBinaries(ctx, t)
	iv := 2 * time.Second // at 1s, a loaded machine's store reads outlive the passes' deadline
	o := Options{
		Bin: bin, DevMongoBin: devMongo, Dir: filepath.Join(dir, "run"),
		TenantsInstallations: 40, TenantsRuns: 5, TenantsReplicas: []int{1, 3},
		TenantsInterval: iv, TenantsWindow: 4, TenantsChurn: 3, TenantsShards: 16,
		Scenarios: []string{ScenarioTenants},
		Progress:  testWriter{t},
	}
	rep, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Log("\n" + rep.Markdown("go test ./cmd/iterion/internal/harness -run TestTenantsScenario"))
	r := rep.Tenants
	if r == nil || len(r.Rows) != 2 {
		t.Fatalf("got %+v, want a row at 1 and at 3 replicas", r)
	}
	for _, row := range r.Rows {
		if !row.Settled {
			t.Errorf("N=%d: did not settle, want every installation swept by one replica, the same two intervals running", row.Replicas)
		}
		if row.Installations != o.TenantsInstallations {
			t.Errorf("N=%d: got %d installations swept in the window, want all %d", row.Replicas, row.Installations, o.TenantsInstallations)
		}
		// The goal is 1.5 intervals; one more of slack for a loaded machine.
		if row.LongestGap > 5*iv/2 {
			t.Errorf("N=%d: got installation %d unswept for %v, want at most %v: every installation is swept every interval",
				row.Replicas, row.GapInstallation, row.LongestGap, 5*iv/2)
		}
	}
	hi := r.Rows[1]
	if hi.Sweepers != 3 {
		t.Errorf("N=3: got %d replicas sweeping, want 3: every replica holds shards", hi.Sweepers)
	}
	// 40 installations on 16 shards are lumpy; the goal, 1.3 × the mean,
	// is for 1,000.
	if hi.Balance > 2 {
		t.Errorf("N=3: got the busiest replica at %.2f × the mean, want at most 2: the installations are spread", hi.Balance)
	}
	if r.Ratio <= 0 || r.Ratio > 1.25 {
		t.Errorf("got N=3 ÷ N=1 requests per installation %.3f, want at most 1.25: each installation's cost is one replica's", r.Ratio)
	}
	if r.Overlaps != 0 {
		t.Errorf("got %d overlaps (longest %v), want 0: one replica sweeps an installation at a time", r.Overlaps, r.LongestOverlap)
	}
	if r.Behind != 0 {
		t.Errorf("got merge_gate_sweep_behind %.0f at the end, want 0: the sweep keeps up", r.Behind)
	}
	if r.KilledInstallations == 0 || r.KillSwept != r.KilledInstallations || r.KillAfter > r.killBound()+iv {
		t.Errorf("kill -9: got %d of %d installations swept again, slowest %v, want all within %v (TTL + retry + one tick, + one interval of slack)",
			r.KillSwept, r.KilledInstallations, r.KillAfter, r.killBound()+iv)
	}
	// The goal is 2 intervals (the report says whether it was met); the news
	// of an add reaches the shard's holder through another replica's lease
	// store list and a re-list, each once an interval, so a loaded machine
	// gets two more of slack here.
	if r.AddedSwept != r.Added || r.AddedAfter > 4*iv {
		t.Errorf("added: got %d of %d swept, slowest %v, want all within %v (2 intervals + two of slack)", r.AddedSwept, r.Added, r.AddedAfter, 4*iv)
	}
	if r.RemovedAfter > 2*iv {
		t.Errorf("removed: got a request %v after a removal, want none after %v (1 interval + one of slack): a removed installation costs nothing", r.RemovedAfter, 2*iv)
	}
	if r.Limited != 0 {
		t.Errorf("got %d rate-limit refusals, want 0: no installation meets a limit", r.Limited)
	}
	if r.UnknownStatus != 202 || r.UnknownLookups == 0 || !r.UnknownAlive {
		t.Errorf("unknown installation's webhook: got %d, %d look-ups, alive %v; want 202, looked up, alive", r.UnknownStatus, r.UnknownLookups, r.UnknownAlive)
	}
}

// TestTenantsGoalsAreNeverMetByAPartialRun pins that bench's report of a
// tenants run that failed part-way meets no goal: the overlaps, the gaps
// and the refusals are counted by later steps, so their zeros there were
// never measured.
func TestTenantsGoalsAreNeverMetByAPartialRun(t *testing.T) {
	iv := 2 * time.Second
	base := TenantsResult{Installations: 40, RunsPer: 5, Interval: iv, TTL: 3 * iv, Retry: iv}
	firstWindow := base
	firstWindow.Rows = []TenantsRow{{Replicas: 1, Settled: true, SettleAfter: 20 * time.Second, Window: 4 * iv,
		Installations: 40, Requests: 160, Sweepers: 1, Balance: 1, LongestGap: iv, GapInstallation: 7}}
	for _, c := range []struct {
		name string
		r    TenantsResult
	}{
		{"failed before any window", base},
		{"failed after N=1's window", firstWindow},
	} {
		for _, g := range c.r.Goals() {
			if g.Met {
				t.Errorf("%s: %q measured %s, reported met; want unmet: its figures were not all measured", c.name, g.Goal, g.Measured)
			}
		}
	}
}

// TestTenantsGoalsAreMetByACompleteRun is the partial run's control: the
// same figures, measured to the end, meet every goal.
func TestTenantsGoalsAreMetByACompleteRun(t *testing.T) {
	iv := 2 * time.Second
	row := func(n int) TenantsRow {
		return TenantsRow{Replicas: n, Settled: true, SettleAfter: 20 * time.Second, Window: 4 * iv,
			Installations: 40, Requests: 160, Sweepers: n, Balance: 1, LongestGap: iv, GapInstallation: 7}
	}
	r := TenantsResult{Installations: 40, RunsPer: 5, Interval: iv, TTL: 3 * iv, Retry: iv,
		Rows: []TenantsRow{row(1), row(3)}, Ratio: 1, RatioP95: 1, RatioMax: 1,
		Added: 3, AddedSwept: 3, AddedAfter: iv, Removed: 3, KilledInstallations: 13, KillSwept: 13, KillAfter: 4 * iv,
		UnknownStatus: 202, UnknownLookups: 2, UnknownAlive: true, Done: true}
	for _, g := range r.Goals() {
		if !g.Met {
			t.Errorf("%q measured %s, reported unmet; want met: a complete run within every bound", g.Goal, g.Measured)
		}
	}
}

// TestTenantsRatioNamesTheReplicaCountsItDivides: the tenants ratio goal
// divides the largest count's requests by the smallest's, which is not 1
// under --tenants-replicas 2,10.
func TestTenantsRatioNamesTheReplicaCountsItDivides(t *testing.T) {
	r := TenantsResult{Rows: []TenantsRow{{Replicas: 2}, {Replicas: 10}}, Ratio: 1}
	want := "requests per installation, N=10 ÷ N=2 ≤ 1.05"
	for _, g := range r.Goals() {
		if strings.HasPrefix(g.Goal, "requests per installation") && g.Goal != want {
			t.Errorf("got goal %q, want %q: the ratio names the counts it divides", g.Goal, want)
		}
	}
}
