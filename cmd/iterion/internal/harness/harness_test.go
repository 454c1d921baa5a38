package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/server"
)

// TestQuickMode runs every scenario of the harness on real processes with
// small N and short phases, and asserts the lease's consequences (docs/design.md) with tolerant
// margins. It builds ./cmd/iterion and ./cmd/dev-mongo once, into the test's
// temporary directory.
func TestQuickMode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute) // cold builds of both commands included
	defer cancel()
	dir, bin, devMongo := testBinaries(ctx, t)
	o := Options{
		Bin:            bin,
		DevMongoBin:    devMongo,
		Dir:            filepath.Join(dir, "run"),
		Interval:       200 * time.Millisecond,
		Runs:           8,
		Ns:             []int{1, 3},
		Window:         12 * 200 * time.Millisecond,
		Hour:           30 * 200 * time.Millisecond,
		Replicas:       3,
		Takeovers:      3,
		BudgetReplicas: 3,
		ScaleRuns:      []int{10, 200},
		ScaleReplicas:  []int{1, 3},
		ScaleInterval:  2 * time.Second, // the REST pass of 200 runs takes 0.8 s on a quiet 2-core machine; 1 s left CI none to spare
		ScalePasses:    3,
		// The load scenario has its own test, TestLoadScenario.
		Scenarios: []string{ScenarioCost, ScenarioBudget, ScenarioTakeover, ScenarioFaults, ScenarioScale},
		Progress:  testWriter{t},
	}
	rep, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Log("\n" + rep.Markdown("go test ./internal/harness -run TestQuickMode"))
	if len(rep.Cost) != 4 || len(rep.Budget) != 2 || len(rep.Takeover) != 2 || len(rep.Faults) != 3 || len(rep.Scale) != 8 {
		t.Fatalf("got %d cost rows, %d budget rows, %d takeover results, %d faults, %d scale rows; want 4, 2, 2, 3, 8: every scenario runs",
			len(rep.Cost), len(rep.Budget), len(rep.Takeover), len(rep.Faults), len(rep.Scale))
	}

	t.Run("cost", func(t *testing.T) {
		for _, c := range rep.Cost {
			want := c.Replicas
			if c.Lease {
				want = 1
			}
			if c.Sweepers != want {
				t.Errorf("N=%d lease=%v: got %d replicas sweeping, want %d: with the lease one replica sweeps, without it every one", c.Replicas, c.Lease, c.Sweepers, want)
			}
			if !c.Agree() {
				t.Errorf("N=%d lease=%v: got transport count %d, want the simulator's %d: the transport counts every request it sends", c.Replicas, c.Lease, c.Transport, c.Sim)
			}
		}
		if r := rep.CostRatio(true); r <= 0 || r > 1.15 {
			t.Errorf("got N=3/N=1 ratio %.3f with the lease, want at most 1.15: the sweep's cost is one replica's whatever N", r)
		}
		if r := rep.CostRatio(false); r < 2.4 || r > 3.6 {
			t.Errorf("got N=3/N=1 ratio %.3f with --no-lease, want about 3: without the lease every replica sweeps", r)
		}
	})
	t.Run("board", func(t *testing.T) {
		for _, c := range rep.Cost {
			want := c.Replicas
			if c.Lease {
				want = 1
			}
			if c.BoardSyncers != want {
				t.Errorf("N=%d lease=%v: got %d replicas syncing the board, want %d: with the board's lease one replica syncs, without it every one", c.Replicas, c.Lease, c.BoardSyncers, want)
			}
			if c.BoardSim == 0 || !c.BoardAgree() {
				t.Errorf("N=%d lease=%v: got board-sync transport count %d, want the simulator's %d (not 0): the transport charges every board request to lane forge-board-sync", c.Replicas, c.Lease, c.BoardTransport, c.BoardSim)
			}
		}
		if r := rep.BoardRatio(true); r <= 0 || r > 1.15 {
			t.Errorf("got board-sync N=3/N=1 ratio %.3f with the lease, want at most 1.15: the board's cost is one replica's whatever N", r)
		}
		if r := rep.BoardRatio(false); r < 2.4 || r > 3.6 {
			t.Errorf("got board-sync N=3/N=1 ratio %.3f with --no-lease, want about 3: without the lease every replica syncs the board", r)
		}
	})
	t.Run("budget", func(t *testing.T) {
		for _, b := range rep.Budget {
			if b.Lease && b.RanOut {
				t.Errorf("got the budget spent at minute %d with the lease at N=%d, want never: one replica's sweep fits the budget", b.Minute, b.Replicas)
			}
			if !b.Lease && !b.RanOut {
				t.Errorf("got the budget never spent with --no-lease at N=%d, want it spent within the hour: the scenario sizes the budget between one and N replicas' demand", b.Replicas)
			}
		}
	})
	t.Run("takeover", func(t *testing.T) {
		for _, tk := range rep.Takeover {
			if len(tk.FromSignal) != o.Takeovers {
				t.Errorf("%s: got %d stops measured, want %d", tk.Signal, len(tk.FromSignal), o.Takeovers)
			}
			// One interval of slack for process scheduling on a loaded
			// 2-core machine and the 10 ms polling.
			if limit := tk.Bound + o.Interval; tk.Max() > limit {
				t.Errorf("%s: got max takeover %v, want at most %v (bound %v + one interval of slack): takeover is bounded", tk.Signal, tk.Max(), limit, tk.Bound)
			}
			if tk.Doubles != 0 {
				t.Errorf("%s: got %d stops followed by two sweepers, want 0: one successor is elected", tk.Signal, tk.Doubles)
			}
			if len(tk.Unreleased) != 0 {
				t.Errorf("%s: got %d stops whose lease was taken only once it expired (%v), want 0: a clean stop releases its lease", tk.Signal, len(tk.Unreleased), tk.Unreleased)
			}
		}
	})
	t.Run("scale", func(t *testing.T) { checkScale(t, rep.Scale) })
	t.Run("faults", func(t *testing.T) {
		for _, f := range rep.Faults {
			if f.Repaired != f.Drifted {
				t.Errorf("%s: got %d of %d drifted runs repaired, want all: nothing is lost", f.Name, f.Repaired, f.Drifted)
			}
			if f.RepairAfter > f.Bound {
				t.Errorf("%s: got repair %v after the fault, want at most %v: repaired within one deep pass", f.Name, f.RepairAfter, f.Bound)
			}
			for _, c := range f.Checks {
				if !c.OK {
					t.Errorf("%s: got %s, want it to hold: %s", f.Name, c.Detail, c.Rule)
				}
			}
		}
	})
}

