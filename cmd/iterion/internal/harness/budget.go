package harness

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
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
	// RanOut reports whether a budget, REST or GraphQL, was spent within
	// the hour, and Minute at which minute of it (0–60).
	RanOut bool
	Minute float64
	// REST is the REST requests the hour charged and Points the GraphQL
	// points; Refused the REST requests refused with 403 once the core
	// budget was spent. (A query the graphql budget cannot pay for is
	// answered 200 with RATE_LIMITED, which the simulator's counts do not
	// tell from a charged 200: spent sees it as the window's remaining
	// points.)
	REST, Points, Refused int64
}

// budget runs the compressed hour without and then with the lease, on
// BudgetReplicas replicas sharing one token, with the ETag cache off as in
// the ADR's incident (a 304 would cost no budget). The batched sweep reads
// with one GraphQL query a pass and writes REST only for drifted runs, so
// the budget it spends is the GraphQL point budget: the scenario sizes the
// budget from the points the cost scenario measured.
func (h *run) budget(ctx context.Context) error {
	// The demand of n replicas without the lease, in GraphQL points per
	// interval: as the cost scenario measured it at n, else n times its
	// one-replica figure, else n times one point a pass.
	n := h.o.BudgetReplicas
	demand := float64(n)
	for _, c := range h.rep.Cost {
		if c.Replicas == 1 && !c.Lease && c.GraphQLPerInterval > 0 {
			demand = float64(n) * c.GraphQLPerInterval
		}
	}
	for _, c := range h.rep.Cost {
		if c.Replicas == n && !c.Lease && c.GraphQLPerInterval > 0 {
			demand = c.GraphQLPerInterval
		}
	}
	hour := h.o.Hour
	passes := float64(hour) / float64(h.o.Interval) // intervals in the hour
	limit := int(math.Round(adrBudgetShare * demand * passes))
	for i, lease := range []bool{false, true} {
		tok := fmt.Sprintf("%s-%d", budgetTokenBase, i+1)
		if err := h.c.sim.setBudget(ctx, tok, limit); err != nil {
			return err
		}
		row := BudgetRow{Replicas: n, Lease: lease, Budget: limit, Hour: hour}
		t0 := time.Now()
		if _, err := h.c.startReplicas(ctx, n, replicaSpec{noLease: !lease, token: tok, extra: []string{noETagFlag}}); err != nil {
			return err
		}
		refused := func(r simRequests) bool {
			return r.Token == tok && r.Status == http.StatusForbidden
		}
		at, err := pollUntil(ctx, h.c.sim, 20*time.Millisecond, hour, func(st simStats) bool {
			return st.spent(tok) || st.byToken(refused)[tok] > 0
		})
		switch {
		case err == nil:
			row.RanOut = true
			row.Minute = 60 * at.Sub(t0).Seconds() / hour.Seconds()
		case ctx.Err() != nil:
			return ctx.Err()
		}
		st, err := h.c.sim.stats(ctx)
		if err != nil {
			return err
		}
		row.Refused = st.byToken(refused)[tok]
		row.Points = st.pointsByToken(isGraphQL)[tok]
		row.REST = st.pointsByToken(func(r simRequests) bool { return !isGraphQL(r) })[tok]
		h.c.stopAll()
		h.rep.Budget = append(h.rep.Budget, row)
		if row.RanOut {
			h.logf("N=%d lease=%v: budget %d spent at minute %.0f of the hour (%d GraphQL points, %d REST requests charged)", n, lease, limit, row.Minute, row.Points, row.REST)
		} else {
			h.logf("N=%d lease=%v: budget %d never spent (%d GraphQL points, %d REST requests charged in the hour)", n, lease, limit, row.Points, row.REST)
		}
	}
	return nil
}

func budgetMarkdown(rows []BudgetRow) string {
	var b strings.Builder
	r0 := rows[0]
	fmt.Fprintf(&b, "**Budget.** The compressed hour lasts %v. All replicas share one forge token, as the ADR's "+
		"share one App installation, with the ETag cache off as in the incident. The batched sweep reads with one GraphQL "+
		"query a pass and writes REST only for drifted runs, so the budget it spends is the GraphQL point budget. "+
		"The simulator's budget is %d an hour, for REST requests and for GraphQL points each: the same share of %d replicas' "+
		"GraphQL demand without the lease (as the cost scenario measured it) as the ADR's 12k of its 11.7k–19.4k at ten "+
		"replicas (%.0f%%).\n\n", r0.Hour, r0.Budget, r0.Replicas, 100*adrBudgetShare)
	b.WriteString("| replicas | lease | budget/hour | spent at minute | GraphQL points | REST charged | REST refused (403) |\n|---:|:---|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		when := "never"
		if r.RanOut {
			when = fmt.Sprintf("%.0f", r.Minute)
		}
		fmt.Fprintf(&b, "| %d | %s | %d | %s | %d | %d | %d |\n", r.Replicas, yesNo(r.Lease), r.Budget, when, r.Points, r.REST, r.Refused)
	}
	b.WriteString("\nGoal: with the lease, never.\n\n")
	return b.String()
}
