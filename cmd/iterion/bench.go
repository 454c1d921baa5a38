package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"iterion.dev/iterion/cmd/iterion/internal/harness"
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
	fs, o, out := benchFlags(stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := benchPathsProblem(o, *out); err != nil {
		return usageError{err} // a bad flag: exit 2, before anything is built
	}
	o.Progress = stderr
	rep, err := harness.Run(ctx, *o)
	var oe *harness.OptionError
	if errors.As(err, &oe) {
		if f := flagOf(fs, o, oe.Field); f != nil {
			err = fmt.Errorf("%s %v %s", flagName(f.Name), f.Value, oe.Reason)
		}
		return usageError{err} // a bad flag: exit 2
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

// benchFlags returns bench's flag set, the harness options its option
// flags write into and the --out file. Each option flag's value points at
// its Options field, so that a refused field finds the flag that set it
// (flagOf).
func benchFlags(stderr io.Writer) (*flag.FlagSet, *harness.Options, *string) {
	fs := newFlagSet("bench", benchHelp, stderr)
	o := &harness.Options{
		Ns: []int{1, 3, 10}, Scenarios: harness.Scenarios(),
		ScaleRuns: []int{10, 100, 1000, 5000}, ScaleReplicas: []int{1, 10},
		ClockRuns: []int{1000, 5000}, ClockReplicas: []int{1, 10}, ClockConcurrency: []int{1},
		TenantsReplicas: []int{1, 10},
	}
	fs.Var((*ints)(&o.Ns), "n", "replica counts of the cost scenario, comma-separated")
	fs.Var((*words)(&o.Scenarios), "scenarios", "scenarios to run, comma-separated")
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
	fs.Var((*ints)(&o.ScaleRuns), "scale-runs", "open-run populations of the scale scenario, comma-separated, increasing")
	fs.Var((*ints)(&o.ScaleReplicas), "scale-replicas", "replica counts of the scale scenario, comma-separated")
	fs.DurationVar(&o.ScaleInterval, "scale-interval", 10*time.Second, "the scale scenario's sweep interval (its compressed minute; the installation tokens live 60 of them)")
	fs.IntVar(&o.ScalePasses, "scale-passes", 2, "intervals each scale configuration is measured over, after its first pass")
	fs.Var((*ints)(&o.ClockRuns), "clock-runs", "open-run populations of the clock scenario, comma-separated, increasing")
	fs.Var((*ints)(&o.ClockReplicas), "clock-replicas", "replica counts of the clock scenario, comma-separated")
	fs.IntVar(&o.ClockShallow, "clock-shallow", 500, "runs of the largest clock population left in the shallow window when the rest are aged out of it (negative: no such configuration)")
	fs.DurationVar(&o.ClockInterval, "clock-interval", 6*time.Second, "the clock scenario's simulator minute (its compressed minute), and its sweep interval with --clock-sweep-minutes 1")
	fs.IntVar(&o.ClockSweepMinutes, "clock-sweep-minutes", 1, "the clock scenario's sweep interval, in its compressed minutes (--clock-interval)")
	fs.IntVar(&o.ClockPasses, "clock-passes", 10, "intervals each clock configuration is measured over, after its first pass")
	fs.Var((*ints)(&o.ClockConcurrency), "clock-sweep-concurrency", "sweep concurrencies (serve's --sweep-concurrency) each clock configuration is measured at, side by side, comma-separated")
	fs.Float64Var(&o.ClockTimeShare, "clock-time-share", 0, "the clock scenario's replicas' --sweep-time-share (0: serve's default)")
	fs.IntVar(&o.ClockDeepPasses, "clock-deep-passes", 0, "intervals the clock configurations with aged runs are measured over (default the deep-pass period + 12)")
	fs.IntVar(&o.GroupShards, "group-shards", 64, "shards of the group scenario's lease group")
	fs.IntVar(&o.GroupReplicas, "group-replicas", 10, "replicas in the group scenario (it halves and restores them)")
	fs.DurationVar(&o.GroupInterval, "group-interval", 3*time.Second, "the group scenario's sweep interval (the group's TTL is 3 intervals, retry 1)")
	fs.IntVar(&o.TenantsInstallations, "tenants-installations", 1000, "installations of the App in the tenants scenario")
	fs.IntVar(&o.TenantsRuns, "tenants-runs", 10, "open runs of each installation in the tenants scenario")
	fs.Var((*ints)(&o.TenantsReplicas), "tenants-replicas", "replica counts of the tenants scenario, comma-separated, increasing (the largest also gets the churn and the kill)")
	fs.DurationVar(&o.TenantsInterval, "tenants-interval", 15*time.Second, "the tenants scenario's sweep interval (its compressed minute)")
	fs.IntVar(&o.TenantsWindow, "tenants-window", 10, "intervals each tenants replica count is measured over once settled")
	fs.IntVar(&o.TenantsChurn, "tenants-churn", 20, "installations the tenants scenario adds, and as many it removes, at its largest replica count")
	fs.IntVar(&o.TenantsShards, "tenants-shards", 0, "serve --sweep-shards in the tenants scenario (0: serve's default)")
	fs.StringVar(&o.Bin, "bin", "", "a built iterion binary (default: build ./cmd/iterion of the enclosing module)")
	fs.StringVar(&o.DevMongoBin, "dev-mongo-bin", "", "a built dev-mongo binary (default: build ./cmd/dev-mongo of the enclosing module)")
	fs.StringVar(&o.Dir, "dir", "", "keep logs and Mongo's files here (default: a temporary directory, removed on success unless a clean stop did not release its lease)")
	return fs, o, out
}

// benchPathsProblem reports every path flag bench would otherwise find
// bad only once it runs, each naming its flag: --out, written after the
// scenarios (tens of minutes), and --bin and --dev-mongo-bin, started
// after the missing binary is built. nil when every given one is usable.
func benchPathsProblem(o *harness.Options, out string) error {
	var bad settingsError
	for _, p := range []struct {
		flag, path string
		problem    func(string) error
	}{
		{"--out", out, outputFileProblem},
		{"--bin", o.Bin, programProblem},
		{"--dev-mongo-bin", o.DevMongoBin, programProblem},
	} {
		if p.path == "" {
			continue
		}
		if err := p.problem(p.path); err != nil {
			bad = append(bad, fmt.Errorf("%s %q: %w", p.flag, p.path, err))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return bad
}

// flagOf returns the flag of fs that writes the Options field named field
// (dotted when nested, as an OptionError names it) of o, or nil when no flag
// does: the flag whose value points at the field.
func flagOf(fs *flag.FlagSet, o *harness.Options, field string) *flag.Flag {
	v := reflect.ValueOf(o).Elem()
	for _, name := range strings.Split(field, ".") {
		if v = v.FieldByName(name); !v.IsValid() {
			return nil
		}
	}
	var found *flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		// A nested struct shares its first field's address; the kinds tell them apart.
		if p := reflect.ValueOf(f.Value); p.Kind() == reflect.Pointer && p.Pointer() == v.Addr().Pointer() && p.Elem().Kind() == v.Kind() {
			found = f
		}
	})
	return found
}

// flagName is name as a user types it: -n, --interval.
func flagName(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// ints is a flag.Value of comma-separated numbers.
type ints []int

func (l *ints) String() string {
	s := make([]string, len(*l))
	for i, n := range *l {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (l *ints) Set(v string) error {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("%q is not a number", f)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

// words is a flag.Value of comma-separated words.
type words []string

func (l *words) String() string { return strings.Join(*l, ",") }

func (l *words) Set(v string) error {
	*l = strings.Split(v, ",")
	return nil
}
