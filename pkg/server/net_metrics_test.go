package server_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"iterion.dev/iterion/internal/testing/doctable"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/server"
)

// slowForge delays every forge request by d (virtual time in a synctest
// bubble), so a pass lasts d per request it sends.
type slowForge struct {
	next http.RoundTripper
	d    time.Duration
}

func (s slowForge) RoundTrip(req *http.Request) (*http.Response, error) {
	time.Sleep(s.d)
	return s.next.RoundTrip(req)
}

// metric finds name's series with label name=value in reg; nil when absent.
func metric(t *testing.T, reg *prometheus.Registry, name, label, value string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m
				}
			}
		}
	}
	return nil
}

// laneRequests is how many requests c sent on lane, whatever the answer.
func laneRequests(c *forge.Client, lane string) int64 {
	var n int64
	for _, k := range c.Counts() {
		if k.Lane == lane {
			n += k.N
		}
	}
	return n
}

// unix is t as the float seconds a timestamp gauge holds.
func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// TestNetPassMetricsAfterAPass pins the pass metrics of each elected net:
// after a complete pass, iterion_net_last_success_timestamp_seconds{lease} is
// the instant it ended and iterion_net_pass_duration_seconds{lease} has
// observed its duration; iterion_net_interval_seconds{lease} is the net's
// interval from the start; forge_rate_limit_remaining is the simulator's
// own figure for the replica's token.
func TestNetPassMetricsAfterAPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newCluster(t, 2)
		if err := c.sim.SeedIssue("acme", "app", forgesim.Issue{Number: 10, Title: "an issue", State: "open"}); err != nil {
			t.Fatal(err)
		}
		const delay = 2 * time.Second
		var reg *prometheus.Registry
		startReplicas(t, c, slowForge{next, delay}, 1, time.Minute, func(cfg *server.Config) {
			reg = cfg.Registry
			cfg.BoardRepos, cfg.BoardInterval = []string{"acme/app"}, 2*time.Minute
		})
		r := c.replicas[0]
		defer r.stop()
		start := time.Now()
		sweeper, board := server.MergeGateSweeper().Name, server.ForgeBoardSync().Name

		for name, want := range map[string]float64{sweeper: 60, board: 120} {
			if m := metric(t, reg, "iterion_net_interval_seconds", "lease", name); m.GetGauge().GetValue() != want {
				t.Errorf("iterion_net_interval_seconds{lease=%q}: got %v, want %v: the configured interval, from the start", name, m, want)
			}
			if m := metric(t, reg, "iterion_net_last_success_timestamp_seconds", "lease", name); m != nil {
				t.Errorf("iterion_net_last_success_timestamp_seconds{lease=%q} before any pass: got %v, want absent", name, m)
			}
		}

		// The sweeper's first pass is one interval after the election, at
		// 1m; the board's at 2m. Look just before the board's.
		time.Sleep(2*time.Minute - time.Second)
		synctest.Wait()
		took := time.Duration(laneRequests(r.forge, forge.LaneMergeGateSweeper)) * delay
		if took == 0 {
			t.Fatalf("sweeper lane requests after its first pass: got 0, want some: the pass offers 2 runs")
		}
		if got, want := metric(t, reg, "iterion_net_last_success_timestamp_seconds", "lease", sweeper).GetGauge().GetValue(), unix(start.Add(time.Minute+took)); got != want {
			t.Errorf("sweeper last success: got %v, want %v (start + 1m + %v): the end of its complete first pass", got, want, took)
		}
		h := metric(t, reg, "iterion_net_pass_duration_seconds", "lease", sweeper).GetHistogram()
		if h.GetSampleCount() != 1 || h.GetSampleSum() != took.Seconds() {
			t.Errorf("sweeper pass durations: got count %d sum %v, want 1 and %v: one pass, %v per request", h.GetSampleCount(), h.GetSampleSum(), took.Seconds(), delay)
		}
		if m := metric(t, reg, "iterion_net_pass_duration_seconds", "lease", board); m != nil {
			t.Errorf("board pass durations before its first pass: got %v, want absent", m)
		}

		time.Sleep(time.Minute)
		synctest.Wait()
		took = time.Duration(laneRequests(r.forge, forge.LaneBoardSync)) * delay
		if got, want := metric(t, reg, "iterion_net_last_success_timestamp_seconds", "lease", board).GetGauge().GetValue(), unix(start.Add(2*time.Minute+took)); took == 0 || got != want {
			t.Errorf("board last success: got %v, want %v (start + 2m + %v): the end of its complete first pass", got, want, took)
		}
		h = metric(t, reg, "iterion_net_pass_duration_seconds", "lease", board).GetHistogram()
		if h.GetSampleCount() != 1 || h.GetSampleSum() != took.Seconds() {
			t.Errorf("board pass durations: got count %d sum %v, want 1 and %v", h.GetSampleCount(), h.GetSampleSum(), took.Seconds())
		}

		if got, want := metric(t, reg, "forge_rate_limit_remaining", "resource", "core").GetGauge().GetValue(), float64(simRemaining(t, c.sim, r.token)); got != want {
			t.Errorf("forge_rate_limit_remaining{resource=core}: got %v, want %v: the simulator's remaining budget for %s", got, want, r.token)
		}
	})
}

