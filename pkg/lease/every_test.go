package lease_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

// everyFor runs Every at interval for run in a synctest bubble, its k-th
// pass (from 1) returning a resume instant resume(k) after it (none when
// that is 0), and returns when, after the start, it passed and skipped.
func everyFor(interval, run time.Duration, resume func(k int) time.Duration) (passes, skips []time.Duration) {
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		lease.Every(ctx, interval, time.Now, func(context.Context) (time.Time, bool) {
			passes = append(passes, time.Since(start))
			if d := resume(len(passes)); d != 0 {
				return time.Now().Add(d), false
			}
			return time.Time{}, true
		}, func(time.Time) { skips = append(skips, time.Since(start)) }, lease.Watchdog{})
	}()
	time.Sleep(run)
	cancel()
	<-done
	return passes, skips
}

// TestEveryCadence pins Every's timing in virtual time: the first pass one
// interval after the start, then one per interval, and the ticks before a
// pass's resume instant skipped (reported, not passes).
func TestEveryCadence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = time.Minute
		passes, skips := everyFor(interval, 6*interval+interval/2, func(k int) time.Duration {
			if k == 2 {
				return 2*interval + interval/2 // a rate limit's reset
			}
			return 0
		})
		wantPasses := []time.Duration{interval, 2 * interval, 5 * interval, 6 * interval}
		wantSkips := []time.Duration{3 * interval, 4 * interval}
		if len(passes) != len(wantPasses) || len(skips) != len(wantSkips) {
			t.Fatalf("got passes %v and skips %v, want passes %v and skips %v: one pass per interval, the first one interval in, none before the resume instant", passes, skips, wantPasses, wantSkips)
		}
		for i := range wantPasses {
			if passes[i] != wantPasses[i] {
				t.Errorf("pass %d: got %v, want %v: one pass per interval, the first one interval in", i+1, passes[i], wantPasses[i])
			}
		}
		for i := range wantSkips {
			if skips[i] != wantSkips[i] {
				t.Errorf("skip %d: got %v, want %v: the ticks before the resume instant are skipped", i+1, skips[i], wantSkips[i])
			}
		}
	})
}

// TestEveryPassesAtTheResumeInstant pins the boundary of a pass's resume
// instant in virtual time: only the ticks before it are skipped (it is
// the first instant the next passes may run, not the last they may not),
// so a tick at it exactly is a pass, as is a tick a nanosecond after it;
// a tick a nanosecond before it is skipped.
func TestEveryPassesAtTheResumeInstant(t *testing.T) {
	const interval = time.Minute
	cases := []struct {
		name   string
		resume time.Duration // after the first pass, which returns it
		passes []time.Duration
		skips  []time.Duration
	}{
		{"at a tick", 2 * interval, []time.Duration{interval, 3 * interval, 4 * interval}, []time.Duration{2 * interval}},
		{"a nanosecond before a tick", 2*interval - time.Nanosecond, []time.Duration{interval, 3 * interval, 4 * interval}, []time.Duration{2 * interval}},
		{"a nanosecond after a tick", 2*interval + time.Nanosecond, []time.Duration{interval, 4 * interval}, []time.Duration{2 * interval, 3 * interval}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				passes, skips := everyFor(interval, 4*interval+interval/2, func(k int) time.Duration {
					if k == 1 {
						return tc.resume
					}
					return 0
				})
				if !slices.Equal(passes, tc.passes) || !slices.Equal(skips, tc.skips) {
					t.Errorf("resume %v after the first pass: got passes %v and skips %v, want passes %v and skips %v: the ticks before the resume instant are skipped, one at it or after is a pass",
						tc.resume, passes, skips, tc.passes, tc.skips)
				}
			})
		})
	}
}

