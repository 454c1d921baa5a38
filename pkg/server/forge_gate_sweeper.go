package server

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/lease"
)

// The sweeper's cadence (ADR-117 context).
const (
	// DefaultSweepInterval is the time between two passes.
	DefaultSweepInterval = time.Minute
	// shallowWindow is how far back a shallow pass looks: it offers the
	// unsettled runs updated in the last hour.
	shallowWindow = time.Hour
	// deepWindow is how far back a deep pass looks.
	deepWindow = 192 * time.Hour
	// DeepEvery makes every DeepEvery-th pass of a term deep; the first
	// pass of every term is deep too.
	DeepEvery = 30
	// sweepPage is how many runs one store read returns.
	sweepPage = 100
)

// SweepPass reports one pass of the merge-gate sweeper to Config.OnSweep.
type SweepPass struct {
	// Owner is the replica that swept.
	Owner string
	// Term counts the terms this sweeper served, from 1; Pass counts the
	// passes of the term, from 1.
	Term, Pass int
	// Deep is true for the 192-hour window.
	Deep bool
	// At is when the pass began; Since is the start of its window.
	At, Since time.Time
	// Offered is how many runs were offered.
	Offered int
	// Complete is false when the pass stopped early: a rate limit, a store
	// error or the end of the term.
	Complete bool
}

// sweeperConfig assembles a sweeper.
type sweeperConfig struct {
	Runs  RunStore // required
	Offer offerer  // required: the reconciler, in the server
	// Interval is the time between passes; 0 means DefaultSweepInterval.
	Interval time.Duration
	// Owner names the replica in logs and SweepPass.
	Owner string
	// Now is the window clock; nil means time.Now.
	Now func() time.Time
	// Logger receives pass summaries and rate-limit stops; nil discards.
	Logger *slog.Logger
	// OnPass is called synchronously after each pass; nil means none. It
	// must not block.
	OnPass func(SweepPass)
}

// sweeper is the merge-gate sweeper: the net that re-offers unsettled runs
// so a verdict lost to a failed or missed event is repaired. Its Work serves
// one lease term; the server runs it only under the lease
// MergeGateSweeper() (or on every replica with --no-lease). Safe for
// concurrent use, though the lease runs one Work at a time.
type sweeper struct {
	cfg   sweeperConfig
	terms atomic.Int64
}

// newSweeper returns a sweeper; cfg.Runs and cfg.Offer are required.
func newSweeper(cfg sweeperConfig) *sweeper {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultSweepInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &sweeper{cfg: cfg}
}

// sweepTerm is what the sweeper keeps in memory for one term, and nothing
// outlives it: the next term starts afresh, with a deep pass.
type sweepTerm struct {
	term, pass int
	// deepCursor is where an unfinished deep pass stopped; deepPending
	// makes the next pass a deep one that resumes there.
	deepCursor  Cursor
	deepPending bool
}

// Work serves one term: it makes a pass every interval until ctx is done,
// the first one interval after the term starts (ADR-117: "its first pass
// one tick later"), so a term that flaps costs no forge request. Its forge
// requests are charged to lane merge-gate-sweeper.
//
// A pass is deep (deepWindow) when it is the term's first, every DeepEvery-th
// pass, or when the last deep pass stopped early, which it then resumes
// from its cursor; otherwise it is shallow (shallowWindow). A rate-limit
// error stops the pass; the ticks before the limit's reset are skipped and
// not counted as passes.
func (s *sweeper) Work(ctx context.Context) {
	st := &sweepTerm{term: int(s.terms.Add(1))}
	lease.Every(forge.WithLane(ctx, forge.LaneMergeGateSweeper), s.cfg.Interval, s.cfg.Now,
		func(ctx context.Context) time.Time { return s.pass(ctx, st) },
		func(until time.Time) {
			s.cfg.Logger.Debug("sweep skipped: rate limited", "owner", s.cfg.Owner, "until", until)
		})
}

// pass makes one pass of the term st and returns the rate limit's reset
// when one stopped it (zero otherwise).
func (s *sweeper) pass(ctx context.Context, st *sweepTerm) (resume time.Time) {
	st.pass++
	p := SweepPass{Owner: s.cfg.Owner, Term: st.term, Pass: st.pass, At: s.cfg.Now(), Complete: true}
	p.Deep = st.pass == 1 || st.pass%DeepEvery == 0 || st.deepPending
	window, cur := shallowWindow, Cursor{}
	if p.Deep {
		window, cur = deepWindow, st.deepCursor
	}
	p.Since = p.At.Add(-window)
	p.Offered, cur, p.Complete, resume = s.offerSince(ctx, p.Since, cur)
	if p.Deep {
		st.deepPending = !p.Complete
		st.deepCursor = Cursor{}
		if !p.Complete {
			st.deepCursor = cur
		}
	}
	log := s.cfg.Logger.Debug
	if !p.Complete {
		log = s.cfg.Logger.Info
	}
	log("sweep pass", "owner", p.Owner, "term", p.Term, "pass", p.Pass, "deep", p.Deep,
		"since", p.Since, "offered", p.Offered, "complete", p.Complete)
	if s.cfg.OnPass != nil {
		s.cfg.OnPass(p)
	}
	return resume
}

// offerSince offers, page by page, the unsettled runs updated since that
// come after cur. It returns how many it offered, the cursor after the last
// run it finished with, whether it reached the end, and, when a rate limit
// stopped it, the limit's reset.
func (s *sweeper) offerSince(ctx context.Context, since time.Time, cur Cursor) (offered int, _ Cursor, complete bool, resume time.Time) {
	for {
		page, err := s.cfg.Runs.Unsettled(ctx, since, cur, sweepPage)
		if err != nil {
			s.cfg.Logger.Warn("sweep stopped: cannot list runs", "owner", s.cfg.Owner, "err", err)
			return offered, cur, false, time.Time{}
		}
		for _, run := range page {
			if ctx.Err() != nil {
				return offered, cur, false, time.Time{}
			}
			_, err := s.cfg.Offer.Offer(ctx, run)
			offered++
			if errors.Is(err, forge.ErrRateLimited) {
				resume = s.cfg.Now().Add(s.cfg.Interval)
				if rl := (*forge.RateLimitError)(nil); errors.As(err, &rl) {
					resume = rl.Reset
				}
				s.cfg.Logger.Warn("sweep stopped: rate limited", "owner", s.cfg.Owner, "until", resume, "err", err)
				return offered, cur, false, resume
			}
			cur = CursorAt(run)
		}
		if len(page) < sweepPage {
			return offered, cur, true, time.Time{}
		}
	}
}
