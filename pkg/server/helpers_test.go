package server_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/gaterun"
)

// The helpers these tests share with pkg/board's, under their local names.
var (
	startSim       = forgetest.StartSim
	newForge       = forgetest.NewForge
	serveSimOnPipe = forgetest.ServeSimOnPipe
	newPipeNet     = forgetest.NewPipeNet
	textLogger     = forgetest.TextLogger
	laneCount      = forgetest.LaneCount
)

// rateLimited reports whether err carries a forge rate limit.
func rateLimited(err error) (*forge.RateLimitError, bool) {
	var rl *forge.RateLimitError
	return rl, errors.As(err, &rl)
}

// countingRuns is a run store that counts its reads: Get calls and
// Unsettled calls (pages listed).
type countingRuns struct {
	gaterun.Store
	gets, lists atomic.Int64
}

func (c *countingRuns) Get(ctx context.Context, id string) (gaterun.Run, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, id)
}

func (c *countingRuns) Unsettled(ctx context.Context, since time.Time, after gaterun.Cursor, limit int) ([]gaterun.Run, error) {
	c.lists.Add(1)
	return c.Store.Unsettled(ctx, since, after, limit)
}

// take returns the Get and Unsettled calls since the last take.
func (c *countingRuns) take() (gets, lists int64) {
	return c.gets.Swap(0), c.lists.Swap(0)
}

// racedStore is a MemoryStore that runs land once, just after the first
// List or UnsettledIn whose answer holds the run with id: another writer
// (a POST /api/runs, say) landing between a caller's read of the run and
// its write.
type racedStore struct {
	*gaterun.MemoryStore
	id   string
	land func()
	once sync.Once
}

func (s *racedStore) List(ctx context.Context, q gaterun.Query) ([]gaterun.Run, error) {
	out, err := s.MemoryStore.List(ctx, q)
	s.landAfter(out)
	return out, err
}

func (s *racedStore) UnsettledIn(ctx context.Context, installation int64, since time.Time, after gaterun.Cursor, limit int) ([]gaterun.Run, error) {
	out, err := s.MemoryStore.UnsettledIn(ctx, installation, since, after, limit)
	s.landAfter(out)
	return out, err
}

// landAfter runs land the first time read holds the run.
func (s *racedStore) landAfter(read []gaterun.Run) {
	if slices.ContainsFunc(read, func(r gaterun.Run) bool { return r.ID == s.id }) {
		s.once.Do(s.land)
	}
}

// settleRun settles the run with id in runs as the reconciler does: with
// the Reported of the copy it read.
func settleRun(t *testing.T, runs gaterun.Store, id string) {
	t.Helper()
	r, err := runs.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%s) to settle it: %v", id, err)
	}
	if settled, err := runs.Settle(context.Background(), id, r.Reported); err != nil || !settled {
		t.Fatalf("Settle(%s, its Reported) = %v, %v, want true", id, settled, err)
	}
}

// newerVerdict puts run again in runs, now with verdict failure: a new
// verdict reported for its head.
func newerVerdict(t *testing.T, runs gaterun.Store, run gaterun.Run) {
	run.Verdict, run.Description = gaterun.VerdictFailure, "review failed"
	if _, err := runs.Put(context.Background(), run, time.Now()); err != nil {
		t.Error(err)
	}
}
