package harness

import (
	"context"
	"fmt"
	"time"

	"iterion.dev/iterion/internal/clock"
)

// gateContext is the status context the seeded runs gate on (the default).
const gateContext = "iterion/review"

// seedRepo is the repository every seeded pull request lives in.
const seedRepo = "acme/app"

// boardRepo is the cost scenario's board repository, and boardIssues how
// many issues are seeded in it. The board lists the issues updated since
// its watermark and stores each one's card every pass, a Mongo write: a
// repository of its own with few issues keeps that load from slowing the
// sweeper it is measured beside.
const (
	boardRepo   = "acme/board"
	boardIssues = 3
)

// headSHA is the head of seeded pull request n: 40 hex digits, unique per n.
func headSHA(n int) string {
	return fmt.Sprintf("%040x", uint64(n)*0x9e3779b97f4a7c15)
}

// seedPopulation opens runs pull requests on c's simulator and records a
// success verdict for each through POST /api/runs on a seeding replica,
// which offers it at once: every forge status then agrees with its
// verdict. It also opens boardIssues issues in boardRepo, for the cost
// scenario's board sync, and returns the seeded runs with the seeder
// stopped.
func seedPopulation(ctx context.Context, c *cluster, runs int, logf func(string, ...any)) ([]runRequest, error) {
	for n := 1; n <= boardIssues; n++ {
		if err := c.sim.seedIssue(ctx, boardRepo, n, fmt.Sprintf("harness issue %d", n)); err != nil {
			return nil, err
		}
	}
	rs, err := c.startReplicas(ctx, 1, replicaSpec{})
	if err != nil {
		return nil, err
	}
	seeder := rs[0]
	var pop []runRequest
	for n := 1; n <= runs; n++ {
		r := runRequest{Repo: seedRepo, Pull: n, HeadSHA: headSHA(n), Verdict: "success"}
		if err := c.sim.seedPull(ctx, r.Repo, r.Pull, r.HeadSHA); err != nil {
			return pop, err
		}
		if err := seeder.api.postRun(ctx, r); err != nil {
			return pop, err
		}
		pop = append(pop, r)
	}
	logf("seeded %d gating runs through %s and %d board issues", runs, seeder.name, boardIssues)
	c.stopAll()
	return pop, nil
}

// awaitAgreement polls the statuses of rs on s until each agrees with its
// verdict, giving up `within` after from, and returns how many agree and
// when, from `from` (0 when they agreed before it). It paces its reads to
// a third of the 900 points a minute GitHub allows one endpoint (the
// simulator's minute is `minute`), so that polling draws no secondary-limit
// refusal of its own.
func awaitAgreement(ctx context.Context, s sim, rs []runRequest, from time.Time, within, minute time.Duration) (int, time.Duration, error) {
	deadline := from.Add(within)
	gap := max(50*time.Millisecond, time.Duration(len(rs))*minute/300)
	for {
		repaired := 0
		for _, r := range rs {
			st, err := s.statusOf(ctx, r.Repo, r.HeadSHA, gateContext)
			if err != nil {
				return repaired, 0, err
			}
			if st == r.Verdict {
				repaired++
			}
		}
		now := time.Now()
		if repaired == len(rs) {
			return repaired, max(0, now.Sub(from)), nil
		}
		if now.After(deadline) {
			return repaired, now.Sub(from), nil
		}
		clock.Sleep(ctx, gap)
	}
}
