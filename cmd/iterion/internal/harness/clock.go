package harness

import (
	"context"
	"fmt"
	"os"
	"time"

	"iterion.dev/iterion/internal/clock"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/server"
)

// The clock scenario: the batched sweep against a simulator that answers
// as slowly as GitHub (its latency model on, as it ships: a 100-pull
// query's median 1.5 s, 2% of them past GitHub's 10 s timeout), with the
// sweeper's time budget on, at each population of open runs and replica
// count, with the lease and App auth (each configuration an installation
// of its own). The simulator's minute and the replicas' --forge-minute are
// the same compressed minute, so the modelled times, GitHub's per-minute
// limits and the sweeper's budget shrink together; the sweep interval is
// that minute or a whole number of them (sweepMinutes). The compression is
// chosen so that a modelled query dwarfs the machine's own time per
// query.
//
// Every figure of GitHub's side comes from the simulator: the points and
// refusals (by kind) it counted for the installation, the GraphQL time it
// charged in each of its minutes, and when it delivered each pull request
// to the installation (a read), from which the runs checked per interval
// and the longest time a run went unchecked follow. The passes come from
// the sweepers' own logs.
const (
	// clockSeed seeds the simulator's latency draws and injected faults.
	clockSeed = 1
	// clockAge is how old the runs aged out of the shallow window are.
	clockAge = 5 * time.Hour
	// clockFaultShare is the share of GraphQL queries the faults
	// configuration answers 502, beside the model's 2% of timeouts.
	clockFaultShare = 0.01
	// clockMoved is how many pull requests the faults configuration pushes
	// to a new head the runs never saw.
	clockMoved = 10
	// clockDrifted is how many shallow-window runs have their gate status
	// set to failure as a configuration's window opens.
	clockDrifted = 5
)

// ClockRow is one configuration of the clock scenario: the simulator's
// figures for its installation.
type ClockRow struct {
	Runs, Shallow, Replicas int
	// Concurrency is the replicas' --sweep-concurrency.
	Concurrency int
	// Faults: 1% of GraphQL queries were answered 502 over the window,
	// and Moved pull requests got a new head as it opened.
	Faults bool
	// Interval is the sweep interval (the compressed minute, or a whole
	// number of them); Window how long the figures below were taken over
	// (whole intervals from when the first pass had offered every run).
	Interval, Window time.Duration
	// Points is the GraphQL points charged in each interval of the window.
	Points []int64
	// ShallowChecked and DeepChecked are, per interval of the window, how
	// many shallow-window and deep-window runs had their pull request
	// delivered to the installation.
	ShallowChecked, DeepChecked []int
	// GraphQLMinutes is the GraphQL response time the simulator charged
	// the installation in each of its minutes that began in the window,
	// in GitHub's seconds (forgesim.CPUMinute).
	GraphQLMinutes []float64
	// Refusals counts the installation's refused requests by kind
	// (forgesim's Refused*), from its replicas' start.
	Refusals map[string]int64
	// LongestShallow and LongestDeep are the longest a shallow-window and
	// a deep-window run went without a read of its pull request in the
	// window, counting from its last read before it, or from the
	// window's start for a run not read before it.
	LongestShallow, LongestDeep time.Duration
	// Drifted shallow-window runs had their gate status set to failure as
	// the window opened; Repaired of them agreed again RepairAfter it.
	Drifted, Repaired int
	RepairAfter       time.Duration
	// Passes are the sweepers' passes that ended in the window; Sweepers
	// how many replicas made them.
	Passes   []passLog
	Sweepers int
	// Moved pull requests got a new head (Faults); WrongCommit is how many
	// of those new heads carry a gate status afterwards (want 0).
	Moved, WrongCommit int
	// Discarded is why each earlier measurement of this configuration was
	// discarded (errHandover, with the replicas' step-downs), in order.
	Discarded []string
}

// clockScenario measures the configurations of the clock scenario.
type clockScenario struct {
	runs     []int // populations, increasing
	replicas []int // replica counts
	// shallow is how many of the largest population stay in the shallow
	// window when the others are aged out of it (0: no such configuration).
	shallow int
	// passes is how many intervals a configuration is measured over;
	// deepPasses the same for those with runs aged out (long enough for a
	// deep-pass period).
	passes, deepPasses int
	// concurrency are the sweep concurrencies each configuration is
	// measured at; timeShare the replicas' time share (0: serve's default).
	concurrency []int
	timeShare   float64
	// sweepMinutes is the sweep interval in compressed minutes (0: 1).
	sweepMinutes int
	logf         func(format string, args ...any)
}

// startCluster starts the clock scenario's cluster in dir: the simulator's
// latency model on, its minute the sweep interval, its GraphQL draws per
// query (each configuration's installation meets the same times and
// timeouts for the same queries, so replica counts are compared on the
// same draws).
func (s clockScenario) startCluster(ctx context.Context, bins binaries, dir string, interval time.Duration) (*cluster, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProcess, err)
	}
	return startCluster(ctx, bins, dir, interval, simBudget, "--latency", "--latency-per-query", "--latency-seed", fmt.Sprint(clockSeed),
		"--graphql-fault-seed", fmt.Sprint(clockSeed), "--token-ttl", (60*interval + time.Minute).String())
}

