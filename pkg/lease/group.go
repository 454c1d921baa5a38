package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// GroupSpec says which lease group RunGroup serves and how. Name, Owner,
// Shards and TTL are required; the zero values of Retry, Logger, Health and
// OnEvent mean their defaults.
type GroupSpec struct {
	// Name is the group's name, shared by every member; its leases are
	// named after it ([ShardName], [MemberName]).
	Name string
	// Owner names this member; each member needs its own.
	Owner string
	// Shards is how many shards the group has, fixed for the group and
	// independent of how many members serve it. At least 1.
	Shards int
	// TTL is how long a take or a renewal holds a shard's lease and the
	// member lease. At least [MinTTL].
	TTL time.Duration
	// Retry is the group's period: one member renewal and one list of the
	// store every Retry, and the campaigns and releases that list calls
	// for. 0 means TTL/3; negative or over TTL/2 is invalid (the member
	// lease must be renewed within its TTL).
	Retry time.Duration
	// Logger receives each shard term's transitions, with attributes lease
	// (the shard's lease name) and owner, and the group's store outages.
	// nil discards them.
	Logger *slog.Logger
	// Health tracks work that outlives its shard's term. nil tracks
	// nothing.
	Health *Health
	// OnEvent receives every [Event] of the group: each shard term's, as
	// Run reports them, with Event.Group and Event.Shard set; the member
	// lease's store calls; and a Surveyed event for each list. It is
	// called synchronously, from the group's goroutines, possibly
	// concurrently, and must not block. nil means none.
	OnEvent func(Event)
}

// errRebalanced is the cause a group cancels a shard term's context with
// when it gives the shard up to even the share.
var errRebalanced = errors.New("lease: shard given up to even the share")

// doneReason is why ctx, a term's or a campaign's, is done, as a
// step-down reason: ReasonRebalanced when its group gave the shard up,
// ReasonCanceled otherwise.
func doneReason(ctx context.Context) string {
	if errors.Is(context.Cause(ctx), errRebalanced) {
		return ReasonRebalanced
	}
	return ReasonCanceled
}

// RunGroup serves shards of the lease group spec.Name for spec.Owner on st,
// calling work for each shard term with the shard's index, until ctx is
// done. The package doc says how the shards are spread.
//
// A caller may rely on this: each shard term keeps every promise [Run]
// makes of a term (work runs only while this member holds the shard's
// lease, its context is cancelled TTL/6 before the store could elect
// another holder, the release is on a detached context, each term calls
// work afresh); a store that cannot answer elects nobody; at most
// ceil(Shards / live members) of the shards run here once the members'
// views agree; and the store sees, in steady state, only the shard
// renewals, one member renewal and one list per Retry. work is called
// concurrently for different shards.
//
// st must list its leases ([Inspector]; both twins do). RunGroup returns an
// error only for an unusable argument (wrapping [ErrInvalid] and naming the
// field), before any store call; otherwise it returns nil once ctx is done,
// every shard term has ended and been released, and the member lease has
// been released. If work panicked, RunGroup ends every term, then re-panics
// with its value.
func RunGroup(ctx context.Context, st Store, spec GroupSpec, work func(ctx context.Context, shard int)) error {
	insp, err := validateGroup(st, spec, work)
	if err != nil {
		return err
	}
	if spec.Retry == 0 {
		spec.Retry = spec.TTL / 3
	}
	g := &groupRunner{
		spec:        spec,
		insp:        insp,
		work:        work,
		busy:        map[int]*shardRun{},
		unheldSince: make([]time.Time, spec.Shards),
		ended:       make(chan shardEnd, spec.Shards),
		released:    make(chan struct{}),
	}
	// The member lease takes a plain Acquire and Release: a stale release
	// of it costs one Retry of membership, never a shard.
	g.member = newLessee(plainStore{st}, MemberName(spec.Name, spec.Shards, spec.Owner), spec.Owner, spec.TTL, spec.Logger, nil, spec.OnEvent)
	g.member.group, g.member.shard = spec.Name, -1
	for i := range spec.Shards {
		l := newLessee(st, ShardName(spec.Name, spec.Shards, i), spec.Owner, spec.TTL, spec.Logger, spec.Health, spec.OnEvent)
		l.group, l.shard, l.released = spec.Name, i, g.released
		g.shards = append(g.shards, l)
	}
	g.member.event(Event{Kind: Campaigning})
	g.run(ctx)
	return nil
}