// TestNetPassMetricsIncompletePassMovesNoTimestamp pins that a pass a rate
// limit stopped is observed in iterion_net_pass_duration_seconds but does
// not move iterion_net_last_success_timestamp_seconds: only a complete pass
// is a success.
func TestNetPassMetricsIncompletePassMovesNoTimestamp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newCluster(t, 2)
		var reg *prometheus.Registry
		startReplicas(t, c, next, 1, time.Minute, func(cfg *server.Config) { reg = cfg.Registry })
		r := c.replicas[0]
		defer r.stop()
		if err := c.sim.SetBudget(r.token, 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		sweeper := server.MergeGateSweeper().Name
		if h := metric(t, reg, "iterion_net_pass_duration_seconds", "lease", sweeper).GetHistogram(); h.GetSampleCount() != 1 {
			t.Errorf("sweeper pass durations: got count %d, want 1: a rate-limited pass is still a pass", h.GetSampleCount())
		}
		if m := metric(t, reg, "iterion_net_last_success_timestamp_seconds", "lease", sweeper); m != nil {
			t.Errorf("sweeper last success after a rate-limited pass: got %v, want absent: an incomplete pass is no success", m)
		}
		if got := metric(t, reg, "forge_rate_limit_remaining", "resource", "core").GetGauge().GetValue(); got != 0 {
			t.Errorf("forge_rate_limit_remaining{resource=core}: got %v, want 0: the budget of 1 is spent", got)
		}
	})
}

// simRemaining is the simulator's remaining core budget for token.
func simRemaining(t *testing.T, sim *forgesim.Sim, token string) int {
	t.Helper()
	for _, w := range sim.Stats().Budget.Windows {
		if w.Token == token && w.Resource == "core" {
			return w.Remaining
		}
	}
	t.Fatalf("simulator budget windows %+v: want a core window for %s", sim.Stats().Budget.Windows, token)
	return 0
}

// TestSweepCountsItsPassesBehindByWindow pins
// merge_gate_sweep_passes_behind_total, the count an operator divides by
// the sweeper's passes for the share that left runs for later: with 1,000
// runs in the shallow window, their statuses in place, and GitHub taking
// 9 s a query, a pass's 30 s a minute reads at most 300 of them, so no
// pass in the first four minutes reaches the window's end, and each is
// counted under window="shallow", none under "deep", on the replica that
// swept, alone and in App mode alike. Both series exist from the start
// at 0.
func TestSweepCountsItsPassesBehindByWindow(t *testing.T) {
	const n = 1000
	slow := forgesim.Latency{GraphQLBase: 9 * time.Second}
	for _, app := range []bool{false, true} {
		t.Run(map[bool]string{false: "one installation", true: "App mode"}[app], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var c *cluster
				var next http.RoundTripper
				run := func(pull int) gaterun.Run { return gateRun(pull, fmt.Sprintf("sha%d", pull), gaterun.VerdictSuccess) }
				if app {
					c, next = newAppCluster(t, 1, false, forgesim.WithLatency(slow))
					run = func(pull int) gaterun.Run {
						r := appRun(1)
						r.Pull, r.HeadSHA = pull, fmt.Sprintf("sha-1-%d", pull)
						r.ID = gaterun.ID(r.Host, r.Repo, pull, r.HeadSHA)
						return r
					}
				} else {
					c, next = newCluster(t, 0)
					if err := c.sim.SetLatency(slow); err != nil {
						t.Fatal(err)
					}
				}
				for pull := 1; pull <= n; pull++ {
					r := run(pull)
					owner, name, _ := strings.Cut(r.Repo, "/")
					if err := c.sim.SeedPull(owner, name, pull, r.HeadSHA, "open"); err != nil {
						t.Fatal(err)
					}
					if err := c.sim.SetStatus(owner, name, r.HeadSHA, forgesim.Status{Context: r.Context, State: string(r.Verdict), Description: r.Description, TargetURL: r.TargetURL}); err != nil {
						t.Fatal(err)
					}
					if _, err := c.runs.Put(context.Background(), r, time.Now()); err != nil {
						t.Fatal(err)
					}
				}
				var reg *prometheus.Registry
				keep := func(cfg *server.Config) { reg = cfg.Registry }
				if app {
					startAppReplicas(t, c, next, 1, time.Minute, 1, keep)
				} else {
					startReplicas(t, c, next, 1, time.Minute, keep)
				}
				defer c.stopAll()
				behind := func(window string) float64 {
					t.Helper()
					m := metric(t, reg, "merge_gate_sweep_passes_behind_total", "window", window)
					if m == nil {
						t.Fatalf("merge_gate_sweep_passes_behind_total{window=%q}: absent, want a series from the start", window)
					}
					return m.GetCounter().GetValue()
				}
				if s, d := behind("shallow"), behind("deep"); s != 0 || d != 0 {
					t.Fatalf("before any pass: shallow %v, deep %v; want 0 and 0", s, d)
				}
				time.Sleep(4*time.Minute + 50*time.Second)
				synctest.Wait()
				_, passes := c.tl.snapshot()
				unfinished := 0
				for _, p := range passes {
					if !p.ShallowDone && p.Complete && p.Offered <= 300 {
						unfinished++
					}
				}
				if len(passes) < 3 || unfinished != len(passes) {
					t.Fatalf("passes %+v: want at least 3, each complete with at most 300 runs offered, none reaching the shallow window's end", passes)
				}
				if s, d := behind("shallow"), behind("deep"); s != float64(unfinished) || d != 0 {
					t.Errorf("shallow %v, deep %v; want %d and 0: one count a pass that stopped before the end of the shallow window", s, d, unfinished)
				}
				h := metric(t, reg, "iterion_net_pass_duration_seconds", "lease", server.MergeGateSweeper().Name).GetHistogram()
				if h.GetSampleCount() != uint64(len(passes)) {
					t.Errorf("iterion_net_pass_duration_seconds count %d, want %d: the share's denominator counts the same passes", h.GetSampleCount(), len(passes))
				}
			})
		})
	}
}