// run seeds each population on c and measures it at each replica count,
// all in the shallow window; then the largest with all but s.shallow aged
// out of it, at each replica count, and once more at the smallest with
// faults. On an error it returns the rows measured before it.
func (s clockScenario) run(ctx context.Context, c *cluster) ([]ClockRow, error) {
	var rows []ClockRow
	key, err := writeAppKey(c.dir)
	if err != nil {
		return rows, err
	}
	var pop []runRequest
	installation := 0
	measureAt := func(shallow, n, passes int, faults bool, conc int) error {
		what := fmt.Sprintf("clock runs=%-5d shallow=%-5d N=%-2d conc=%d faults=%-5v", len(pop), shallow, n, conc, faults)
		row, discarded, err := remeasured(s.logf, what, func() (ClockRow, error) {
			installation++
			return s.one(ctx, c, clockConfig{pop: pop, shallow: shallow, replicas: n, passes: passes, faults: faults, installation: installation, key: key, concurrency: conc})
		})
		if err != nil {
			return fmt.Errorf("%d runs (%d shallow), %d replicas, faults %v, concurrency %d: %w", len(pop), shallow, n, faults, conc, err)
		}
		row.Discarded = discarded
		rows = append(rows, row)
		s.logf("clock runs=%-5d shallow=%-5d N=%-2d conc=%d faults=%-5v GraphQL max %5.1f s/min  points %5.1f/interval  refusals %d  longest unchecked %.1f (shallow) %.1f (deep) intervals  repaired %d/%d in %.1f intervals  pass ÷ interval %.2f mean %.2f max  behind %d of %d  wrong commit %d",
			row.Runs, row.Shallow, n, conc, faults, row.MaxGraphQLMinute(), row.PointsPerInterval(), row.RefusalsTotal(),
			row.intervals(row.LongestShallow), row.intervals(row.LongestDeep), row.Repaired, row.Drifted, row.intervals(row.RepairAfter),
			row.MeanDuty(), row.MaxDuty(), row.BehindPasses(), len(row.Passes), row.WrongCommit)
		return nil
	}
	measure := func(shallow, n, passes int, faults bool) error {
		for _, k := range s.concurrency {
			if err := measureAt(shallow, n, passes, faults, k); err != nil {
				return err
			}
		}
		return nil
	}
	for _, size := range s.runs {
		t0 := time.Now()
		more, err := seedScale(ctx, c, len(pop)+1, size)
		if err != nil {
			return rows, err
		}
		pop = append(pop, more...)
		s.logf("clock: seeded %d open runs in %v", len(pop), time.Since(t0).Round(time.Millisecond))
		for _, n := range s.replicas {
			if err := measure(len(pop), n, s.passes, false); err != nil {
				return rows, err
			}
		}
	}
	if s.shallow <= 0 || s.shallow >= len(pop) {
		return rows, nil
	}
	aged, err := c.ageRuns(ctx, s.shallow, clockAge)
	if err != nil {
		return rows, err
	}
	s.logf("clock: aged %d of %d runs out of the shallow window", aged, len(pop))
	for _, n := range s.replicas {
		if err := measure(s.shallow, n, s.deepPasses, false); err != nil {
			return rows, err
		}
	}
	return rows, measure(s.shallow, s.replicas[0], s.passes, true)
}

// replicaFlags are the flags of configuration cf's replicas beyond their
// credentials: debug logs (each pass), the sweep interval, the sweep
// concurrency and the time share.
func (s clockScenario) replicaFlags(cf clockConfig, interval time.Duration) []string {
	flags := []string{"--log-level", "debug", "--sweep-interval", interval.String(), "--sweep-concurrency", fmt.Sprint(max(cf.concurrency, 1))}
	if s.timeShare > 0 {
		flags = append(flags, "--sweep-time-share", fmt.Sprint(s.timeShare))
	}
	return flags
}

// clockConfig is one configuration: the population (its first shallow
// runs in the shallow window), the replica count, the intervals measured,
// faults or not, and the installation its replicas authenticate as.
type clockConfig struct {
	pop          []runRequest
	shallow      int
	replicas     int
	passes       int
	faults       bool
	installation int
	key          string
	concurrency  int // the replicas' --sweep-concurrency
}

