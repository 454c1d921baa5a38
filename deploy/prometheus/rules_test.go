// Package prometheus_test checks the shipped alert rules,
// iterion-rules.yaml, with Prometheus's own rule parser and PromQL engine.
// It is a test-only package: no binary links Prometheus.
package prometheus_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
)

const rulesFile = "iterion-rules.yaml"

// fixture is a set of series (promqltest's load syntax, from time 0) and
// the instant an alert is judged at.
type fixture struct {
	why    string // what the series show, in the operator's words
	series string
	at     time.Duration
}

// alertCase is one alert's failing fixture (it must fire) and healthy ones
// (it must stay quiet).
type alertCase struct {
	alert   string
	fires   fixture
	healthy []fixture
}

var cases = []alertCase{{
	alert: "IterionNetNoPass",
	fires: fixture{"the sweeper's last pass ended at 1m, and it is 10m now: 9 intervals of 1m", `
load 1m
  iterion_net_interval_seconds{lease="merge-gate-sweeper", instance="a"} 60x20
  iterion_net_last_success_timestamp_seconds{lease="merge-gate-sweeper", instance="a"} 60x20
`, 10 * time.Minute},
	healthy: []fixture{{"the sweeper passes every minute on a; b passed once long ago (it lost the lease): the fleet's latest pass counts", `
load 1m
  iterion_net_interval_seconds{lease="merge-gate-sweeper", instance="a"} 60x20
  iterion_net_interval_seconds{lease="merge-gate-sweeper", instance="b"} 60x20
  iterion_net_last_success_timestamp_seconds{lease="merge-gate-sweeper", instance="a"} 0+60x20
  iterion_net_last_success_timestamp_seconds{lease="merge-gate-sweeper", instance="b"} 60x20
`, 10 * time.Minute}, {"the board (interval 5m) passed 10m ago: 2 intervals, under 3", `
load 1m
  iterion_net_interval_seconds{lease="forge-board-sync", instance="a"} 300x20
  iterion_net_last_success_timestamp_seconds{lease="forge-board-sync", instance="a"} 0x20
`, 10 * time.Minute}},
}, {
	alert: "IterionNetForgeErrors",
	fires: fixture{"every forge read of the sweeper's passes fails from 2m; judged at 7m, the rule's `for` after", `
load 1m
  iterion_net_forge_error_ratio{lease="merge-gate-sweeper", instance="a"} 0 0 1x20
`, 7 * time.Minute},
	healthy: []fixture{{"one batch in ten fails", `
load 1m
  iterion_net_forge_error_ratio{lease="merge-gate-sweeper", instance="a"} 0.1x20
`, 10 * time.Minute}, {"the forge failed from 2m to 4m, then recovered", `
load 1m
  iterion_net_forge_error_ratio{lease="merge-gate-sweeper", instance="a"} 0 0 1 1 0x20
`, 10 * time.Minute}},
}, {
	alert: "IterionNetNeverPassed",
	fires: fixture{"the replicas have run the sweeper for 40m and none completed a pass", `
load 1m
  iterion_net_interval_seconds{lease="merge-gate-sweeper", instance="a"} 60x60
  iterion_net_interval_seconds{lease="merge-gate-sweeper", instance="b"} 60x60
`, 40 * time.Minute},
	healthy: []fixture{{"one replica completes passes", `
load 1m
  iterion_net_interval_seconds{lease="merge-gate-sweeper", instance="a"} 60x60
  iterion_net_interval_seconds{lease="merge-gate-sweeper", instance="b"} 60x60
  iterion_net_last_success_timestamp_seconds{lease="merge-gate-sweeper", instance="b"} 0+60x60
`, 40 * time.Minute}},
}, {
	alert: "IterionForgeBudgetBelowReserve",
	fires: fixture{"300 core requests left, the sweeper's reserve is 1000, the window resets at 1h", `
load 1m
  forge_rate_limit_remaining{host="api.github.com", resource="core", instance="a"} 300x20
  forge_rate_limit_reset_timestamp_seconds{host="api.github.com", resource="core", instance="a"} 3600x20
  forge_rate_limit_reserve{lane="merge-gate-sweeper", instance="a"} 1000x20
`, 10 * time.Minute},
	healthy: []fixture{{"4000 core requests left, above the reserve of 1000", `
load 1m
  forge_rate_limit_remaining{host="api.github.com", resource="core", instance="a"} 4000x20
  forge_rate_limit_reset_timestamp_seconds{host="api.github.com", resource="core", instance="a"} 3600x20
  forge_rate_limit_reserve{lane="merge-gate-sweeper", instance="a"} 1000x20
`, 10 * time.Minute}, {"300 left, but that window reset at 5m: the figure is from before the reset", `
load 1m
  forge_rate_limit_remaining{host="api.github.com", resource="core", instance="a"} 300x20
  forge_rate_limit_reset_timestamp_seconds{host="api.github.com", resource="core", instance="a"} 300x20
  forge_rate_limit_reserve{lane="merge-gate-sweeper", instance="a"} 1000x20
`, 10 * time.Minute}, {"300 graphql points left: the reserve is the core budget's", `
load 1m
  forge_rate_limit_remaining{host="api.github.com", resource="graphql", instance="a"} 300x20
  forge_rate_limit_reset_timestamp_seconds{host="api.github.com", resource="graphql", instance="a"} 3600x20
  forge_rate_limit_reserve{lane="merge-gate-sweeper", instance="a"} 1000x20
`, 10 * time.Minute}},
}, {
	alert: "IterionSweepBehind",
	fires: fixture{"every pass of replica a since 2m stops at its time budget before the end of the shallow window", `
load 1m
  merge_gate_sweep_behind{instance="a"} 0 0 1x20
  merge_gate_sweep_behind{instance="b"} 0x22
`, 8 * time.Minute},
	healthy: []fixture{{"one pass in three is behind: the backlog clears", `
load 1m
  merge_gate_sweep_behind{instance="a"} 1 0 0 1 0 0 1 0 0 1 0 0 1 0 0
`, 12 * time.Minute}, {"two passes in three are behind, never 5 minutes in a row: IterionSweepOftenBehind's case", `
load 1m
  merge_gate_sweep_behind{instance="a"} 1 1 0 1 1 0 1 1 0 1 1 0 1 1 0
`, 12 * time.Minute}, {"no pass is behind", `
load 1m
  merge_gate_sweep_behind{instance="a"} 0x20
`, 10 * time.Minute}},
}, {
	alert: "IterionSweepOftenBehind",
	fires: fixture{"for 90m, two of every three passes (one a minute, on a) stopped before the end of the shallow window; IterionSweepBehind stays quiet, as every third pass is not behind", `
load 1m
  merge_gate_sweep_passes_behind_total{window="shallow", instance="a"} ` + cumulative("110", 90) + `
  merge_gate_sweep_passes_behind_total{window="deep", instance="a"} 0x90
  iterion_net_pass_duration_seconds_count{lease="merge-gate-sweeper", instance="a"} 0+1x90
  iterion_net_pass_duration_seconds_count{lease="merge-gate-sweeper", instance="b"} 0x90
`, 90 * time.Minute},
	healthy: []fixture{{"one pass in three behind, the backlog clearing", `
load 1m
  merge_gate_sweep_passes_behind_total{window="shallow", instance="a"} ` + cumulative("100", 90) + `
  iterion_net_pass_duration_seconds_count{lease="merge-gate-sweeper", instance="a"} 0+1x90
`, 90 * time.Minute}, {"one pass in twenty behind, as GitHub's timeouts leave under the project's latency model", `
load 1m
  merge_gate_sweep_passes_behind_total{window="shallow", instance="a"} ` + cumulative("10000000000000000000", 90) + `
  iterion_net_pass_duration_seconds_count{lease="merge-gate-sweeper", instance="a"} 0+1x90
`, 90 * time.Minute}, {"every pass behind in its deep window only: IterionSweepBehind's concern, not this one's", `
load 1m
  merge_gate_sweep_passes_behind_total{window="shallow", instance="a"} 0x90
  merge_gate_sweep_passes_behind_total{window="deep", instance="a"} 0+1x90
  iterion_net_pass_duration_seconds_count{lease="merge-gate-sweeper", instance="a"} 0+1x90
`, 90 * time.Minute}, {"no replica swept in the last hour: no passes, no share", `
load 1m
  merge_gate_sweep_passes_behind_total{window="shallow", instance="a"} 0x90
  iterion_net_pass_duration_seconds_count{lease="merge-gate-sweeper", instance="a"} 0x90
`, 90 * time.Minute}},
}, {
	alert: "IterionRunsUncovered",
	fires: fixture{"the adopter's holder has counted 3 uncovered runs for over an hour", `
load 5m
  merge_gate_runs_uncovered{instance="a"} 3x20
  merge_gate_runs_uncovered{instance="b"} 0x20
`, 70 * time.Minute},
	healthy: []fixture{{"an uncovered run adopted after 50 minutes, when the App was installed on its repository", `
load 5m
  merge_gate_runs_uncovered{instance="a"} 1x10 0x10
`, 70 * time.Minute}, {"none uncovered", `
load 5m
  merge_gate_runs_uncovered{instance="a"} 0x20
`, 70 * time.Minute}, {"a sweeper counted a run of a repository its installation lost for 40 minutes, then moved it to the installation GitHub named", `
load 1m
  merge_gate_runs_uncovered{found_by="sweeper", instance="a"} 1x40 0x40
  merge_gate_runs_uncovered{found_by="adopter", instance="a"} 0x80
`, 80 * time.Minute}},
}, {
	alert: "IterionRunsUncovered",
	fires: fixture{"a's sweepers counted 2 runs of a repository no installation covers any more, then its shard moved to b, whose first look-up came 3 minutes later", `
load 1m
  merge_gate_runs_uncovered{found_by="sweeper", instance="a"} 2x30 0x50
  merge_gate_runs_uncovered{found_by="sweeper", instance="b"} 0x33 2x47
  merge_gate_runs_uncovered{found_by="adopter", instance="a"} 0x80
  merge_gate_runs_uncovered{found_by="adopter", instance="b"} 0x80
`, 75 * time.Minute},
}, {
	alert: "IterionInstallationUnswept",
	fires: fixture{"a's sweeper has had no complete pass of one installation since it began sweeping it at 0 (counted from 3m), while b's installations pass", `
load 1m
  merge_gate_installations_unswept{instance="a"} 0x3 1x40
  merge_gate_installations_unswept{instance="b"} 0x43
`, 25 * time.Minute},
	healthy: []fixture{{"every installation swept", `
load 1m
  merge_gate_installations_unswept{instance="a"} 0x43
  merge_gate_installations_unswept{instance="b"} 0x43
`, 25 * time.Minute}, {"an installation's forge answered 5xx from just before 0 to 7m: its passes at 0, 2m and 6m failed, backing off 2, 4 and 8 intervals, and the one at 14m completed; counted unswept at the scrapes from 4m to 14m, judged at the last evaluation the rule's condition holds", `
load 1m
  merge_gate_installations_unswept{instance="a"} 0x3 1x10 0x30
`, 18*time.Minute + 45*time.Second}},
}, {
	alert: "IterionInstallationUnswept",
	fires: fixture{"a counted an unswept installation from 3m; its shard moved to b at 13m, which counts it from 16m", `
load 1m
  merge_gate_installations_unswept{instance="a"} 0x3 1x10 0x30
  merge_gate_installations_unswept{instance="b"} 0x16 1x27
`, 30 * time.Minute},
}, {
	alert: "IterionInstallationMintsRefused",
	fires: fixture{"a's sweeper has had an installation's mint refused at 10m, 11m, 13m, 17m, 25m, 41m, 73m, then hourly (its holds doubling to an hour); judged at 3h, 47 minutes after the last", `
load 1m
  merge_gate_installation_mints_refused_total{instance="a"} 0x9 1 2 2 3x3 4x7 5x15 6x31 7x60 8x60
  merge_gate_installation_mints_refused_total{instance="b"} 0x200
`, 180 * time.Minute},
	healthy: []fixture{{"no mint refused", `
load 1m
  merge_gate_installation_mints_refused_total{instance="a"} 0x200
`, 180 * time.Minute}, {"one refused at 10m, then tokens came (a transient refusal): judged 2h later", `
load 1m
  merge_gate_installation_mints_refused_total{instance="a"} 0x9 1x200
`, 140 * time.Minute}},
}, {
	alert: "IterionMalformedCards",
	fires: fixture{"a's full sync met one document at 10m; judged 24h later", `
load 10m
  board_malformed_cards_total{instance="a"} 0 1x200
  board_malformed_cards_total{instance="b"} 0x200
`, 24*time.Hour + 10*time.Minute},
	healthy: []fixture{{"no document met", `
load 10m
  board_malformed_cards_total{instance="a"} 0x200
`, 30 * time.Hour}, {"met by the full syncs at 10m and 24h20m, then replaced: judged 25h50m after the last", `
load 10m
  board_malformed_cards_total{instance="a"} 0 1x144 2x300
`, 50*time.Hour + 10*time.Minute}},
}, {
	alert: "IterionMalformedRuns",
	fires: fixture{"a's sweeper skipped one document every minute from 10m (in the last hour's window); judged at 30m", `
load 1m
  merge_gate_sweep_malformed_runs_total{instance="a"} 0x9 1+1x40
  merge_gate_sweep_malformed_runs_total{instance="b"} 0x50
`, 30 * time.Minute},
	healthy: []fixture{{"no document skipped", `
load 1m
  merge_gate_sweep_malformed_runs_total{instance="a"} 0x200
`, 180 * time.Minute}, {"one skipped by deep windows at 10m and 40m, then deleted: judged 2h after the last", `
load 1m
  merge_gate_sweep_malformed_runs_total{instance="a"} 0x9 1x30 2x200
`, 165 * time.Minute}},
}, {
	alert: "IterionLeaseStoreUnreachable",
	fires: fixture{"every renewal and acquire of replica a for 15m got no answer", `
load 1m
  lease_store_call_errors_total{op="renew", instance="a"} 0+1x20
  lease_store_call_duration_seconds_count{op="renew", instance="a"} 0+1x20
  lease_store_call_errors_total{op="acquire", instance="a"} 0+2x20
  lease_store_call_duration_seconds_count{op="acquire", instance="a"} 0+2x20
`, 15 * time.Minute},
	healthy: []fixture{{"one renewal in ten fails", `
load 1m
  lease_store_call_errors_total{op="renew", instance="a"} 0+0.1x20
  lease_store_call_duration_seconds_count{op="renew", instance="a"} 0+1x20
`, 15 * time.Minute}},
}, {
	alert: "IterionConnectionsAtCap",
	fires: fixture{"replica a has held all 1024 connections from 2m on; judged at 5m, past the rule's `for`", `
load 1m
  http_connections_open{instance="a"} 40 40 1024x20
  http_connections_max{instance="a"} 1024x22
  http_connections_open{instance="b"} 40x22
  http_connections_max{instance="b"} 1024x22
`, 5 * time.Minute},
	healthy: []fixture{{"a busy replica, 1000 open, still under its cap", `
load 1m
  http_connections_open{instance="a"} 1000x20
  http_connections_max{instance="a"} 1024x20
`, 10 * time.Minute}, {"a burst at the cap for one minute, then back to tens", `
load 1m
  http_connections_open{instance="a"} 40 1024 40x20
  http_connections_max{instance="a"} 1024x22
`, 10 * time.Minute}},
}, {
	alert: "IterionWebhookFailedAfterAnswer",
	fires: fixture{"replica a answered a slow delivery 202 at 10m, and its runs lookup then failed", `
load 1m
  webhook_deliveries_total{outcome="answered_before_processed", instance="a"} 0x10 1x20
  webhook_deliveries_total{outcome="failed_after_answer", instance="a"} 0x10 1x20
`, 15 * time.Minute},
	healthy: []fixture{{"slow deliveries answered 202 early, every one processed afterwards", `
load 1m
  webhook_deliveries_total{outcome="answered_before_processed", instance="a"} 0+1x30
  webhook_deliveries_total{outcome="processed_after_answer", instance="a"} 0+1x30
  webhook_deliveries_total{outcome="failed_after_answer", instance="a"} 0x30
`, 20 * time.Minute}, {"one failed after its answer two hours ago, none since", `
load 5m
  webhook_deliveries_total{outcome="failed_after_answer", instance="a"} 0 1x40
`, 180 * time.Minute}},
}, {
	alert: "IterionLeaseNoHolder",
	fires: fixture{"neither replica has held the sweeper's lease for 10m", `
load 1m
  lease_held{lease="merge-gate-sweeper", instance="a"} 0x20
  lease_held{lease="merge-gate-sweeper", instance="b"} 0x20
`, 10 * time.Minute},
	healthy: []fixture{{"b holds the sweeper's lease", `
load 1m
  lease_held{lease="merge-gate-sweeper", instance="a"} 0x20
  lease_held{lease="merge-gate-sweeper", instance="b"} 1x20
`, 10 * time.Minute}, {"nobody has held the board's lease for 10m: within its crash takeover (TTL 15m + retry 5m)", `
load 1m
  lease_held{lease="forge-board-sync", instance="a"} 0x20
  lease_held{lease="forge-board-sync", instance="b"} 0x20
`, 10 * time.Minute}},
}, {
	alert: "IterionLeaseNoHolder",
	fires: fixture{"nobody has held the board's lease for 30m", `
load 1m
  lease_held{lease="forge-board-sync", instance="a"} 0x40
`, 30 * time.Minute},
}, {
	alert: "IterionLeaseFlapping",
	fires: fixture{"replica a's sweeper terms ended at their deadline 3 times in 20 minutes, and b's was refused once: its renewals are late", `
load 5m
  lease_step_downs_total{lease="merge-gate-sweeper", reason="deadline", instance="a"} 0 1 2 3x10
  lease_step_downs_total{lease="merge-gate-sweeper", reason="refused", instance="b"} 0 0 0 0 1x10
`, 40 * time.Minute},
	healthy: []fixture{{"a rolling restart: every replica's terms ended cleanly, 10 in 25 minutes", `
load 5m
  lease_step_downs_total{lease="merge-gate-sweeper", reason="ctx_done", instance="a"} 0 2 4 6 8 10x5
`, 40 * time.Minute}, {"one stall an hour, over three hours: 4 deadlines, never more than 2 in an hour", `
load 15m
  lease_step_downs_total{lease="merge-gate-sweeper", reason="deadline", instance="a"} 0 0 0 1 1 1 2 2 2 3 3 3 4 4
`, 195 * time.Minute}, {"2 deadlines of the sweeper's lease and 2 of the board's in the hour: each lease counts alone", `
load 5m
  lease_step_downs_total{lease="merge-gate-sweeper", reason="deadline", instance="a"} 0 1 2x10
  lease_step_downs_total{lease="forge-board-sync", reason="deadline", instance="a"} 0 1 2x10
`, 40 * time.Minute}},
}, {
	alert: "IterionLeaseLateStepDown",
	fires: fixture{"replica a's sweeper term stopped its work after its lease's expiry once, 20 minutes ago", `
load 5m
  lease_step_downs_late_total{lease="merge-gate-sweeper", instance="a"} 0 0 0 0 1x10
`, 40 * time.Minute},
	healthy: []fixture{{"no late step-down: the terms that ended at their deadline did so TTL/6 before the expiry", `
load 5m
  lease_step_downs_late_total{lease="merge-gate-sweeper", instance="a"} 0x12
  lease_step_downs_total{lease="merge-gate-sweeper", reason="deadline", instance="a"} 0 1 2x10
`, 40 * time.Minute}, {"one late step-down, two hours ago", `
load 5m
  lease_step_downs_late_total{lease="merge-gate-sweeper", instance="a"} 0 1x40
`, 150 * time.Minute}},
}, {
	alert: "IterionLeaseLateStepDown",
	fires: fixture{"in App mode, member a's term of a sweeper shard stopped its work after its shard lease's expiry once, 20 minutes ago", `
load 5m
  lease_group_step_downs_late_total{group="merge-gate-sweeper", instance="a"} 0 0 0 0 1x10
`, 40 * time.Minute},
	healthy: []fixture{{"no late shard step-down: the shards given up at their deadline or rebalanced stopped in time", `
load 5m
  lease_group_step_downs_late_total{group="merge-gate-sweeper", instance="a"} 0x12
  lease_group_handovers_total{group="merge-gate-sweeper", reason="deadline", instance="a"} 0 1 2x10
`, 40 * time.Minute}, {"one late shard step-down, two hours ago", `
load 5m
  lease_group_step_downs_late_total{group="merge-gate-sweeper", instance="a"} 0 1x40
`, 150 * time.Minute}},
}, {
	alert: "IterionLeaseFlapping",
	fires: fixture{"member a of the sweeper's group lost its share to a missed deadline 4 times in 40 minutes, 6 shards each time", `
load 5m
  lease_group_handovers_total{group="merge-gate-sweeper", reason="deadline", instance="a"} 0 6 6 12 12 18 18 24x5
`, 40 * time.Minute},
	healthy: []fixture{{"one stall dropped member a's whole share of 8 shards at once", `
load 5m
  lease_group_handovers_total{group="merge-gate-sweeper", reason="deadline", instance="a"} 0 0 8x10
`, 40 * time.Minute}, {"a scale-out: members gave up 30 shards to even the share, over 25 minutes", `
load 5m
  lease_group_handovers_total{group="merge-gate-sweeper", reason="rebalanced", instance="a"} 0 6 12 18 24 30x5
`, 40 * time.Minute}},
}, {
	alert: "IterionLeaseGroupShardsUnheld",
	fires: fixture{"member a has seen 2 shards of the group unheld past TTL + retry", `
load 1m
  lease_group_shards_overdue{group="sweeper", instance="a"} 0 0 2x10
  lease_group_shards_overdue{group="sweeper", instance="b"} 0x12
`, 10 * time.Minute},
	healthy: []fixture{{"shards were unheld during a hand-over, never past TTL + retry", `
load 1m
  lease_group_shards_unheld{group="sweeper", instance="a"} 0 3 0x10
  lease_group_shards_overdue{group="sweeper", instance="a"} 0x12
`, 10 * time.Minute}},
}, {
	alert: "IterionShardCountChangeStuck",
	fires: fixture{"a rollout from 4 shards to 8 began at 5m and replica c stayed on 4: a and b have counted it as another member for over an hour", `
load 1m
  lease_group_other_members{group="merge-gate-sweeper", instance="a"} 0x5 1x70
  lease_group_other_members{group="merge-gate-sweeper", instance="b"} 0x5 1x70
  lease_group_other_members{group="merge-gate-sweeper", instance="c"} 0x5 2x70
`, 75 * time.Minute},
	healthy: []fixture{{"a slow rollout from 4 shards to 8, under way for 50 minutes: not yet an hour", `
load 1m
  lease_group_other_members{group="merge-gate-sweeper", instance="a"} 0x5 1x80
  lease_group_other_members{group="merge-gate-sweeper", instance="b"} 0x5 1x80
`, 55 * time.Minute}, {"a rollout from 4 shards to 8 that took 50 minutes, then finished", `
load 1m
  lease_group_other_members{group="merge-gate-sweeper", instance="a"} 0x5 1x50 0x30
  lease_group_other_members{group="merge-gate-sweeper", instance="b"} 0x5 1x50 0x30
`, 85 * time.Minute}, {"every replica on one shard count throughout", `
load 1m
  lease_group_other_members{group="merge-gate-sweeper", instance="a"} 0x90
  lease_group_other_members{group="forge-board-sync", instance="a"} 0x90
`, 85 * time.Minute}},
}}

