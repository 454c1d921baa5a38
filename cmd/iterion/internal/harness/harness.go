// Package harness measures the lease's consequences (docs/design.md) on real processes: it
// builds the iterion and dev-mongo binaries, starts `dev-mongo`, `iterion forge-sim`
// and N `iterion serve` replicas on loopback ports, seeds gating runs through
// the wire contracts, and measures the sweep's forge cost, the budget it
// spends, takeover delays, what faults lose, and how the API holds on an
// open network (load.go). Every forge count comes from the simulator's own
// per-token counts (GET /_sim/stats), each replica having its own forge
// token; the replicas' transport counts (/metrics) are checked against them.
//
// Between each replica and Mongo the harness puts a TCP forwarder of its
// own: cutting it partitions exactly that replica from Mongo, a real network
// partition as the replica's driver sees it.
//
// The package is layered, each file referring only to those below it:
//
//   - errors.go, proc.go, forwarder.go, clients.go and measure.go are the
//     plumbing: child processes, the partitioning forwarder, the wire
//     contracts of the simulator and the replicas, and the statistics;
//   - cluster.go starts and stops the processes of one run, and
//     population.go seeds the gating runs the scenarios measure;
//   - cost.go, budget.go, takeover.go, faults.go, scale.go, clock.go, load.go,
//     group.go and tenants.go each hold one scenario: a type whose run method
//     takes a cluster and returns its rows (the load scenario's three phases
//     are in load_slow.go, load_webhooks.go and load_runs.go; the group
//     scenario's figures, from its replicas' logged shard terms, in
//     group_terms.go; the clock scenario's, from the simulator's reads and
//     the sweepers' logs, in clock_figures.go; its wire contracts in
//     clock_clients.go, what it reads of a cluster in cluster_clock.go, its
//     report in report_clock.go; the tenants scenario's, from the
//     simulator's request log, in tenants_log.go, its wire steps in
//     tenants_seed.go, and its seeding straight into the store in
//     tenants_seed_store.go);
//   - options.go validates Options, report.go renders the rows, and
//     harness.go's Run starts the clusters and runs the chosen scenarios.
//
// Quick mode runs in the test suite (harness_test.go); the full mode is
// `iterion bench`. Every process is started in its own process group and
// stopped when Run returns.
package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Run builds the binary when needed, starts the processes, runs the chosen
// scenarios in order and returns what they measured. The report holds the
// scenarios that completed even when an error stops the run, with the rows
// the failing scenario completed before its error.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	rep := &Report{Date: time.Now().UTC(), Options: o}
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "iterion-harness-")
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrProcess, err)
		}
		dir = d
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: Dir: %w", ErrProcess, err)
	}
	rep.Dir = dir
	bins, err := buildMissing(ctx, o, dir)
	if err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) { fmt.Fprintf(o.Progress, "  "+format+"\n", args...) }
	// Every scenario but scale, clock and tenants shares one cluster and
	// population; those three start their own.
	var (
		c          *cluster
		population []runRequest
	)
	if slices.ContainsFunc(o.Scenarios, func(s string) bool {
		return s != ScenarioScale && s != ScenarioClock && s != ScenarioTenants
	}) {
		c, err = startCluster(ctx, bins, dir, o.Interval, simBudget)
		if err != nil {
			return rep, err
		}
		defer c.close()
		if population, err = seedPopulation(ctx, c, o.Runs, logf); err != nil {
			return rep, err
		}
	}
	steps := map[string]func(context.Context) error{
		ScenarioCost: func(ctx context.Context) (err error) {
			rep.Cost, err = costScenario{ns: o.Ns, window: o.Window, logf: logf}.run(ctx, c)
			return err
		},
		ScenarioBudget: func(ctx context.Context) (err error) {
			s := budgetScenario{replicas: o.BudgetReplicas, hour: o.Hour, demand: pointsPerInterval(rep.Cost), logf: logf}
			rep.Budget, err = s.run(ctx, c)
			return err
		},
		ScenarioTakeover: func(ctx context.Context) (err error) {
			rep.Takeover, err = takeoverScenario{replicas: o.Replicas, takeovers: o.Takeovers, logf: logf}.run(ctx, c)
			return err
		},
		ScenarioFaults: func(ctx context.Context) (err error) {
			rep.Faults, err = faultScenario{replicas: o.Replicas, population: population, logf: logf}.run(ctx, c)
			return err
		},
		ScenarioLoad: func(ctx context.Context) (err error) {
			rep.Load, err = loadScenario{LoadOptions: o.Load, logf: logf}.run(ctx, c)
			return err
		},
		ScenarioGroup: func(ctx context.Context) error {
			s := groupScenario{shards: o.GroupShards, replicas: o.GroupReplicas, interval: o.GroupInterval, window: 30 * o.GroupInterval, logf: logf}
			g, err := s.run(ctx, c)
			rep.Group = &g
			return err
		},
		ScenarioClock: func(ctx context.Context) (err error) {
			shallow := max(o.ClockShallow, 0)
			s := clockScenario{runs: o.ClockRuns, replicas: o.ClockReplicas, shallow: shallow, passes: o.ClockPasses, deepPasses: o.ClockDeepPasses,
				concurrency: o.ClockConcurrency, timeShare: o.ClockTimeShare, sweepMinutes: o.ClockSweepMinutes, logf: logf}
			if len(s.concurrency) == 0 {
				s.concurrency = []int{1}
			}
			cc, err := s.startCluster(ctx, bins, filepath.Join(dir, "clock"), o.ClockInterval)
			if err != nil {
				return err
			}
			defer cc.close()
			rep.Clock, err = s.run(ctx, cc)
			return err
		},
		ScenarioScale: func(ctx context.Context) (err error) {
			s := scaleScenario{runs: o.ScaleRuns, replicas: o.ScaleReplicas, passes: o.ScalePasses, logf: logf}
			sc, err := s.startCluster(ctx, bins, filepath.Join(dir, "scale"), o.ScaleInterval)
			if err != nil {
				return err
			}
			defer sc.close()
			rep.Scale, err = s.run(ctx, sc)
			return err
		},
		ScenarioTenants: func(ctx context.Context) error {
			s := tenantsScenario{installations: o.TenantsInstallations, runsPer: o.TenantsRuns, replicas: o.TenantsReplicas,
				window: o.TenantsWindow, churn: o.TenantsChurn, shards: o.TenantsShards, logf: logf}
			tc, err := s.startCluster(ctx, bins, filepath.Join(dir, "tenants"), o.TenantsInterval)
			if err != nil {
				return err
			}
			defer tc.close()
			t, err := s.run(ctx, tc)
			rep.Tenants = &t
			return err
		},
	}
	for _, s := range Scenarios() {
		if !slices.Contains(o.Scenarios, s) {
			continue
		}
		fmt.Fprintf(o.Progress, "scenario %s\n", s)
		if err := steps[s](ctx); err != nil {
			return rep, fmt.Errorf("scenario %s: %w (logs in %s)", s, err, dir)
		}
		if c != nil {
			c.stopAll()
		}
	}
	switch {
	case o.Dir != "":
	case rep.unreleased():
		fmt.Fprintf(o.Progress, "a clean stop did not release its lease: logs kept in %s\n", dir)
	default:
		os.RemoveAll(dir)
		rep.Dir = ""
	}
	return rep, nil
}