// one measures one configuration on fresh replicas.
func (s clockScenario) one(ctx context.Context, c *cluster, cf clockConfig) (ClockRow, error) {
	iv := c.interval * time.Duration(max(s.sweepMinutes, 1))
	row := ClockRow{Runs: len(cf.pop), Shallow: cf.shallow, Replicas: cf.replicas, Faults: cf.faults, Interval: iv, Concurrency: cf.concurrency}
	principal := installationPrincipal(cf.installation)
	before, err := c.sim.fullStats(ctx)
	if err != nil {
		return row, err
	}
	rs, err := c.startReplicas(ctx, cf.replicas, replicaSpec{
		app: []string{"--github-app-id", fmt.Sprint(scaleAppID), "--github-installation-id", fmt.Sprint(cf.installation),
			"--github-private-key-file", cf.key},
		timeBudget: true,
		extra:      s.replicaFlags(cf, iv),
	})
	if err != nil {
		return row, err
	}
	defer c.stopAll()
	// The window opens when the first pass, over as many intervals as its
	// time budget needs, has offered every run.
	if err := awaitFirstPass(ctx, rs, len(cf.pop), iv); err != nil {
		return row, err
	}
	turns0, err := turnsOf(ctx, rs, server.MergeGateSweeper().Name)
	if err != nil {
		return row, err
	}
	t0 := time.Now()
	drifted := cf.pop[:min(clockDrifted, cf.shallow)]
	for _, r := range drifted {
		if err := c.sim.setStatus(ctx, r.Repo, r.HeadSHA, gateContext, "failure"); err != nil {
			return row, err
		}
	}
	var moved []runRequest
	if cf.faults {
		if err := c.sim.setFaults(ctx, forgesim.GraphQLFaults{BadGatewayShare: clockFaultShare, Seed: clockSeed}); err != nil {
			return row, err
		}
		moved = cf.pop[len(drifted):min(len(drifted)+clockMoved, cf.shallow)]
		for _, r := range moved {
			if err := c.sim.pushHead(ctx, r.Repo, r.Pull, movedHead(r.Pull)); err != nil {
				return row, err
			}
		}
	}
	repair := watchRepair(ctx, c.sim, drifted, t0, time.Duration(cf.passes)*iv, iv)
	defer repair.stop()
	last, err := c.sim.fullStats(ctx)
	if err != nil {
		return row, err
	}
	for k := 1; k <= cf.passes; k++ {
		clock.Sleep(ctx, time.Until(t0.Add(time.Duration(k)*iv)))
		st, err := c.sim.fullStats(ctx)
		if err != nil {
			return row, err
		}
		row.Points = append(row.Points, graphqlPoints(st, cf.installation)-graphqlPoints(last, cf.installation))
		last = st
	}
	t1 := time.Now()
	row.Window = t1.Sub(t0)
	if cf.faults {
		if err := c.sim.setFaults(ctx, forgesim.GraphQLFaults{}); err != nil {
			return row, err
		}
	}
	turns1, err := turnsOf(ctx, rs, server.MergeGateSweeper().Name)
	if err != nil {
		return row, err
	}
	if err := handoversBetween(rs, turns0, turns1); err != nil {
		return row, err
	}
	for _, r := range moved {
		st, err := c.sim.statusOf(ctx, r.Repo, movedHead(r.Pull), gateContext)
		if err != nil {
			return row, err
		}
		if st != "" {
			row.WrongCommit++
		}
	}
	row.Moved = len(moved)
	row.Refusals = refusalsOf(last, principal)
	for k, n := range refusalsOf(before, principal) {
		row.Refusals[k] -= n
	}
	for _, m := range last.CPUMinutes {
		if m.Principal == principal && m.Resource == "graphql" && !m.Start.Before(t0) && m.Start.Before(t1) {
			row.GraphQLMinutes = append(row.GraphQLMinutes, m.Seconds)
		}
	}
	reads, err := c.sim.reads(ctx, principal)
	if err != nil {
		return row, err
	}
	skip := map[int]bool{}
	for _, r := range moved {
		skip[r.Pull] = true // settled once read: never checked again
	}
	row.checked(reads, cf.shallow, skip, t0, cf.passes)
	for _, r := range rs {
		ps, err := r.passLogs(t0, t1)
		if err != nil {
			return row, err
		}
		if len(ps) > 0 {
			row.Sweepers++
		}
		row.Passes = append(row.Passes, ps...)
	}
	row.Drifted = len(drifted)
	row.Repaired, row.RepairAfter, err = repair.result()
	return row, err
}

// movedHead is the new head the faults configuration pushes pull request
// n to: 40 hex digits, unlike any seeded head.
func movedHead(n int) string { return fmt.Sprintf("%040x", 1<<40+n) }

// graphqlPoints is the GraphQL points st counts for installation's tokens.
func graphqlPoints(st forgesim.Stats, installation int) int64 {
	prefix := fmt.Sprintf("ghs_sim_%d_", installation)
	var n int64
	for _, r := range st.Requests {
		if r.Route == graphqlRoute && len(r.Token) > len(prefix) && r.Token[:len(prefix)] == prefix {
			n += r.Points
		}
	}
	return n
}

// refusalsOf is st's refusals of principal by kind.
func refusalsOf(st forgesim.Stats, principal string) map[string]int64 {
	out := map[string]int64{}
	for _, r := range st.Refusals {
		if r.Principal == principal {
			out[r.Kind] += r.Count
		}
	}
	return out
}
