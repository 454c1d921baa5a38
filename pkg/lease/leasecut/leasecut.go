// Package leasecut cuts one replica off from a lease store that several
// replicas in one process share, so the demo and the tests can play a crash
// or a partition of that replica without touching the others.
package leasecut

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

// ErrCut is what a cut Store answers: no answer, as from a store that cannot
// be reached.
var ErrCut = errors.New("leasecut: cut off from the lease store: no answer")

// Store is one replica's view of a shared lease.Store. Until Cut it passes
// every call through; from Cut on, every call fails at once with ErrCut and
// reaches nothing, as if the process had died or lost its network: the
// replica can neither renew nor release, so its lease stays until it
// expires. Safe for concurrent use.
//
// A view implements lease.TermStore and lease.Inspector exactly when the
// shared store does, so Run, RunGroup and a server find the same optional
// interfaces through it as on the shared store: term-scoped releases, a
// group, /leases. It never claims one the shared store lacks, which it
// could not honour.
type Store interface {
	lease.Store
	// Cut cuts the view off for good; calls in flight finish as they would.
	Cut()
}

// New returns a view of st that is not cut, with st's optional interfaces.
func New(st lease.Store) Store {
	v := &view{inner: st}
	ts, isTerms := st.(lease.TermStore)
	insp, isInsp := st.(lease.Inspector)
	switch {
	case isTerms && isInsp:
		return fullView{v, termCalls{v, ts}, listCall{v, insp}}
	case isTerms:
		return termView{v, termCalls{v, ts}}
	case isInsp:
		return listView{v, listCall{v, insp}}
	}
	return v
}

// A view of a store with optional interfaces is one of these shapes, by
// which of them the store implements: *view alone for none.
type (
	fullView struct {
		*view
		termCalls
		listCall
	}
	termView struct {
		*view
		termCalls
	}
	listView struct {
		*view
		listCall
	}
)

var (
	_ lease.TermStore = fullView{}
	_ lease.Inspector = fullView{}
	_ lease.TermStore = termView{}
	_ lease.Inspector = listView{}
)

// view is a Store's lease.Store methods and Cut.
type view struct {
	inner lease.Store
	cut   atomic.Bool
}

// Cut cuts the view off for good (Store).
func (v *view) Cut() { v.cut.Store(true) }

// Acquire passes through until Cut, then answers ErrCut.
func (v *view) Acquire(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (bool, error) {
	if v.cut.Load() {
		return false, ErrCut
	}
	return v.inner.Acquire(ctx, name, owner, now, ttl)
}

// Renew passes through until Cut, then answers ErrCut.
func (v *view) Renew(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (bool, error) {
	if v.cut.Load() {
		return false, ErrCut
	}
	return v.inner.Renew(ctx, name, owner, now, ttl)
}

// Release passes through until Cut, then answers ErrCut.
func (v *view) Release(ctx context.Context, name, owner string) error {
	if v.cut.Load() {
		return ErrCut
	}
	return v.inner.Release(ctx, name, owner)
}

// termCalls is a view's lease.TermStore methods, over a shared TermStore.
type termCalls struct {
	v     *view
	inner lease.TermStore
}

// AcquireTerm passes through until Cut, then answers ErrCut.
func (t termCalls) AcquireTerm(ctx context.Context, name, owner string, now time.Time, ttl time.Duration, token string) (bool, error) {
	if t.v.cut.Load() {
		return false, ErrCut
	}
	return t.inner.AcquireTerm(ctx, name, owner, now, ttl, token)
}

// ReleaseTerm passes through until Cut, then answers ErrCut.
func (t termCalls) ReleaseTerm(ctx context.Context, name, owner, token string) error {
	if t.v.cut.Load() {
		return ErrCut
	}
	return t.inner.ReleaseTerm(ctx, name, owner, token)
}

// listCall is a view's lease.Inspector method, over a shared Inspector.
type listCall struct {
	v     *view
	inner lease.Inspector
}

// Holders passes through until Cut, then answers ErrCut.
func (l listCall) Holders(ctx context.Context) ([]lease.Holder, error) {
	if l.v.cut.Load() {
		return nil, ErrCut
	}
	return l.inner.Holders(ctx)
}