// built holds the binaries testBinaries built, once for every test of the
// package: TestQuickMode and TestLoadScenario run the same two commands.
var built struct {
	mu            sync.Mutex
	dir           string // removed by TestMain
	bin, devMongo string
	err           error
}

// TestMain removes the binaries the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// testBinaries builds ./cmd/iterion and ./cmd/dev-mongo the first time a
// test asks, and returns a new temporary directory for the test's run and
// both binaries' paths. Every test that asks runs real processes, so
// -short skips it here.
func testBinaries(ctx context.Context, t *testing.T) (dir, bin, devMongo string) {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process: builds both commands and runs real replicas; -short skips it")
	}
	built.mu.Lock()
	defer built.mu.Unlock()
	if built.dir == "" && built.err == nil {
		built.err = buildTestBinaries(ctx)
	}
	if built.err != nil {
		t.Fatal(built.err)
	}
	dir = t.TempDir()
	// Registered after TempDir's removal, so it runs before it.
	t.Cleanup(func() {
		if t.Failed() {
			logLeaseWarnings(t, dir)
		}
	})
	return dir, built.bin, built.devMongo
}

// maxLeaseWarnings caps the lines a failed test logs.
const maxLeaseWarnings = 100

// logLeaseWarnings logs, for a failed test, the lease warnings its
// processes wrote under dir (leaseWarnings): the test's temporary
// directory is removed with the logs, and a lease that changed hands on a
// loaded CI machine explains most failures of "one sweeper".
func logLeaseWarnings(t *testing.T, dir string) {
	lines, more := leaseWarnings(dir, maxLeaseWarnings)
	for _, l := range lines {
		t.Logf("lease warning, %s", l)
	}
	if more {
		t.Logf("lease warnings: more than %d; the rest are not shown", maxLeaseWarnings)
	}
}

// leaseWarnings returns up to max of the lease warnings and errors in the
// processes' logs (*.stdout, *.stderr) under dir, each as "file: line": a
// step-down other than a clean stop, a renewal failed, the store
// unreachable, a release refused. more says some were left out.
func leaseWarnings(dir string, max int) (lines []string, more bool) {
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".stdout") || strings.HasSuffix(path, ".stderr")) {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return nil
		}
		defer f.Close()
		rel, _ := filepath.Rel(dir, path)
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
		for sc.Scan() {
			var rec struct{ Level, Msg string }
			if json.Unmarshal(sc.Bytes(), &rec) != nil || !strings.HasPrefix(rec.Msg, "lease:") || (rec.Level != "WARN" && rec.Level != "ERROR") {
				continue
			}
			if len(lines) == max {
				more = true
				return filepath.SkipAll
			}
			lines = append(lines, rel+": "+sc.Text())
		}
		return nil
	})
	return lines, more
}

// buildTestBinaries fills built; built.mu is held.
func buildTestBinaries(ctx context.Context) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := ModuleRoot(wd)
	if err != nil {
		return err
	}
	if built.dir, err = os.MkdirTemp("", "iterion-harness-bin-"); err != nil {
		return err
	}
	built.bin, built.devMongo = filepath.Join(built.dir, "iterion"), filepath.Join(built.dir, "dev-mongo")
	if err := build(ctx, root, iterionPkg, built.bin); err != nil {
		return err
	}
	return build(ctx, root, devMongoPkg, built.devMongo)
}

