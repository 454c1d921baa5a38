package harness

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"time"
)

// The ADR's figures (#1995): a budget of about 12k requests an hour against
// a modelled sweep demand of 11.7k–19.4k an hour at ten replicas.
const (
	adrBudget       = 12_000
	adrDemandAtTen  = (11_700 + 19_400) / 2
	adrBudgetShare  = float64(adrBudget) / adrDemandAtTen
	budgetTokenBase = "installation"
)

// noETagFlag is the serve flag that turns the forge client's ETag cache off,
// for the replay of the ADR's incident.
const noETagFlag = "--forge-etag-cache=-1"

// BudgetRow is the budget scenario for one configuration: every replica
// shares one forge token, as the ADR's replicas share one GitHub App
// installation, whose hourly budgets (REST requests and GraphQL points,
// each) are Budget.
type BudgetRow struct {
	Replicas int
	Lease    bool
	// Budget is the simulator's budget for the compressed hour, the same
	// for REST requests and for GraphQL points.
	Budget int
	// Hour is the compressed hour's real length.
	Hour time.Duration
	// DemandFrom says where the GraphQL demand the budget was sized from
	// came from: the cost scenario's figure at Replicas, Replicas times
	// its one-replica figure, or Replicas times one point a pass when the
	// cost scenario did not run.
	DemandFrom string
	// RanOut reports whether a budget, REST or GraphQL, was seen spent
	// within the hour, counted from the replicas' start, and Minute
	// during which minute of it (0–59; see spentWithin).
	RanOut bool
	Minute int
	// REST is the REST requests the hour charged and Points the GraphQL
	// points; Refused the REST requests refused with 403 once the core
	// budget was spent. (A query the graphql budget cannot pay for is
	// answered 200 with RATE_LIMITED, which the simulator's counts do not
	// tell from a charged 200: spent sees it as the window's remaining
	// points.)
	REST, Points, Refused int64
}

// demandOf is the demand of s.replicas replicas without the lease, in
// GraphQL points per interval, and where it came from: as the cost
// scenario measured it at that count, else that count times its
// one-replica figure, else that count times one point a pass.
func (s budgetScenario) demandOf() (float64, string) {
	n := s.replicas
	if d, ok := s.demand[n]; ok {
		return d, fmt.Sprintf("as the cost scenario measured it at %d", n)
	}
	if d, ok := s.demand[1]; ok {
		return float64(n) * d, fmt.Sprintf("%d × the cost scenario's one-replica figure", n)
	}
	return float64(n), fmt.Sprintf("%d × one point a pass: the cost scenario did not run", n)
}

// budgetLimit is the budget of the compressed hour for a demand of
// demand points an interval without the lease: the ADR's share of it
// (adrBudgetShare, 12k of 11.7k–19.4k), over the hour's intervals.
func budgetLimit(demand float64, hour, interval time.Duration) int {
	passes := float64(hour) / float64(interval) // intervals in the hour
	return int(math.Round(adrBudgetShare * demand * passes))
}

// spentWithin is the minute of the hour (0–59) during which a budget seen
// spent elapsed after the hour began was spent, as a clock reads it (47.8
// minutes in is minute 47, as the ADR's "31–43 minutes after every hourly
// reset" counts), and whether that was within the hour. The hour's end is
// its budget's reset, so a spend seen then or later, as a poll may see it
// up to one poll after the end, is not within the hour: there is no
// minute 60.
func spentWithin(elapsed, hour time.Duration) (minute int, within bool) {
	if elapsed < 0 || elapsed >= hour {
		return 0, false
	}
	return int(60 * elapsed / hour), true
}

// budgetScenario runs the compressed hour without and then with the lease,
// on replicas sharing one token, with the ETag cache off as in the ADR's
// incident (a 304 would cost no budget). The batched sweep reads with one
// GraphQL query a pass and writes REST only for drifted runs, so the budget
// it spends is the GraphQL point budget: the scenario sizes the budget from
// the points the cost scenario measured.
type budgetScenario struct {
	replicas int
	hour     time.Duration // the compressed hour
	// demand is the GraphQL points per interval the sweep spent without
	// the lease, by replica count, as the cost scenario measured them;
	// empty when it did not run.
	demand map[int]float64
	logf   func(format string, args ...any)
}

// run spends the hour twice on c and returns a row for each, without the
// lease first; on an error, the rows measured before it.
func (s budgetScenario) run(ctx context.Context, c *cluster) ([]BudgetRow, error) {
	n := s.replicas
	demand, from := s.demandOf()
	hour := s.hour
	limit := budgetLimit(demand, hour, c.interval)
	var rows []BudgetRow
	for i, lease := range []bool{false, true} {
		tok := fmt.Sprintf("%s-%d", budgetTokenBase, i+1)
		if err := c.sim.setBudget(ctx, tok, limit); err != nil {
			return rows, err
		}
		row := BudgetRow{Replicas: n, Lease: lease, Budget: limit, Hour: hour, DemandFrom: from}
		t0 := time.Now()
		if _, err := c.startReplicas(ctx, n, replicaSpec{noLease: !lease, token: tok, extra: []string{noETagFlag}}); err != nil {
			return rows, err
		}
		refused := func(r simRequests) bool {
			return r.Token == tok && r.Status == http.StatusForbidden
		}
		// The hour began at t0, before the replicas started, so the poll
		// has what is left of it.
		at, err := pollUntil(ctx, c.sim, 20*time.Millisecond, hour-time.Since(t0), func(st simStats) bool {
			return st.spent(tok) || st.byToken(refused)[tok] > 0
		})
		switch {
		case err == nil:
			row.Minute, row.RanOut = spentWithin(at.Sub(t0), hour)
		case ctx.Err() != nil:
			return rows, ctx.Err()
		}
		st, err := c.sim.stats(ctx)
		if err != nil {
			return rows, err
		}
		row.Refused = st.byToken(refused)[tok]
		row.Points = st.pointsByToken(isGraphQL)[tok]
		row.REST = st.pointsByToken(func(r simRequests) bool { return !isGraphQL(r) })[tok]
		c.stopAll()
		rows = append(rows, row)
		if row.RanOut {
			s.logf("N=%d lease=%v: budget %d spent at minute %d of the hour (%d GraphQL points, %d REST requests charged)", n, lease, limit, row.Minute, row.Points, row.REST)
		} else {
			s.logf("N=%d lease=%v: budget %d never spent (%d GraphQL points, %d REST requests charged in the hour)", n, lease, limit, row.Points, row.REST)
		}
	}
	return rows, nil
}
