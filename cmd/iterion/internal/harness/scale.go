package harness

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"strings"
	"time"

	"iterion.dev/iterion/internal/clock"
	"iterion.dev/iterion/pkg/server"
)

// The scale scenario: the per-run REST sweep and the batched
// sweep side by side, on growing populations of open runs, at each replica
// count, with App auth (every configuration has an installation of its own,
// whose tokens the simulator mints and rotates every compressed hour) and
// the ETag cache on. GitHub's secondary limits are on, per compressed
// minute; the primary budgets are not enforced (simBudget), so that what a
// configuration would spend of a 5,000/h installation budget is measured
// rather than cut short, and reported as a share of it.
const (
	// scaleAppID is the GitHub App the scale replicas authenticate as.
	scaleAppID = 1
	// installationBudget is the budget the shares are reported against:
	// an App installation's 5,000 an hour, REST and GraphQL each.
	installationBudget = 5000
	// mintRoute is the simulator's route of installation-token requests,
	// charged to lane auth, not the sweeper's.
	mintRoute = "POST /app/installations/{id}/access_tokens"
	// seedConcurrency is how many runs are seeded at once.
	seedConcurrency = 16
)

// ScaleRow is one configuration of the scale scenario. Counts are the
// configuration's installation's, over its measuring window.
type ScaleRow struct {
	// Mode is the serve --sweep-mode: "rest" or "batch".
	Mode     server.SweepMode
	Runs     int
	Replicas int
	// Interval is the compressed minute; an hour is 60 of them.
	Interval time.Duration
	// Window is how long the counts below were taken over, and Passes how
	// many passes it held: the runs the sweeper offered (its
	// gate_offers_total) over Runs, so a pass a rate limit cut short
	// counts for the share it offered.
	Window time.Duration
	Passes float64
	// Requests is every request the installation's tokens sent; REST the
	// REST requests charged to its budget (a 304 or a refusal is free);
	// Points the GraphQL points charged; Refused the answers 403 or 429
	// (secondary limits: the primary budget is not enforced here); Mints
	// the installation-token requests (lane auth, the App's JWT).
	Requests, REST, Points, Refused, Mints int64
	// FirstREST is the REST requests charged from the replicas' start to
	// the window: the term's first pass, on freshly minted tokens, whose
	// reads no ETag of theirs could answer 304. A rotation costs a pass
	// like it once a compressed hour.
	FirstREST int64
	// PassTime is the summed duration of the sweeper passes that ended in
	// the window, PassesTimed how many (the sweepers'
	// iterion_net_pass_duration_seconds): store reads, forge reads and
	// writes, from the pass's tick to its end.
	PassTime    time.Duration
	PassesTimed uint64
	// Sweepers is how many replicas' transports counted sweeper requests
	// in the window.
	Sweepers int
	// Drifted runs had their gate status set to failure behind the
	// replicas' backs as the window opened; Repaired of them agreed with
	// their verdict again RepairAfter the window opened.
	Drifted, Repaired int
	RepairAfter       time.Duration
	// Discarded is why each earlier measurement of this configuration was
	// discarded (errHandover, with the replicas' step-downs), in order.
	Discarded []string
}

// PerPass is v per pass.
func (r ScaleRow) PerPass(v int64) float64 {
	if r.Passes == 0 {
		return 0
	}
	return float64(v) / r.Passes
}

// MeetsGoal reports whether the configuration's requests a pass are
// within ScaleGoal; false when the window held no pass to divide by.
func (r ScaleRow) MeetsGoal() bool {
	return r.Passes > 0 && r.PerPass(r.Requests) <= float64(ScaleGoal(r.Runs))
}

// PerHour is v per compressed hour (60 intervals), at the window's rate.
func (r ScaleRow) PerHour(v int64) float64 {
	return float64(v) * float64(60*r.Interval) / float64(r.Window)
}

// BudgetShare is v per compressed hour as a share of an installation's
// 5,000 an hour.
func (r ScaleRow) BudgetShare(v int64) float64 { return r.PerHour(v) / installationBudget }

