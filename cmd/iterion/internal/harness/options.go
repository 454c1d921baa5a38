package harness

import (
	"cmp"
	"io"
	"slices"
	"time"

	"iterion.dev/iterion/pkg/server"
)

// The scenarios Run knows, in the order it runs them.
const (
	ScenarioCost     = "cost"
	ScenarioBudget   = "budget"
	ScenarioTakeover = "takeover"
	ScenarioFaults   = "faults"
	ScenarioScale    = "scale"
	// ScenarioLoad puts the API on an open network: slow connections,
	// unsigned large webhooks, and POST /api/runs under load through a
	// Mongo crash.
	ScenarioLoad = "load"
	// ScenarioGroup runs the measurement lease group (serve
	// --measure-group-shards) and measures its spread, hand-overs, store
	// cost and overlaps (group.go).
	ScenarioGroup = "group"
	// ScenarioClock measures the batched sweep against a simulator that
	// answers as slowly as GitHub, its time budget on (clock.go).
	ScenarioClock = "clock"
	// ScenarioTenants serves one App's many installations in App mode at
	// 1 and N replicas, adds and removes installations and kills a
	// replica, measured from the simulator's request log (tenants.go).
	ScenarioTenants = "tenants"
)

// Scenarios returns every scenario name Options.Scenarios accepts, in the
// order Run runs them.
func Scenarios() []string {
	return []string{ScenarioCost, ScenarioBudget, ScenarioTakeover, ScenarioFaults, ScenarioScale, ScenarioClock, ScenarioLoad, ScenarioGroup, ScenarioTenants}
}

// Options configures one harness run. The zero value of a field means the
// default given beside it; Run refuses a field it cannot run with, before it
// starts anything, with an *OptionError naming the field.
type Options struct {
	// Bin is a built iterion binary; empty: build ./cmd/iterion of the
	// module enclosing the working directory into Dir.
	Bin string
	// DevMongoBin is a built dev-mongo binary; empty: build ./cmd/dev-mongo
	// of the module enclosing the working directory into Dir.
	DevMongoBin string
	// Dir keeps the processes' logs and Mongo's files; empty: a new
	// temporary directory, removed when Run succeeds.
	Dir string
	// Interval is the replicas' sweep interval, the compressed minute:
	// lease TTL is 3 intervals and retry 1 (pkg/server/leases.go). Default 500ms.
	Interval time.Duration
	// Runs is the seeded population of gating runs. Default 20.
	Runs int
	// Ns are the replica counts of the cost scenario. Default 1, 3, 10.
	Ns []int
	// Window is how long each cost configuration is measured. Default 30
	// intervals.
	Window time.Duration
	// Replicas is the replica count of the takeover and fault scenarios.
	// Default 3.
	Replicas int
	// Takeovers is how many times the leader is stopped with each signal.
	// Default 20.
	Takeovers int
	// BudgetReplicas is the replica count of the budget scenario. Default
	// the largest of Ns.
	BudgetReplicas int
	// Hour is the budget scenario's compressed hour. Default 60 intervals,
	// an interval standing for a minute.
	Hour time.Duration
	// Load sizes the load scenario (load.go).
	Load LoadOptions
	// ScaleRuns are the open-run populations of the scale scenario, in
	// increasing order. Default 10, 100, 1000, 5000.
	ScaleRuns []int
	// ScaleReplicas are the replica counts of the scale scenario. Default
	// 1, 10.
	ScaleReplicas []int
	// ScaleInterval is the scale scenario's sweep interval, its compressed
	// minute: long enough for a pass over the largest population. Its
	// compressed hour (60 intervals) is the installation tokens' rotation.
	// Default 10s.
	ScaleInterval time.Duration
	// ScalePasses is how many intervals each scale configuration is
	// measured over, after its first pass. Default 2.
	ScalePasses int
	// ClockRuns are the open-run populations of the clock scenario, in
	// increasing order, all in the shallow window. Default 1000, 5000.
	ClockRuns []int
	// ClockReplicas are the clock scenario's replica counts. Default 1, 10.
	ClockReplicas []int
	// ClockShallow is how many runs of the largest ClockRuns stay in the
	// shallow window when the clock scenario ages the rest out of it, for
	// its last configurations; 0: default 500; negative: none.
	ClockShallow int
	// ClockInterval is the clock scenario's simulator minute, the
	// compressed minute, and its sweep interval unless ClockSweepMinutes
	// says otherwise. Default 6s: a 1.5 s query answers in 150 ms, well
	// above the machine's own time per query.
	ClockInterval time.Duration
	// ClockSweepMinutes is the clock scenario's sweep interval in its
	// compressed minutes (ClockInterval). Default 1.
	ClockSweepMinutes int
	// ClockPasses is how many intervals each clock configuration is
	// measured over, after its first pass. Default 10.
	ClockPasses int
	// ClockDeepPasses is the same for the configurations with runs aged
	// out of the shallow window: long enough to see a deep-pass period.
	// Default server.DeepEvery + 12.
	ClockDeepPasses int
	// ClockConcurrency are the sweep concurrencies (serve's
	// --sweep-concurrency) each clock configuration is measured at, side
	// by side. Default 1.
	ClockConcurrency []int
	// ClockTimeShare is the replicas' --sweep-time-share in the clock
	// scenario; 0: serve's default.
	ClockTimeShare float64
	// GroupShards is the group scenario's shard count. Default 64.
	GroupShards int
	// GroupReplicas is the group scenario's replica count, halved and
	// restored during it. Default 10.
	GroupReplicas int
	// GroupInterval is the group scenario's sweep interval: the group's
	// TTL is 3 of them and its retry 1. Default 3s: at 1s, ten replicas
	// renewing 64 shards on a loaded 2-core machine miss renewals.
	GroupInterval time.Duration
	// TenantsInstallations is how many installations of the App the
	// tenants scenario serves, TenantsRuns the open runs of each. Default
	// 1,000 and 10.
	TenantsInstallations, TenantsRuns int
	// TenantsReplicas are the tenants scenario's replica counts, in
	// increasing order; the largest, at least 2, also gets the churn and
	// the kill. Default 1, 10.
	TenantsReplicas []int
	// TenantsInterval is the tenants scenario's sweep interval, its
	// compressed minute (the latency model's and the secondary limits').
	// Default 15s, meant to leave a pass over 1,000 installations room
	// (not measured yet: see docs/benchmarks.md).
	TenantsInterval time.Duration
	// TenantsWindow is how many intervals each replica count's steady
	// state is measured over. Default 10.
	TenantsWindow int
	// TenantsChurn is how many installations are added, and how many
	// removed, at the largest replica count. Default 20.
	TenantsChurn int
	// TenantsShards is serve's --sweep-shards; 0: its default.
	TenantsShards int
	// Scenarios to run; empty: all of Scenarios().
	Scenarios []string
	// Progress receives one line per step; nil discards.
	Progress io.Writer
}

