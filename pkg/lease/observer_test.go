package lease_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

// recorder counts the events Run reports, keyed by what a metric would
// label them with. Safe for concurrent use.
type recorder struct {
	mu          sync.Mutex
	campaigning map[string]int    // by lease
	held        map[string]int    // by lease: terms started minus step-downs
	terms       map[string]int    // by lease
	stepDowns   map[string]int    // by "lease/reason"
	calls       map[string]int    // by "lease/op", answered or not
	failed      map[string]int    // by "lease/op"
	negative    []time.Duration   // latencies under 0, which no call has
	byOp        map[string]uint64 // by op, every lease
}

func newRecorder() *recorder {
	return &recorder{campaigning: map[string]int{}, held: map[string]int{}, terms: map[string]int{},
		stepDowns: map[string]int{}, calls: map[string]int{}, failed: map[string]int{}, byOp: map[string]uint64{}}
}

// observe counts e; chain it after the harness's recorder on Spec.OnEvent.
func (r *recorder) observe(e lease.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch e.Kind {
	case lease.Campaigning:
		r.campaigning[e.Name]++
	case lease.Elected:
		r.held[e.Name]++
		r.terms[e.Name]++
	case lease.SteppedDown:
		r.held[e.Name]--
		r.stepDowns[e.Name+"/"+e.Reason]++
	case lease.StoreCalled:
		r.calls[e.Name+"/"+e.Op]++
		r.byOp[e.Op]++
		if e.Failed {
			r.failed[e.Name+"/"+e.Op]++
		}
		if e.Took < 0 {
			r.negative = append(r.negative, e.Took)
		}
	}
}

// also returns spec with obs counting its events after what spec records.
func (r *recorder) also(spec lease.Spec) lease.Spec {
	record := spec.OnEvent
	spec.OnEvent = func(e lease.Event) {
		record(e)
		r.observe(e)
	}
	return spec
}

// snapshot renders the counters of one kind, sorted, for got/want messages.
func snapshot[V comparable](r *recorder, m map[string]V) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return fmt.Sprint(out)
}

// check is one observed count against what a rule wants.
type check struct{ got, want, rule string }

// expect reports every check whose got is not its want, when.
func expect(t *testing.T, when string, checks []check) {
	t.Helper()
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %s, want %s: %s", when, c.got, c.want, c.rule)
		}
	}
}

// TestEventsCountTermsStepDownsAndStoreCallsPerLease pins what Run reports
// to Spec.OnEvent, the feed of leaseprom's metrics: one consumer serves two
// Runs of two leases; each Run campaigns once, each term starts and steps
// down once with its reason, and every store call is reported once with its
// op, failed only when it got no answer.
func TestEventsCountTermsStepDownsAndStoreCallsPerLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		obs := newRecorder()
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
		doneA := h.start(ctx, st, obs.also(specA), h.work("a", nil))
		doneB := h.start(ctx, st, obs.also(specB), h.work("b", nil))

		h.sleepUntil(2500 * time.Millisecond)
		synctest.Wait()
		expect(t, "while both hold", []check{
			{snapshot(obs, obs.campaigning), "[alpha=1 beta=1]", "Campaigning once per Run"},
			{snapshot(obs, obs.held), "[alpha=1 beta=1]", "both hold their lease"},
			{snapshot(obs, obs.terms), "[alpha=2 beta=1]", "Elected once per term won"},
			{snapshot(obs, obs.stepDowns), "[alpha/refused=1]", "SteppedDown with the reason of the term that ended"},
			{snapshot(obs, obs.failed), "[beta/acquire=2]", "a store call with no answer is failed"},
		})

		cancel()
		<-doneA
		<-doneB
		expect(t, "after both stepped down", []check{
			{snapshot(obs, obs.held), "[alpha=0 beta=0]", "every Elected has its SteppedDown"},
			{snapshot(obs, obs.stepDowns), "[alpha/ctx_done=1 alpha/refused=1 beta/ctx_done=1]", "SteppedDown with the reason of the term that ended"},
			// Every store call is reported: alpha 2 attempts, 1 renewal, 2
			// releases; beta 3 attempts (2 failed) and 3 releases (2 after
			// the failed ones).
			{snapshot(obs, obs.byOp), "[acquire=5 release=5 renew=1]", "every store call is reported"},
			{snapshot(obs, obs.calls), "[alpha/acquire=2 alpha/release=2 alpha/renew=1 beta/acquire=3 beta/release=3]", "every store call is reported under its lease"},
		})
		if len(obs.negative) != 0 {
			t.Errorf("got latencies %v, want none negative: a call's latency is its duration", obs.negative)
		}
	})
}

// TestCallsCutByShutdownAreNotStoreFailures pins what StoreCalled's godoc
// and the logs promise: a store call cut because Run's context was done (an
// attempt) or the term ended (a renewal) says nothing about the store. It is
// reported as neither a failure nor a latency, and opens no
// store-unreachable episode.
func TestCallsCutByShutdownAreNotStoreFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		obs := newRecorder()
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
		doneA := h.start(ctx, st, obs.also(specA), h.work("a", nil))
		h.sleepUntil(800 * time.Millisecond)
		doneB := h.start(ctx, st, obs.also(specB), h.work("b", nil))
		h.sleepUntil(1500 * time.Millisecond)
		cancel()
		<-doneA
		<-doneB

		if n := len(st.Calls("renew", "a")) + len(st.Calls("acquire", "b")); n != 2 {
			t.Fatalf("got %d cut calls, want 2 (a's renewal, b's attempt): the test must cut calls in flight", n)
		}
		if got := snapshot(obs, obs.failed); got != "[]" {
			t.Errorf("got failed calls %s, want none: a call cut by shutdown is not a store failure", got)
		}
		// Reported: a's winning Acquire; a's release and b's release after
		// its unanswered attempt. Not reported: the two cut calls.
		if got, want := snapshot(obs, obs.byOp), "[acquire=1 release=2]"; got != want {
			t.Errorf("got store calls %s, want %s: a call cut by shutdown is not reported", got, want)
		}
		for _, msg := range []string{"lease: store unreachable", "lease: store reachable again", "lease: renew failed"} {
			if logs := h.Logs(msg); len(logs) != 0 {
				t.Errorf("got %d %q logs, want 0: a call cut by shutdown opens no episode", len(logs), msg)
			}
		}
	})
}
