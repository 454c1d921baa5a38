package lease

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// lessee is one owner's side of one lease: what a campaign and a term need
// to call the store, track whether it answers, and report. One goroutine
// at a time uses it: a campaign's, or a term's renewal while the term's
// goroutine waits for that renewal's answer on a channel.
type lessee struct {
	st          Store
	terms       TermStore // st as a TermStore, when it is one; nil otherwise
	name, owner string
	ttl         time.Duration
	cut         time.Duration // TTL/3: every store call's bound and the renewal period
	log         *slog.Logger  // with the lease and owner attributes
	health      *Health
	onEvent     func(Event)
	// group and shard name a group's lease in its events ("" and 0 for
	// Run's; shard −1 for the member lease).
	group string
	shard int
	// released, when not nil, is waited for before a release for
	// ReasonCanceled: a group's shards release only once its member lease
	// is gone, so no other member counts a stopping one as live.
	released <-chan struct{}

	down      bool      // in a store-unreachable episode
	downSince time.Time // when that episode started
	// quiet: this episode's release after an unanswered attempt was already
	// reported; the next ones in the same episode are not.
	quiet bool
}

// newLessee returns owner's lessee of the lease name on st; a nil log
// discards.
func newLessee(st Store, name, owner string, ttl time.Duration, log *slog.Logger, health *Health, onEvent func(Event)) *lessee {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &lessee{st: st, name: name, owner: owner, ttl: ttl, cut: ttl / 3,
		log: log.With("lease", name, "owner", owner), health: health, onEvent: onEvent}
	l.terms, _ = st.(TermStore)
	return l
}

// deadline is the instant to step down by when the last proven renewal (or
// the winning Acquire) was sent at sent: the store's expiry for it, minus
// TTL/6, carried on sent's monotonic reading. The expiry is truncated to the
// millisecond, up to 1 ms before sent+TTL (more with a sub-millisecond TTL).
func (l *lessee) deadline(sent time.Time) time.Time {
	return sent.Add(Expiry(sent, l.ttl).Sub(sent) - l.ttl/6)
}

// renewal is the outcome of one Renew.
type renewal struct {
	sent time.Time
	ok   bool
	err  error
}

// renew sends one Renew, bounded by TTL/3 and by termCtx. It leaves the
// store-unreachable episode to its caller (track), which acts on the answer
// first: logging the episode's end must not delay a step-down or a moved
// deadline.
func (l *lessee) renew(termCtx context.Context) renewal {
	res := renewal{sent: time.Now()}
	res.err = l.callOutsideEpisode(termCtx, OpRenew, func(ctx context.Context) error {
		var err error
		res.ok, err = l.st.Renew(ctx, l.name, l.owner, res.sent, l.ttl)
		return err
	})
	return res
}

// release gives the lease up on a context detached from ctx, bounded by
// TTL/3, and logs the outcome. reason says why: a step-down reason, or
// ReasonUnanswered, whose failures the store-unreachable episode already
// reports. token is the term's (or the attempt's): with a TermStore, the
// release deletes only the lease that token's Acquire took.
func (l *lessee) release(ctx context.Context, reason, token string) {
	if l.released != nil && reason == ReasonCanceled {
		<-l.released
	}
	send := l.call
	if reason == ReasonUnanswered {
		send = l.callOutsideEpisode
	}
	err := send(context.WithoutCancel(ctx), OpRelease, func(ctx context.Context) error {
		if l.terms != nil {
			return l.terms.ReleaseTerm(ctx, l.name, l.owner, token)
		}
		return l.st.Release(ctx, l.name, l.owner)
	})
	switch {
	case err == nil && reason == ReasonUnanswered && l.down && l.quiet:
		// This episode's first such release was reported: a store that
		// fails every Acquire but answers its Release would report one
		// per attempt.
	case err == nil:
		if reason == ReasonUnanswered && l.down {
			l.quiet = true
		}
		l.log.Info("lease: released", "reason", reason)
		l.event(Event{Kind: Released, Reason: reason})
	case errors.Is(err, ErrLost) && (reason == ReasonUnanswered || reason == ReasonRefused):
		// The expected answer: after an unanswered attempt that did not
		// land, or a refused renewal, another owner holds the lease. The
		// step-down already warned of the refusal, and every follower
		// would warn on each attempt.
		l.log.Debug("lease: release refused as expected: another owner holds it", "reason", reason, "err", err)
	case errors.Is(err, ErrLost):
		l.log.Warn("lease: release refused: the lease moved on", "reason", reason, "err", err)
	case reason != ReasonUnanswered:
		l.log.Warn("lease: release failed", "reason", reason, "err", err)
	}
}

// call sends one store call (see callOutsideEpisode) and tracks the
// store-unreachable episode with its outcome (see track).
func (l *lessee) call(parent context.Context, op string, f func(context.Context) error) error {
	start := time.Now()
	err := l.callOutsideEpisode(parent, op, f)
	l.track(parent, op, start, err)
	return err
}

// track tracks the store-unreachable episode with err, the outcome of the
// call op sent at start: the first failure opens it, the first answer
// closes it, each logged once. A call cut because parent is done
// (shutdown, step-down) says nothing about the store and changes nothing.
// ErrLost is an answer, not a failure.
func (l *lessee) track(parent context.Context, op string, start time.Time, err error) {
	if cutShort(parent, err) {
		return
	}
	failed := err != nil && !errors.Is(err, ErrLost)
	switch {
	case failed && !l.down:
		l.down, l.downSince, l.quiet = true, start, false
		l.log.Warn("lease: store unreachable", "op", op, "err", err)
	case !failed && l.down:
		l.down = false
		l.log.Info("lease: store reachable again", "op", op, "down", time.Since(l.downSince))
	}
}

// callOutsideEpisode runs one store call bounded by TTL/3 and by parent, and
// reports it as a StoreCalled event, unless cut short. It leaves the
// store-unreachable episode alone: the release after an unanswered attempt
// uses it, since the failed attempt opened the episode, and a release
// answering between failing attempts would split one outage into an episode
// per attempt.
func (l *lessee) callOutsideEpisode(parent context.Context, op string, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(parent, l.cut)
	defer cancel()
	start := time.Now()
	err := f(ctx)
	if cutShort(parent, err) {
		return err
	}
	l.event(Event{Kind: StoreCalled, Op: op, Took: time.Since(start), Failed: err != nil && !errors.Is(err, ErrLost)})
	return err
}

// cutShort reports whether a call failed because parent is done, which says
// nothing about the store.
func cutShort(parent context.Context, err error) bool {
	return err != nil && parent.Err() != nil
}
