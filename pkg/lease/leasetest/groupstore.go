package leasetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

// groupStore is what the group cases need of a store: terms and a list.
type groupStore interface {
	lease.TermStore
	lease.Inspector
}

// bridge calls a store from goroutines started outside any synctest
// bubble. A case runs in a bubble, in virtual time; a database client does
// real I/O, and its goroutines and deadlines must stay outside the bubble.
// A bubble goroutine waiting for the bridge is not durably blocked, so
// virtual time stands still during a call: every call takes no virtual
// time. Safe for concurrent use.
type bridge struct {
	inner groupStore
	slots chan *slot // free slots; their channels belong to no bubble
	calls chan *slot
}

// slot carries one call to a bridge worker and signals its end.
type slot struct {
	f    func(context.Context)
	done chan struct{}
}

// bridgeWorkers is how many calls a bridge runs at once.
const bridgeWorkers = 8

// newBridge starts the workers of a bridge to st, stopped at t's cleanup.
// Call it outside the bubble.
func newBridge(t *testing.T, st groupStore) *bridge {
	b := &bridge{inner: st, slots: make(chan *slot, bridgeWorkers), calls: make(chan *slot)}
	for range bridgeWorkers {
		b.slots <- &slot{done: make(chan struct{}, 1)}
		go func() {
			for s := range b.calls {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				s.f(ctx)
				cancel()
				s.done <- struct{}{}
			}
		}()
	}
	t.Cleanup(func() { close(b.calls) })
	return b
}

// do runs f on a worker, unless ctx is done already.
func (b *bridge) do(ctx context.Context, f func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s := <-b.slots
	var err error
	s.f = func(ctx context.Context) { err = f(ctx) }
	b.calls <- s
	<-s.done
	b.slots <- s
	return err
}

// fault is what a member's view does with one call: fail it at once, or
// hold it for hold and then let it land, answering the caller only if the
// caller still waits.
type fault struct {
	fail bool
	hold time.Duration
}

// errCut is a member view's answer when its plan fails a call.
var errCut = errors.New("leasetest: member cut off from the store")

// memberView is one member's view of the shared store, with its faults.
// Safe for concurrent use.
type memberView struct {
	b     *bridge
	owner string
	trace func(format string, args ...any) // notes each call of a shard lease
	late  *sync.WaitGroup                  // calls held that have not landed yet
	mu    sync.Mutex
	plan  func(op, name string) fault // nil: pass everything
	calls map[string]int              // by op
}

var _ groupStore = (*memberView)(nil)

// setPlan replaces the view's plan.
func (v *memberView) setPlan(plan func(op, name string) fault) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.plan = plan
}

// count returns how many calls of op the view received.
func (v *memberView) count(op string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.calls[op]
}

// viewCall applies v's plan to one call of op on name, then runs f on the
// bridge. A held call lands in its own goroutine, whose answer reaches the
// caller only if the caller still waits.
func viewCall[T any](ctx context.Context, v *memberView, op, name string, f func(context.Context) (T, error)) (T, error) {
	v.mu.Lock()
	v.calls[op]++
	var flt fault
	if v.plan != nil {
		flt = v.plan(op, name)
	}
	v.mu.Unlock()
	var zero T
	traced := strings.Contains(name, "/shard/")
	if flt.fail {
		if traced {
			v.trace("%s %s %s: failed", v.owner, op, name)
		}
		return zero, errCut
	}
	run := func(ctx context.Context) (T, error) {
		var res T
		err := v.b.do(ctx, func(ctx context.Context) (err error) {
			res, err = f(ctx)
			return err
		})
		if traced {
			v.trace("%s %s %s: landed %v, %v (held %v)", v.owner, op, name, res, err, flt.hold)
		}
		return res, err
	}
	if flt.hold == 0 {
		return run(ctx)
	}
	type answer struct {
		res T
		err error
	}
	landed := make(chan answer, 1)
	v.late.Add(1)
	go func() {
		defer v.late.Done()
		time.Sleep(flt.hold)
		res, err := run(context.Background())
		landed <- answer{res, err}
	}()
	select {
	case a := <-landed:
		return a.res, a.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

func (v *memberView) Acquire(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (bool, error) {
	return viewCall(ctx, v, "acquire", name, func(ctx context.Context) (bool, error) {
		return v.b.inner.Acquire(ctx, name, owner, now, ttl)
	})
}

func (v *memberView) AcquireTerm(ctx context.Context, name, owner string, now time.Time, ttl time.Duration, token string) (bool, error) {
	return viewCall(ctx, v, "acquireTerm", name, func(ctx context.Context) (bool, error) {
		return v.b.inner.AcquireTerm(ctx, name, owner, now, ttl, token)
	})
}

func (v *memberView) Renew(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (bool, error) {
	return viewCall(ctx, v, "renew", name, func(ctx context.Context) (bool, error) {
		return v.b.inner.Renew(ctx, name, owner, now, ttl)
	})
}

func (v *memberView) Release(ctx context.Context, name, owner string) error {
	_, err := viewCall(ctx, v, "release", name, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, v.b.inner.Release(ctx, name, owner)
	})
	return err
}

func (v *memberView) ReleaseTerm(ctx context.Context, name, owner, token string) error {
	_, err := viewCall(ctx, v, "releaseTerm", name, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, v.b.inner.ReleaseTerm(ctx, name, owner, token)
	})
	return err
}

func (v *memberView) Holders(ctx context.Context) ([]lease.Holder, error) {
	return viewCall(ctx, v, "list", "", func(ctx context.Context) ([]lease.Holder, error) {
		return v.b.inner.Holders(ctx)
	})
}
