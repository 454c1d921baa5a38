package server

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
	ShallowWindow     = shallowWindow
	DeepWindow        = deepWindow
	DeepEase          = deepEase
	DeepSpacing       = DeepEvery - deepSlack
	DeepShare         = deepShare
)

var (
	DeepSpacingAfter = deepSpacing
	NewReconciler    = newReconciler
	NewSweeper       = newSweeper
)

// The JSON answers of GET /api/runs, which the tests decode.
type (
	RunView  = runView
	RunsPage = runsList
)

// PerRunOfferer is the SweepREST sweep's offerer over o.
func PerRunOfferer(o Offerer) Offerer { return perRunOfferer{o} }