// TestEveryStartsNoPassOnceTheTermEnded pins the rule that once ctx is
// done, no pass starts and no tick is reported skipped, even when a tick is
// ready at the same time as ctx.Done (select would pick either at random).
// Each round's only pass ends the term and outlasts the next tick, so both
// are ready when Every looks again; 64 rounds make a coin that chooses the
// tick every time (2^-64) the only way to pass with the defect.
func TestEveryStartsNoPassOnceTheTermEnded(t *testing.T) {
	const interval = time.Second
	for _, tc := range []struct {
		name   string
		resume time.Duration // what the pass returns, from its start; 0: none
	}{
		{"a tick that comes with the end of the term starts no pass", 0},
		{"a tick before the resume instant that comes with the end of the term is not reported", time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				for round := range 64 {
					ctx, cancel := context.WithCancel(t.Context())
					passes, late := 0, 0
					lease.Every(ctx, interval, time.Now, func(ctx context.Context) (time.Time, bool) {
						passes++
						if ctx.Err() != nil {
							late++
						}
						resume := time.Time{}
						if tc.resume > 0 {
							resume = time.Now().Add(tc.resume)
						}
						cancel()                          // the term ends during the pass
						time.Sleep(interval + interval/2) // and the pass outlasts the next tick
						return resume, true
					}, func(time.Time) { late++ }, lease.Watchdog{PassTimeout: 2 * interval})
					cancel()
					if passes != 1 || late != 0 {
						t.Fatalf("round %d: got %d passes and %d calls after the term ended, want 1 and 0: a pass never starts once ctx is done", round, passes, late)
					}
				}
			})
		})
	}
}

// TestEveryWatchdog pins the watchdog's rules in virtual time: a pass that
// outlives its deadline is cancelled (cause ErrPassTimeout) and counted; a
// term whose passes fail StallAfter times in a row ends with ErrStalled,
// while passes stopped by a rate limit count neither way; and a pass that
// ignores its cancellation fails Health once past its deadline plus the
// bound.
func TestEveryWatchdog(t *testing.T) {
	const interval = time.Minute
	t.Run("a hung pass is cancelled at its deadline and the term ends after StallAfter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			timeouts, passes, stalled := 0, 0, 0
			var causes []error
			err := lease.Every(t.Context(), interval, time.Now, func(ctx context.Context) (time.Time, bool) {
				passes++
				<-ctx.Done() // a forge request that never answers
				causes = append(causes, context.Cause(ctx))
				return time.Time{}, false
			}, func(time.Time) {}, lease.Watchdog{Name: "net", PassTimeout: interval / 2, StallAfter: 3, TimedOut: func() { timeouts++ }, Stalled: func() { stalled++ }})
			if !errors.Is(err, lease.ErrStalled) {
				t.Fatalf("Every: got %v, want ErrStalled: three failed passes in a row end the term", err)
			}
			if passes != 3 || timeouts != 3 || stalled != 1 {
				t.Errorf("got %d passes, %d timeouts and %d stall reports, want 3, 3 and 1: each hung pass is cancelled and counted, the stall reported", passes, timeouts, stalled)
			}
			for i, c := range causes {
				if !errors.Is(c, lease.ErrPassTimeout) {
					t.Errorf("pass %d's cause: got %v, want ErrPassTimeout", i+1, c)
				}
			}
			if got, want := time.Since(start), 3*interval+interval/2; got != want {
				t.Errorf("the term ended after %v, want %v: the third pass's deadline", got, want)
			}
		})
	})
	t.Run("a complete pass resets the count and rate-limited passes are neutral", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*interval+interval/2)
			defer cancel()
			n := 0
			// fail, limited, fail, ok, fail, fail, ok, fail, fail, ok: never 3 failures in a row, and only if the limited pass counts as one.
			script := "frfoffoffo"
			err := lease.Every(ctx, interval, time.Now, func(context.Context) (time.Time, bool) {
				c := script[n%len(script)]
				n++
				switch c {
				case 'o':
					return time.Time{}, true
				case 'r':
					return time.Now().Add(time.Second), false
				}
				return time.Time{}, false
			}, func(time.Time) {}, lease.Watchdog{StallAfter: 3})
			if err != nil || n != 10 {
				t.Errorf("Every: got %v after %d passes, want nil after 10: a complete pass resets the count, a rate limit counts neither way", err, n)
			}
		})
	})
	t.Run("a pass that ignores its cancellation fails Health", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := lease.NewHealth(10 * time.Second)
			ctx, cancel := context.WithCancel(t.Context())
			release := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				lease.Every(ctx, interval, time.Now, func(context.Context) (time.Time, bool) {
					<-release // blind to its context
					return time.Time{}, true
				}, func(time.Time) {}, lease.Watchdog{Name: "net", PassTimeout: interval, Health: h})
			}()
			time.Sleep(2*interval + 5*time.Second) // the pass began at 1m, its deadline is 2m
			if err := h.Check(); err != nil {
				t.Errorf("Check within the bound past the deadline: got %v, want nil", err)
			}
			time.Sleep(5 * time.Second)
			if err := h.Check(); !errors.Is(err, lease.ErrPassStuck) {
				t.Errorf("Check at the deadline plus the bound: got %v, want ErrPassStuck: a stalled pass fails /healthz", err)
			}
			close(release)
			cancel()
			<-done
			if err := h.Check(); err != nil {
				t.Errorf("Check after the pass returned: got %v, want nil", err)
			}
		})
	})
}

