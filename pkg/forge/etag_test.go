package forge_test

import (
	"net/http"
	"testing"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

func TestNotModifiedIsServedFromTheCacheAndCountedAs304(t *testing.T) {
	sim, srv := startSim(t, forgesim.WithBudget(100))
	c := newClient(t, srv, forge.Config{Token: "t"})
	if err := sim.SeedPull("acme", "app", 1, "sha1", "open"); err != nil {
		t.Fatal(err)
	}
	ctx := laneCtx(forge.LaneMergeGateSweeper)
	want := forge.Pull{Number: 1, State: "open", HeadSHA: "sha1"}
	for i := range 3 {
		pr, err := c.GetPull(ctx, "acme", "app", 1)
		if err != nil || pr != want {
			t.Fatalf("read %d: got %+v, %v, want %+v: a 304 is answered from the cached body", i+1, pr, err, want)
		}
	}
	if got200, got304 := countOf(c, forge.LaneMergeGateSweeper, http.StatusOK), countOf(c, forge.LaneMergeGateSweeper, http.StatusNotModified); got200 != 1 || got304 != 2 {
		t.Fatalf("counts: got %d×200 %d×304, want 1×200 2×304: the counts tell 304s apart", got200, got304)
	}
	if got := sim.Stats().Budget.Windows[0].Used; got != 1 {
		t.Fatalf("budget used: got %d, want 1: GitHub does not charge a 304", got)
	}

	if err := sim.PushHead("acme", "app", 1, "sha2"); err != nil {
		t.Fatal(err)
	}
	pr, err := c.GetPull(ctx, "acme", "app", 1)
	if err != nil || pr.HeadSHA != "sha2" {
		t.Fatalf("read after a push: got %+v, %v, want head sha2: a changed resource is a fresh 200, never the stale cache", pr, err)
	}
	if got := countOf(c, forge.LaneMergeGateSweeper, http.StatusOK); got != 2 {
		t.Fatalf("200s counted: got %d, want 2", got)
	}
}

func TestETagCacheIsBoundedAndPerIdentity(t *testing.T) {
	sim, srv := startSim(t)
	for n := 1; n <= 3; n++ {
		if err := sim.SeedPull("acme", "app", n, "sha", "open"); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, srv, forge.Config{Token: "a", ETagCacheEntries: 2})
	ctx := laneCtx(forge.LaneAPI)
	read := func(cl *forge.Client, n int) {
		t.Helper()
		if _, err := cl.GetPull(ctx, "acme", "app", n); err != nil {
			t.Fatal(err)
		}
	}
	read(c, 1)
	read(c, 2)
	read(c, 3) // evicts 1, the least recently used
	read(c, 3)
	read(c, 1)
	if got := countOf(c, forge.LaneAPI, http.StatusNotModified); got != 1 {
		t.Fatalf("304s: got %d, want 1 (pull 3 again): an entry beyond the bound is evicted, least recently used first", got)
	}
	other := newClient(t, srv, forge.Config{Token: "b"})
	read(other, 3)
	if got := countOf(other, forge.LaneAPI, http.StatusOK); got != 1 {
		t.Fatalf("another token's first read: got %d×200, want 1: answers are cached per auth identity", got)
	}
}