// validateGroup checks RunGroup's arguments, naming the first bad field, and
// returns st's Inspector.
func validateGroup(st Store, spec GroupSpec, work func(context.Context, int)) (Inspector, error) {
	insp, _ := st.(Inspector)
	switch {
	case st == nil:
		return nil, fmt.Errorf("%w: store is nil", ErrInvalid)
	case insp == nil:
		return nil, fmt.Errorf("%w: store %T does not list its leases (lease.Inspector)", ErrInvalid, st)
	case work == nil:
		return nil, fmt.Errorf("%w: work is nil", ErrInvalid)
	case strings.TrimSpace(spec.Name) == "":
		return nil, fmt.Errorf("%w: GroupSpec.Name %q is empty", ErrInvalid, spec.Name)
	case strings.TrimSpace(spec.Owner) == "":
		return nil, fmt.Errorf("%w: GroupSpec.Owner %q is empty", ErrInvalid, spec.Owner)
	case spec.Shards < 1:
		return nil, fmt.Errorf("%w: GroupSpec.Shards %d is under 1", ErrInvalid, spec.Shards)
	case spec.TTL < MinTTL:
		return nil, fmt.Errorf("%w: GroupSpec.TTL %v is under %v", ErrInvalid, spec.TTL, MinTTL)
	case spec.Retry < 0:
		return nil, fmt.Errorf("%w: GroupSpec.Retry %v is negative", ErrInvalid, spec.Retry)
	case spec.Retry > spec.TTL/2:
		return nil, fmt.Errorf("%w: GroupSpec.Retry %v is over TTL/2 (%v)", ErrInvalid, spec.Retry, spec.TTL/2)
	}
	return insp, nil
}

// plainStore hides a store's TermStore, so a lessee over it takes plain
// Acquire and Release.
type plainStore struct{ Store }

// groupRunner is one RunGroup's state. RunGroup's goroutine owns it; each
// shard's lessee is used by that shard's goroutine alone while it runs.
type groupRunner struct {
	spec   GroupSpec
	insp   Inspector
	work   func(context.Context, int)
	member *lessee   // the member lease; its calls and the lists report as the group's
	shards []*lessee // by index

	busy map[int]*shardRun // shards whose goroutine runs: a campaign, a term, its release
	// unheldSince[i] is the list instant since which every list showed
	// shard i unheld; zero when the last one showed it held.
	unheldSince []time.Time
	// live is the live members the last list showed, sorted: a member
	// gives shards up only when two lists in a row agree on it.
	live  []string
	ended chan shardEnd
	// released is closed once the member lease is released at shutdown;
	// the shards' releases for ReasonCanceled wait for it.
	released chan struct{}
}

// shardRun is one shard's goroutine as the group sees it.
type shardRun struct {
	stop     context.CancelCauseFunc
	stopping bool // given up to even the share; it steps down and releases
}

// shardEnd reports that a shard's goroutine returned, with work's panic
// when it panicked.
type shardEnd struct {
	shard    int
	panicked bool
	value    any
}

// run surveys every Retry until ctx is done or work panicked, then shuts
// down: the member lease first, then every shard term.
func (g *groupRunner) run(ctx context.Context) {
	shardsCtx, stopShards := context.WithCancel(ctx)
	defer stopShards()
	var panicked *shardEnd
	for next := time.Now(); ctx.Err() == nil && panicked == nil; {
		g.survey(shardsCtx)
		for now := time.Now(); !next.After(now); {
			next = next.Add(g.spec.Retry)
		}
		panicked = g.wait(ctx, next)
	}
	g.member.release(ctx, ReasonCanceled, "")
	close(g.released)
	stopShards()
	for len(g.busy) > 0 {
		if e := g.ended1(); e.panicked && panicked == nil {
			panicked = &e
		}
	}
	if panicked != nil {
		panic(panicked.value)
	}
}

// wait notes the shards whose goroutine ends until next or until ctx is
// done, and returns the first one whose work panicked, if any.
func (g *groupRunner) wait(ctx context.Context, next time.Time) *shardEnd {
	t := time.NewTimer(time.Until(next))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			return nil
		case e := <-g.ended:
			delete(g.busy, e.shard)
			if e.panicked {
				return &e
			}
		}
	}
}

// ended1 waits for one shard's goroutine to end, and forgets it.
func (g *groupRunner) ended1() shardEnd {
	e := <-g.ended
	delete(g.busy, e.shard)
	return e
}

