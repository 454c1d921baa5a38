package server

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// RunStore keeps gating runs. Implementations are safe for concurrent use,
// keep instants in UTC truncated to the millisecond, and pass the
// conformance suite in package runstoretest. An error means the call may or
// may not have landed.
type RunStore interface {
	// Put upserts run by its ID: a new run is stored with Created = Updated
	// = now; an existing one takes run's verdict, context, description and
	// target URL, keeps its Created, gets Updated = now and is unsettled (a
	// new verdict is news, and the reconciler settles it again if the pull
	// request is done). created reports whether the run was new. A run that
	// fails Validate is refused with an error wrapping ErrInvalid and
	// nothing is written.
	Put(ctx context.Context, run GateRun, now time.Time) (created bool, err error)
	// Get returns the run with id, or an error wrapping ErrNotFound.
	Get(ctx context.Context, id string) (GateRun, error)
	// Unsettled returns at most limit unsettled runs updated at or after
	// since that come after the cursor, in listing order (Updated, then ID).
	// Resume with CursorAt(last run of the page); a page shorter than limit
	// is the last.
	Unsettled(ctx context.Context, since time.Time, after Cursor, limit int) ([]GateRun, error)
	// ForPull returns the unsettled runs of one pull request, any head.
	ForPull(ctx context.Context, host, repo string, pull int) ([]GateRun, error)
	// ForHead returns the unsettled runs whose head is sha in repo.
	ForHead(ctx context.Context, host, repo, sha string) ([]GateRun, error)
	// List returns at most q.Limit runs that match q and come after
	// q.After, in listing order (Updated, then ID), settled ones included
	// unless q.State says otherwise. Resume with CursorAt(last run of the
	// page); a page shorter than q.Limit is the last. A q that fails
	// Validate is refused with an error wrapping ErrInvalid.
	List(ctx context.Context, q RunQuery) ([]GateRun, error)
	// Settle marks the run with id settled; settling a settled run is a
	// no-op. A missing id is an error wrapping ErrNotFound.
	Settle(ctx context.Context, id string) error
}

// MemoryRunStore is the in-memory RunStore twin, for a single process and
// for tests. The zero value is ready to use; it is safe for concurrent use.
type MemoryRunStore struct {
	mu   sync.Mutex
	runs map[string]GateRun
}

var _ RunStore = (*MemoryRunStore)(nil)

// NewMemoryRunStore returns an empty MemoryRunStore.
func NewMemoryRunStore() *MemoryRunStore { return &MemoryRunStore{} }

// Put implements RunStore.
func (s *MemoryRunStore) Put(ctx context.Context, run GateRun, now time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("server: put run: %w", err)
	}
	if err := run.Validate(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs == nil {
		s.runs = make(map[string]GateRun)
	}
	now = stamp(now)
	old, ok := s.runs[run.ID]
	if ok {
		run.Created = old.Created
	} else {
		run.Created = now
	}
	run.Updated = now
	run.Settled = false
	s.runs[run.ID] = run
	return !ok, nil
}

// Get implements RunStore.
func (s *MemoryRunStore) Get(ctx context.Context, id string) (GateRun, error) {
	if err := ctx.Err(); err != nil {
		return GateRun{}, fmt.Errorf("server: get run: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok {
		return GateRun{}, fmt.Errorf("%w: id %q", ErrNotFound, id)
	}
	return r, nil
}

// Unsettled implements RunStore.
func (s *MemoryRunStore) Unsettled(ctx context.Context, since time.Time, after Cursor, limit int) ([]GateRun, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%w: limit %d is under 1", ErrInvalid, limit)
	}
	since = stamp(since)
	out, err := s.filter(ctx, func(r GateRun) bool {
		return !r.Updated.Before(since) && after.Before(r)
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b GateRun) int {
		return cmp.Or(a.Updated.Compare(b.Updated), cmp.Compare(a.ID, b.ID))
	})
	return out[:min(limit, len(out))], nil
}

// ForPull implements RunStore.
func (s *MemoryRunStore) ForPull(ctx context.Context, host, repo string, pull int) ([]GateRun, error) {
	return s.filter(ctx, func(r GateRun) bool { return r.Host == host && r.Repo == repo && r.Pull == pull })
}

// ForHead implements RunStore.
func (s *MemoryRunStore) ForHead(ctx context.Context, host, repo, sha string) ([]GateRun, error) {
	return s.filter(ctx, func(r GateRun) bool { return r.Host == host && r.Repo == repo && r.HeadSHA == sha })
}

// filter returns the unsettled runs keep accepts, sorted by id.
func (s *MemoryRunStore) filter(ctx context.Context, keep func(GateRun) bool) ([]GateRun, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("server: list runs: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []GateRun
	for _, r := range s.runs {
		if !r.Settled && keep(r) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b GateRun) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// List implements RunStore.
func (s *MemoryRunStore) List(ctx context.Context, q RunQuery) ([]GateRun, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("server: list runs: %w", err)
	}
	s.mu.Lock()
	var out []GateRun
	for _, r := range s.runs {
		if q.Matches(r) && q.After.Before(r) {
			out = append(out, r)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b GateRun) int {
		return cmp.Or(a.Updated.Compare(b.Updated), cmp.Compare(a.ID, b.ID))
	})
	return out[:min(q.Limit, len(out))], nil
}

// Settle implements RunStore.
func (s *MemoryRunStore) Settle(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("server: settle run: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok {
		return fmt.Errorf("%w: id %q", ErrNotFound, id)
	}
	r.Settled = true
	s.runs[id] = r
	return nil
}
