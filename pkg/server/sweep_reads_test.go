package server

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/gaterun"
)

// countingRuns counts the unsettled-run reads that reach the store.
type countingRuns struct {
	gaterun.Store
	among, in atomic.Int64
}

func (c *countingRuns) UnsettledAmong(ctx context.Context, ids []int64, since time.Time, after gaterun.Cursor, limit int) ([]gaterun.Run, error) {
	c.among.Add(1)
	return c.Store.UnsettledAmong(ctx, ids, since, after, limit)
}

func (c *countingRuns) UnsettledIn(ctx context.Context, id int64, since time.Time, after gaterun.Cursor, limit int) ([]gaterun.Run, error) {
	c.in.Add(1)
	return c.Store.UnsettledIn(ctx, id, since, after, limit)
}

// readsFixture stores 3 runs for each of installations 1 to n at t0 and
// returns the store, its counter and reads at interval iv on clock *now.
func readsFixture(t *testing.T, n int, t0 time.Time, now *time.Time, iv time.Duration) (*gaterun.MemoryStore, *countingRuns, *sweepReads) {
	t.Helper()
	mem := &gaterun.MemoryStore{}
	for id := 1; id <= n; id++ {
		for pull := 1; pull <= 3; pull++ {
			putInstallationRun(t, mem, int64(id), pull, t0)
		}
	}
	counting := &countingRuns{Store: mem}
	return mem, counting, newSweepReads(counting, func() time.Time { return *now }, iv)
}

func putInstallationRun(t *testing.T, s gaterun.Store, id int64, pull int, at time.Time) gaterun.Run {
	t.Helper()
	repo := fmt.Sprintf("org-%d/repo-1", id)
	r := gaterun.Run{ID: gaterun.ID("github.com", repo, pull, "abc"), Host: "github.com", Repo: repo, Pull: pull,
		HeadSHA: "abc", Context: gaterun.DefaultContext, Verdict: gaterun.VerdictSuccess, Installation: id}
	if _, err := s.Put(context.Background(), r, at); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSweepReadsOneReadForTheReplicasInstallations(t *testing.T) {
	ctx, iv := context.Background(), 10*time.Second
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	mem, counting, reads := readsFixture(t, 20, t0, &now, iv)
	for id := int64(1); id <= 20; id++ {
		reads.join(id)
	}
	for id := int64(1); id <= 20; id++ {
		now = now.Add(iv / 50) // the installations' passes spread over part of the interval
		got, err := reads.unsettledIn(ctx, id, now.Add(-time.Hour), gaterun.Cursor{}, 2)
		want, _ := mem.UnsettledIn(ctx, id, now.Add(-time.Hour), gaterun.Cursor{}, 2)
		if err != nil || !sameRunIDs(got, want) {
			t.Fatalf("installation %d: unsettledIn = %v, %v, want %v: what UnsettledIn lists, paged alike", id, runIDs(got), err, runIDs(want))
		}
		rest, err := reads.unsettledIn(ctx, id, now.Add(-time.Hour), gaterun.CursorAt(got[1]), 2)
		if err != nil || len(rest) != 1 {
			t.Fatalf("installation %d: the page after 2 = %v, %v, want its third run", id, runIDs(rest), err)
		}
	}
	if a, in := counting.among.Load(), counting.in.Load(); a != 1 || in != 0 {
		t.Errorf("store reads for 20 installations' passes within half an interval: %d UnsettledAmong, %d UnsettledIn; want 1 and 0: one read for the replica's installations", a, in)
	}
}

func TestSweepReadsNeverServeAPassAnOlderSnapshotThanHalfAnInterval(t *testing.T) {
	ctx, iv := context.Background(), 10*time.Second
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	mem, counting, reads := readsFixture(t, 2, t0, &now, iv)
	reads.join(1)
	reads.join(2)
	if _, err := reads.unsettledIn(ctx, 1, t0, gaterun.Cursor{}, 10); err != nil {
		t.Fatal(err)
	}
	late := putInstallationRun(t, mem, 2, 9, now)
	settled, err := mem.Get(ctx, gaterun.ID("github.com", "org-1/repo-1", 1, "abc"))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := mem.Settle(ctx, settled.ID, settled.Reported); err != nil || !ok {
		t.Fatalf("Settle = %v, %v, want true", ok, err)
	}
	now = now.Add(iv / 2)
	got2, err := reads.unsettledIn(ctx, 2, t0, gaterun.Cursor{}, 10)
	if err != nil || len(got2) != 4 || got2[3].ID != late.ID {
		t.Errorf("installation 2 half an interval after the read = %v, %v; want its 4 runs, the one put since last: the snapshot is read again", runIDs(got2), err)
	}
	got1, err := reads.unsettledIn(ctx, 1, t0, gaterun.Cursor{}, 10)
	if err != nil || len(got1) != 2 {
		t.Errorf("installation 1 = %v, %v; want 2 runs: the one settled since the last read is gone", runIDs(got1), err)
	}
	if a := counting.among.Load(); a != 2 {
		t.Errorf("UnsettledAmong reads = %d, want 2", a)
	}
	// An installation the snapshot was not read for, and a since before
	// the snapshot's, are read from the store.
	if got, err := reads.unsettledIn(ctx, 3, t0, gaterun.Cursor{}, 10); err != nil || len(got) != 0 || counting.among.Load() != 3 {
		t.Errorf("installation 3 (not joined) = %v, %v after %d reads; want none, read again for it", runIDs(got), err, counting.among.Load())
	}
	if got, err := reads.unsettledIn(ctx, 2, now.Add(-deepWindow-2*iv), gaterun.Cursor{}, 10); err != nil || len(got) != 4 || counting.in.Load() != 1 {
		t.Errorf("a since before the snapshot's = %v, %v, %d UnsettledIn; want the 4 runs from UnsettledIn itself", runIDs(got), err, counting.in.Load())
	}
	reads.leave(2)
	now = now.Add(iv)
	if _, err := reads.unsettledIn(ctx, 1, t0, gaterun.Cursor{}, 10); err != nil || reads.covers[2] {
		t.Errorf("after installation 2 left, the next read covers it = %t, %v; want false: only the installations swept here are read", reads.covers[2], err)
	}
}

func runIDs(runs []gaterun.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = fmt.Sprintf("%s#%d", r.Repo, r.Pull)
	}
	return out
}

