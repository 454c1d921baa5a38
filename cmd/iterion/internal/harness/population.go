package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
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

// seedRuns seeds rs through the wire contracts, conc at once: each
// pull request and its gate status on the simulator (control endpoints,
// which no budget or secondary limit charges), then the verdict through
// POST /api/runs on to, which resolves the repository's installation and
// offers the run at once. A 503 (the installation not resolved yet: the
// App's requests are held back by a secondary limit) or no answer in time
// is retried after its Retry-After, or pause, as a client of the
// idempotent API would.
func seedRuns(ctx context.Context, s sim, to api, rs []runRequest, conc int, pause time.Duration) error {
	failed, first := eachAtOnce(rs, conc, func(r runRequest) error {
		// The simulator's steps are idempotent, so a step a loaded machine
		// timed out is sent again, up to 3 times; postRunRetrying retries
		// the API's put itself.
		var err error
		for attempt := 0; attempt < 3 && (attempt == 0 || err != nil); attempt++ {
			err = s.seedPull(ctx, r.Repo, r.Pull, r.HeadSHA)
			if err == nil {
				err = s.seedStatus(ctx, r.Repo, r.HeadSHA, gateContext, r.Verdict)
			}
		}
		if err != nil {
			return err
		}
		return postRunRetrying(ctx, to, r, pause)
	})
	if failed > 0 {
		return fmt.Errorf("seeding %d runs: %d failed, the first: %w", len(rs), failed, first)
	}
	return nil
}

// eachAtOnce calls seed for every run of rs, conc at once, and returns how
// many calls failed and the first failure to return.
func eachAtOnce(rs []runRequest, conc int, seed func(runRequest) error) (failed int, first error) {
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	next := make(chan runRequest)
	for range conc {
		wg.Go(func() {
			for r := range next {
				if err := seed(r); err != nil {
					mu.Lock()
					if failed++; first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for _, r := range rs {
		next <- r
	}
	close(next)
	wg.Wait()
	return failed, first
}

// seedAttempts bounds postRunRetrying's attempts.
const seedAttempts = 120

// postRunRetrying posts r to a, retrying a 503 or no answer after the
// Retry-After (at least pause) up to seedAttempts times.
func postRunRetrying(ctx context.Context, a api, r runRequest, pause time.Duration) error {
	body, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("%w: run: %w", ErrRequest, err)
	}
	for range seedAttempts {
		status, retryAfter, answer, _, err := postStatus(ctx, a.hc, a.url+"/api/runs", a.token, body)
		switch {
		case err != nil && ctx.Err() != nil:
			return err
		case err != nil:
			// No answer in the client's time (the run's offer waits on
			// GitHub's): the put is idempotent, so send it again.
		case status == http.StatusCreated || status == http.StatusOK:
			return nil
		case status != http.StatusServiceUnavailable:
			return fmt.Errorf("%w: POST %s/api/runs %s#%d: %d: %s", ErrRequest, a.url, r.Repo, r.Pull, status, strings.TrimSpace(string(answer)))
		}
		if !clock.Sleep(ctx, max(retryAfter, pause)) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("%w: POST %s/api/runs %s#%d: 503 or no answer %d times", ErrRequest, a.url, r.Repo, r.Pull, seedAttempts)
}