// RESTShare is the REST requests charged per compressed hour, with the
// hour's token rotation (one pass charged as the first was, in place of
// one at the window's rate), as a share of an installation's 5,000 an hour.
func (r ScaleRow) RESTShare() float64 {
	perPass := r.PerPass(r.REST)
	return (r.PerHour(r.REST) + max(0, float64(r.FirstREST)-perPass)) / installationBudget
}

// Duty is a pass's duration over the interval: the mean of the passes that
// ended in the window or, when none did (a pass longer than the window),
// the window over the share of a pass it offered.
func (r ScaleRow) Duty() float64 {
	switch {
	case r.PassesTimed > 0:
		return r.PassTime.Seconds() / float64(r.PassesTimed) / r.Interval.Seconds()
	case r.Passes > 0:
		return r.Window.Seconds() / r.Passes / r.Interval.Seconds()
	}
	return 0
}

// scaleScenario measures the per-run REST sweep and the batched sweep at
// each population of open runs and replica count, on a cluster of its own
// (startCluster) whose interval is its compressed minute.
type scaleScenario struct {
	runs     []int // the open-run populations, increasing
	replicas []int // the replica counts
	passes   int   // intervals each configuration is measured over
	logf     func(format string, args ...any)
}

// startCluster starts the scale scenario's cluster in dir, with sweep
// interval `interval`: the simulator's installation tokens live a
// compressed hour, 60 intervals.
func (s scaleScenario) startCluster(ctx context.Context, bins binaries, dir string, interval time.Duration) (*cluster, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProcess, err)
	}
	hour := 60 * interval
	// ghinstallation refreshes a token a minute before it expires: a TTL
	// of the hour plus that minute rotates the token every compressed hour.
	return startCluster(ctx, bins, dir, interval, simBudget, "--token-ttl", (hour + time.Minute).String())
}

// run seeds each population on c in turn and measures every mode and
// replica count on it, returning a row for each configuration; on an
// error, the rows measured before it.
func (s scaleScenario) run(ctx context.Context, c *cluster) ([]ScaleRow, error) {
	var rows []ScaleRow
	key, err := writeAppKey(c.dir)
	if err != nil {
		return rows, err
	}
	var pop []runRequest
	installation := 0
	for _, size := range s.runs {
		t0 := time.Now()
		more, err := seedScale(ctx, c, len(pop)+1, size)
		if err != nil {
			return rows, err
		}
		pop = append(pop, more...)
		s.logf("scale: seeded %d open runs in %v", len(pop), time.Since(t0).Round(time.Millisecond))
		for _, mode := range []server.SweepMode{server.SweepREST, server.SweepBatch} {
			for _, n := range s.replicas {
				what := fmt.Sprintf("scale %-5s runs=%-5d N=%-2d", mode, len(pop), n)
				row, discarded, err := remeasured(s.logf, what, func() (ScaleRow, error) {
					installation++
					row, err := s.one(ctx, c, pop, mode, n, installation, key)
					if errors.Is(err, errHandover) {
						err = fmt.Errorf("%w; it measured %.1f requests a pass, %d replicas sweeping", err, row.PerPass(row.Requests), row.Sweepers)
					}
					return row, err
				})
				if err != nil {
					return rows, fmt.Errorf("%s sweep, %d runs, %d replicas: %w", mode, len(pop), n, err)
				}
				row.Discarded = discarded
				rows = append(rows, row)
				s.logf("scale %-5s runs=%-5d N=%-2d %7.1f req/pass  REST %7.1f  points %6.1f /pass  refused %d  duty %.2f  REST %5.1f%%  GraphQL %5.1f%% of 5,000/h  sweepers %d  repaired %d/%d in %v",
					mode, row.Runs, n, row.PerPass(row.Requests), row.PerPass(row.REST), row.PerPass(row.Points), row.Refused, row.Duty(),
					100*row.RESTShare(), 100*row.BudgetShare(row.Points), row.Sweepers, row.Repaired, row.Drifted, row.RepairAfter.Round(time.Millisecond))
			}
		}
	}
	return rows, nil
}

