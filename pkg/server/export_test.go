package server

import (
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/lease"
)

// The merge gate's inner parts, exported to this package's tests only,
// which drive them directly.
type (
	Reconciler    = reconciler
	Offerer       = offerer
	Outcome       = outcome
	Sweeper       = sweeper
	SweeperConfig = sweeperConfig
)

const (
	OutcomeGone       = outcomeGone
	OutcomeSettled    = outcomeSettled
	OutcomeCurrent    = outcomeCurrent
	OutcomePublished  = outcomePublished
	OutcomeFailed     = outcomeFailed
	OutcomeUnreadable = outcomeUnreadable
	OutcomeSuperseded = outcomeSuperseded
	OutcomeReported   = outcomeReported
	ShallowWindow     = shallowWindow
	DeepWindow        = deepWindow
	DeepEase          = deepEase
	DeepSpacing       = DeepEvery - deepSlack
	DeepShare         = deepShare
	MinSweepBatch     = minSweepBatch
	ReadyFor          = readyFor
)

var (
	TellInstallationChange = (*Server).installationsChanged
	ReplayKey              = replayKey
	ClaimHold              = claimHoldOf
	DeepSpacingAfter       = deepSpacing
	NewReconciler          = newReconciler
	NewSweeper             = newSweeper
)

// The JSON answers of GET /api/runs, which the tests decode.
type (
	RunView  = runView
	RunsPage = runsList
)

// PerRunOfferer is the SweepREST sweep's offerer over o.
func PerRunOfferer(o Offerer) Offerer { return perRunOfferer{o} }

// Widened is widened over spans written as [from, to) pairs of a page's
// indexes.
func Widened(sp [2]int, pending [][2]int, next, end int) (wide [2]int, left [][2]int, after int) {
	spans := make([]span, len(pending))
	for i, p := range pending {
		spans[i] = span{p[0], p[1]}
	}
	got, rest, after := widened(span{sp[0], sp[1]}, spans, next, end)
	for _, r := range rest {
		left = append(left, [2]int{r.from, r.to})
	}
	return [2]int{got.from, got.to}, left, after
}

// LabelValue is a label of the metrics named, and every value the code
// gives it there.
type LabelValue struct {
	Label   string
	Metrics []string
	Values  []string
}

// LabelValues are the values the code gives the labels of its metrics
// that take a known set of values, each from the constants or the list
// the code names them by. TestLabelValuesAreInOperatingsTable pins
// docs/operating.md's table of label values to it both ways, and
// TestEveryMetricIsInOperatingsTable checks that a replica's series carry
// no other value; deploy/prometheus's rules test holds the alerts'
// filters against that table. The resource values are the two budgets
// the forge client draws on, as GitHub names them in x-ratelimit-resource
// (core, and graphql for GraphQL queries): it calls no endpoint of
// another of GitHub's categories
// (https://docs.github.com/en/rest/rate-limit/rate-limit).
var LabelValues = []LabelValue{
	{"lease", []string{"iterion_net_last_success_timestamp_seconds", "iterion_net_pass_duration_seconds", "iterion_net_interval_seconds",
		"iterion_net_forge_error_ratio", "iterion_net_pass_timeouts_total", "iterion_net_stalls_total",
		"lease_held", "lease_terms_started_total", "lease_step_downs_total", "lease_step_down_margin_seconds", "lease_step_downs_late_total"}, leaseNames(Leases())},
	{"group", []string{"lease_group_shards_held", "lease_group_shards_unheld", "lease_group_shards_overdue", "lease_group_members",
		"lease_group_other_members", "lease_group_handovers_total", "lease_group_step_down_margin_seconds", "lease_group_step_downs_late_total"}, leaseNames([]Lease{MergeGateSweeper(), ForgeBoardSync(), MeasureGroup()})},
	{"reason", []string{"lease_step_downs_total", "lease_step_down_margin_seconds"}, []string{lease.ReasonRefused, lease.ReasonDeadline, lease.ReasonCanceled,
		lease.ReasonWorkReturned, lease.ReasonWorkPanicked, lease.ReasonUnanswered}},
	{"reason", []string{"lease_group_handovers_total", "lease_group_step_down_margin_seconds"}, []string{lease.ReasonRefused, lease.ReasonDeadline, lease.ReasonCanceled,
		lease.ReasonWorkReturned, lease.ReasonWorkPanicked, lease.ReasonUnanswered, lease.ReasonRebalanced}},
	{"op", []string{"lease_store_call_duration_seconds", "lease_store_call_errors_total", "measure_group_store_calls_total"},
		[]string{lease.OpAcquire, lease.OpRenew, lease.OpRelease, lease.OpList}},
	{"lane", []string{"gate_offers_total", "forge_http_requests_total", "forge_graphql_points_total", "forge_etag_hits_total", "forge_rate_limit_reserve"},
		[]string{forge.LaneMergeGateSweeper, forge.LaneWebhook, forge.LaneAPI, forge.LaneAuth, forge.LaneUnlaned, forge.LaneBoardSync, forge.LaneApp}},
	{"outcome", []string{"gate_offers_total"}, []string{string(outcomeGone), string(outcomeSettled), string(outcomeCurrent),
		string(outcomePublished), string(outcomeFailed), string(outcomeUnreadable), string(outcomeSuperseded), string(outcomeReported)}},
	{"outcome", []string{"webhook_deliveries_total"}, deliveryOutcomes},
	{"call", []string{"run_store_calls_failed_total"}, runStoreCalls},
	{"window", []string{"merge_gate_sweep_passes_behind_total"}, behindWindows},
	{"found_by", []string{"merge_gate_runs_uncovered"}, uncoveredFinders},
	{"resource", []string{"forge_rate_limit_remaining", "forge_rate_limit_limit", "forge_rate_limit_reset_timestamp_seconds"}, []string{"core", "graphql"}},
}

// leaseNames is the names of ls.
func leaseNames(ls []Lease) []string {
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = l.Name
	}
	return names
}
