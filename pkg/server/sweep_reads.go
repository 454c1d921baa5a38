package server

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"iterion.dev/iterion/internal/mongostore"
	"iterion.dev/iterion/pkg/gaterun"
)

// sweepReads serves App mode's installation sweepers their unsettled runs
// from one store read for every installation the replica sweeps
// (Store.UnsettledAmong) instead of a read each: a store that scans the
// collection per query (dev-mongo: FerretDB's SQLite backend pushes no
// filter down but _id) would otherwise scan it once per installation per
// interval.
//
// What a sweeper may rely on: a list is what UnsettledIn would have given
// at the snapshot's read, which is at most fresh old; fresh is under the
// interval, so an installation's consecutive passes (an interval apart)
// never share a snapshot and a run settled by one pass is not listed by
// the next. A run put after the snapshot waits for a later one (at most
// fresh more); POST /api/runs offers a run at once, the sweep is the
// repair. A list the snapshot cannot answer (an installation it was not
// read for, a since before its own) is read from the store directly.
// After a failed read, the lists that need a new one fail at once with its
// error for fresh/4 (an eighth of an interval), so that a store that times
// out is not sent each of the replica's sweepers' reads, one after the
// other: at 1,000 installations on dev-mongo that kept the store saturated
// after the load that overran it had passed. Safe for concurrent use; one
// read at a time.
type sweepReads struct {
	runs  gaterun.Store
	now   func() time.Time
	fresh time.Duration
	// reach is how far before a snapshot's read its since goes: the deep
	// window, and an interval more for a pass that began before the read.
	reach time.Duration

	mu      sync.Mutex
	failed  time.Time     // the last failed read; zero: none since a success
	failErr error         // its error
	members map[int64]int // installations swept here: sweepers running each
	at      time.Time     // the snapshot's read; zero: none
	since   time.Time     // the snapshot's since, as stores keep it
	covers  map[int64]bool
	of      map[int64][]gaterun.Run // by installation, in listing order
}

// newSweepReads returns the reads of a replica sweeping every interval.
func newSweepReads(runs gaterun.Store, now func() time.Time, interval time.Duration) *sweepReads {
	return &sweepReads{runs: runs, now: now, fresh: interval / 2, reach: deepWindow + interval, members: map[int64]int{}}
}

// join counts a sweeper of installation id running here; leave undoes it.
// The next snapshot is read for the installations joined.
func (r *sweepReads) join(id int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.members[id]++
}

// leave undoes one join of id.
func (r *sweepReads) leave(id int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.members[id]--; r.members[id] <= 0 {
		delete(r.members, id)
	}
}

// unsettledIn is Store.UnsettledIn of installation id, from the snapshot
// (read again when older than fresh, or not read for id).
func (r *sweepReads) unsettledIn(ctx context.Context, id int64, since time.Time, after gaterun.Cursor, limit int) ([]gaterun.Run, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%w: limit %d is under 1", gaterun.ErrInvalid, limit)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if !r.covers[id] || r.at.IsZero() || now.Sub(r.at) >= r.fresh {
		if !r.failed.IsZero() && now.Sub(r.failed) < r.fresh/4 {
			return nil, fmt.Errorf("server: unsettled runs not read again until %v after a failed read: %w", r.fresh/4, r.failErr)
		}
		if err := r.readLocked(ctx, now, id); err != nil {
			r.failed, r.failErr = now, err
			return nil, err
		}
		r.failed, r.failErr = time.Time{}, nil
	}
	since = mongostore.Stamp(since)
	if since.Before(r.since) {
		return r.runs.UnsettledIn(ctx, id, since, after, limit)
	}
	var out []gaterun.Run
	for _, run := range r.of[id] {
		if len(out) == limit {
			break
		}
		if !run.Updated.Before(since) && after.Before(run) {
			out = append(out, run)
		}
	}
	return out, nil
}

// unlisted is the runs of runIDs that installation id's snapshot does not
// list unsettled: settled, moved to another installation, deleted or past
// the deep window by its read. None when no snapshot covers id (a read
// failed), as nothing says they left.
func (r *sweepReads) unlisted(id int64, runIDs []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.covers[id] || len(runIDs) == 0 {
		return nil
	}
	left := make(map[string]bool, len(runIDs))
	for _, runID := range runIDs {
		left[runID] = true
	}
	for _, run := range r.of[id] {
		delete(left, run.ID)
	}
	return slices.Collect(maps.Keys(left))
}

// readLocked reads the snapshot at now for the members and id, page by
// page; r.mu is held. On an error the old snapshot is dropped.
func (r *sweepReads) readLocked(ctx context.Context, now time.Time, id int64) error {
	r.at, r.covers, r.of = time.Time{}, nil, nil
	ids := slices.Sorted(maps.Keys(r.members))
	if !slices.Contains(ids, id) {
		ids = append(ids, id)
	}
	since := mongostore.Stamp(now.Add(-r.reach))
	of := map[int64][]gaterun.Run{}
	cur := gaterun.Cursor{}
	for {
		page, err := r.runs.UnsettledAmong(ctx, ids, since, cur, listPage)
		if err != nil {
			return err
		}
		for _, run := range page {
			of[run.Installation] = append(of[run.Installation], run)
		}
		if len(page) < listPage {
			break
		}
		cur = gaterun.CursorAt(page[len(page)-1])
	}
	r.covers = map[int64]bool{}
	for _, i := range ids {
		r.covers[i] = true
	}
	r.at, r.since, r.of = now, since, of
	return nil
}