// cumulative is a counter's samples, one a step for steps+1 steps from 0,
// that grows by one at each step whose place in pattern, repeated, is
// '1': promqltest's load syntax for passes counted as they end.
func cumulative(pattern string, steps int) string {
	var b strings.Builder
	n := 0
	b.WriteString("0")
	for i := range steps {
		if pattern[i%len(pattern)] == '1' {
			n++
		}
		fmt.Fprintf(&b, " %d", n)
	}
	return b.String()
}

// TestAlertRules loads iterion-rules.yaml with Prometheus's rule parser
// and, for each alert, evaluates its expression with Prometheus's PromQL
// engine over fixture series: it must hold at every 15 s evaluation through
// the rule's `for` on the failing fixture (the alert fires), and not at the
// judged instant on a healthy one (it stays quiet).
func TestAlertRules(t *testing.T) {
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("rulefmt.ParseFile(%s): %v, want a valid rules file", rulesFile, errs)
	}
	rules := map[string][]rulefmt.Rule{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				rules[r.Alert] = append(rules[r.Alert], r)
			}
		}
	}
	var tested []string
	for _, c := range cases {
		tested = append(tested, c.alert)
	}
	for name := range rules {
		if !slices.Contains(tested, name) {
			t.Errorf("alert %s has no fixture: got untested, want a failing and a healthy fixture for every alert", name)
		}
	}
	engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)

	for _, c := range cases {
		rs := rules[c.alert]
		if len(rs) == 0 {
			t.Errorf("alert %s: got no rule of that name in %s, want one", c.alert, rulesFile)
			continue
		}
		t.Run(c.alert+"/fires", func(t *testing.T) {
			if !slices.ContainsFunc(rs, func(r rulefmt.Rule) bool { return firing(t, engine, r, c.fires) }) {
				t.Errorf("got quiet, want firing at %v: %s", c.fires.at, c.fires.why)
			}
		})
		for _, h := range c.healthy {
			t.Run(c.alert+"/quiet", func(t *testing.T) {
				for _, r := range rs {
					if firing(t, engine, r, h) {
						t.Errorf("got firing (%s), want quiet at %v: %s", r.Expr, h.at, h.why)
					}
				}
			})
		}
	}
}

