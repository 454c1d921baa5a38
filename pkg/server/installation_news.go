// Installation news: GitHub delivers each installation webhook to one
// replica, and the installation's shard may be another's. The replica that
// handled one says what changed in the lease store, which every replica
// lists once an interval; the others apply the change as it says. And the
// replicas list the App's installations one at a time.

package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"iterion.dev/iterion/internal/clock"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/lease"
)

// installationNewsPrefix starts the name of a news lease,
// app-installations-changed/<id>/<kind>/<account>/<owner>: one change to
// the App's installations (newsNames) that an installation webhook, a
// check after GitHub refused an installation's token or read, or an
// installation found otherwise (AppClient.TakeFound) made on the replica
// owner, taken by it for newsIntervals sweep intervals and released after.
// It elects nothing: the other replicas read the change from its name.
const installationNewsPrefix = "app-installations-changed/"

// newsIntervals is a news lease's TTL in sweep intervals: long enough for
// every replica's interval list to see it unexpired.
const newsIntervals = 3

// The kinds of change a news lease names. newsSuspended is a gone
// installation GitHub suspended, followed by newsSuspendedAt and GitHub's
// suspended_at (RFC 3339, UTC) when the replica telling it heard one; a
// release before it knew no such kind, and its parseNews passes over the
// lease, so a suspension is told with a newsGone lease beside it
// (newsNames).
const (
	newsInstalled    = "installed"
	newsGone         = "gone"
	newsSuspended    = "suspended"
	newsRepositories = "repositories"
	newsSuspendedAt  = "@"
)

// newsNames is the news leases of change ch made on owner: one, or for a
// suspension two, gone and suspended (with its suspended_at, when said:
// the lease's name is all the news carries). A replica of this release
// reads both (applying a suspension after a gone, or before, drops the
// installation and lists it suspended, since the same time as here);
// one of the release before reads gone alone, and drops the installation
// as it always did.
func newsNames(ch forge.InstallationChange, owner string) []string {
	name := func(kind string) string {
		return fmt.Sprintf("%s%d/%s/%s/%s", installationNewsPrefix, ch.ID, kind, ch.Account, owner)
	}
	switch {
	case ch.Gone && ch.Suspended:
		suspended := newsSuspended
		if !ch.SuspendedAt.IsZero() {
			suspended += newsSuspendedAt + ch.SuspendedAt.UTC().Format(time.RFC3339Nano)
		}
		return []string{name(newsGone), name(suspended)}
	case ch.Gone:
		return []string{name(newsGone)}
	case ch.Repositories:
		return []string{name(newsRepositories)}
	}
	return []string{name(newsInstalled)}
}

// parseNews is the change and owner a news lease's name says; ok is false
// for a name that is not one (another version's, say).
func parseNews(name string) (ch forge.InstallationChange, owner string, ok bool) {
	rest, ok := strings.CutPrefix(name, installationNewsPrefix)
	if !ok {
		return ch, "", false
	}
	parts := strings.SplitN(rest, "/", 4)
	if len(parts) != 4 || parts[3] == "" {
		return ch, "", false
	}
	id, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || id <= 0 {
		return ch, "", false
	}
	ch = forge.InstallationChange{ID: id, Account: parts[2]}
	kind, at, timed := strings.Cut(parts[1], newsSuspendedAt)
	if timed {
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil || kind != newsSuspended {
			return ch, "", false
		}
		ch.SuspendedAt = t
	}
	switch kind {
	case newsInstalled:
	case newsGone:
		ch.Gone = true
	case newsSuspended:
		ch.Gone, ch.Suspended = true, true
	case newsRepositories:
		ch.Repositories = true
	default:
		return ch, "", false
	}
	return ch, parts[3], true
}

// installationsChanged applies what an installation webhook, a sweeper's
// check after GitHub refused an installation's token or read
// (installationSweeps.checkRefused), or an installation found here
// otherwise (runApp, AppClient.TakeFound) changed here at once (the shard
// terms look at their installations again), and tells the other replicas
// by taking the change's news leases (newsNames), within StoreTimeout
// each. A store that does not answer is logged: the others then learn at
// their hourly re-list. It reports whether the store took every lease
// (true for a change that tells nothing).
func (s *Server) installationsChanged(ctx context.Context, ch forge.InstallationChange) (told bool) {
	s.sweeps.news.notify()
	if ch.ID <= 0 {
		return true
	}
	// The news outlives the caller: dropping an installation stops its
	// sweeper, whose pass may be the caller, and a suspension told by its
	// gone lease alone would end the others' suspended listing. Each lease
	// is still bounded by StoreTimeout.
	ctx = context.WithoutCancel(ctx)
	ttl := newsIntervals * s.cfg.SweepInterval
	for _, name := range newsNames(ch, s.cfg.Owner) {
		actx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
		_, err := s.cfg.Leases.Acquire(actx, name, s.cfg.Owner, s.cfg.Now(), ttl)
		cancel()
		if err != nil {
			s.log.Warn("installation change not told to the other replicas; they learn at their next re-list", "installation", ch.ID, "err", err)
			return false
		}
		s.sweeps.told(name, s.cfg.Now().Add(ttl))
	}
	return true
}