// survey renews the member lease, lists the store once, and acts on what
// the list shows: it gives up the shards above this member's target once
// the membership held for a Retry, or campaigns for free shards up to its
// target. A list that fails changes nothing: the terms run on, each
// fail-closed on its own.
func (g *groupRunner) survey(ctx context.Context) {
	sent := time.Now()
	g.member.call(ctx, OpAcquire, func(ctx context.Context) error {
		_, err := g.member.st.Acquire(ctx, g.member.name, g.spec.Owner, sent, g.spec.TTL)
		return err
	})
	listed := time.Now()
	var hs []Holder
	err := g.member.call(ctx, OpList, func(ctx context.Context) error {
		var err error
		hs, err = g.insp.Holders(ctx)
		return err
	})
	if err != nil || ctx.Err() != nil {
		return
	}
	v := viewGroup(g.spec.Name, g.spec.Shards, hs, listed, g.spec.Owner)
	v.Others = otherCounts(g.spec.Name, g.spec.Shards, hs, listed)
	for i, h := range v.Holders {
		switch {
		case h != "":
			g.unheldSince[i] = time.Time{}
		case g.unheldSince[i].IsZero():
			g.unheldSince[i] = listed
		case listed.Sub(g.unheldSince[i]) > g.spec.TTL+g.spec.Retry:
			v.Overdue = append(v.Overdue, i)
		}
	}
	g.member.event(Event{Kind: Surveyed, View: &v})

	var serving []int
	for i, r := range g.busy {
		if !r.stopping {
			serving = append(serving, i)
		}
	}
	live := make([]string, len(v.Members))
	for i, m := range v.Members {
		live[i] = m.Owner
	}
	settled := slices.Equal(live, g.live)
	g.live = live
	me, _ := v.member(g.spec.Owner)
	if excess := len(serving) - me.Target; excess > 0 {
		// The hysteresis: members joining one after the other, or one that
		// flaps, move nothing until the membership held for a Retry; then
		// every member's list shows the same members, so the shards given
		// up here are the ones the others' allocation expects.
		if settled {
			g.giveUp(serving, excess)
		}
		return
	}
	// Shards whose lease is still this member's (a term that ended and
	// whose release failed) are no other member's to take: take them back
	// first. Then free ones up to its target: those the list gives it
	// (members listing at once agree on them), then those it scores
	// highest. So the members short of shards that list in the Retry after
	// a shard came free take it.
	held := len(serving)
	var free []int
	for i, h := range v.Holders {
		if _, ok := g.busy[i]; ok {
			continue
		}
		switch {
		case h == g.spec.Owner && held < me.Target:
			held++
			g.start(ctx, i)
		case h == "":
			free = append(free, i)
		}
	}
	want := v.allocate(g.spec.Owner, held, free)
	g.byScore(free)
	for _, i := range free {
		if !slices.Contains(want, i) {
			want = append(want, i)
		}
	}
	for _, i := range want[:min(len(want), max(me.Target-held, 0))] {
		g.start(ctx, i)
	}
}

// byScore sorts shards by this member's score for them, highest first.
func (g *groupRunner) byScore(shards []int) {
	slices.SortFunc(shards, func(a, b int) int {
		return cmp.Compare(score(g.spec.Name, b, g.spec.Owner), score(g.spec.Name, a, g.spec.Owner))
	})
}

// giveUp stops the n shards of serving this member scores lowest: those it
// would be the last to take again.
func (g *groupRunner) giveUp(serving []int, n int) {
	g.byScore(serving)
	for _, i := range serving[len(serving)-n:] {
		r := g.busy[i]
		r.stopping = true
		r.stop(errRebalanced)
	}
}

// start runs shard i's goroutine: one campaign and, when it wins, one term.
func (g *groupRunner) start(ctx context.Context, i int) {
	shardCtx, stop := context.WithCancelCause(ctx)
	g.busy[i] = &shardRun{stop: stop}
	go func() {
		end := shardEnd{shard: i}
		defer func() {
			stop(nil)
			if p := recover(); p != nil {
				end.panicked, end.value = true, p
			}
			g.ended <- end
		}()
		l := g.shards[i]
		if sent, token, won := l.campaign(shardCtx); won {
			l.serve(shardCtx, sent, token, func(ctx context.Context) { g.work(ctx, i) })
		}
	}()
}
