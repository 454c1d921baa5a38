package leaseprom_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/lease/leaseprom"
)

// TestMetricsCountTermsStepDownsAndStoreCallsPerLease runs two Runs of two
// leases on one Metrics and pins the series they leave, exactly.
func TestMetricsCountTermsStepDownsAndStoreCallsPerLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		reg := prometheus.NewPedanticRegistry()
		m := leaseprom.New(reg) // one Metrics shared by two Runs, two leases
		// alpha: its first renewal (1s) is refused; it wins again at 2s.
		// beta: its first two attempts fail; it wins at 2s.
		st := &scripted{Store: lease.NewMemoryStore()}
		ctx, cancel := context.WithCancel(t.Context())
		doneA := run(ctx, st, lease.Spec{Name: "alpha", Owner: "a", TTL: 3 * time.Second, Retry: time.Second, OnEvent: m.Observe})
		doneB := run(ctx, st, lease.Spec{Name: "beta", Owner: "b", TTL: 3 * time.Second, Retry: time.Second, OnEvent: m.Observe})

		time.Sleep(time.Until(start.Add(2500 * time.Millisecond)))
		synctest.Wait()
		want := `
# HELP lease_held Runs of this process that hold the lease.
# TYPE lease_held gauge
lease_held{lease="alpha"} 1
lease_held{lease="beta"} 1
# HELP lease_step_downs_total Terms ended, by reason.
# TYPE lease_step_downs_total counter
lease_step_downs_total{lease="alpha",reason="refused"} 1
# HELP lease_store_call_errors_total Lease store calls that got no answer, by operation.
# TYPE lease_store_call_errors_total counter
lease_store_call_errors_total{op="acquire"} 2
# HELP lease_terms_started_total Terms won by this process.
# TYPE lease_terms_started_total counter
lease_terms_started_total{lease="alpha"} 2
lease_terms_started_total{lease="beta"} 1
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
			"lease_held", "lease_step_downs_total", "lease_store_call_errors_total", "lease_terms_started_total"); err != nil {
			t.Errorf("while both hold: %v", err)
		}

		cancel()
		<-doneA
		<-doneB
		want = `
# HELP lease_held Runs of this process that hold the lease.
# TYPE lease_held gauge
lease_held{lease="alpha"} 0
lease_held{lease="beta"} 0
# HELP lease_step_downs_total Terms ended, by reason.
# TYPE lease_step_downs_total counter
lease_step_downs_total{lease="alpha",reason="ctx_done"} 1
lease_step_downs_total{lease="alpha",reason="refused"} 1
lease_step_downs_total{lease="beta",reason="ctx_done"} 1
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "lease_held", "lease_step_downs_total"); err != nil {
			t.Errorf("after both stepped down: %v", err)
		}
		// Every store call is timed: alpha 2 attempts, 1 renewal, 2 releases;
		// beta 3 attempts (2 failed) and 3 releases (2 after the failed ones).
		for op, n := range map[string]uint64{"acquire": 5, "renew": 1, "release": 5} {
			if got := histogramCount(t, reg, "lease_store_call_duration_seconds", op); got != n {
				t.Errorf("got %d %s observations, want %d: every store call is timed", got, op, n)
			}
		}
		if n, err := testutil.GatherAndCount(prometheus.DefaultGatherer, "lease_held"); err != nil || n != 0 {
			t.Errorf("got %d lease_held series on the global registry (%v), want 0: metrics go only to the caller's registerer", n, err)
		}
	})
}

// scripted is a MemoryStore whose first renewal of alpha is refused and
// whose first two Acquires of beta get no answer. Safe for concurrent use.
type scripted struct {
	// A plain Store: an embedded *MemoryStore would promote AcquireTerm,
	// which Run prefers, past the scripted Acquire.
	lease.Store
	mu                    sync.Mutex
	alphaRenews, betaAcqs int
}

var errUnreachable = errors.New("scripted: store unreachable")

func (s *scripted) Acquire(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	n := s.betaAcqs
	if name == "beta" {
		s.betaAcqs++
	}
	s.mu.Unlock()
	if name == "beta" && n < 2 {
		return false, errUnreachable
	}
	return s.Store.Acquire(ctx, name, owner, now, ttl)
}

func (s *scripted) Renew(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	n := s.alphaRenews
	if name == "alpha" {
		s.alphaRenews++
	}
	s.mu.Unlock()
	if name == "alpha" && n == 0 {
		return false, nil
	}
	return s.Store.Renew(ctx, name, owner, now, ttl)
}

