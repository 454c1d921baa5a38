package lease_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"iterion.dev/iterion/pkg/lease"
)

func TestMetricsCountTermsStepDownsAndStoreCallsPerLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		reg := prometheus.NewPedanticRegistry()
		m := lease.NewMetrics(reg) // one Metrics shared by two Runs, two leases
		// alpha: its first renewal (1s) is refused; it wins again at 2s.
		// beta: its first two attempts fail; it wins at 2s.
		st := newFaultStore(lease.NewMemoryStore(), func(c storeCall) fault {
			switch {
			case c.Owner == "a" && c.Op == "renew" && c.N == 0:
				return fault{kind: refuse}
			case c.Owner == "b" && c.Op == "acquire" && c.N < 2:
				return fault{kind: fail}
			}
			return fault{}
		})
		ctx, cancel := context.WithCancel(t.Context())
		specA, specB := h.spec("a", time.Second), h.spec("b", time.Second)
		specA.Name, specB.Name = "alpha", "beta"
		specA.Metrics, specB.Metrics = m, m
		doneA := h.start(ctx, st, specA, h.work("a", nil))
		doneB := h.start(ctx, st, specB, h.work("b", nil))

		h.sleepUntil(2500 * time.Millisecond)
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

// TestCallsCutByShutdownAreNotStoreFailures pins what Metrics' godoc and the
// logs promise: a store call cut because Run's context was done (an attempt)
// or the term ended (a renewal) says nothing about the store. It counts as
// neither an error nor a latency, and opens no store-unreachable episode.
func TestCallsCutByShutdownAreNotStoreFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		reg := prometheus.NewPedanticRegistry()
		m := lease.NewMetrics(reg)
		// a holds "net"; its first renewal, sent at 1s, hangs. b's first
		// attempt on "other", sent at 0.8s, hangs. Both are in flight, short
		// of their TTL/3 cut, when ctx is done at 1.5s.
		st := newFaultStore(lease.NewMemoryStore(), func(c storeCall) fault {
			if (c.Owner == "a" && c.Op == "renew") || (c.Owner == "b" && c.Op == "acquire") {
				return fault{delay: time.Hour}
			}
			return fault{}
		})
		ctx, cancel := context.WithCancel(t.Context())
		specA, specB := h.spec("a", time.Hour), h.spec("b", time.Hour)
		specB.Name = "other"
		specA.Metrics, specB.Metrics = m, m
		doneA := h.start(ctx, st, specA, h.work("a", nil))
		h.sleepUntil(800 * time.Millisecond)
		doneB := h.start(ctx, st, specB, h.work("b", nil))
		h.sleepUntil(1500 * time.Millisecond)
		cancel()
		<-doneA
		<-doneB

		if n := len(st.Calls("renew", "a")) + len(st.Calls("acquire", "b")); n != 2 {
			t.Fatalf("got %d cut calls, want 2 (a's renewal, b's attempt): the test must cut calls in flight", n)
		}
		if n, err := testutil.GatherAndCount(reg, "lease_store_call_errors_total"); err != nil || n != 0 {
			t.Errorf("got %d lease_store_call_errors_total series (%v), want 0: a call cut by shutdown is not a store error", n, err)
		}
		// Counted: a's winning Acquire; a's release and b's release after
		// its unanswered attempt. Not counted: the two cut calls.
		for op, n := range map[string]uint64{"acquire": 1, "renew": 0, "release": 2} {
			if got := histogramCount(t, reg, "lease_store_call_duration_seconds", op); got != n {
				t.Errorf("got %d %s observations, want %d: a call cut by shutdown is not timed", got, op, n)
			}
		}
		for _, msg := range []string{"lease: store unreachable", "lease: store reachable again", "lease: renew failed"} {
			if logs := h.Logs(msg); len(logs) != 0 {
				t.Errorf("got %d %q logs, want 0: a call cut by shutdown opens no episode", len(logs), msg)
			}
		}
	})
}

// histogramCount is the sample count of the histogram name{op}.
func histogramCount(t *testing.T, g prometheus.Gatherer, name, op string) uint64 {
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
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" && l.GetValue() == op {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}