// TestEveryAfterStartsItsCadenceAtItsFirstPass pins EveryAfter's timing in
// virtual time: the first pass first after the start (at once for 0), the
// passes after it once an interval from the first.
func TestEveryAfterStartsItsCadenceAtItsFirstPass(t *testing.T) {
	const interval = time.Minute
	for _, first := range []time.Duration{0, interval / 3, interval + interval/4} {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			ctx, cancel := context.WithCancel(t.Context())
			var passes []time.Duration
			done := make(chan struct{})
			go func() {
				defer close(done)
				lease.EveryAfter(ctx, first, interval, time.Now, func(context.Context) (time.Time, bool) {
					passes = append(passes, time.Since(start))
					return time.Time{}, true
				}, func(time.Time) {}, lease.Watchdog{})
			}()
			time.Sleep(first + 2*interval + interval/2)
			cancel()
			<-done
			want := []time.Duration{first, first + interval, first + 2*interval}
			if len(passes) != len(want) || passes[0] != want[0] || passes[1] != want[1] || passes[2] != want[2] {
				t.Errorf("first %v: got passes at %v, want %v: the first pass first in, then one an interval from it", first, passes, want)
			}
		})
	}
}

// TestWatchdogBoundBoundsOnePassFromItsCall pins Watchdog.Bound in virtual
// time: the pass's context ends PassTimeout after the call, whatever
// waited before it, with cause ErrPassTimeout and one call to TimedOut;
// Health fails once a pass ignoring that cancellation is past its deadline
// by its bound, not before, and is healthy again once the pass returned.
func TestWatchdogBoundBoundsOnePassFromItsCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout, bound = time.Minute, 10 * time.Second
		h := lease.NewHealth(bound)
		timeouts := 0
		wd := lease.Watchdog{Name: "net", PassTimeout: timeout, Health: h, TimedOut: func() { timeouts++ }}
		time.Sleep(timeout / 2) // a wait before the pass, not charged to it
		start := time.Now()
		release := make(chan struct{})
		var ended time.Duration
		var cause error
		done := make(chan struct{})
		go func() {
			defer close(done)
			wd.Bound(t.Context(), func(ctx context.Context) {
				<-ctx.Done()
				ended, cause = time.Since(start), context.Cause(ctx)
				<-release // blind to its cancellation
			})
		}()
		time.Sleep(timeout + bound - time.Second)
		if err := h.Check(); err != nil {
			t.Errorf("Check within the bound past the deadline: got %v, want nil", err)
		}
		time.Sleep(time.Second)
		if err := h.Check(); !errors.Is(err, lease.ErrPassStuck) {
			t.Errorf("Check at the deadline plus the bound: got %v, want ErrPassStuck", err)
		}
		close(release)
		<-done
		if ended != timeout || !errors.Is(cause, lease.ErrPassTimeout) || timeouts != 1 {
			t.Errorf("pass's context ended %v after the call with cause %v, %d TimedOut calls; want %v, ErrPassTimeout, 1", ended, cause, timeouts, timeout)
		}
		if err := h.Check(); err != nil {
			t.Errorf("Check after the pass returned: got %v, want nil", err)
		}
	})
}