// run starts lease.Run with work that waits for its term to end; the
// channel is closed when Run returns.
func run(ctx context.Context, st lease.Store, spec lease.Spec) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = lease.Run(ctx, st, spec, func(ctx context.Context) { <-ctx.Done() })
	}()
	return done
}

// TestNilMetricsCountsNothing pins the godoc: a nil *Metrics observes every
// kind of event and counts nothing.
func TestNilMetricsCountsNothing(t *testing.T) {
	var m *leaseprom.Metrics
	for _, e := range []lease.Event{
		{Name: "net", Kind: lease.Campaigning},
		{Name: "net", Kind: lease.Elected},
		{Name: "net", Kind: lease.SteppedDown, Reason: lease.ReasonRefused},
		{Name: "net", Kind: lease.StoreCalled, Op: lease.OpRenew, Took: time.Second, Failed: true},
	} {
		m.Observe(e)
	}
}

// TestNewRegistersOnlyOnTheCallersRegisterer pins the series New registers,
// by name and type, on reg and nowhere else, before any Run: a lease's held
// and terms series appear at 0 once a Run campaigns.
func TestNewRegistersOnlyOnTheCallersRegisterer(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := leaseprom.New(reg)
	m.Observe(lease.Event{Name: "net", Kind: lease.Campaigning})
	want := `
# HELP lease_held Runs of this process that hold the lease.
# TYPE lease_held gauge
lease_held{lease="net"} 0
# HELP lease_step_downs_late_total Terms that stopped their work at or after the lease's expiry in the store.
# TYPE lease_step_downs_late_total counter
lease_step_downs_late_total{lease="net"} 0
# HELP lease_terms_started_total Terms won by this process.
# TYPE lease_terms_started_total counter
lease_terms_started_total{lease="net"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Errorf("after Campaigning: %v: a lease's series are visible at 0 before its first term", err)
	}
	if n, err := testutil.GatherAndCount(prometheus.DefaultGatherer, "lease_held", "lease_terms_started_total"); err != nil || n != 0 {
		t.Errorf("got %d series on the global registry (%v), want 0: metrics go only to the caller's registerer", n, err)
	}
	leaseprom.New(nil) // registers nowhere: a second New on no registry does not panic
}

// histogramCount is the sample count of the histogram name{op}.
func histogramCount(t *testing.T, g prometheus.Gatherer, name, op string) uint64 {
	t.Helper()
	return histogramOf(t, g, name, map[string]string{"op": op}).GetSampleCount()
}

// histogramOf is the histogram name whose labels include labels; nil
// (whose getters give zeros) when there is none.
func histogramOf(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) *dto.Histogram {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			matched := 0
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
					matched++
				}
			}
			if matched == len(labels) {
				return m.GetHistogram()
			}
		}
	}
	return nil
}

// TestGroupMetricsCountShardsByGroup pins the group series: two members of
// one group, each a process with its own Metrics, settle to 2 shards each;
// the first gave 2 up to even the share (rebalanced hand-overs), and both
// see every shard held by 2 live members.
func TestGroupMetricsCountShardsByGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := lease.NewMemoryStore()
		regA, regB := prometheus.NewPedanticRegistry(), prometheus.NewPedanticRegistry()
		ctx, cancel := context.WithCancel(t.Context())
		spec := lease.GroupSpec{Name: "g", Shards: 4, TTL: 3 * time.Second}
		doneA := runGroup(ctx, st, spec, "a", leaseprom.New(regA))
		time.Sleep(500 * time.Millisecond)
		doneB := runGroup(ctx, st, spec, "b", leaseprom.New(regB))
		time.Sleep(5 * time.Second)
		synctest.Wait()
		const series = `
# HELP lease_group_members Live members of the lease group in this member's last list.
# TYPE lease_group_members gauge
lease_group_members{group="g"} 2
# HELP lease_group_shards_held Shard terms of the lease group this process serves.
# TYPE lease_group_shards_held gauge
lease_group_shards_held{group="g"} 2
# HELP lease_group_shards_overdue Shards of the lease group this member has seen unheld for longer than TTL + Retry.
# TYPE lease_group_shards_overdue gauge
lease_group_shards_overdue{group="g"} 0
# HELP lease_group_shards_unheld Shards of the lease group unheld in this member's last list.
# TYPE lease_group_shards_unheld gauge
lease_group_shards_unheld{group="g"} 0
`
		names := []string{"lease_group_members", "lease_group_shards_held", "lease_group_shards_overdue", "lease_group_shards_unheld", "lease_group_handovers_total", "lease_held"}
		if err := testutil.GatherAndCompare(regA, strings.NewReader(series+`
# HELP lease_group_handovers_total Shard terms of the lease group this process ended, by reason.
# TYPE lease_group_handovers_total counter
lease_group_handovers_total{group="g",reason="rebalanced"} 2
`), names...); err != nil {
			t.Errorf("a, which held all 4 and gave 2 up: %v", err)
		}
		if err := testutil.GatherAndCompare(regB, strings.NewReader(series), names...); err != nil {
			t.Errorf("b, which took 2: %v", err)
		}
		cancel()
		<-doneA
		<-doneB
	})
}

// TestGroupMetricsCountOverdueShards pins lease_group_shards_overdue: a
// member whose campaigns never get an answer sees every shard unheld, and
// once that lasted longer than TTL + Retry, overdue.
func TestGroupMetricsCountOverdueShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		ctx, cancel := context.WithCancel(t.Context())
		spec := lease.GroupSpec{Name: "g", Shards: 4, TTL: 3 * time.Second, Retry: time.Second}
		done := runGroup(ctx, noCampaign{lease.NewMemoryStore()}, spec, "a", leaseprom.New(reg))
		overdue := func(n int) string {
			return fmt.Sprintf(`
# HELP lease_group_shards_overdue Shards of the lease group this member has seen unheld for longer than TTL + Retry.
# TYPE lease_group_shards_overdue gauge
lease_group_shards_overdue{group="g"} %d
`, n)
		}
		time.Sleep(spec.TTL + spec.Retry) // lists at 0..4s: unheld for 4s, not longer
		synctest.Wait()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(overdue(0)), "lease_group_shards_overdue"); err != nil {
			t.Errorf("unheld for TTL + Retry: %v: overdue is past the bound, not at it", err)
		}
		time.Sleep(spec.Retry)
		synctest.Wait()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(overdue(4)), "lease_group_shards_overdue"); err != nil {
			t.Errorf("unheld for TTL + 2 Retries: %v", err)
		}
		cancel()
		<-done
	})
}

// TestGroupMetricsCountMembersOfAnotherShardCount pins
// lease_group_other_members: a serves g with 4 shards and b with 2, as
// during a rolling change of the shard count, so each sees one owner
// serving the group with another count; once b stops (its leases
// released), a's next list shows none: the change is done.
func TestGroupMetricsCountMembersOfAnotherShardCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := lease.NewMemoryStore()
		regA, regB := prometheus.NewPedanticRegistry(), prometheus.NewPedanticRegistry()
		ctx, cancel := context.WithCancel(t.Context())
		ctxB, stopB := context.WithCancel(ctx)
		spec := lease.GroupSpec{Name: "g", Shards: 4, TTL: 3 * time.Second, Retry: time.Second}
		doneA := runGroup(ctx, st, spec, "a", leaseprom.New(regA))
		spec.Shards = 2
		doneB := runGroup(ctxB, st, spec, "b", leaseprom.New(regB))
		others := func(n int) string {
			return fmt.Sprintf(`
# HELP lease_group_other_members Owners serving the lease group with another shard count (live members or shard holders) in this member's last list: above 0 while a change of the shard count is under way.
# TYPE lease_group_other_members gauge
lease_group_other_members{group="g"} %d
`, n)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		for _, m := range []struct {
			owner string
			reg   *prometheus.Registry
		}{{"a", regA}, {"b", regB}} {
			if err := testutil.GatherAndCompare(m.reg, strings.NewReader(others(1)), "lease_group_other_members"); err != nil {
				t.Errorf("%s, while the other serves g with another shard count: %v", m.owner, err)
			}
		}
		stopB()
		<-doneB
		time.Sleep(spec.Retry + time.Millisecond)
		synctest.Wait()
		if err := testutil.GatherAndCompare(regA, strings.NewReader(others(0)), "lease_group_other_members"); err != nil {
			t.Errorf("a, once b stopped and released its leases: %v", err)
		}
		cancel()
		<-doneA
	})
}

// noCampaign is a MemoryStore whose AcquireTerm never answers.
type noCampaign struct{ *lease.MemoryStore }

func (noCampaign) AcquireTerm(context.Context, string, string, time.Time, time.Duration, string) (bool, error) {
	return false, errUnreachable
}

// runGroup starts lease.RunGroup of spec for owner, counting into m, with
// work that waits for its term to end; the channel is closed when it
// returns.
func runGroup(ctx context.Context, st lease.Store, spec lease.GroupSpec, owner string, m *leaseprom.Metrics) <-chan struct{} {
	spec.Owner, spec.OnEvent = owner, m.Observe
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = lease.RunGroup(ctx, st, spec, func(ctx context.Context, _ int) { <-ctx.Done() })
	}()
	return done
}

// TestStepDownMarginsAreObservedByLeaseAndReason pins
// lease_step_down_margin_seconds: each SteppedDown's Margin is observed by
// lease and reason, and a step-down at or after the store's expiry (a
// margin of zero or less) falls in the bucket le="0", the one to alert on.
func TestStepDownMarginsAreObservedByLeaseAndReason(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := leaseprom.New(reg)
	for _, margin := range []time.Duration{500 * time.Millisecond, 0, -2 * time.Second} {
		m.Observe(lease.Event{Name: "net", Kind: lease.SteppedDown, Reason: lease.ReasonDeadline, Margin: margin})
	}
	m.Observe(lease.Event{Name: "net", Kind: lease.SteppedDown, Reason: lease.ReasonCanceled, Margin: 2 * time.Second})
	want := `
# HELP lease_step_down_margin_seconds How long before the store's expiry of its last proven call each term stopped its work, by reason; le="0": at or after it.
# TYPE lease_step_down_margin_seconds histogram
lease_step_down_margin_seconds_bucket{lease="net",reason="ctx_done",le="0"} 0
lease_step_down_margin_seconds_bucket{lease="net",reason="ctx_done",le="0.001"} 0
lease_step_down_margin_seconds_bucket{lease="net",reason="ctx_done",le="0.004"} 0
lease_step_down_margin_seconds_bucket{lease="net",reason="ctx_done",le="0.016"} 0
lease_step_down_margin_seconds_bucket{lease="net",reason="ctx_done",le="0.064"} 0
lease_step_down_margin_seconds_bucket{lease="net",reason="ctx_done",le="0.256"} 0
lease_step_down_margin_seconds_bucket{lease="net",reason="ctx_done",le="1.024"} 0
lease_step_down_margin_seconds_bucket{lease="net",reason="ctx_done",le="4.096"} 1
lease_step_down_margin_seconds_bucket{lease="net",reason="ctx_done",le="16.384"} 1
lease_step_down_margin_seconds_bucket{lease="net",reason="ctx_done",le="65.536"} 1
lease_step_down_margin_seconds_bucket{lease="net",reason="ctx_done",le="262.144"} 1
lease_step_down_margin_seconds_bucket{lease="net",reason="ctx_done",le="+Inf"} 1
lease_step_down_margin_seconds_sum{lease="net",reason="ctx_done"} 2
lease_step_down_margin_seconds_count{lease="net",reason="ctx_done"} 1
lease_step_down_margin_seconds_bucket{lease="net",reason="deadline",le="0"} 2
lease_step_down_margin_seconds_bucket{lease="net",reason="deadline",le="0.001"} 2
lease_step_down_margin_seconds_bucket{lease="net",reason="deadline",le="0.004"} 2
lease_step_down_margin_seconds_bucket{lease="net",reason="deadline",le="0.016"} 2
lease_step_down_margin_seconds_bucket{lease="net",reason="deadline",le="0.064"} 2
lease_step_down_margin_seconds_bucket{lease="net",reason="deadline",le="0.256"} 2
lease_step_down_margin_seconds_bucket{lease="net",reason="deadline",le="1.024"} 3
lease_step_down_margin_seconds_bucket{lease="net",reason="deadline",le="4.096"} 3
lease_step_down_margin_seconds_bucket{lease="net",reason="deadline",le="16.384"} 3
lease_step_down_margin_seconds_bucket{lease="net",reason="deadline",le="65.536"} 3
lease_step_down_margin_seconds_bucket{lease="net",reason="deadline",le="262.144"} 3
lease_step_down_margin_seconds_bucket{lease="net",reason="deadline",le="+Inf"} 3
lease_step_down_margin_seconds_sum{lease="net",reason="deadline"} -1.5
lease_step_down_margin_seconds_count{lease="net",reason="deadline"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "lease_step_down_margin_seconds"); err != nil {
		t.Errorf("%v: each step-down's margin is observed, and one at or after the expiry falls in le=\"0\"", err)
	}
	want = `
# HELP lease_step_downs_late_total Terms that stopped their work at or after the lease's expiry in the store.
# TYPE lease_step_downs_late_total counter
lease_step_downs_late_total{lease="net"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "lease_step_downs_late_total"); err != nil {
		t.Errorf("%v: the step-downs at a margin of zero or less are counted late", err)
	}
}

// TestShardStepDownsCountMarginsAndLateOnesByGroup pins a lease group's
// step-down series: each shard term's SteppedDown has its Margin observed
// by group and reason in lease_group_step_down_margin_seconds, one at or
// after its shard lease's expiry counts in
// lease_group_step_downs_late_total{group} (visible at 0 from the group's
// first campaign, so an alert sees the first), and none of them counts in
// the lease series, whose label lease names a lease, not a group.
func TestShardStepDownsCountMarginsAndLateOnesByGroup(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := leaseprom.New(reg)
	m.Observe(lease.Event{Name: "g/shard", Group: "g", Shard: -1, Kind: lease.Campaigning})
	late := `
# HELP lease_group_step_downs_late_total Shard terms of the lease group that stopped their work at or after their shard lease's expiry in the store.
# TYPE lease_group_step_downs_late_total counter
lease_group_step_downs_late_total{group="g"} %d
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(late, 0)), "lease_group_step_downs_late_total"); err != nil {
		t.Errorf("after the group's Campaigning: %v: its late step-downs are visible at 0 before any", err)
	}
	for i, margin := range []time.Duration{500 * time.Millisecond, 0, -2 * time.Second} {
		m.Observe(lease.Event{Name: fmt.Sprintf("g/4/%d", i), Group: "g", Shard: i, Kind: lease.SteppedDown, Reason: lease.ReasonDeadline, Margin: margin})
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(late, 2)), "lease_group_step_downs_late_total"); err != nil {
		t.Errorf("%v: the shard step-downs at a margin of zero or less are counted late, by group", err)
	}
	for _, c := range []struct {
		le   string
		want uint64
	}{{"0", 2}, {"1.024", 3}} {
		if got := histogramBucket(t, reg, "lease_group_step_down_margin_seconds", "g", lease.ReasonDeadline, c.le); got != c.want {
			t.Errorf("lease_group_step_down_margin_seconds{group=\"g\",reason=\"deadline\",le=%q} = %d, want %d: each shard step-down's margin is observed", c.le, got, c.want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "lease_step_downs_late_total", "lease_step_down_margin_seconds", "lease_step_downs_total"); err != nil || n != 0 {
		t.Errorf("lease series of a group's step-downs: %d (%v), want 0: they are counted by group", n, err)
	}
}

// histogramBucket is the cumulative count of the bucket le of the
// histogram name{group, reason}.
func histogramBucket(t *testing.T, g prometheus.Gatherer, name, group, reason, le string) uint64 {
	t.Helper()
	for _, b := range histogramOf(t, g, name, map[string]string{"group": group, "reason": reason}).GetBucket() {
		if strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64) == le {
			return b.GetCumulativeCount()
		}
	}
	return 0
}