// TestEveryMetricIsInOperatingsTable pins docs/operating.md's table of
// metrics to what a replica registers, both ways: every metric family a
// replica's registry describes (with the board on, with the measurement
// group, and in App mode) or gathers after a few passes has a row there,
// every metric a row names is registered, and a row's labels are those
// of its metrics: each metric's labels are in its row, and each label of
// the row is some metric's of the row.
func TestEveryMetricIsInOperatingsTable(t *testing.T) {
	type row struct {
		names  []string
		labels map[string]bool
	}
	var rows []row
	rowOf := map[string]int{}
	for _, r := range doctable.Rows(t, "operating.md", "| metric | labels | what it says |") {
		labels := map[string]bool{}
		for _, l := range doctable.Ticked(r[1]) {
			labels[l] = true
		}
		for _, name := range doctable.Ticked(r[0]) {
			rowOf[name] = len(rows)
		}
		rows = append(rows, row{doctable.Ticked(r[0]), labels})
	}
	registered := map[string]map[string]bool{} // metric: its labels, over both modes
	for _, app := range []bool{false, true} {
		t.Run(map[bool]string{false: "one installation, with the board and the measurement group", true: "App mode"}[app], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var c *cluster
				var reg *prometheus.Registry
				keep := func(cfg *server.Config) { reg = cfg.Registry }
				if app {
					var next http.RoundTripper
					c, next = newAppCluster(t, 2, true)
					startAppReplicas(t, c, next, 1, time.Minute, 4, keep)
				} else {
					var next http.RoundTripper
					c, next = newCluster(t, 2)
					if err := c.sim.SeedIssue("acme", "app", forgesim.Issue{Number: 10, Title: "an issue", State: "open"}); err != nil {
						t.Fatal(err)
					}
					c.cmp = server.Comparison{MeasureGroupShards: 2}
					startReplicas(t, c, next, 1, time.Minute, func(cfg *server.Config) {
						keep(cfg)
						cfg.BoardRepos, cfg.BoardInterval = []string{"acme/app"}, time.Minute
					})
				}
				defer c.stopAll()
				time.Sleep(3*time.Minute + 30*time.Second)
				synctest.Wait()
				mfs, err := reg.Gather()
				if err != nil {
					t.Fatal(err)
				}
				for _, mf := range mfs {
					if _, ok := rowOf[mf.GetName()]; !ok {
						t.Errorf("the replica exports %s, which docs/operating.md's table of metrics does not list", mf.GetName())
					}
					for _, m := range mf.GetMetric() {
						for _, lp := range m.GetLabel() {
							if values, ok := labelValuesOf(mf.GetName(), lp.GetName()); ok && !slices.Contains(values, lp.GetValue()) {
								t.Errorf("the replica exports %s{%s=%q}, a value server.LabelValues does not list (%v): an alert filtering on the listed values misses it", mf.GetName(), lp.GetName(), lp.GetValue(), values)
							}
						}
					}
				}
				if len(mfs) < 15 {
					t.Errorf("%d metric families gathered, want the server's, the leases' and the forge client's (15 or more)", len(mfs))
				}
				for name, labels := range describedMetrics(t, reg) {
					if registered[name] == nil {
						registered[name] = map[string]bool{}
					}
					for l := range labels {
						registered[name][l] = true
					}
				}
			})
		})
	}
	for name, labels := range registered {
		i, ok := rowOf[name]
		if !ok {
			t.Errorf("the replica registers %s, which docs/operating.md's table of metrics does not list", name)
			continue
		}
		for l := range labels {
			if !rows[i].labels[l] {
				t.Errorf("the replica registers %s with the label %s, which its row in docs/operating.md's table of metrics does not name", name, l)
			}
		}
	}
	for _, r := range rows {
		used := map[string]bool{}
		for _, name := range r.names {
			if registered[name] == nil {
				t.Errorf("docs/operating.md's table of metrics lists %s, which no replica registers", name)
			}
			for l := range registered[name] {
				used[l] = true
			}
		}
		for l := range r.labels {
			if !used[l] {
				t.Errorf("docs/operating.md's table of metrics gives %v the label %s, which none of them has", r.names, l)
			}
		}
	}
}