// tellFound tells the other replicas, as installed news
// (installationsChanged), the installations this replica found otherwise
// than by news or a webhook (AppClient.TakeFound), until the store fails
// one: those left are not told (logged; the others learn of them at their
// next re-list), so a store that does not answer holds runApp's tick one
// StoreTimeout, however many were found.
func (s *Server) tellFound(ctx context.Context) {
	found := s.cfg.App.TakeFound()
	for i, ch := range found {
		if !s.installationsChanged(ctx, ch) {
			s.log.Warn("installations found here not told to the other replicas: the lease store did not answer; they learn at their next re-list", "untold", len(found)-i)
			return
		}
	}
}

// told notes this replica's news lease name, expiring at expires, for
// releaseTold.
func (g *installationSweeps) told(name string, expires time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.newsTold[name] = expires
}

// releaseTold releases, within StoreTimeout each, this replica's news
// leases expired at now, or all of them with all; one the store did not
// release is tried again next time (all: left to expire, and to
// otherNews's clearing).
func (s *Server) releaseTold(ctx context.Context, now time.Time, all bool) {
	g := s.sweeps
	g.mu.Lock()
	var names []string
	for name, exp := range g.newsTold {
		if all || !exp.After(now) {
			names = append(names, name)
		}
	}
	g.mu.Unlock()
	for _, name := range names {
		if s.release(ctx, name) || all {
			g.mu.Lock()
			delete(g.newsTold, name)
			g.mu.Unlock()
		}
	}
}

// isTold reports whether name is one of this replica's news leases that
// releaseTold has yet to release.
func (g *installationSweeps) isTold(name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.newsTold[name]
	return ok
}

// otherNews lists the lease store within StoreTimeout and returns the
// changes other replicas' news leases say that are new or moved since seen
// (which it updates, forgetting the leases gone from the store), oldest
// first; remember notes the leases without returning them (the first
// list, which the start-up re-list covers). A news lease left expired by a
// replica that died for newsIntervals intervals more is cleared: taken,
// then released, so the store does not keep them.
func (s *Server) otherNews(ctx context.Context, seen map[string]time.Time, remember bool) []forge.InstallationChange {
	insp, ok := s.cfg.Leases.(lease.Inspector)
	if !ok {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	hs, err := insp.Holders(lctx)
	cancel()
	if err != nil {
		return nil // the next interval lists again
	}
	type dated struct {
		ch forge.InstallationChange
		at time.Time
	}
	var news []dated
	listed := make(map[string]bool, len(hs))
	now, ttl := s.cfg.Now(), newsIntervals*s.cfg.SweepInterval
	for _, h := range hs {
		ch, owner, ok := parseNews(h.Name)
		switch {
		case !ok:
			continue // not news
		case h.Owner == s.cfg.Owner:
			// This replica's: one it told (releaseTold's), or, expired
			// and not told here, one it took to clear or told before it
			// restarted under the same owner.
			if !h.Expires.After(now) && !s.sweeps.isTold(h.Name) {
				s.release(ctx, h.Name)
			}
			continue
		case owner != h.Owner:
			continue // another replica is clearing it
		}
		listed[h.Name] = true
		if h.Expires.Add(ttl).Before(now) {
			s.clearNews(ctx, h.Name, now)
			continue
		}
		if last, ok := seen[h.Name]; ok && last.Equal(h.Expires) {
			continue
		}
		seen[h.Name] = h.Expires
		if !remember {
			news = append(news, dated{ch, h.Expires})
		}
	}
	for name := range seen {
		if !listed[name] {
			delete(seen, name)
		}
	}
	// A suspension's gone lease is taken before its suspended one, and
	// applied first, even at the same instant: a gone alone after it
	// would end the suspended listing (forge.AppClient.Apply).
	suspended := func(d dated) int {
		if d.ch.Suspended {
			return 1
		}
		return 0
	}
	slices.SortStableFunc(news, func(a, b dated) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(suspended(a), suspended(b)))
	})
	out := make([]forge.InstallationChange, len(news))
	for i, d := range news {
		out[i] = d.ch
	}
	return out
}

// clearNews takes another replica's long-expired news lease name and
// releases it: the store forgets it. Taken, its owner is this replica, not
// the one its name says, so no replica reads it as news meanwhile; a
// release the store did not answer is made at a later list (otherNews).
func (s *Server) clearNews(ctx context.Context, name string, now time.Time) {
	actx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	ok, err := s.cfg.Leases.Acquire(actx, name, s.cfg.Owner, now, s.cfg.StoreTimeout)
	cancel()
	if ok && err == nil {
		s.release(ctx, name)
	}
}

