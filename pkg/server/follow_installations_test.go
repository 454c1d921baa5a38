package server_test

import (
	"context"
	"maps"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/server"
)

// TestFollowInstallationsNeverOverlapsRunsOfOneInstallation pins that
// followInstallations starts a run for an installation only once the run
// before it for the same one has returned: an installation dropped then
// added again before its stopped run ended (a sweep whose own pass
// dropped it still writing the news, StoreTimeout a lease), or whose key
// changed (a board sync's repositories), gets its new run after the old
// one's clean-up (sweepInstallation's forget), which therefore never
// clears what the new run set up (its mint hold, its figures).
func TestFollowInstallationsNeverOverlapsRunsOfOneInstallation(t *testing.T) {
	for _, c := range []struct {
		name  string
		steps []map[int64]string // what want says, one step after the other
	}{
		{"dropped then added again", []map[int64]string{{}, {7: "a"}}},
		{"key changed", []map[int64]string{{7: "b"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const interval, cleanUp = time.Minute, 10 * time.Second
				var mu sync.Mutex
				wanted := map[int64]string{7: "a"}
				woken := make(chan struct{})
				state := map[int64]string{} // what the installation's run set up
				running, most := 0, 0
				wake := func() <-chan struct{} { mu.Lock(); defer mu.Unlock(); return woken }
				want := func() map[int64]string { mu.Lock(); defer mu.Unlock(); return maps.Clone(wanted) }
				run := func(ctx context.Context, id int64, key string) {
					mu.Lock()
					running++
					most = max(most, running)
					state[id] = key
					mu.Unlock()
					<-ctx.Done()
					time.Sleep(cleanUp) // a write on a detached context
					mu.Lock()
					running--
					delete(state, id) // its clean-up, as forget
					mu.Unlock()
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { server.FollowInstallations(ctx, interval, wake, want, run); close(done) }()
				synctest.Wait()
				for _, w := range c.steps {
					mu.Lock()
					wanted = w
					close(woken)
					woken = make(chan struct{})
					mu.Unlock()
					synctest.Wait()
				}
				time.Sleep(2 * cleanUp) // the old run ends; the new one runs on
				synctest.Wait()
				mu.Lock()
				got, overlap := state[7], most
				mu.Unlock()
				if got != c.steps[len(c.steps)-1][7] || overlap > 1 {
					t.Errorf("installation 7's new run's state after the old run ended: %q, runs of it at once: %d; want %q and 1: a new run starts once the old one returned", got, overlap, c.steps[len(c.steps)-1][7])
				}
				cancel()
				<-done
			})
		})
	}
}
