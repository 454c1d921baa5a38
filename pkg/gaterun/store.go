package gaterun

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"iterion.dev/iterion/internal/mongostore"
	"iterion.dev/iterion/pkg/forge"
)

// Store keeps gating runs. Implementations are safe for concurrent use,
// keep instants in UTC truncated to the millisecond, and pass the
// conformance suite in package gateruntest. An error means the call may or
// may not have landed. A store that can hold a document it cannot read as
// a run (MongoStore) skips it in its listings (Unsettled, UnsettledIn,
// UnsettledAmong, List), telling ctx's WithSkipped function, and fills
// their pages from the runs after it; its other calls answer an error.
type Store interface {
	// Put upserts run by its ID: a new run is stored with Created = Updated
	// = Reported = now; an existing one takes run's verdict, context,
	// description and target URL, keeps its Created and its Repo as first
	// given (a later spelling that differs in case does not replace it),
	// gets Updated = Reported = now and is unsettled (a
	// new verdict is news, and the reconciler settles it again if the pull
	// request is done). created reports whether the run was new. A run that
	// fails Validate is refused with an error wrapping ErrInvalid and
	// nothing is written.
	Put(ctx context.Context, run Run, now time.Time) (created bool, err error)
	// Get returns the run with id, or an error wrapping ErrNotFound.
	Get(ctx context.Context, id string) (Run, error)
	// Unsettled returns at most limit unsettled runs updated at or after
	// since that come after the cursor, in listing order (Updated, then ID).
	// Resume with CursorAt(last run of the page); a page shorter than limit
	// is the last.
	Unsettled(ctx context.Context, since time.Time, after Cursor, limit int) ([]Run, error)
	// UnsettledIn is Unsettled restricted to the runs of one installation
	// (Run.Installation; 0 lists the runs stored without one), in the same
	// order and with the same paging: the sweeper of one App installation
	// lists its runs alone.
	UnsettledIn(ctx context.Context, installation int64, since time.Time, after Cursor, limit int) ([]Run, error)
	// UnsettledAmong is Unsettled restricted to the runs of a set of
	// installations (as UnsettledIn, 0 naming the runs stored without
	// one), in the same order and with the same paging: one read for the
	// installations a replica sweeps, where a read each would cost a store
	// that scans per query once per installation. An empty set lists none.
	UnsettledAmong(ctx context.Context, installations []int64, since time.Time, after Cursor, limit int) ([]Run, error)
	// ForPull returns the unsettled runs of one pull request, any head.
	// Here and in ForHead and List, repo matches a run's Repo without
	// regard to case, as GitHub compares names ([forge.RepoKey]).
	ForPull(ctx context.Context, host, repo string, pull int) ([]Run, error)
	// ForHead returns the unsettled runs whose head is sha in repo.
	ForHead(ctx context.Context, host, repo, sha string) ([]Run, error)
	// List returns at most q.Limit runs that match q and come after
	// q.After, in listing order (Updated, then ID), settled ones included
	// unless q.State says otherwise. Resume with CursorAt(last run of the
	// page); a page shorter than q.Limit is the last. A q that fails
	// Validate is refused with an error wrapping ErrInvalid.
	List(ctx context.Context, q Query) ([]Run, error)
	// Settle settles the verdict reported at reported (the Run.Reported of
	// the copy the caller decided from), in one conditional write: it
	// marks the run settled only while its Reported is still reported,
	// and reports whether the run is settled with that report now;
	// settling a settled run again is a no-op that reports true. A run
	// reported again since (a Put: a new verdict, which is news the caller
	// did not decide on) is left as it is, and settled is false; a move,
	// which reports nothing, does not stop it. A missing id is an error
	// wrapping ErrNotFound.
	Settle(ctx context.Context, id string, reported time.Time) (settled bool, err error)
	// Move gives the run with id installation to, in one conditional
	// write, if it is unsettled and stored under installation from (0: the
	// runs stored without one), and reports whether it did. The run keeps
	// every other field but Updated, which becomes now, so the sweeper of
	// to finds it among its news; Reported stays, as a move reports no
	// verdict. Unlike a Put of a copy read earlier, a
	// move never undoes a verdict reported or a settle made since the
	// read. A run that is gone, settled or under another installation is
	// left as it is, and moved is false. A to under 1 is refused with an
	// error wrapping ErrInvalid.
	Move(ctx context.Context, id string, from, to int64, now time.Time) (moved bool, err error)
}