// seedScale seeds runs first..last through the wire contracts, several at
// once: the pull request and its gate status on the simulator (the status
// through the control endpoint, so that seeding spends no secondary
// limit), then the verdict through POST /api/runs on a seeding replica.
func seedScale(ctx context.Context, c *cluster, first, last int) ([]runRequest, error) {
	if first > last {
		return nil, nil
	}
	// The seeder never sweeps (its first pass would come an hour after its
	// term began): a sweep over thousands of runs would slow its own seeding.
	rs, err := c.startReplicas(ctx, 1, replicaSpec{extra: []string{"--sweep-interval", time.Hour.String()}})
	if err != nil {
		return nil, err
	}
	defer c.stopAll()
	seeder := rs[0]
	out := make([]runRequest, 0, last-first+1)
	for n := first; n <= last; n++ {
		out = append(out, runRequest{Repo: seedRepo, Pull: n, HeadSHA: headSHA(n), Verdict: "success"})
	}
	if err := seedRuns(ctx, c.sim, seeder.api, out, seedConcurrency, c.interval); err != nil {
		return nil, err
	}
	return out, nil
}

// one measures one configuration on fresh replicas with the lease, all
// authenticating as installation `installation` of the scale App.
func (s scaleScenario) one(ctx context.Context, c *cluster, pop []runRequest, mode server.SweepMode, n, installation int, key string) (ScaleRow, error) {
	iv := c.interval
	row := ScaleRow{Mode: mode, Runs: len(pop), Replicas: n, Interval: iv}
	prefix := fmt.Sprintf("ghs_sim_%d_", installation)
	mine := func(r simRequests) bool { return strings.HasPrefix(r.Token, prefix) }
	restOf := func(st simStats) int64 {
		return total(st.pointsByToken(func(r simRequests) bool { return mine(r) && !isGraphQL(r) }))
	}
	stStart, err := c.sim.stats(ctx)
	if err != nil {
		return row, err
	}
	rs, err := c.startReplicas(ctx, n, replicaSpec{
		app: []string{"--github-app-id", fmt.Sprint(scaleAppID), "--github-installation-id", fmt.Sprint(installation),
			"--github-private-key-file", key},
		extra: []string{"--sweep-mode", string(mode)},
	})
	if err != nil {
		return row, err
	}
	defer c.stopAll()
	if err := awaitFirstPass(ctx, rs, len(pop), iv); err != nil {
		return row, err
	}
	snap0, err := sweepersOf(ctx, rs)
	if err != nil {
		return row, err
	}
	turns0, err := turnsOf(ctx, rs, server.MergeGateSweeper().Name)
	if err != nil {
		return row, err
	}
	st0, err := c.sim.stats(ctx)
	if err != nil {
		return row, err
	}
	t0 := time.Now()
	row.FirstREST = restOf(st0) - restOf(stStart)
	drifted := pop[:min(5, max(1, len(pop)/100))]
	for _, r := range drifted {
		if err := c.sim.setStatus(ctx, r.Repo, r.HeadSHA, gateContext, "failure"); err != nil {
			return row, err
		}
	}
	repair := watchRepair(ctx, c.sim, drifted, t0, (server.DeepEvery+1)*iv, iv)
	defer repair.stop() // an early return waits for the poller too
	clock.Sleep(ctx, time.Duration(s.passes)*iv)
	snap1, err := sweepersOf(ctx, rs)
	if err != nil {
		return row, err
	}
	turns1, err := turnsOf(ctx, rs, server.MergeGateSweeper().Name)
	if err != nil {
		return row, err
	}
	row.PassTime = time.Duration((snap1.passSeconds - snap0.passSeconds) * float64(time.Second))
	row.PassesTimed = snap1.passes - snap0.passes
	st1, err := c.sim.stats(ctx)
	if err != nil {
		return row, err
	}
	row.Window = time.Since(t0)
	row.Passes = float64(snap1.offers-snap0.offers) / float64(len(pop))
	delta := func(count func(simStats) int64) int64 { return count(st1) - count(st0) }
	row.Requests = delta(func(st simStats) int64 { return total(st.byToken(mine)) })
	row.REST = delta(restOf)
	row.Points = delta(func(st simStats) int64 {
		return total(st.pointsByToken(func(r simRequests) bool { return mine(r) && isGraphQL(r) }))
	})
	row.Refused = delta(func(st simStats) int64 {
		return total(st.byToken(func(r simRequests) bool {
			return mine(r) && (r.Status == http.StatusForbidden || r.Status == http.StatusTooManyRequests)
		}))
	})
	row.Mints = delta(func(st simStats) int64 {
		return total(st.byToken(func(r simRequests) bool { return r.Route == mintRoute }))
	})
	for i := range rs {
		if snap1.requests[i] > snap0.requests[i] {
			row.Sweepers++
		}
	}
	if err := handoversBetween(rs, turns0, turns1); err != nil {
		return row, err
	}
	row.Drifted = len(drifted)
	row.Repaired, row.RepairAfter, err = repair.result()
	return row, err
}

