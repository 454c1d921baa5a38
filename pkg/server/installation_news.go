// Installation news: GitHub delivers each installation webhook to one
// replica, and the installation's shard may be another's. The replica that
// handled one says so in the lease store, which every replica lists once
// an interval; the others then list the App's installations again.

package server

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"iterion.dev/iterion/internal/clock"
	"iterion.dev/iterion/pkg/lease"
)

// installationNewsPrefix starts the name of each replica's news lease,
// app-installations-changed/<owner>: its owner takes it again (moving its
// expiry) each time it handles an installation webhook, and releases it
// when it stops. It elects nothing.
const installationNewsPrefix = "app-installations-changed/"

// newsIntervals is the news lease's TTL in sweep intervals: long enough
// for every replica's interval list to see it unexpired.
const newsIntervals = 3

// installationsChanged applies what an installation webhook changed here
// at once (the shard terms look at their installations again), and tells
// the other replicas by taking this replica's news lease again, within
// StoreTimeout. A store that does not answer is logged: the others then
// learn at their hourly re-list.
func (s *Server) installationsChanged(r *http.Request) {
	s.sweeps.news.notify()
	ctx, cancel := s.storeCtx(r)
	defer cancel()
	_, err := s.cfg.Leases.Acquire(ctx, installationNewsPrefix+s.cfg.Owner, s.cfg.Owner, s.cfg.Now(), newsIntervals*s.cfg.SweepInterval)
	if err != nil {
		s.log.Warn("installation change not told to the other replicas; they learn at their next re-list", "err", err)
	}
}

// otherNews lists the lease store within StoreTimeout and reports whether
// another replica's news lease moved since seen (which it updates);
// remember notes the leases without reporting them (the first list).
func (s *Server) otherNews(ctx context.Context, seen map[string]time.Time, remember bool) bool {
	insp, ok := s.cfg.Leases.(lease.Inspector)
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	hs, err := insp.Holders(ctx)
	if err != nil {
		return false // the next interval lists again
	}
	news := false
	for _, h := range hs {
		if !strings.HasPrefix(h.Name, installationNewsPrefix) || h.Owner == s.cfg.Owner {
			continue
		}
		if last, ok := seen[h.Name]; !ok || !last.Equal(h.Expires) {
			seen[h.Name] = h.Expires
			news = news || !remember
		}
	}
	return news
}

// firstListed wakes the shard terms once the App client's first list of
// its installations (AppClient.Run's, at start-up) has answered, so a
// term elected before it learns of its installations then, and spreads
// their first passes (passOffset), rather than at its first tick, all at
// once. It looks every twentieth of an interval, and gives up with ctx.
func (s *Server) firstListed(ctx context.Context) {
	for s.cfg.App.LastListed().IsZero() {
		if !clock.Sleep(ctx, s.cfg.SweepInterval/20) {
			return
		}
	}
	s.sweeps.news.notify()
}

// runApp keeps the App client's installations current until ctx is done:
// its periodic re-list (AppClient.Run), and a re-list when a webhook named
// an unknown installation (lookUp) or another replica's news lease moved
// (otherNews, listed at every tick of the sweep interval), at most one
// between two ticks, so a stream of events costs the App's budget little
// (a 1,000-installation App lists them in 10 requests): news re-lists at
// the tick that lists it, a look-up at once unless a re-list was made
// since the last tick (then at the next). After a re-list the shard terms
// look at their installations again at once. At the end it releases this
// replica's news lease.
func (s *Server) runApp(ctx context.Context) {
	relisted := make(chan struct{})
	go func() {
		defer close(relisted)
		_ = s.cfg.App.Run(ctx) // returns ctx's error at shutdown
	}()
	defer func() { <-relisted }()
	go s.firstListed(ctx)
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.StoreTimeout)
		defer cancel()
		_ = s.cfg.Leases.Release(rctx, installationNewsPrefix+s.cfg.Owner, s.cfg.Owner) // nobody's: a no-op
	}()
	seen := map[string]time.Time{}
	s.otherNews(ctx, seen, true)
	tick := time.NewTicker(s.cfg.SweepInterval)
	defer tick.Stop()
	listed := false // since the last tick
	pending := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.sweeps.lookups:
			pending = true
			if listed {
				continue // waits for the next tick
			}
		case <-tick.C:
			listed = false
			pending = s.otherNews(ctx, seen, false) || pending
			if !pending {
				continue
			}
		}
		pending, listed = false, true
		lctx, cancel := context.WithTimeout(ctx, s.cfg.OfferTimeout)
		if err := s.cfg.App.Relist(lctx); err != nil && ctx.Err() == nil {
			s.log.Warn("looking installations up failed; the periodic re-list will", "err", err)
		}
		cancel()
		s.sweeps.news.notify()
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
