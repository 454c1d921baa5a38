package lease_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

// TestRenewalRefusedBecauseAnotherOwnerTookTheLeaseIsOneWarning pins that a
// loss is logged once: when another owner really took the lease, the
// renewal is refused, Run steps down with one warning, and the release's
// ErrLost, the expected answer, is no second warning. Both the plain and the
// term-scoped release are checked.
func TestRenewalRefusedBecauseAnotherOwnerTookTheLeaseIsOneWarning(t *testing.T) {
	plan := func(c storeCall) fault {
		if c.Op == "renew" && c.N == 1 {
			return fault{kind: stolen} // the thief takes the lease, then the renewal lands
		}
		return fault{}
	}
	for _, c := range []struct {
		name string
		st   func() lease.Store
	}{
		{"Release", func() lease.Store { return newFaultStore(lease.NewMemoryStore(), plan) }},
		{"ReleaseTerm", func() lease.Store { return newTermFaultStore(lease.NewMemoryStore(), plan) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				st := c.st()
				h.runUntil(3*time.Second, st, h.spec("a", time.Hour), h.work("a", nil))

				renews := st.(interface {
					Calls(op, owner string) []storeCall
				}).Calls("renew", "a")
				if len(renews) != 2 || renews[1].OK || renews[1].Err != nil {
					t.Fatalf("got renewals %+v, want the second refused: the setup", renews)
				}
				rel := st.(interface {
					Calls(op, owner string) []storeCall
				}).Calls("release", "a")
				if len(rel) != 1 || !errors.Is(rel[0].Err, lease.ErrLost) {
					t.Fatalf("got releases %+v, want one answered ErrLost: the thief holds the lease", rel)
				}
				if sd := h.Events("a", lease.SteppedDown); len(sd) != 1 || sd[0].Reason != lease.ReasonRefused || sd[0].At != h.at(2*time.Second) {
					t.Errorf("got step-downs %+v, want one at 2s with reason %q", sd, lease.ReasonRefused)
				}
				warns := h.LogsAt("WARN")
				if len(warns) != 1 || warns[0]["msg"] != "lease: stepped down" {
					t.Errorf("got warnings %v, want one, the step-down: one loss is one warning", warns)
				}
				if rl := h.Events("a", lease.Released); len(rl) != 0 {
					t.Errorf("got Released events %+v, want none: the release was refused", rl)
				}
			})
		})
	}
}

// TestReleaseAfterUnansweredAttemptsIsReportedOncePerEpisode pins the
// package doc's "once per episode" for a store that fails every Acquire but
// answers its Release: one "released" log and one Released event per
// store-unreachable episode, not one per attempt. At TTL 90ms (an attempt
// every 30ms) Acquires fail before 150ms, are answered (refused) at 150ms
// and 180ms, and fail again from 210ms: two episodes.
func TestReleaseAfterUnansweredAttemptsIsReportedOncePerEpisode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		st := newFaultStore(lease.NewMemoryStore(), func(c storeCall) fault {
			if c.Op != "acquire" {
				return fault{}
			}
			if at := h.since(c.At); at >= 150*time.Millisecond && at < 210*time.Millisecond {
				return fault{kind: refuse}
			}
			return fault{kind: fail}
		})
		spec := h.spec("a", 0)
		spec.TTL = 90 * time.Millisecond
		h.runUntil(330*time.Millisecond, st, spec, h.work("a", nil))

		rel := st.Calls("release", "a")
		if len(rel) < 9 {
			t.Fatalf("got %d releases, want one after each of at least 9 failed attempts: the setup", len(rel))
		}
		for _, c := range rel {
			if c.Err != nil {
				t.Fatalf("release at %v answered %v, want nil: the setup", h.since(c.At), c.Err)
			}
		}
		for msg, n := range map[string]int{
			"lease: store unreachable":     2,
			"lease: store reachable again": 1,
			"lease: released":              2,
		} {
			if got := len(h.Logs(msg)); got != n {
				t.Errorf("got %d %q logs, want %d: once per episode, not per attempt", got, msg, n)
			}
		}
		rl := h.Events("a", lease.Released)
		if len(rl) != 2 || rl[0].At != h.at(0) || rl[1].At != h.at(210*time.Millisecond) {
			t.Errorf("got Released events at %v, want two, at 0 and 210ms: once per episode, not per attempt", eventTimes(h, rl))
		}
		for _, e := range rl {
			if e.Reason != lease.ReasonUnanswered {
				t.Errorf("got a Released event with reason %q, want %q", e.Reason, lease.ReasonUnanswered)
			}
		}
	})
}

// eventTimes returns the instants of events as offsets from t0.
func eventTimes(h *harness, events []lease.Event) []time.Duration {
	xs := make([]time.Time, len(events))
	for i, e := range events {
		xs[i] = e.At
	}
	return h.offsets(xs)
}
