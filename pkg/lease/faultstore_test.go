package lease_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"iterion.dev/iterion/internal/clock"
	"iterion.dev/iterion/pkg/lease"
)

// faultKind is what a faultStore does with one call once its delay passed.
type faultKind int

const (
	pass     faultKind = iota // forward to the inner store
	refuse                    // answer false (Acquire, Renew) or ErrLost (Release), inner untouched
	fail                      // answer errUnreachable, inner untouched
	landLose                  // forward to the inner store, then answer errLostAnswer
	late                      // forward to the inner store after the delay even if the caller gave up
	stolen                    // thief takes the lease in the inner store, then forward: a real refusal
	landSlow                  // forward to the inner store at once, answer after the delay (ctx's error if it ends first)
	deaf                      // forward to the inner store at once, answer after the delay whatever the caller's ctx: a store that ignores its deadline
)

// thief is the owner a stolen fault hands the lease to.
const thief = "thief"

// fault scripts one call: block for delay (or until the caller's ctx ends,
// which answers ctx's error and, except for late, changes nothing), then do
// kind.
type fault struct {
	delay time.Duration
	kind  faultKind
}

var (
	errUnreachable = errors.New("faultstore: store unreachable")
	errLostAnswer  = errors.New("faultstore: answer lost after the write landed")
)

// storeCall is one call a faultStore received, in virtual time.
type storeCall struct {
	Op, Owner string
	N         int       // index among this owner's calls of this op
	Now       time.Time // the now passed (zero for Release)
	At, End   time.Time // when it was received and answered
	CtxErr    error     // the caller's ctx error when received
	Deadline  time.Duration
	OK        bool  // the answer
	Err       error // the answer
	Fault     fault // what the plan did with it
}

// faultStore wraps a Store and applies a scripted fault to each call,
// recording every call. It is safe for concurrent use.
type faultStore struct {
	inner lease.Store
	plan  func(c storeCall) fault // nil: pass everything

	mu    sync.Mutex
	calls []storeCall
	n     map[[2]string]int
	late  sync.WaitGroup // late writes not landed yet
}

// Settle waits until every late write has landed.
func (f *faultStore) Settle() { f.late.Wait() }

func newFaultStore(inner lease.Store, plan func(c storeCall) fault) *faultStore {
	return &faultStore{inner: inner, plan: plan, n: make(map[[2]string]int)}
}

// Calls returns the calls recorded so far with op ("" for all) and owner
// ("" for all), in the order they were received.
func (f *faultStore) Calls(op, owner string) []storeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []storeCall
	for _, c := range f.calls {
		if (op == "" || c.Op == op) && (owner == "" || c.Owner == owner) {
			out = append(out, c)
		}
	}
	return out
}

func (f *faultStore) Acquire(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (bool, error) {
	return f.do(ctx, "acquire", name, owner, now, func(ctx context.Context) (bool, error) {
		return f.inner.Acquire(ctx, name, owner, now, ttl)
	})
}

func (f *faultStore) Renew(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (bool, error) {
	return f.do(ctx, "renew", name, owner, now, func(ctx context.Context) (bool, error) {
		return f.inner.Renew(ctx, name, owner, now, ttl)
	})
}

func (f *faultStore) Release(ctx context.Context, name, owner string) error {
	_, err := f.do(ctx, "release", name, owner, time.Time{}, func(ctx context.Context) (bool, error) {
		return true, f.inner.Release(ctx, name, owner)
	})
	return err
}

// termFaultStore is a faultStore over a TermStore that is a TermStore too:
// Run scopes its releases to the term through it. Its AcquireTerm and
// ReleaseTerm are recorded as "acquire" and "release".
type termFaultStore struct {
	*faultStore
	terms lease.TermStore
}

func newTermFaultStore(inner lease.TermStore, plan func(c storeCall) fault) *termFaultStore {
	return &termFaultStore{faultStore: newFaultStore(inner, plan), terms: inner}
}

func (f *termFaultStore) AcquireTerm(ctx context.Context, name, owner string, now time.Time, ttl time.Duration, token string) (bool, error) {
	return f.do(ctx, "acquire", name, owner, now, func(ctx context.Context) (bool, error) {
		return f.terms.AcquireTerm(ctx, name, owner, now, ttl, token)
	})
}

func (f *termFaultStore) ReleaseTerm(ctx context.Context, name, owner, token string) error {
	_, err := f.do(ctx, "release", name, owner, time.Time{}, func(ctx context.Context) (bool, error) {
		return true, f.terms.ReleaseTerm(ctx, name, owner, token)
	})
	return err
}

func (f *faultStore) do(ctx context.Context, op, name, owner string, now time.Time, call func(context.Context) (bool, error)) (bool, error) {
	c := storeCall{Op: op, Owner: owner, Now: now, At: time.Now(), CtxErr: ctx.Err()}
	if d, ok := ctx.Deadline(); ok {
		c.Deadline = time.Until(d)
	}
	f.mu.Lock()
	key := [2]string{op, owner}
	c.N = f.n[key]
	f.n[key]++
	f.mu.Unlock()

	var flt fault
	if f.plan != nil {
		flt = f.plan(c)
	}
	if flt.kind == stolen {
		f.steal(ctx, name, owner)
	}
	c.Fault = flt
	c.OK, c.Err = f.apply(ctx, op, flt, call)
	c.End = time.Now()
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	return c.OK, c.Err
}

// steal hands owner's lease name to thief in the inner store, for an hour.
func (f *faultStore) steal(ctx context.Context, name, owner string) {
	if err := f.inner.Release(ctx, name, owner); err != nil {
		panic(fmt.Sprintf("faultstore: steal: release: %v", err))
	}
	if ok, err := f.inner.Acquire(ctx, name, thief, time.Now(), time.Hour); !ok || err != nil {
		panic(fmt.Sprintf("faultstore: steal: acquire = %v, %v", ok, err))
	}
}

func (f *faultStore) apply(ctx context.Context, op string, flt fault, call func(context.Context) (bool, error)) (bool, error) {
	if flt.kind == late {
		landed := make(chan struct{})
		var ok bool
		var err error
		f.late.Add(1)
		go func() {
			defer f.late.Done()
			defer close(landed)
			time.Sleep(flt.delay)
			ok, err = call(context.WithoutCancel(ctx))
		}()
		select {
		case <-landed:
			return ok, err
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	if flt.kind == deaf {
		ok, err := call(ctx)
		time.Sleep(flt.delay)
		return ok, err
	}
	if flt.kind == landSlow {
		ok, err := call(ctx)
		if !clock.Sleep(ctx, flt.delay) {
			return false, ctx.Err()
		}
		return ok, err
	}
	if flt.delay > 0 && !clock.Sleep(ctx, flt.delay) {
		return false, ctx.Err()
	}
	switch flt.kind {
	case refuse:
		if op == "release" {
			return false, fmt.Errorf("faultstore: %w", lease.ErrLost)
		}
		return false, nil
	case fail:
		return false, errUnreachable
	case landLose:
		if _, err := call(ctx); err != nil {
			return false, err
		}
		return false, errLostAnswer
	}
	return call(ctx)
}