// TestEveryAlertIsInOperatingsTable pins docs/operating.md's table of
// alerts to iterion-rules.yaml: every alert the rules define has a row,
// and every row names an alert the rules define.
func TestEveryAlertIsInOperatingsTable(t *testing.T) {
	documented := map[string]bool{}
	for _, row := range operatingTable(t, "| alert | fires when |") {
		name, _, _ := strings.Cut(strings.TrimPrefix(row, "| `"), "`")
		documented[name] = true
	}
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("rulefmt.ParseFile(%s): %v", rulesFile, errs)
	}
	defined := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				defined[r.Alert] = true
				if !documented[r.Alert] {
					t.Errorf("%s defines %s, which docs/operating.md's table of alerts does not list", rulesFile, r.Alert)
				}
			}
		}
	}
	for name := range documented {
		if !defined[name] {
			t.Errorf("docs/operating.md lists the alert %s, which %s does not define", name, rulesFile)
		}
	}
}

// TestAlertsWatchDocumentedMetrics pins each alert's expression to
// docs/operating.md's table of metrics, which pkg/server's
// TestEveryMetricIsInOperatingsTable pins to what a replica registers: an
// alert must read only metrics a replica exports (a histogram's _count,
// _sum and _bucket series included), select them by labels they have,
// and group or match only on labels of its metrics or on the target
// labels Prometheus adds (instance, job). A row naming several metrics
// lends its labels to each. An expression naming a metric
// or label that does not exist never fires, and its fixtures would not
// tell, since they are written with the same names.
func TestAlertsWatchDocumentedMetrics(t *testing.T) {
	labelsOf := map[string]map[string]bool{} // documented metric: its row's labels
	for _, row := range operatingTable(t, "| metric | labels | what it says |") {
		cells := strings.SplitN(row, " | ", 3)
		if len(cells) < 3 {
			t.Fatalf("docs/operating.md: metrics row %q: want 3 cells", row)
		}
		labels := map[string]bool{}
		for _, l := range ticked(cells[1]) {
			labels[l] = true
		}
		for _, name := range ticked(cells[0]) {
			labelsOf[name] = labels
		}
	}
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("rulefmt.ParseFile(%s): %v", rulesFile, errs)
	}
	targetLabels := map[string]bool{"instance": true, "job": true}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("%s: %v", r.Alert, err)
			}
			reads := map[string]bool{} // labels of the metrics the expression reads
			var grouped []string
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				switch n := n.(type) {
				case *parser.VectorSelector:
					name := n.Name
					for _, suffix := range []string{"_count", "_sum", "_bucket"} {
						if base, ok := strings.CutSuffix(name, suffix); ok && labelsOf[base] != nil {
							name = base
						}
					}
					labels, ok := labelsOf[name]
					if !ok {
						t.Errorf("alert %s reads %s, which docs/operating.md's table of metrics does not list: no replica exports it", r.Alert, n.Name)
						return nil
					}
					for l := range labels {
						reads[l] = true
					}
					for _, m := range n.LabelMatchers {
						if m.Name != model.MetricNameLabel && !labels[m.Name] && !targetLabels[m.Name] {
							t.Errorf("alert %s selects %s by the label %s, which it does not have (docs/operating.md: %v)", r.Alert, n.Name, m.Name, slices.Sorted(maps.Keys(labels)))
						}
					}
				case *parser.AggregateExpr:
					grouped = append(grouped, n.Grouping...)
				case *parser.BinaryExpr:
					if n.VectorMatching != nil {
						grouped = append(grouped, n.VectorMatching.MatchingLabels...)
						grouped = append(grouped, n.VectorMatching.Include...)
					}
				}
				return nil
			})
			for _, l := range grouped {
				if !reads[l] && !targetLabels[l] {
					t.Errorf("alert %s groups or matches on the label %s, which none of the metrics it reads has", r.Alert, l)
				}
			}
		}
	}
}