// TestGroupStoreCallsCountInTheStoreCallSeries pins that a lease group's
// store calls (a shard's campaign, the member's survey list) count in
// lease_store_call_duration_seconds and lease_store_call_errors_total by
// op, as a Run's do, not only in the group's own series.
func TestGroupStoreCallsCountInTheStoreCallSeries(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := leaseprom.New(reg)
	m.Observe(lease.Event{Name: lease.MemberName("g", 2, "a"), Group: "g", Shard: -1, Kind: lease.StoreCalled, Op: lease.OpList, Took: 2 * time.Millisecond})
	m.Observe(lease.Event{Name: lease.ShardName("g", 2, 0), Group: "g", Shard: 0, Kind: lease.StoreCalled, Op: lease.OpAcquire, Took: time.Second, Failed: true})
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP lease_store_call_errors_total Lease store calls that got no answer, by operation.
# TYPE lease_store_call_errors_total counter
lease_store_call_errors_total{op="acquire"} 1
`), "lease_store_call_errors_total"); err != nil {
		t.Errorf("a shard's failed Acquire: %v", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "lease_store_call_duration_seconds" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "op" {
					got[l.GetValue()] = mt.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	if want := map[string]uint64{"list": 1, "acquire": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("lease_store_call_duration_seconds samples by op = %v, want %v: a group's calls are timed like a Run's", got, want)
	}
}
