package lease_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
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
		// A done ctx: RunGroup with an argument it failed to reject returns
		// nil at once rather than serving until the test times out.
		done, cancel := context.WithCancel(t.Context())
		cancel()
		err := lease.RunGroup(done, c.st, spec, c.work)
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

// slowShardAnswers is a MemoryStore whose AcquireTerm of a shard by owner,
// sent before until, lands at once but answers only delay later, whatever
// the caller's ctx does meanwhile: the answer was on its way.
type slowShardAnswers struct {
	*lease.MemoryStore
	owner string
	delay time.Duration
	until time.Time
}

func (s slowShardAnswers) AcquireTerm(ctx context.Context, name, owner string, now time.Time, ttl time.Duration, token string) (bool, error) {
	ok, err := s.MemoryStore.AcquireTerm(ctx, name, owner, now, ttl, token)
	if owner == s.owner && strings.Contains(name, "/shard/") && now.Before(s.until) {
		time.Sleep(s.delay)
	}
	return ok, err
}

// TestShardGivenUpMidCampaignIsReleasedAtOnceWhenItsAcquireWins pins that a
// shard its member gave up to even the share while the shard's Acquire was
// in flight starts no term when that Acquire wins: it is released at once,
// for ReasonRebalanced, as Run releases a win answered once ctx is done,
// not held unrenewed until the group shuts down. Member a campaigns for
// shards 0 and 1 at 0s; both Acquires land at once and answer at 2.5s. b
// joins at 0.7s, so at a's survey at 2s the membership has held for a
// Retry and a gives one shard up; b takes it at its next survey, at 2.7s
// (off the instant of a's release, so the test does not race it).
func TestShardGivenUpMidCampaignIsReleasedAtOnceWhenItsAcquireWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		mem := lease.NewMemoryStore()
		var mu sync.Mutex
		var events []lease.Event
		record := func(e lease.Event) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, e)
		}
		spec := func(owner string) lease.GroupSpec {
			return lease.GroupSpec{Name: "g", Owner: owner, Shards: 2, TTL: 30 * time.Second, Retry: time.Second, OnEvent: record}
		}
		work := func(ctx context.Context, shard int) { <-ctx.Done() }
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() {
			_ = lease.RunGroup(ctx, slowShardAnswers{MemoryStore: mem, owner: "a", delay: 2500 * time.Millisecond, until: t0.Add(time.Second)}, spec("a"), work)
		})
		time.Sleep(700 * time.Millisecond)
		wg.Go(func() { _ = lease.RunGroup(ctx, mem, spec("b"), work) })
		time.Sleep(5 * time.Second)
		synctest.Wait()
		mu.Lock()
		var released, elected []string
		for _, e := range events {
			switch {
			case e.Kind == lease.Released && e.Owner == "a" && e.Shard >= 0:
				released = append(released, fmt.Sprintf("%v shard %d %s", e.At.Sub(t0), e.Shard, e.Reason))
			case e.Kind == lease.Elected && e.Owner == "b":
				elected = append(elected, fmt.Sprintf("%v shard %d", e.At.Sub(t0), e.Shard))
			}
		}
		mu.Unlock()
		if want := []string{"2.5s shard 1 rebalanced"}; !slices.Equal(released, want) {
			t.Errorf("a's shard releases by 5.7s: got %q, want %q: the given-up shard whose Acquire won is released as the win answers", released, want)
		}
		if want := []string{"2.7s shard 1"}; !slices.Equal(elected, want) {
			t.Errorf("b's terms by 5.7s: got %q, want %q: the shard a gave up is free at b's next survey", elected, want)
		}
		cancel()
		wg.Wait()
	})
}

// memberReleaseSlow is a MemoryStore whose Release of a group's member
// lease answers delay late, and that records when each release was
// received and answered, by lease name.
type memberReleaseSlow struct {
	*lease.MemoryStore
	delay time.Duration

	mu       sync.Mutex
	releases []releaseAt
}

type releaseAt struct {
	name     string
	sent, at time.Time // received, answered
}

func (s *memberReleaseSlow) Release(ctx context.Context, name, owner string) error {
	sent := time.Now()
	if strings.Contains(name, "/member/") {
		time.Sleep(s.delay)
	}
	err := s.MemoryStore.Release(ctx, name, owner)
	s.note(name, sent)
	return err
}

