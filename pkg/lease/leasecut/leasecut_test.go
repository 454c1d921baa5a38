package leasecut_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/lease/leasecut"
)

// TestCutViewAnswersNothingAndReachesNothing pins the rule the demo's crash
// and the server's partition tests rely on: before Cut the view is the store;
// after it every call, the optional interfaces' included, fails with ErrCut
// and the shared store is untouched, so the cut replica's lease stays until
// it expires.
func TestCutViewAnswersNothingAndReachesNothing(t *testing.T) {
	ctx := t.Context()
	now := time.Date(2026, 9, 30, 15, 0, 0, 0, time.UTC)
	shared := lease.NewMemoryStore()
	view := leasecut.New(shared)
	terms, _ := view.(lease.TermStore)
	insp, _ := view.(lease.Inspector)
	if terms == nil || insp == nil {
		t.Fatalf("view of a MemoryStore is TermStore %v, Inspector %v, want both: the view has the shared store's optional interfaces", terms != nil, insp != nil)
	}
	if ok, err := terms.AcquireTerm(ctx, "net", "a", now, time.Minute, "t1"); !ok || err != nil {
		t.Fatalf("AcquireTerm before Cut = %v, %v, want true, nil: an uncut view is the store", ok, err)
	}
	if hs, err := insp.Holders(ctx); len(hs) != 1 || err != nil {
		t.Fatalf("Holders before Cut = %+v, %v, want net: an uncut view is the store", hs, err)
	}
	view.Cut()
	if ok, err := view.Renew(ctx, "net", "a", now.Add(time.Second), time.Hour); ok || !errors.Is(err, leasecut.ErrCut) {
		t.Errorf("Renew after Cut = %v, %v, want false, ErrCut", ok, err)
	}
	if err := view.Release(ctx, "net", "a"); !errors.Is(err, leasecut.ErrCut) {
		t.Errorf("Release after Cut = %v, want ErrCut", err)
	}
	if err := terms.ReleaseTerm(ctx, "net", "a", "t1"); !errors.Is(err, leasecut.ErrCut) {
		t.Errorf("ReleaseTerm after Cut = %v, want ErrCut", err)
	}
	if ok, err := view.Acquire(ctx, "other", "a", now, time.Minute); ok || !errors.Is(err, leasecut.ErrCut) {
		t.Errorf("Acquire after Cut = %v, %v, want false, ErrCut", ok, err)
	}
	if ok, err := terms.AcquireTerm(ctx, "other", "a", now, time.Minute, "t2"); ok || !errors.Is(err, leasecut.ErrCut) {
		t.Errorf("AcquireTerm after Cut = %v, %v, want false, ErrCut", ok, err)
	}
	if hs, err := insp.Holders(ctx); hs != nil || !errors.Is(err, leasecut.ErrCut) {
		t.Errorf("Holders after Cut = %+v, %v, want nil, ErrCut", hs, err)
	}
	holders, err := shared.Holders(ctx)
	if err != nil || len(holders) != 1 || !holders[0].Expires.Equal(now.Add(time.Minute)) {
		t.Errorf("shared store holds %+v (%v), want only net, expiring at %v: a cut view reaches nothing", holders, err, now.Add(time.Minute))
	}
	if ok, err := shared.Acquire(ctx, "net", "b", now.Add(time.Minute), time.Minute); !ok || err != nil {
		t.Errorf("successor Acquire at the expiry = %v, %v, want true, nil: the cut holder's lease expires", ok, err)
	}
}

// TestViewHasExactlyTheSharedStoresOptionalInterfaces pins that a view is a
// lease.TermStore and a lease.Inspector exactly when the shared store is:
// Run through it scopes its releases to terms and RunGroup accepts it as
// they would the shared store, and it never claims an interface it could
// not honour.
func TestViewHasExactlyTheSharedStoresOptionalInterfaces(t *testing.T) {
	mem := lease.NewMemoryStore()
	for _, c := range []struct {
		why         string
		shared      lease.Store
		terms, list bool
	}{
		{"both twins implement both", mem, true, true},
		{"a plain Store", struct{ lease.Store }{mem}, false, false},
		{"a TermStore that cannot list", struct{ lease.TermStore }{mem}, true, false},
		{"an Inspector without terms", struct {
			lease.Store
			lease.Inspector
		}{mem, mem}, false, true},
	} {
		view := leasecut.New(c.shared)
		if _, terms := view.(lease.TermStore); terms != c.terms {
			t.Errorf("%s: view is a lease.TermStore: got %v, want %v: the view has the shared store's optional interfaces", c.why, terms, c.terms)
		}
		if _, list := view.(lease.Inspector); list != c.list {
			t.Errorf("%s: view is a lease.Inspector: got %v, want %v: the view has the shared store's optional interfaces", c.why, list, c.list)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // RunGroup checks the store before its first call, then returns at once
		err := lease.RunGroup(ctx, view, lease.GroupSpec{Name: "g", Owner: "a", Shards: 2, TTL: 3 * time.Second}, func(context.Context, int) {})
		if accepted := err == nil; accepted != c.list {
			t.Errorf("%s: RunGroup over the view = %v, want it accepted exactly when the shared store lists its leases (%v)", c.why, err, c.list)
		}
	}
}
