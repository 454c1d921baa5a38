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
// installation, whose hourly budget is Budget.
type BudgetRow struct {
	Replicas int
	Lease    bool
	// Budget is the simulator's budget for the compressed hour.
	Budget int
	// Hour is the compressed hour's real length.
	Hour time.Duration
	// RanOut reports whether the budget was spent within the hour, and
	// Minute at which minute of it (0–60).
	RanOut bool
	Minute float64
	// Spent is what the hour charged (answers other than 304 and refusals),
	// and Refused the requests refused with 403 once it was spent.
	Spent, Refused int64
}

// budget runs the compressed hour without and then with the lease, on
// BudgetReplicas replicas sharing one token, with the ETag cache off as in
// the ADR's incident (a 304 would cost no budget).
func (h *run) budget(ctx context.Context) error {
	// The demand of n replicas without the lease, per interval: as the cost
	// scenario measured it on this machine when it ran at n, else n times
	// its one-replica figure, else n times the reconciler's two reads per run.
	n := h.o.BudgetReplicas
	demand := float64(n * 2 * h.o.Runs)
	for _, c := range h.rep.Cost {
		if c.Replicas == 1 && !c.Lease && c.PerInterval > 0 {
			demand = float64(n) * c.PerInterval
		}
	}
	for _, c := range h.rep.Cost {
		if c.Replicas == n && !c.Lease && c.PerInterval > 0 {
			demand = c.PerInterval
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
		refused := func(r simRequests) bool { return r.Token == tok && r.Status == http.StatusForbidden }
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
		row.Spent = st.byToken(func(r simRequests) bool {
			return r.Token == tok && r.Status != http.StatusNotModified && r.Status != http.StatusForbidden
		})[tok]
		h.c.stopAll()
		h.rep.Budget = append(h.rep.Budget, row)
		if row.RanOut {
			h.logf("N=%d lease=%v: budget %d spent at minute %.0f of the hour", n, lease, limit, row.Minute)
		} else {
			h.logf("N=%d lease=%v: budget %d never spent (%d used in the hour)", n, lease, limit, row.Spent)
		}
	}
	return nil
}

func budgetMarkdown(rows []BudgetRow) string {
	var b strings.Builder
	r0 := rows[0]
	fmt.Fprintf(&b, "**Budget.** The compressed hour lasts %v. All replicas share one forge token, as the ADR's "+
		"share one App installation, with the ETag cache off as in the incident. The simulator's budget is %d an hour: "+
		"the same share of %d replicas' demand without the lease (as the cost scenario measured it) as the ADR's 12k "+
		"of its 11.7k–19.4k at ten replicas (%.0f%%).\n\n", r0.Hour, r0.Budget, r0.Replicas, 100*adrBudgetShare)
	b.WriteString("| replicas | lease | budget/hour | spent at minute | charged | refused (403) |\n|---:|:---|---:|---:|---:|---:|\n")
	for _, r := range rows {
		when := "never"
		if r.RanOut {
			when = fmt.Sprintf("%.0f", r.Minute)
		}
		fmt.Fprintf(&b, "| %d | %s | %d | %s | %d | %d |\n", r.Replicas, yesNo(r.Lease), r.Budget, when, r.Spent, r.Refused)
	}
	b.WriteString("\nGoal: with the lease, never.\n\n")
	return b.String()
}