func (s *memberReleaseSlow) ReleaseTerm(ctx context.Context, name, owner, token string) error {
	sent := time.Now()
	err := s.MemoryStore.ReleaseTerm(ctx, name, owner, token)
	s.note(name, sent)
	return err
}

func (s *memberReleaseSlow) note(name string, sent time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releases = append(s.releases, releaseAt{name: name, sent: sent, at: time.Now()})
}

// TestGroupShutdownReleasesItsShardsOnlyOnceItsMemberLeaseIsGone pins the
// order of a member's shutdown: its shards' releases are sent only once
// its member lease's release was answered, so that no other member's list
// shows it live, owed its share, beside the shards it freed (and takes
// only its own share of them for a Retry). The member lease's release
// takes 300ms here.
func TestGroupShutdownReleasesItsShardsOnlyOnceItsMemberLeaseIsGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &memberReleaseSlow{MemoryStore: lease.NewMemoryStore(), delay: 300 * time.Millisecond}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- lease.RunGroup(ctx, st, lease.GroupSpec{Name: "g", Owner: "a", Shards: 2, TTL: 3 * time.Second},
				func(ctx context.Context, shard int) { <-ctx.Done() })
		}()
		time.Sleep(2 * time.Second)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("RunGroup = %v, want nil", err)
		}
		st.mu.Lock()
		defer st.mu.Unlock()
		var member time.Time
		shards := 0
		for _, r := range st.releases {
			if strings.Contains(r.name, "/member/") {
				member = r.at
			}
		}
		for _, r := range st.releases {
			if strings.Contains(r.name, "/shard/") {
				shards++
				if member.IsZero() || r.sent.Before(member) {
					t.Errorf("shard lease %s released at %v, member lease's release answered at %v: a shard is released only once the member lease is gone", r.name, r.sent, member)
				}
			}
		}
		if shards != 2 {
			t.Errorf("got %d shard releases, want 2 (releases %+v)", shards, st.releases)
		}
	})
}

// TestGroupsReadsTheGroupsFromAList pins the lease names of a group and
// what Groups reads back: shards zero-padded to sort, the shard count in
// the name, live members with their counts and targets, expired leases
// unheld, and other leases ignored.
func TestGroupsReadsTheGroupsFromAList(t *testing.T) {
	for _, c := range []struct {
		shards, i int
		want      string
	}{
		{64, 7, "sweeper[64]/shard/07"},
		// The names are the stores' keys: a width that changed across a
		// release would name one shard twice during a rolling upgrade.
		{10, 7, "sweeper[10]/shard/7"},
		{1, 0, "sweeper[1]/shard/0"},
	} {
		if got := lease.ShardName("sweeper", c.shards, c.i); got != c.want {
			t.Errorf("ShardName(%d, %d) = %q, want %q: padded to the width of S-1", c.shards, c.i, got, c.want)
		}
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
		{Name: "g[3]/shard/3", Owner: "a", Expires: live},             // no shard of g[3]: shards are 0..2
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

// TestGroupViewServedNeedsALiveOwner pins Served: a group is served while
// it has a live member or an unexpired shard lease, and by nobody once
// every lease of it expired, as a killed replica leaves them.
func TestGroupViewServedNeedsALiveOwner(t *testing.T) {
	now := time.Date(2026, 9, 30, 15, 0, 0, 0, time.UTC)
	live, gone := now.Add(time.Minute), now
	for _, c := range []struct {
		why  string
		hs   []lease.Holder
		want bool
	}{
		{"a live member serves it", []lease.Holder{{Name: lease.MemberName("g", 2, "a"), Owner: "a", Expires: live}}, true},
		{"an unexpired shard lease without a member lease serves it", []lease.Holder{
			{Name: lease.MemberName("g", 2, "a"), Owner: "a", Expires: gone},
			{Name: lease.ShardName("g", 2, 1), Owner: "a", Expires: live}}, true},
		{"every lease expired: nobody serves it", []lease.Holder{
			{Name: lease.MemberName("g", 2, "a"), Owner: "a", Expires: gone},
			{Name: lease.ShardName("g", 2, 0), Owner: "a", Expires: gone},
			{Name: lease.ShardName("g", 2, 1), Owner: "a", Expires: gone}}, false},
	} {
		gs := lease.Groups(c.hs, now)
		if len(gs) != 1 || gs[0].Served() != c.want {
			t.Errorf("Groups(%s) = %+v, want one group with Served() %v: %s", c.why, gs, c.want, c.why)
		}
	}
}

// TestRestartedMemberTakesBackItsOwnShardsOnlyUpToItsTarget pins that a
// member takes back shards whose leases are still its own (a replica
// restarted under the same owner before its leases expired) only up to
// its target: a finds its old leases of shards 0, 1 and 2, and b live
// with shard 3, so a's target is 2 of the 4 shards, and a serves 2 after
// its first survey, never ceil(Shards / live members) + 1.
func TestRestartedMemberTakesBackItsOwnShardsOnlyUpToItsTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := lease.NewMemoryStore()
		seed := func(name, owner string) {
			if ok, err := st.Acquire(ctx, name, owner, time.Now(), time.Hour); !ok || err != nil {
				t.Fatalf("setup: Acquire(%s, %s) = %v, %v", name, owner, ok, err)
			}
		}
		for i := range 3 {
			seed(lease.ShardName("g", 4, i), "a")
		}
		seed(lease.ShardName("g", 4, 3), "b")
		seed(lease.MemberName("g", 4, "b"), "b")
		var mu sync.Mutex
		var elected []int
		runCtx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- lease.RunGroup(runCtx, st, lease.GroupSpec{Name: "g", Owner: "a", Shards: 4, TTL: 3 * time.Second,
				OnEvent: func(e lease.Event) {
					if e.Kind == lease.Elected {
						mu.Lock()
						elected = append(elected, e.Shard)
						mu.Unlock()
					}
				}}, func(ctx context.Context, shard int) { <-ctx.Done() })
		}()
		synctest.Wait() // a's first survey and the campaigns it started
		mu.Lock()
		got := slices.Clone(elected)
		mu.Unlock()
		slices.Sort(got)
		if want := []int{0, 1}; !slices.Equal(got, want) {
			t.Errorf("a's terms after its first survey: shards %v, want %v: its own leases are taken back up to its target, 2", got, want)
		}
		cancel()
		<-done
	})
}

