package lease_test

import (
	"context"
	"errors"
	"log/slog"
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

// TestHealthCountsFromTheCancellationNotFromRunsGoroutine pins that Health
// measures work that outlives its term from the instant its context was
// cancelled, even when Run's goroutine gets to the step-down later: here
// renewals fail, "renew failed" at 1s holds Run's goroutine in a slow log
// sink until 4s, and the deadline cancels work's context at 2.5s; work
// ignores it until 6s. With a bound of 500ms, Check fails from 3s.
func TestHealthCountsFromTheCancellationNotFromRunsGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound = 500 * time.Millisecond
		h := newHarness(t)
		health := lease.NewHealth(bound)
		st := newTermFaultStore(lease.NewMemoryStore(), func(c storeCall) fault {
			if c.Op == "renew" {
				return fault{kind: fail}
			}
			return fault{}
		})
		spec := h.spec("a", time.Hour)
		spec.Health = health
		spec.Logger = slog.New(&slowSink{slow: map[string]bool{"lease: renew failed": true}, delay: 3 * time.Second, cancelled: map[string]bool{}})
		ctx, cancel := context.WithCancel(t.Context())
		done := h.start(ctx, st, spec, h.work("a", func(ctx context.Context) {
			<-ctx.Done()
			h.sleepUntil(6 * time.Second)
		}))
		for _, c := range []struct {
			at    time.Duration
			stuck bool
			why   string
		}{
			{2500*time.Millisecond + bound - time.Millisecond, false, "within the bound after the cancellation at 2.5s"},
			{2500*time.Millisecond + bound, true, "work has not returned bound after its context was cancelled, though Run's goroutine is still in the log sink"},
			{6*time.Second + time.Millisecond, false, "work returned"},
		} {
			h.sleepUntil(c.at)
			synctest.Wait()
			if err := health.Check(); errors.Is(err, lease.ErrStuck) != c.stuck {
				t.Errorf("at %v: Check() = %v, want stuck %v: %s", c.at, err, c.stuck, c.why)
			}
		}
		cancel()
		<-done
	})
}
