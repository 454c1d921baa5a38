package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"iterion.dev/iterion/cmd/iterion/internal/harness"
	"iterion.dev/iterion/pkg/server"
)

// benchHelp is bench's -h.
var benchHelp = help{
	usage: "iterion bench [flags]",
	about: "Builds iterion and dev-mongo, starts real replica processes against the forge\n" +
		"simulator and MongoDB, and measures the forge cost per replica count, the\n" +
		"takeovers, the faults, the budget, the load, the scale, GitHub's clock, the\n" +
		"lease-group and the many-installation (tenants) scenarios. It prints its figures as markdown for docs/benchmarks.md. It takes\n" +
		"tens of minutes.",
	example: "iterion bench --scenarios cost,takeover -n 1,3 --out bench.md",
}

// runBench runs the multi-process harness in full mode and prints its
// figures as a markdown block for docs/benchmarks.md.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", benchHelp, stderr)
	var o harness.Options
	ns := fs.String("n", "1,3,10", "replica counts of the cost scenario, comma-separated")
	scen := fs.String("scenarios", strings.Join(harness.Scenarios(), ","), "scenarios to run, comma-separated")
	out := fs.String("out", "", "also write the markdown block to this file")
	fs.DurationVar(&o.Interval, "interval", 500*time.Millisecond, "sweep interval of every replica (the compressed minute; TTL is 3 intervals, retry 1)")
	fs.IntVar(&o.Runs, "runs", 20, "gating runs to seed")
	fs.DurationVar(&o.Window, "window", 0, "how long each cost configuration is measured (default 30 intervals)")
	fs.IntVar(&o.Replicas, "replicas", 3, "replicas in the takeover and fault scenarios")
	fs.IntVar(&o.Takeovers, "takeovers", 20, "leader stops per signal (SIGTERM, SIGKILL)")
	fs.IntVar(&o.BudgetReplicas, "budget-replicas", 0, "replicas in the budget scenario (default the largest -n)")
	fs.DurationVar(&o.Hour, "hour", 0, "the budget scenario's compressed hour (default 60 intervals)")
	fs.IntVar(&o.Load.Requests, "load-requests", 2000, "runs the load scenario posts")
	fs.IntVar(&o.Load.Concurrency, "load-concurrency", 50, "clients posting at once in the load scenario")
	fs.DurationVar(&o.Load.Outage, "load-outage", 2*time.Second, "how long the load scenario leaves dev-mongo down after its SIGKILL")
	scaleRuns := fs.String("scale-runs", "10,100,1000,5000", "open-run populations of the scale scenario, comma-separated, increasing")
	scaleReplicas := fs.String("scale-replicas", "1,10", "replica counts of the scale scenario, comma-separated")
	fs.DurationVar(&o.ScaleInterval, "scale-interval", 10*time.Second, "the scale scenario's sweep interval (its compressed minute; the installation tokens live 60 of them)")
	fs.IntVar(&o.ScalePasses, "scale-passes", 2, "intervals each scale configuration is measured over, after its first pass")
	clockRuns := fs.String("clock-runs", "1000,5000", "open-run populations of the clock scenario, comma-separated, increasing")
	clockReplicas := fs.String("clock-replicas", "1,10", "replica counts of the clock scenario, comma-separated")
	fs.IntVar(&o.ClockShallow, "clock-shallow", 500, "runs of the largest clock population left in the shallow window when the rest are aged out of it (negative: no such configuration)")
	fs.DurationVar(&o.ClockInterval, "clock-interval", 6*time.Second, "the clock scenario's simulator minute (its compressed minute), and its sweep interval with --clock-sweep-minutes 1")
	fs.IntVar(&o.ClockSweepMinutes, "clock-sweep-minutes", 1, "the clock scenario's sweep interval, in its compressed minutes (--clock-interval)")
	fs.IntVar(&o.ClockPasses, "clock-passes", 10, "intervals each clock configuration is measured over, after its first pass")
	clockConc := fs.String("clock-sweep-concurrency", "1", "sweep concurrencies (serve's --sweep-concurrency) each clock configuration is measured at, side by side, comma-separated")
	fs.Float64Var(&o.ClockTimeShare, "clock-time-share", 0, "the clock scenario's replicas' --sweep-time-share (0: serve's default)")
	fs.IntVar(&o.ClockDeepPasses, "clock-deep-passes", 0, "intervals the clock configurations with aged runs are measured over (default the deep-pass period + 12)")
	fs.IntVar(&o.GroupShards, "group-shards", 64, "shards of the group scenario's lease group")
	fs.IntVar(&o.GroupReplicas, "group-replicas", 10, "replicas in the group scenario (it halves and restores them)")
	fs.DurationVar(&o.GroupInterval, "group-interval", 3*time.Second, "the group scenario's sweep interval (the group's TTL is 3 intervals, retry 1)")
	fs.IntVar(&o.TenantsInstallations, "tenants-installations", 1000, "installations of the App in the tenants scenario")
	fs.IntVar(&o.TenantsRuns, "tenants-runs", 10, "open runs of each installation in the tenants scenario")
	tenantsReplicas := fs.String("tenants-replicas", "1,10", "replica counts of the tenants scenario, comma-separated, increasing (the largest also gets the churn and the kill)")
	fs.DurationVar(&o.TenantsInterval, "tenants-interval", 15*time.Second, "the tenants scenario's sweep interval (its compressed minute)")
	fs.IntVar(&o.TenantsWindow, "tenants-window", 10, "intervals each tenants replica count is measured over once settled")
	fs.IntVar(&o.TenantsChurn, "tenants-churn", 20, "installations the tenants scenario adds, and as many it removes, at its largest replica count")
	fs.IntVar(&o.TenantsShards, "tenants-shards", 0, "serve --sweep-shards in the tenants scenario (0: serve's default)")
	fs.StringVar(&o.Bin, "bin", "", "a built iterion binary (default: build ./cmd/iterion of the enclosing module)")
	fs.StringVar(&o.DevMongoBin, "dev-mongo-bin", "", "a built dev-mongo binary (default: build ./cmd/dev-mongo of the enclosing module)")
	fs.StringVar(&o.Dir, "dir", "", "keep logs and Mongo's files here (default: a temporary directory, removed on success)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var err error
	if o.Ns, err = ints("-n", *ns); err != nil {
		return usageError{err}
	}
	if o.ScaleRuns, err = ints("--scale-runs", *scaleRuns); err != nil {
		return usageError{err}
	}
	if o.ScaleReplicas, err = ints("--scale-replicas", *scaleReplicas); err != nil {
		return usageError{err}
	}
	if o.ClockRuns, err = ints("--clock-runs", *clockRuns); err != nil {
		return usageError{err}
	}
	if o.TenantsReplicas, err = ints("--tenants-replicas", *tenantsReplicas); err != nil {
		return usageError{err}
	}
	if o.ClockConcurrency, err = ints("--clock-sweep-concurrency", *clockConc); err != nil {
		return usageError{err}
	}
	for _, k := range o.ClockConcurrency {
		if k < 1 || k > server.MaxSweepConcurrency {
			return usageError{fmt.Errorf("--clock-sweep-concurrency %q: %d is not within 1 to %d", *clockConc, k, server.MaxSweepConcurrency)}
		}
	}
	if o.ClockTimeShare < 0 || o.ClockTimeShare > 1 {
		return usageError{fmt.Errorf("--clock-time-share %v: want 0 (serve's default) to 1", o.ClockTimeShare)}
	}
	if o.ClockReplicas, err = ints("--clock-replicas", *clockReplicas); err != nil {
		return usageError{err}
	}
	o.Scenarios = strings.Split(*scen, ",")
	o.Progress = stderr
	rep, err := harness.Run(ctx, o)
	if errors.Is(err, harness.ErrInvalid) {
		return usageError{err} // a bad flag, named by its option: exit 2
	}
	if rep != nil {
		md := rep.Markdown("go run ./cmd/iterion bench " + strings.Join(args, " "))
		fmt.Fprint(stdout, md)
		if *out != "" {
			if werr := os.WriteFile(*out, []byte(md), 0o644); werr != nil && err == nil {
				err = werr
			}
		}
	}
	return err
}

// ints parses the comma-separated numbers v of flag name.
func ints(name, v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%s %q: %q is not a number", name, v, f)
		}
		out = append(out, n)
	}
	return out, nil
}