// pointsPerInterval is the GraphQL points per interval the cost scenario
// measured without the lease, by replica count: the demand the budget
// scenario sizes its budget from.
func pointsPerInterval(rows []CostRow) map[int]float64 {
	out := map[int]float64{}
	for _, c := range rows {
		if !c.Lease && c.GraphQLPerInterval > 0 {
			out[c.Replicas] = c.GraphQLPerInterval
		}
	}
	return out
}

// buildMissing returns o's binaries, building into dir those it leaves empty
// from the module enclosing the working directory.
func buildMissing(ctx context.Context, o Options, dir string) (binaries, error) {
	bins := binaries{iterion: o.Bin, devMongo: o.DevMongoBin}
	for _, b := range []struct {
		path *string
		pkg  string
	}{{&bins.iterion, iterionPkg}, {&bins.devMongo, devMongoPkg}} {
		if *b.path != "" {
			continue
		}
		wd, err := os.Getwd()
		if err != nil {
			return bins, fmt.Errorf("%w: %w", ErrBuild, err)
		}
		root, err := ModuleRoot(wd)
		if err != nil {
			return bins, err
		}
		*b.path = filepath.Join(dir, filepath.Base(b.pkg))
		fmt.Fprintf(o.Progress, "building %s\n", *b.path)
		if err := build(ctx, root, b.pkg, *b.path); err != nil {
			return bins, err
		}
	}
	return bins, nil
}
