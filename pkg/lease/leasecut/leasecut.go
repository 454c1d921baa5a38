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
type Store struct {
	inner lease.Store
	cut   atomic.Bool
}

var _ lease.Store = (*Store)(nil)

// New returns a view of st that is not cut.
func New(st lease.Store) *Store { return &Store{inner: st} }

// Cut cuts the view off for good; calls in flight finish as they would.
func (s *Store) Cut() { s.cut.Store(true) }

// Acquire passes through until Cut, then answers ErrCut.
func (s *Store) Acquire(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (bool, error) {
	if s.cut.Load() {
		return false, ErrCut
	}
	return s.inner.Acquire(ctx, name, owner, now, ttl)
}

// Renew passes through until Cut, then answers ErrCut.
func (s *Store) Renew(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (bool, error) {
	if s.cut.Load() {
		return false, ErrCut
	}
	return s.inner.Renew(ctx, name, owner, now, ttl)
}

// Release passes through until Cut, then answers ErrCut.
func (s *Store) Release(ctx context.Context, name, owner string) error {
	if s.cut.Load() {
		return ErrCut
	}
	return s.inner.Release(ctx, name, owner)
}
