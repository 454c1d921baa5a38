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
	ReadyFor          = readyFor
)

var (
	ReplayKey        = replayKey
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