// TestMemberGivesShardsUpOnlyOnceTheMembershipHeldForARetry pins the
// hysteresis of evening the share: a serves all 4 shards alone; b joins at
// 0.5s. a's list at 1s shows b for the first time, and gives nothing up;
// its list at 2s shows the same members again, and gives up 2. So members
// joining one after the other, or one that flaps, move no shard until the
// membership held for a Retry.
func TestMemberGivesShardsUpOnlyOnceTheMembershipHeldForARetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := lease.NewMemoryStore()
		got := joinedAtHalfASecond(st, st, 3500*time.Millisecond, func(e lease.Event) bool {
			return e.Kind == lease.SteppedDown && e.Reason == lease.ReasonRebalanced
		})
		if want := []time.Duration{2 * time.Second, 2 * time.Second}; !slices.Equal(got, want) {
			t.Errorf("a gave shards up at %v, want %v: at the second list showing b, not the first", got, want)
		}
	})
}

// joinedAtHalfASecond runs member a of group g (4 shards, TTL 3s, Retry
// 1s) on stA from now, and member b on stB from 0.5s later, until d after
// now; then it stops both and returns the offsets from now of a's events
// that keep accepts. Call it in a synctest bubble.
func joinedAtHalfASecond(stA, stB lease.Store, d time.Duration, keep func(lease.Event) bool) []time.Duration {
	t0 := time.Now()
	var mu sync.Mutex
	var at []time.Duration
	spec := func(owner string) lease.GroupSpec {
		return lease.GroupSpec{Name: "g", Owner: owner, Shards: 4, TTL: 3 * time.Second, Retry: time.Second,
			OnEvent: func(e lease.Event) {
				if e.Owner == "a" && keep(e) {
					mu.Lock()
					at = append(at, e.At.Sub(t0))
					mu.Unlock()
				}
			}}
	}
	work := func(ctx context.Context, shard int) { <-ctx.Done() }
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = lease.RunGroup(ctx, stA, spec("a"), work) })
	time.Sleep(500 * time.Millisecond)
	wg.Go(func() { _ = lease.RunGroup(ctx, stB, spec("b"), work) })
	time.Sleep(time.Until(t0.Add(d)))
	synctest.Wait()
	mu.Lock()
	out := slices.Clone(at)
	mu.Unlock()
	cancel()
	wg.Wait()
	return out
}

