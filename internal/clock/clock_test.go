package clock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/internal/clock"
)

// TestSleep pins Sleep's rules in virtual time: it returns true after
// exactly d; false as soon as ctx is cancelled; at once for d <= 0, false
// when ctx is already done.
func TestSleep(t *testing.T) {
	t.Run("full wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			if ok := clock.Sleep(t.Context(), 3*time.Second); !ok {
				t.Errorf("got false, want true: an uncancelled sleep waits all of d")
			}
			if got := time.Since(start); got != 3*time.Second {
				t.Errorf("got %v, want 3s: Sleep returns after exactly d", got)
			}
		})
	})
	t.Run("cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(time.Second, cancel)
			start := time.Now()
			if ok := clock.Sleep(ctx, time.Hour); ok {
				t.Errorf("got true, want false: a cancelled sleep reports it was cut short")
			}
			if got := time.Since(start); got != time.Second {
				t.Errorf("got %v, want 1s: Sleep returns when ctx is done", got)
			}
		})
	})
	t.Run("non-positive", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			if ok := clock.Sleep(ctx, 0); !ok {
				t.Errorf("got false for d=0 on a live ctx, want true: nothing to wait for")
			}
			cancel()
			if ok := clock.Sleep(ctx, -time.Second); ok {
				t.Errorf("got true for d<0 on a done ctx, want false: ctx ended")
			}
		})
	})
}