// describedMetrics is every metric reg describes, with its variable
// labels: what it registered, series or not (a vector with no child yet,
// say lease_store_call_errors_total before an error, is described but not
// gathered). Desc has no accessors, so its String form is parsed.
func describedMetrics(t *testing.T, reg *prometheus.Registry) map[string]map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() {
		reg.Describe(ch)
		close(ch)
	}()
	out := map[string]map[string]bool{}
	for d := range ch {
		m := descForm.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("Desc %s: not of the form %s", d, descForm)
		}
		labels := map[string]bool{}
		for l := range strings.SplitSeq(m[2], ",") {
			if l != "" {
				labels[strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")")] = true
			}
		}
		out[m[1]] = labels
	}
	return out
}

// descForm is prometheus.Desc's String form: its name and, last, its
// variable labels.
var descForm = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", .*variableLabels: \{([^{}]*)\}\}$`)

// labelValuesOf is the values server.LabelValues gives label on metric,
// and whether it lists that label of that metric.
func labelValuesOf(metric, label string) ([]string, bool) {
	for _, lv := range server.LabelValues {
		if lv.Label == label && slices.Contains(lv.Metrics, metric) {
			return lv.Values, true
		}
	}
	return nil, false
}

// TestLabelValuesAreInOperatingsTable pins docs/operating.md's table of
// label values to server.LabelValues, the values the code gives each
// label from its constants, both ways: every row names a label of the
// listed metrics and exactly the values the code gives it there, and
// every list has its row. deploy/prometheus's rules test checks the
// alerts' filters against that table, so an alert filtering on a value
// the code never emits (which never fires) fails there.
func TestLabelValuesAreInOperatingsTable(t *testing.T) {
	rows := doctable.Rows(t, "operating.md", "| label | metrics | values |")
	seen := make([]bool, len(server.LabelValues))
	for _, r := range rows {
		label := doctable.Ticked(r[0])
		metrics := doctable.Ticked(r[1])
		values, _, _ := strings.Cut(r[2], ";")
		documented := doctable.Ticked(values)
		if len(label) != 1 {
			t.Errorf("docs/operating.md: label values row %q: want one label", r)
			continue
		}
		i := slices.IndexFunc(server.LabelValues, func(lv server.LabelValue) bool {
			return lv.Label == label[0] && slices.Equal(slices.Sorted(slices.Values(lv.Metrics)), slices.Sorted(slices.Values(metrics)))
		})
		if i < 0 {
			t.Errorf("docs/operating.md lists values of %s on %v, which server.LabelValues does not list for those metrics", label[0], metrics)
			continue
		}
		seen[i] = true
		want := slices.Sorted(slices.Values(server.LabelValues[i].Values))
		if got := slices.Sorted(slices.Values(documented)); !slices.Equal(got, want) {
			t.Errorf("docs/operating.md gives %s on %v the values %v, want %v: the values the code gives it", label[0], metrics, got, want)
		}
	}
	for i, lv := range server.LabelValues {
		if !seen[i] {
			t.Errorf("server.LabelValues lists %s on %v, which docs/operating.md's table of label values does not list", lv.Label, lv.Metrics)
		}
	}
}
