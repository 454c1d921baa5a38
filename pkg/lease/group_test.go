package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

// TestRunGroupRejectsUnusableArguments pins RunGroup's validation: each
// unusable argument is an error wrapping ErrInvalid that names the field,
// before any store call.
func TestRunGroupRejectsUnusableArguments(t *testing.T) {
	ok := lease.GroupSpec{Name: "g", Owner: "a", Shards: 4, TTL: 3 * time.Second}
	work := func(context.Context, int) {}
	for _, c := range []struct {
		why   string
		st    lease.Store
		spec  func(s *lease.GroupSpec)
		work  func(context.Context, int)
		field string
	}{
		{"a store that cannot list its leases cannot see the members", struct{ lease.Store }{lease.NewMemoryStore()}, func(*lease.GroupSpec) {}, work, "lease.Inspector"},
		{"nil work", lease.NewMemoryStore(), func(*lease.GroupSpec) {}, nil, "work"},
		{"blank name", lease.NewMemoryStore(), func(s *lease.GroupSpec) { s.Name = " " }, work, "GroupSpec.Name"},
		{"blank owner", lease.NewMemoryStore(), func(s *lease.GroupSpec) { s.Owner = "" }, work, "GroupSpec.Owner"},
		{"no shards", lease.NewMemoryStore(), func(s *lease.GroupSpec) { s.Shards = 0 }, work, "GroupSpec.Shards"},
		{"TTL under MinTTL", lease.NewMemoryStore(), func(s *lease.GroupSpec) { s.TTL = 0 }, work, "GroupSpec.TTL"},
		{"negative retry", lease.NewMemoryStore(), func(s *lease.GroupSpec) { s.Retry = -time.Second }, work, "GroupSpec.Retry"},
		{"a retry over TTL/2 lets the member lease lapse between renewals", lease.NewMemoryStore(), func(s *lease.GroupSpec) { s.Retry = 2 * time.Second }, work, "GroupSpec.Retry"},
	} {
		spec := ok
		c.spec(&spec)
		err := lease.RunGroup(t.Context(), c.st, spec, c.work)
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: RunGroup = %v, want ErrInvalid naming %s", c.why, err, c.field)
		}
	}
}

// TestRunGroupRepanicsAfterEndingEveryTerm pins what RunGroup does when a
// shard's work panics, as Run does: it ends every term (the other shards'
// work sees its context cancelled), releases every lease, the member's
// included, and then re-panics with the work's value.
func TestRunGroupRepanicsAfterEndingEveryTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := lease.NewMemoryStore()
		cancelled := make(chan int, 2)
		var got any
		func() {
			defer func() { got = recover() }()
			_ = lease.RunGroup(t.Context(), st, lease.GroupSpec{Name: "g", Owner: "a", Shards: 2, TTL: 3 * time.Second},
				func(ctx context.Context, shard int) {
					if shard == 0 {
						time.Sleep(time.Second)
						panic("shard 0 broke")
					}
					<-ctx.Done()
					cancelled <- shard
				})
		}()
		if got != "shard 0 broke" {
			t.Fatalf("RunGroup recovered %v, want the work's panic value re-panicked", got)
		}
		select {
		case s := <-cancelled:
			if s != 1 {
				t.Errorf("cancelled shard %d, want 1", s)
			}
		default:
			t.Errorf("shard 1's work did not see its context cancelled: every term ends before the re-panic")
		}
		if hs, _ := st.Holders(context.Background()); len(hs) != 0 {
			t.Errorf("leases left %v, want none: every shard and the member lease are released before the re-panic", hs)
		}
	})
}

// TestGroupsReadsTheGroupsFromAList pins the lease names of a group and
// what Groups reads back: shards zero-padded to sort, the shard count in
// the name, live members with their counts and targets, expired leases
// unheld, and other leases ignored.
func TestGroupsReadsTheGroupsFromAList(t *testing.T) {
	if got := lease.ShardName("sweeper", 64, 7); got != "sweeper[64]/shard/07" {
		t.Errorf("ShardName = %q, want sweeper[64]/shard/07: padded to the width of S-1", got)
	}
	if got := lease.MemberName("sweeper", 64, "web-1"); got != "sweeper[64]/member/web-1" {
		t.Errorf("MemberName = %q, want sweeper[64]/member/web-1", got)
	}
	now := time.Date(2026, 9, 30, 15, 0, 0, 0, time.UTC)
	live, gone := now.Add(time.Minute), now
	hs := []lease.Holder{
		{Name: "merge-gate-sweeper", Owner: "a", Expires: live},
		{Name: lease.MemberName("g", 3, "a"), Owner: "a", Expires: live},
		{Name: lease.MemberName("g", 3, "b"), Owner: "b", Expires: gone}, // expired at now: not live
		{Name: lease.ShardName("g", 3, 0), Owner: "a", Expires: live},
		{Name: lease.ShardName("g", 3, 1), Owner: "b", Expires: live},
		{Name: lease.ShardName("g", 3, 2), Owner: "a", Expires: gone}, // expired: unheld
		{Name: "g[x]/shard/1", Owner: "a", Expires: live},             // not a group's
	}
	gs := lease.Groups(hs, now)
	if len(gs) != 1 {
		t.Fatalf("Groups = %+v, want one group", gs)
	}
	g := gs[0]
	if got := fmt.Sprintf("%s %d %q fair=%d unheld=%v %+v", g.Name, g.Shards, g.Holders, g.Fair(), g.Unheld(), g.Holdings()); got !=
		`g 3 ["a" "b" ""] fair=3 unheld=[2] [{Owner:a Shards:[0] Member:true Target:3} {Owner:b Shards:[1] Member:false Target:0}]` {
		t.Errorf("Groups = %s, want g of 3 shards: a the one live member (target 3), b holding shard 1 without a member lease, shard 2 unheld", got)
	}
}
