package lease_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

// TestEveryCadence pins Every's timing in virtual time: the first pass one
// interval after the start, then one per interval, and the ticks before a
// pass's resume instant skipped (reported, not passes).
func TestEveryCadence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = time.Minute
		start := time.Now()
		ctx, cancel := context.WithCancel(t.Context())
		var passes, skips []time.Duration
		done := make(chan struct{})
		go func() {
			defer close(done)
			lease.Every(ctx, interval, time.Now, func(context.Context) time.Time {
				passes = append(passes, time.Since(start))
				if len(passes) == 2 {
					return time.Now().Add(2*interval + interval/2) // a rate limit's reset
				}
				return time.Time{}
			}, func(time.Time) { skips = append(skips, time.Since(start)) })
		}()
		time.Sleep(6*interval + interval/2)
		cancel()
		<-done
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
					lease.Every(ctx, interval, time.Now, func(ctx context.Context) time.Time {
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
						return resume
					}, func(time.Time) { late++ })
					cancel()
					if passes != 1 || late != 0 {
						t.Fatalf("round %d: got %d passes and %d calls after the term ended, want 1 and 0: a pass never starts once ctx is done", round, passes, late)
					}
				}
			})
		})
	}
}