func sameRunIDs(a, b []gaterun.Run) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID {
			return false
		}
	}
	return true
}

// failingAmong is a run store whose UnsettledAmong fails while down is
// set, and counts its calls.
type failingAmong struct {
	gaterun.Store
	down  atomic.Bool
	calls atomic.Int64
}

func (f *failingAmong) UnsettledAmong(ctx context.Context, ids []int64, since time.Time, after gaterun.Cursor, limit int) ([]gaterun.Run, error) {
	f.calls.Add(1)
	if f.down.Load() {
		return nil, context.DeadlineExceeded
	}
	return f.Store.UnsettledAmong(ctx, ids, since, after, limit)
}

// TestSweepReadsBackOffAfterAFailedRead pins the back-off: after a failed
// read, the replica's other sweepers' lists fail at once with its error,
// sending the store nothing, for an eighth of an interval; then one read
// is tried again, and once it succeeds the lists are served as before.
func TestSweepReadsBackOffAfterAFailedRead(t *testing.T) {
	ctx, iv := context.Background(), 40*time.Second
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	mem, _, _ := readsFixture(t, 20, t0, &now, iv)
	store := &failingAmong{Store: mem}
	store.down.Store(true)
	reads := newSweepReads(store, func() time.Time { return now }, iv)
	for id := int64(1); id <= 20; id++ {
		reads.join(id)
	}
	list := func(id int64) error {
		_, err := reads.unsettledIn(ctx, id, now.Add(-time.Hour), gaterun.Cursor{}, 10)
		return err
	}
	for id := int64(1); id <= 20; id++ {
		if err := list(id); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("installation %d's list with the store timing out: %v, want its error", id, err)
		}
		now = now.Add(200 * time.Millisecond) // 20 passes within 4 s, under an eighth of 40 s
	}
	if n := store.calls.Load(); n != 1 {
		t.Errorf("store reads for 20 lists within 4 s of a failed read: %d, want 1: the others wait out the back-off", n)
	}
	store.down.Store(false)
	now = now.Add(iv/8 - 4*time.Second)
	if err := list(1); err != nil {
		t.Fatalf("a list an eighth of an interval after the failed read, the store back: %v, want it read", err)
	}
	if n := store.calls.Load(); n != 2 {
		t.Errorf("store reads after the back-off: %d, want 2", n)
	}
	for id := int64(2); id <= 20; id++ {
		if err := list(id); err != nil {
			t.Fatalf("installation %d after a good read: %v", id, err)
		}
	}
	if n := store.calls.Load(); n != 2 {
		t.Errorf("store reads for the other 19 after a good read: %d more, want none: the snapshot serves them", n-2)
	}
}

// TestSweepReadsAFailedReadSaysNoRunLeft pins what unlisted answers: the
// runs an installation's snapshot does not list (here a run ID it never
// held), and none once a read has failed and no snapshot covers it, as
// nothing then says any run left. A sweeper drops the back-offs and the
// failed deep-window runs unlisted names (keepListed); after a failed
// read, naming them all would drop every one of them, and a run that
// keeps failing would be offered again from scratch.
func TestSweepReadsAFailedReadSaysNoRunLeft(t *testing.T) {
	ctx, iv := context.Background(), 40*time.Second
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	mem, _, _ := readsFixture(t, 1, t0, &now, iv)
	store := &failingAmong{Store: mem}
	reads := newSweepReads(store, func() time.Time { return now }, iv)
	reads.join(1)
	listed, err := reads.unsettledIn(ctx, 1, now.Add(-time.Hour), gaterun.Cursor{}, 10)
	if err != nil || len(listed) == 0 {
		t.Fatalf("installation 1's list: %d runs, %v; want its runs", len(listed), err)
	}
	kept := []string{listed[0].ID, "gone"}
	if got := reads.unlisted(1, kept); len(got) != 1 || got[0] != "gone" {
		t.Errorf("unlisted(%v) with a snapshot: %v, want [gone]: the runs the snapshot does not list", kept, got)
	}
	store.down.Store(true)
	now = now.Add(iv) // past the snapshot's freshness: read again, and the read fails
	if _, err := reads.unsettledIn(ctx, 1, now.Add(-time.Hour), gaterun.Cursor{}, 10); err == nil {
		t.Fatal("installation 1's list with the store down: no error, want the store's")
	}
	if got := reads.unlisted(1, kept); len(got) != 0 {
		t.Errorf("unlisted(%v) after a failed read: %v, want none: no snapshot says any run left", kept, got)
	}
}