// memberAcquireFails is a MemoryStore whose Acquire of a group's member
// lease fails from an instant on: the member's renewals get no answer
// while its shards' calls and the lists do.
type memberAcquireFails struct {
	*lease.MemoryStore
	from time.Time
}

func (s memberAcquireFails) Acquire(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (bool, error) {
	if strings.Contains(name, "/member/") && !time.Now().Before(s.from) {
		return false, errors.New("member lease store unreachable")
	}
	return s.MemoryStore.Acquire(ctx, name, owner, now, ttl)
}

// TestMemberWhoseMemberLeaseLapsedStillCountsItselfLive pins that a member
// counts itself live whatever its list shows: a serves both shards alone,
// and from 1.5s its member lease's renewals fail, so the lease (last
// renewed at 1s) lists as expired from 4s. a keeps serving both shards,
// renewed every Retry, rather than take its target as 0 and give them up
// to nobody.
func TestMemberWhoseMemberLeaseLapsedStillCountsItselfLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		st := memberAcquireFails{MemoryStore: lease.NewMemoryStore(), from: t0.Add(1500 * time.Millisecond)}
		var mu sync.Mutex
		var stepped []string
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- lease.RunGroup(ctx, st, lease.GroupSpec{Name: "g", Owner: "a", Shards: 2, TTL: 3 * time.Second, Retry: time.Second,
				OnEvent: func(e lease.Event) {
					if e.Kind == lease.SteppedDown {
						mu.Lock()
						stepped = append(stepped, fmt.Sprintf("%v shard %d %s", e.At.Sub(t0), e.Shard, e.Reason))
						mu.Unlock()
					}
				}}, func(ctx context.Context, shard int) { <-ctx.Done() })
		}()
		time.Sleep(7 * time.Second)
		synctest.Wait()
		mu.Lock()
		got := slices.Clone(stepped)
		mu.Unlock()
		if len(got) != 0 {
			t.Errorf("a's step-downs by 7s: %q, want none: a member counts itself live though its member lease lapsed", got)
		}
		cancel()
		<-done
	})
}

// listFails is a MemoryStore whose Holders fails from an instant on, and
// that counts the AcquireTerm calls sent from then.
type listFails struct {
	*lease.MemoryStore
	from     time.Time
	mu       sync.Mutex
	acquires int
}

func (s *listFails) Holders(ctx context.Context) ([]lease.Holder, error) {
	if !time.Now().Before(s.from) {
		return nil, errors.New("list unreachable")
	}
	return s.MemoryStore.Holders(ctx)
}

func (s *listFails) AcquireTerm(ctx context.Context, name, owner string, now time.Time, ttl time.Duration, token string) (bool, error) {
	if !time.Now().Before(s.from) {
		s.mu.Lock()
		s.acquires++
		s.mu.Unlock()
	}
	return s.MemoryStore.AcquireTerm(ctx, name, owner, now, ttl, token)
}

// TestFailedListChangesNothing pins survey's rule that a list that fails
// changes nothing: a and b serve 2 of 4 shards each; from 3.2s a's lists
// fail. a reports no survey from them, and campaigns for no shard (its
// own run on; b's are b's), rather than reading the failure as an empty
// group it alone serves.
func TestFailedListChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := lease.NewMemoryStore()
		stA := &listFails{MemoryStore: mem, from: time.Now().Add(3200 * time.Millisecond)}
		surveyed := joinedAtHalfASecond(stA, mem, 6500*time.Millisecond, func(e lease.Event) bool { return e.Kind == lease.Surveyed })
		stA.mu.Lock()
		acquires := stA.acquires
		stA.mu.Unlock()
		if last := surveyed[len(surveyed)-1]; last >= 3200*time.Millisecond {
			t.Errorf("a reported a survey at %v, want none from 3.2s: a failed list is no survey", last)
		}
		if acquires != 0 {
			t.Errorf("a sent %d shard Acquires once its lists failed, want 0: a failed list changes nothing", acquires)
		}
	})
}