// checkScale asserts the sweep-at-scale goals on the scale rows, with margins for
// quick mode's small sizes: a batched pass costs at most ceil(N/50)+5
// requests, draws no secondary-limit refusal and fits half its interval;
// the REST pass it replaced costs two reads a run; with the lease
// one replica sweeps, so the hourly cost at the largest replica count is
// the smallest's; drift is repaired within one deep pass.
func checkScale(t *testing.T, rows []ScaleRow) {
	hourly := map[[2]any][]float64{} // by mode and runs, in replica order
	for _, s := range rows {
		name := fmt.Sprintf("%s sweep, %d runs, N=%d", s.Mode, s.Runs, s.Replicas)
		perPass := s.PerPass(s.Requests)
		switch s.Mode {
		case server.SweepBatch:
			if !s.MeetsGoal() {
				t.Errorf("%s: got %.1f requests a pass over %.2f passes, want at most %d: a batched pass costs open runs / 50 + 5", name, perPass, s.Passes, ScaleGoal(s.Runs))
			}
			if s.Refused != 0 {
				t.Errorf("%s: got %d secondary-limit refusals, want 0: the batched sweep stays under GitHub's secondary limits", name, s.Refused)
			}
			// The goal is a quarter; twice that is the margin for a
			// loaded 2-core machine. The pass durations are the sweepers'
			// own (iterion_net_pass_duration_seconds).
			if d := s.Duty(); d > 0.5 {
				t.Errorf("%s: got a pass of %.2f intervals, want at most 0.5: a batched pass fits its interval", name, d)
			}
		case server.SweepREST:
			if perPass < 1.8*float64(s.Runs) {
				t.Errorf("%s: got %.1f requests a pass, want about %d: the REST sweep reads each run's pull and status", name, perPass, 2*s.Runs)
			}
		}
		if s.Sweepers != 1 {
			t.Errorf("%s: got %d replicas sweeping, want 1: the lease elects one", name, s.Sweepers)
		}
		if s.Repaired != s.Drifted || s.RepairAfter > (server.DeepEvery+1)*s.Interval {
			t.Errorf("%s: got %d of %d drifted runs repaired in %v, want all within one deep pass (%v)", name, s.Repaired, s.Drifted, s.RepairAfter, (server.DeepEvery+1)*s.Interval)
		}
		k := [2]any{s.Mode, s.Runs}
		hourly[k] = append(hourly[k], s.PerHour(s.Requests))
	}
	for k, hs := range hourly {
		if r := hs[len(hs)-1] / hs[0]; hs[0] == 0 || r > 1.5 {
			t.Errorf("%s sweep, %d runs: got largest N / N=1 hourly requests %.2f, want about 1 (at most 1.5): with the lease the cost is one replica's", k[0], k[1], r)
		}
	}
}

// testWriter sends the harness's progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// TestLeaseWarningsKeepsTheLeasesWarningsOnly pins what a failed
// multi-process test logs of its processes' logs: the lease's warnings
// and errors, with their file, and nothing else (a clean step-down, other
// warnings, lines that are not JSON), at most max of them.
func TestLeaseWarningsKeepsTheLeasesWarningsOnly(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "scale"), 0o755); err != nil {
		t.Fatal(err)
	}
	logs := map[string]string{
		"scale/replica-04.stdout": `{"level":"INFO","msg":"lease: elected","lease":"merge-gate-sweeper"}
{"level":"WARN","msg":"lease: renew failed","lease":"merge-gate-sweeper","err":"context deadline exceeded"}
{"level":"WARN","msg":"lease: stepped down","lease":"merge-gate-sweeper","reason":"deadline"}
{"level":"INFO","msg":"lease: stepped down","lease":"merge-gate-sweeper","reason":"ctx_done"}
{"level":"WARN","msg":"forge: rate limited"}
not json: lease: stepped down
`,
		"scale/replica-04.stderr": `{"level":"ERROR","msg":"lease: work panicked"}` + "\n",
		"scale/app-key.pem":       `{"level":"WARN","msg":"lease: not a log"}` + "\n",
	}
	for name, body := range logs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lines, more := leaseWarnings(dir, 10)
	want := []string{"work panicked", "renew failed", `"reason":"deadline"`} // files in lexical order
	if len(lines) != len(want) || more {
		t.Fatalf("got %d lines (more %v): %q; want %d, none left out", len(lines), more, lines, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], filepath.Join("scale", "replica-04.")) || !strings.Contains(lines[i], w) {
			t.Errorf("line %d: got %q, want one of scale/replica-04's naming %q", i, lines[i], w)
		}
	}
	if lines, more := leaseWarnings(dir, 2); len(lines) != 2 || !more {
		t.Errorf("with at most 2: got %d lines, more %v; want 2 and more", len(lines), more)
	}
}