// TestAlertsFilterOnEmittedLabelValues pins the label values each alert
// selects by to docs/operating.md's table of label values, which pkg/server's
// TestLabelValuesAreInOperatingsTable pins to the values the code gives
// each label (server.LabelValues in pkg/server/export_test.go, from the
// code's constants). A selector's `=` or `!=` value, and each alternative
// of a `=~` or `!~` that is a list of names (any other pattern must match
// some value), must be a value the code emits for that label of that
// metric: a filter on another selects nothing, the alert never fires,
// and its fixtures, written with the same value, would not tell. A
// filter on a label the table does not list fails too, Prometheus's
// target labels (instance, job) aside: its values are not known.
func TestAlertsFilterOnEmittedLabelValues(t *testing.T) {
	type key struct{ metric, label string }
	valuesOf := map[key][]string{}
	for _, row := range operatingTable(t, "| label | metrics | values |") {
		cells := strings.SplitN(row, " | ", 3)
		if len(cells) < 3 {
			t.Fatalf("docs/operating.md: label values row %q: want 3 cells", row)
		}
		label := ticked(cells[0])
		values, _, _ := strings.Cut(cells[2], ";")
		if len(label) != 1 {
			t.Fatalf("docs/operating.md: label values row %q: want one label", row)
		}
		for _, m := range ticked(cells[1]) {
			valuesOf[key{m, label[0]}] = ticked(values)
		}
	}
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("rulefmt.ParseFile(%s): %v", rulesFile, errs)
	}
	targetLabels := map[string]bool{"instance": true, "job": true}
	checked := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("%s: %v", r.Alert, err)
			}
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				vs, ok := n.(*parser.VectorSelector)
				if !ok {
					return nil
				}
				metric := vs.Name
				for _, suffix := range []string{"_count", "_sum", "_bucket"} {
					metric = strings.TrimSuffix(metric, suffix)
				}
				for _, m := range vs.LabelMatchers {
					if m.Name == model.MetricNameLabel || targetLabels[m.Name] {
						continue
					}
					emitted, ok := valuesOf[key{metric, m.Name}]
					if !ok {
						t.Errorf("alert %s filters %s on %s, a label whose values docs/operating.md's table of label values does not list for it: add them there (and to server.LabelValues)", r.Alert, vs.Name, m)
						continue
					}
					checked++
					for _, v := range filtered(m) {
						if !slices.Contains(emitted, v) {
							t.Errorf("alert %s filters %s on %s, but the code never gives %s the value %q there (docs/operating.md: %v): the filter selects nothing", r.Alert, vs.Name, m, m.Name, v, emitted)
						}
					}
					if names := filtered(m); names == nil && !slices.ContainsFunc(emitted, m.Matches) {
						t.Errorf("alert %s filters %s on %s, which matches none of the values the code gives %s (docs/operating.md: %v)", r.Alert, vs.Name, m, m.Name, emitted)
					}
				}
				return nil
			})
		}
	}
	if checked == 0 {
		t.Error("no alert filters on a label value, want the rules' filters checked: the table or the parser changed")
	}
}

