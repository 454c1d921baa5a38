package server

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// errNoRoom is a forge call's error when the sweep batch that would make
// it has no room left for it (forgeTimer.admit): the call was not made,
// and the run it was for is left for the next offer.
var errNoRoom = errors.New("server: no room in the sweep's time budget for another forge call")

// forgeTimer sums the time of the forge calls made under a context that
// carries it (withForgeTimer): the forge's response time, which the
// sweeper's time budget counts, and not the store's reads and writes an
// offer makes between those calls. Safe for concurrent use.
type forgeTimer struct {
	now  func() time.Time
	took atomic.Int64 // nanoseconds
	// admit is asked before each call after the first (the batch's query,
	// which the sweeper admitted itself); false refuses the call with
	// errNoRoom. charge is told each call made, as it ends, with its error.
	admit  func() bool
	charge func(began time.Time, took time.Duration, err error)
	calls  atomic.Int64
}

// forgeTimerKey is the context key withForgeTimer stores the timer under.
type forgeTimerKey struct{}

// withForgeTimer returns a copy of ctx whose forge calls (timeForge) are
// timed by now into the returned timer, each after the first made only
// when admit allows it, and each charged to charge as it ends.
func withForgeTimer(ctx context.Context, now func() time.Time, admit func() bool, charge func(time.Time, time.Duration, error)) (context.Context, *forgeTimer) {
	t := &forgeTimer{now: now, admit: admit, charge: charge}
	return context.WithValue(ctx, forgeTimerKey{}, t), t
}

// Took is the time of the forge calls timed so far.
func (t *forgeTimer) Took() time.Duration {
	return time.Duration(t.took.Load())
}

// timeForge makes call, one forge request, and adds the time it took to
// the timer ctx carries, if any (withForgeTimer). Under a timer whose
// admit refuses it (not the first call), it makes no request and returns
// errNoRoom.
func timeForge(ctx context.Context, call func() error) error {
	t, _ := ctx.Value(forgeTimerKey{}).(*forgeTimer)
	if t == nil {
		return call()
	}
	if t.calls.Add(1) > 1 && !t.admit() {
		return errNoRoom
	}
	began := t.now()
	err := call()
	took := t.now().Sub(began)
	t.took.Add(int64(took))
	t.charge(began, took, err)
	return err
}
