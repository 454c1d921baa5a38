package leasecut_test

import (
	"errors"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/lease/leasecut"
)

// TestCutViewAnswersNothingAndReachesNothing pins the rule the demo's crash
// and the server's partition tests rely on: before Cut the view is the store;
// after it every call fails with ErrCut and the shared store is untouched,
// so the cut replica's lease stays until it expires.
func TestCutViewAnswersNothingAndReachesNothing(t *testing.T) {
	ctx := t.Context()
	now := time.Date(2026, 9, 30, 15, 0, 0, 0, time.UTC)
	shared := lease.NewMemoryStore()
	view := leasecut.New(shared)
	if ok, err := view.Acquire(ctx, "net", "a", now, time.Minute); !ok || err != nil {
		t.Fatalf("Acquire before Cut = %v, %v, want true, nil: an uncut view is the store", ok, err)
	}
	view.Cut()
	if ok, err := view.Renew(ctx, "net", "a", now.Add(time.Second), time.Hour); ok || !errors.Is(err, leasecut.ErrCut) {
		t.Errorf("Renew after Cut = %v, %v, want false, ErrCut", ok, err)
	}
	if err := view.Release(ctx, "net", "a"); !errors.Is(err, leasecut.ErrCut) {
		t.Errorf("Release after Cut = %v, want ErrCut", err)
	}
	if ok, err := view.Acquire(ctx, "other", "a", now, time.Minute); ok || !errors.Is(err, leasecut.ErrCut) {
		t.Errorf("Acquire after Cut = %v, %v, want false, ErrCut", ok, err)
	}
	holders, err := shared.Holders(ctx)
	if err != nil || len(holders) != 1 || !holders[0].Expires.Equal(now.Add(time.Minute)) {
		t.Errorf("shared store holds %+v (%v), want only net, expiring at %v: a cut view reaches nothing", holders, err, now.Add(time.Minute))
	}
	if ok, err := shared.Acquire(ctx, "net", "b", now.Add(time.Minute), time.Minute); !ok || err != nil {
		t.Errorf("successor Acquire at the expiry = %v, %v, want true, nil: the cut holder's lease expires", ok, err)
	}
}