// filtered is the label values m names: its value for = and !=, each
// alternative of a =~ or !~ that is a list of plain names; nil for any
// other pattern, or for an empty value (the label absent).
func filtered(m *labels.Matcher) []string {
	if m.Value == "" {
		return nil
	}
	switch m.Type {
	case labels.MatchEqual, labels.MatchNotEqual:
		return []string{m.Value}
	}
	alts := strings.Split(m.Value, "|")
	for _, a := range alts {
		if !plainName.MatchString(a) {
			return nil
		}
	}
	return alts
}

// plainName is a label value with no regular expression syntax.
var plainName = regexp.MustCompile(`^[A-Za-z0-9_\-]+$`)

// operatingTable is the rows of docs/operating.md's table headed header,
// up to the blank line after it. (The main module's doctable reads the
// same tables; this module does not import the main one.)
func operatingTable(t *testing.T, header string) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operating.md"))
	if err != nil {
		t.Fatal(err)
	}
	rule := "|" + strings.Repeat(" --- |", strings.Count(header, "|")-1)
	_, table, ok := strings.Cut(string(doc), header+"\n"+rule+"\n")
	if !ok {
		t.Fatalf("docs/operating.md: no table headed %s", header)
	}
	table, _, _ = strings.Cut(table, "\n\n")
	return slices.Collect(strings.Lines(table))
}

// ticked is every `code span` of a table cell, in order.
func ticked(cell string) []string {
	var out []string
	for i, span := range strings.Split(cell, "`") {
		if i%2 == 1 {
			out = append(out, span)
		}
	}
	return out
}

// firing reports whether r fires at f.at on f's series: its expression
// returns a sample at every 15 s evaluation from f.at minus r's `for`
// through f.at, as Prometheus's rule evaluation would see it.
func firing(t *testing.T, engine *promql.Engine, r rulefmt.Rule, f fixture) bool {
	t.Helper()
	st := promqltest.LoadedStorage(t, f.series)
	defer st.Close()
	hold := time.Duration(r.For)
	for at := f.at - hold; at <= f.at; at += 15 * time.Second {
		q, err := engine.NewInstantQuery(context.Background(), st, nil, r.Expr, time.Unix(0, 0).Add(at))
		if err != nil {
			t.Fatalf("alert %s: %v: want an expression the engine accepts", r.Alert, err)
		}
		res := q.Exec(context.Background())
		q.Close()
		v, err := res.Vector()
		if err != nil {
			t.Fatalf("alert %s at %v: %v: want an instant vector", r.Alert, at, err)
		}
		if len(v) == 0 {
			return false
		}
	}
	return true
}