// MemoryStore is the in-memory Store twin, for a single process and
// for tests. The zero value is ready to use; it is safe for concurrent use.
type MemoryStore struct {
	mu     sync.Mutex
	runs   map[string]Run
	sweeps map[int64]InstallationSweep // by installation (installations.go)
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

// Put implements Store.
func (s *MemoryStore) Put(ctx context.Context, run Run, now time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("gaterun: put run: %w", err)
	}
	if err := run.Validate(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs == nil {
		s.runs = make(map[string]Run)
	}
	now = mongostore.Stamp(now)
	old, ok := s.runs[run.ID]
	if ok {
		run.Created, run.Repo = old.Created, old.Repo
	} else {
		run.Created = now
	}
	run.Updated, run.Reported = now, now
	run.Settled = false
	s.runs[run.ID] = run
	return !ok, nil
}

// Get implements Store.
func (s *MemoryStore) Get(ctx context.Context, id string) (Run, error) {
	if err := ctx.Err(); err != nil {
		return Run{}, fmt.Errorf("gaterun: get run: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok {
		return Run{}, fmt.Errorf("%w: id %q", ErrNotFound, id)
	}
	return r, nil
}

// Unsettled implements Store.
func (s *MemoryStore) Unsettled(ctx context.Context, since time.Time, after Cursor, limit int) ([]Run, error) {
	return s.unsettled(ctx, func(Run) bool { return true }, since, after, limit)
}

// UnsettledIn implements Store.
func (s *MemoryStore) UnsettledIn(ctx context.Context, installation int64, since time.Time, after Cursor, limit int) ([]Run, error) {
	return s.unsettled(ctx, func(r Run) bool { return r.Installation == installation }, since, after, limit)
}

// UnsettledAmong implements Store.
func (s *MemoryStore) UnsettledAmong(ctx context.Context, installations []int64, since time.Time, after Cursor, limit int) ([]Run, error) {
	return s.unsettled(ctx, func(r Run) bool { return slices.Contains(installations, r.Installation) }, since, after, limit)
}

// unsettled is Unsettled of the runs keep accepts.
func (s *MemoryStore) unsettled(ctx context.Context, keep func(Run) bool, since time.Time, after Cursor, limit int) ([]Run, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%w: limit %d is under 1", ErrInvalid, limit)
	}
	since = mongostore.Stamp(since)
	out, err := s.filter(ctx, func(r Run) bool {
		return keep(r) && !r.Updated.Before(since) && after.Before(r)
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Run) int {
		return cmp.Or(a.Updated.Compare(b.Updated), cmp.Compare(a.ID, b.ID))
	})
	return out[:min(limit, len(out))], nil
}

// ForPull implements Store.
func (s *MemoryStore) ForPull(ctx context.Context, host, repo string, pull int) ([]Run, error) {
	key := forge.RepoKey(repo)
	return s.filter(ctx, func(r Run) bool { return r.Host == host && forge.RepoKey(r.Repo) == key && r.Pull == pull })
}

// ForHead implements Store.
func (s *MemoryStore) ForHead(ctx context.Context, host, repo, sha string) ([]Run, error) {
	key := forge.RepoKey(repo)
	return s.filter(ctx, func(r Run) bool { return r.Host == host && forge.RepoKey(r.Repo) == key && r.HeadSHA == sha })
}

// filter returns the unsettled runs keep accepts, sorted by id.
func (s *MemoryStore) filter(ctx context.Context, keep func(Run) bool) ([]Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("gaterun: list runs: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Run
	for _, r := range s.runs {
		if !r.Settled && keep(r) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Run) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// List implements Store.
func (s *MemoryStore) List(ctx context.Context, q Query) ([]Run, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("gaterun: list runs: %w", err)
	}
	s.mu.Lock()
	var out []Run
	for _, r := range s.runs {
		if q.Matches(r) && q.After.Before(r) {
			out = append(out, r)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Run) int {
		return cmp.Or(a.Updated.Compare(b.Updated), cmp.Compare(a.ID, b.ID))
	})
	return out[:min(q.Limit, len(out))], nil
}

// Settle implements Store.
func (s *MemoryStore) Settle(ctx context.Context, id string, reported time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("gaterun: settle run: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok {
		return false, fmt.Errorf("%w: id %q", ErrNotFound, id)
	}
	if !r.Reported.Equal(mongostore.Stamp(reported)) {
		return false, nil
	}
	r.Settled = true
	s.runs[id] = r
	return true, nil
}

// Move implements Store.
func (s *MemoryStore) Move(ctx context.Context, id string, from, to int64, now time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("gaterun: move run: %w", err)
	}
	if to < 1 {
		return false, fmt.Errorf("%w: run %q: installation %d to move to is not an installation ID", ErrInvalid, id, to)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok || r.Settled || r.Installation != from {
		return false, nil
	}
	r.Installation, r.Updated = to, mongostore.Stamp(now)
	s.runs[id] = r
	return true, nil
}