// release releases this replica's lease name within StoreTimeout and
// reports whether the store answered (a lease no longer this replica's
// is an answer).
func (s *Server) release(ctx context.Context, name string) bool {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	err := s.cfg.Leases.Release(ctx, name, s.cfg.Owner)
	return err == nil || errors.Is(err, lease.ErrLost)
}

// installationListLease is the lease a replica holds while it lists the
// App's installations (listTurn).
const installationListLease = "app-installations-list"

// listTurn waits until this replica holds the lease app-installations-list
// (TTL one sweep interval, which a list of 1,000 installations, 10 pages,
// fits), trying again every tenth of an interval or so, and returns its
// release. So replicas list the App's installations one at a time: ten
// replicas starting together, each listing 1,000 installations at about
// 1.5 s of GitHub's time a page, would ask 150 s of the App's CPU-time
// limit of 90 s a minute at once ("About secondary rate limits":
// https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits),
// and be refused. A store that does not answer does not hold the list up:
// the replica lists. It elects nothing; /leases shows it.
func (s *Server) listTurn(ctx context.Context) (done func()) {
	iv := s.cfg.SweepInterval
	for {
		actx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
		ok, err := s.cfg.Leases.Acquire(actx, installationListLease, s.cfg.Owner, s.cfg.Now(), iv)
		cancel()
		if ok || err != nil {
			if err != nil && ctx.Err() == nil {
				s.log.Warn("listing the App's installations without the list lease: the lease store did not answer", "err", err)
			}
			return func() {
				s.release(context.WithoutCancel(ctx), installationListLease) // another's or nobody's: refused or a no-op
			}
		}
		if !clock.Sleep(ctx, iv/10+rand.N(iv/10+1)) {
			return func() {}
		}
	}
}

// runApp keeps the App client's installations current until ctx is done:
// its periodic re-list (AppClient.RunInTurn, in listTurn); the changes
// other replicas' news leases say (otherNews, listed at every tick of the
// sweep interval), applied without a request, so an installation webhook
// costs the App's budget nothing on the replicas it did not reach (each,
// whatever its kind, ends the installation's mint hold here:
// installationSweeps.releaseMint; where it came, only an installation
// webhook applied does); the installations this replica
// found otherwise than by news or a webhook (AppClient.TakeFound: a
// repository's look-up, a re-list), told to the others at every tick
// (tellFound: up to the first the store fails), so that a shard's holder
// that has not heard of one sweeps its runs within two intervals of the
// look-up rather than at its own next re-list; and a
// re-list when a webhook named an unknown installation (lookUp), at once
// unless one was made since the last tick (then at the next). After any
// of them (the start-up list included, so a term elected before it
// learns of its installations then and spreads their first passes,
// passOffset, rather than at its first tick) the shard terms look at
// their installations again at once. At each tick it releases this
// replica's expired news leases, and at the end all of them.
func (s *Server) runApp(ctx context.Context) {
	// A list made in turn wakes the terms once it is done: an
	// installation it found is swept at once, not at the term's next tick.
	turn := func(ctx context.Context) (done func()) {
		release := s.listTurn(ctx)
		return func() {
			release()
			s.sweeps.news.notify()
		}
	}
	relisted := make(chan struct{})
	go func() {
		defer close(relisted)
		_ = s.cfg.App.RunInTurn(ctx, turn) // returns ctx's error at shutdown
	}()
	defer func() { <-relisted }()
	defer s.releaseTold(context.WithoutCancel(ctx), time.Time{}, true)
	seen := map[string]time.Time{}
	s.otherNews(ctx, seen, true)
	tick := time.NewTicker(s.cfg.SweepInterval)
	defer tick.Stop()
	listed, pending := false, false // a look-up since the last tick; one asked for
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.sweeps.lookups:
			pending = true
		case <-tick.C:
			listed = false
			s.releaseTold(ctx, s.cfg.Now(), false)
			changes := s.otherNews(ctx, seen, false)
			for _, ch := range changes {
				s.cfg.App.Apply(ch)
				s.sweeps.releaseMint(ch.ID)
			}
			if len(changes) > 0 {
				s.log.Info("installations changed on other replicas", "changes", len(changes))
				s.sweeps.news.notify()
			}
			s.tellFound(ctx) // after the news: one it says is gone is dropped, not told installed
		}
		if !pending || listed {
			continue // a look-up asked for since one was made: at the next tick
		}
		pending, listed = false, true
		lctx, cancel := context.WithTimeout(ctx, s.cfg.OfferTimeout)
		if err := s.cfg.App.RelistInTurn(lctx, turn); err != nil && ctx.Err() == nil {
			s.log.Warn("looking installations up failed; the periodic re-list will", "err", err)
		}
		cancel()
	}
}

// broadcast wakes every waiter at once. Safe for concurrent use; the zero
// value is ready.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait is closed at the next notify.
func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

// notify wakes the waiters.
func (b *broadcast) notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}