// awaitFirstPass waits until the sweepers of rs have offered n runs: the
// term's first pass (deep) offers every run once. A per-run REST pass, or
// a pass on GitHub's clock, over thousands of runs takes several
// intervals; one deep pass's worth of them, and a minute for the replicas
// to start, bounds the wait.
func awaitFirstPass(ctx context.Context, rs []*replica, n int, iv time.Duration) error {
	firstPass := (server.DeepEvery+1)*iv + time.Minute
	deadline := time.Now().Add(firstPass)
	for {
		snap, err := sweepersOf(ctx, rs)
		if err != nil {
			return err
		}
		if snap.offers >= int64(n) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: the first pass offered %d of %d runs within %v", ErrMeasure, snap.offers, n, firstPass)
		}
		clock.Sleep(ctx, 50*time.Millisecond)
	}
}

// repairWatch polls drifted runs' statuses in the background until they
// agree with their verdicts (awaitAgreement).
type repairWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	n      int
	after  time.Duration
	err    error
}

// watchRepair starts polling drifted on s from t0, giving up within after
// it; minute is the simulator's.
func watchRepair(ctx context.Context, s sim, drifted []runRequest, t0 time.Time, within, minute time.Duration) *repairWatch {
	rctx, cancel := context.WithCancel(ctx)
	w := &repairWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.n, w.after, w.err = awaitAgreement(rctx, s, drifted, t0, within, minute)
	}()
	return w
}

// result waits for the poller and returns how many runs agree and when,
// from t0.
func (w *repairWatch) result() (int, time.Duration, error) {
	<-w.done
	return w.n, w.after, w.err
}

// stop cancels the poller and waits for it; safe after result.
func (w *repairWatch) stop() {
	w.cancel()
	<-w.done
}

// sweepers is the replicas' sweeper figures at one instant: offers and
// passes summed, sweeper requests by replica.
type sweepers struct {
	offers      int64
	passSeconds float64
	passes      uint64
	requests    []int64 // by replica
}

// sweepersOf scrapes each replica's /metrics once.
func sweepersOf(ctx context.Context, rs []*replica) (sweepers, error) {
	var out sweepers
	for _, r := range rs {
		f, err := r.api.sweeper(ctx)
		if err != nil {
			return sweepers{}, err
		}
		out.offers += f.offers
		out.passSeconds += f.passSeconds
		out.passes += f.passes
		out.requests = append(out.requests, f.requests)
	}
	return out, nil
}

// ScaleGoal is the batched sweep's goal for one pass at runs open runs: at most
// ceil(runs/50)+5 requests.
func ScaleGoal(runs int) int { return int(math.Ceil(float64(runs)/50)) + 5 }