func (o *Options) defaults() error {
	o.Interval = cmp.Or(o.Interval, 500*time.Millisecond)
	o.Runs = cmp.Or(o.Runs, 20)
	if len(o.Ns) == 0 {
		o.Ns = []int{1, 3, 10}
	}
	o.Window = cmp.Or(o.Window, 30*o.Interval)
	o.Replicas = cmp.Or(o.Replicas, 3)
	o.Takeovers = cmp.Or(o.Takeovers, 20)
	o.BudgetReplicas = cmp.Or(o.BudgetReplicas, slices.Max(o.Ns))
	o.Hour = cmp.Or(o.Hour, 60*o.Interval)
	if len(o.ScaleRuns) == 0 {
		o.ScaleRuns = []int{10, 100, 1000, 5000}
	}
	if len(o.ScaleReplicas) == 0 {
		o.ScaleReplicas = []int{1, 10}
	}
	o.ScaleInterval = cmp.Or(o.ScaleInterval, 10*time.Second)
	o.ScalePasses = cmp.Or(o.ScalePasses, 2)
	if len(o.ClockRuns) == 0 {
		o.ClockRuns = []int{1000, 5000}
	}
	if len(o.ClockReplicas) == 0 {
		o.ClockReplicas = []int{1, 10}
	}
	o.ClockShallow = cmp.Or(o.ClockShallow, 500)
	o.ClockInterval = cmp.Or(o.ClockInterval, 6*time.Second)
	o.ClockPasses = cmp.Or(o.ClockPasses, 10)
	o.ClockSweepMinutes = cmp.Or(o.ClockSweepMinutes, 1)
	o.ClockDeepPasses = cmp.Or(o.ClockDeepPasses, server.DeepEvery+12)
	if len(o.ClockConcurrency) == 0 {
		o.ClockConcurrency = []int{1}
	}
	o.GroupShards = cmp.Or(o.GroupShards, 64)
	o.GroupReplicas = cmp.Or(o.GroupReplicas, 10)
	o.GroupInterval = cmp.Or(o.GroupInterval, 3*time.Second)
	o.TenantsInstallations = cmp.Or(o.TenantsInstallations, 1000)
	o.TenantsRuns = cmp.Or(o.TenantsRuns, 10)
	if len(o.TenantsReplicas) == 0 {
		o.TenantsReplicas = []int{1, 10}
	}
	o.TenantsInterval = cmp.Or(o.TenantsInterval, 15*time.Second)
	o.TenantsWindow = cmp.Or(o.TenantsWindow, 10)
	o.TenantsChurn = cmp.Or(o.TenantsChurn, 20)
	if len(o.Scenarios) == 0 {
		o.Scenarios = Scenarios()
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	for _, l := range []struct {
		field string
		ns    []int
		max   int // 0: none
	}{
		{"Ns", o.Ns, 0},
		{"ScaleReplicas", o.ScaleReplicas, 0},
		{"ClockReplicas", o.ClockReplicas, 0},
		{"ClockConcurrency", o.ClockConcurrency, server.MaxSweepConcurrency},
	} {
		for _, n := range l.ns {
			switch {
			case n < 1:
				return refuse(l.field, l.ns, "has %d, under 1", n)
			case l.max > 0 && n > l.max:
				return refuse(l.field, l.ns, "has %d, over %d", n, l.max)
			}
		}
	}
	switch {
	case o.Interval < 50*time.Millisecond:
		return refuse("Interval", o.Interval, "is under 50ms")
	case o.Runs < 1:
		return refuse("Runs", o.Runs, "is under 1")
	case o.Window < 4*o.Interval:
		return refuse("Window", o.Window, "is under 4 intervals (%v)", 4*o.Interval)
	case o.Replicas < 2:
		return refuse("Replicas", o.Replicas, "is under 2: a takeover needs a successor")
	case o.BudgetReplicas < 1:
		return refuse("BudgetReplicas", o.BudgetReplicas, "is under 1")
	case o.Hour < 10*o.Interval:
		return refuse("Hour", o.Hour, "is under 10 intervals (%v)", 10*o.Interval)
	case o.Takeovers < 1:
		return refuse("Takeovers", o.Takeovers, "is under 1")
	case o.ScaleInterval < 500*time.Millisecond:
		return refuse("ScaleInterval", o.ScaleInterval, "is under 500ms")
	case o.GroupShards < 1:
		return refuse("GroupShards", o.GroupShards, "is under 1")
	case o.GroupReplicas < 2:
		return refuse("GroupReplicas", o.GroupReplicas, "is under 2: the scenario kills one and stops half")
	case o.GroupInterval < 100*time.Millisecond:
		return refuse("GroupInterval", o.GroupInterval, "is under 100ms")
	case o.ScalePasses < 1:
		return refuse("ScalePasses", o.ScalePasses, "is under 1")
	case o.TenantsInstallations < 1:
		return refuse("TenantsInstallations", o.TenantsInstallations, "is under 1")
	case o.TenantsRuns < 1:
		return refuse("TenantsRuns", o.TenantsRuns, "is under 1")
	case !increasing(o.TenantsReplicas) || o.TenantsReplicas[0] < 1 || slices.Max(o.TenantsReplicas) < 2:
		return refuse("TenantsReplicas", o.TenantsReplicas, "is not increasing counts of at least 1, the largest at least 2 (it kills one)")
	case o.TenantsInterval < 500*time.Millisecond:
		return refuse("TenantsInterval", o.TenantsInterval, "is under 500ms")
	case o.TenantsWindow < 2:
		return refuse("TenantsWindow", o.TenantsWindow, "is under 2 intervals")
	case o.TenantsChurn < 1 || o.TenantsChurn > o.TenantsInstallations:
		return refuse("TenantsChurn", o.TenantsChurn, "is not within 1 to the installations (%d)", o.TenantsInstallations)
	case o.TenantsShards < 0:
		return refuse("TenantsShards", o.TenantsShards, "is negative")
	case !slices.IsSorted(o.ScaleRuns) || o.ScaleRuns[0] < 1:
		return refuse("ScaleRuns", o.ScaleRuns, "is not increasing populations of at least 1")
	case !slices.IsSorted(o.ClockRuns) || o.ClockRuns[0] < 1:
		return refuse("ClockRuns", o.ClockRuns, "is not increasing populations of at least 1")
	case o.ClockInterval < time.Second:
		return refuse("ClockInterval", o.ClockInterval, "is under 1s")
	case o.ClockSweepMinutes < 1:
		return refuse("ClockSweepMinutes", o.ClockSweepMinutes, "is under 1")
	case o.ClockPasses < 2:
		return refuse("ClockPasses", o.ClockPasses, "is under 2")
	case o.ClockDeepPasses < 2:
		return refuse("ClockDeepPasses", o.ClockDeepPasses, "is under 2")
	case o.ClockTimeShare < 0 || o.ClockTimeShare > 1:
		return refuse("ClockTimeShare", o.ClockTimeShare, "is not within 0 (serve's default) to 1")
	}
	if err := o.Load.defaults(); err != nil {
		return err
	}
	for _, s := range o.Scenarios {
		if !slices.Contains(Scenarios(), s) {
			return refuse("Scenarios", o.Scenarios, "has %q, not one of %v", s, Scenarios())
		}
	}
	return nil
}

// ttl and retry are the sweeper lease's, as pkg/server/leases.go derives
// them from the sweep interval.
func (o *Options) ttl() time.Duration   { return server.MergeGateSweeper().TTL(o.Interval) }
func (o *Options) retry() time.Duration { return server.MergeGateSweeper().Retry(o.Interval) }

// increasing reports whether each of ns is larger than the one before it.
func increasing(ns []int) bool {
	for i := 1; i < len(ns); i++ {
		if ns[i] <= ns[i-1] {
			return false
		}
	}
	return true
}
