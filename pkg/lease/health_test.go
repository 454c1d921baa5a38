package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

func TestHealthFailsWhileWorkOutlivesItsTermPastTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound = 10 * time.Second
		h := newHarness(t)
		health := lease.NewHealth(bound)
		// a's renewal at 1s is refused; its work ignores the cancellation
		// for 20s. b's work returns on time and shares the Health.
		st := newFaultStore(lease.NewMemoryStore(), func(c storeCall) fault {
			if c.Op == "renew" && c.Owner == "a" {
				return fault{kind: refuse}
			}
			return fault{}
		})
		ctx, cancel := context.WithCancel(t.Context())
		specA, specB := h.spec("a", time.Hour), h.spec("b", time.Hour)
		specB.Name = "other-net"
		specA.Health, specB.Health = health, health
		doneA := h.start(ctx, st, specA, h.work("a", func(ctx context.Context) {
			<-ctx.Done()
			time.Sleep(20 * time.Second)
		}))
		doneB := h.start(ctx, st, specB, h.work("b", nil))

		check := func(at time.Duration, wantStuck bool, why string) {
			t.Helper()
			h.sleepUntil(at)
			synctest.Wait()
			err := health.Check()
			if got := errors.Is(err, lease.ErrStuck); got != wantStuck {
				t.Errorf("at %v: Check() = %v, want stuck %v: %s", at, err, wantStuck, why)
			}
		}
		check(500*time.Millisecond, false, "a term in progress is healthy")
		check(1*time.Second+bound-time.Millisecond, false, "within the bound after the step-down (1s)")
		check(1*time.Second+bound, true, "work has not returned bound after its context was cancelled")
		err := health.Check()
		if err == nil || !strings.Contains(err.Error(), `lease "net"`) || !strings.Contains(err.Error(), `owner "a"`) || !strings.Contains(err.Error(), "cancelled 10s ago") {
			t.Errorf("got %v, want it to name the lease, the owner and how long", err)
		}
		check(21*time.Second, false, "healthy again once work returned")
		cancel()
		<-doneA
		<-doneB
		if err := health.Check(); err != nil {
			t.Errorf("got %v after both Runs returned, want nil", err)
		}
	})
}

func TestNilHealthIsAlwaysHealthy(t *testing.T) {
	var h *lease.Health
	if err := h.Check(); err != nil {
		t.Errorf("got %v, want nil: a nil Health tracks nothing", err)
	}
}
