package server

import (
	"context"
	"sync/atomic"
	"time"
)

// forgeTimer sums the time of the forge calls made under a context that
// carries it (withForgeTimer): the forge's response time, which the
// sweeper's time budget counts, and not the store's reads and writes an
// offer makes between those calls. Safe for concurrent use.
type forgeTimer struct {
	now  func() time.Time
	took atomic.Int64 // nanoseconds
}

// forgeTimerKey is the context key withForgeTimer stores the timer under.
type forgeTimerKey struct{}

// withForgeTimer returns a copy of ctx whose forge calls (timeForge) are
// timed by now into the returned timer.
func withForgeTimer(ctx context.Context, now func() time.Time) (context.Context, *forgeTimer) {
	t := &forgeTimer{now: now}
	return context.WithValue(ctx, forgeTimerKey{}, t), t
}

// Took is the time of the forge calls timed so far.
func (t *forgeTimer) Took() time.Duration {
	return time.Duration(t.took.Load())
}

// timeForge makes call, one forge request, and adds the time it took to
// the timer ctx carries, if any (withForgeTimer).
func timeForge(ctx context.Context, call func() error) error {
	t, _ := ctx.Value(forgeTimerKey{}).(*forgeTimer)
	if t == nil {
		return call()
	}
	began := t.now()
	err := call()
	t.took.Add(int64(t.now().Sub(began)))
	return err
}
