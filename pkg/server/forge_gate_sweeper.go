package server

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
)

// The sweeper's cadence (docs/design.md, the problem).
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
	// listPage is how many runs one store read returns: a pass over N open
	// runs lists them in ceil(N/listPage) reads, and offers each page in
	// batches of sweepBatch. A page of 5,000 runs holds a few megabytes
	// (a run is a few hundred bytes), and one read costs a round trip
	// however many runs it returns; a store that scans its collection for a
	// query (dev-mongo's FerretDB on SQLite does) pays that scan per read.
	listPage = 50 * sweepBatch
	// sweepBatch is how many runs one batch offers: one forge query reads
	// them all.
	sweepBatch = forge.MaxPullBatch
)

// SweepPass reports one pass of the sweeper to sweeperConfig.OnPass.
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
	// Offered is how many runs were offered; BackingOff how many the pass
	// skipped because their pull request could not be read lately.
	Offered, BackingOff int
	// ForgeReads is how many batches the pass offered (one forge read
	// each); ForgeErrors how many of them failed whole (no run got a
	// forge answer), ServerErrors how many of those with a 5xx.
	ForgeReads, ForgeErrors, ServerErrors int
	// Complete is false when the pass stopped early (a rate limit, a store
	// error or the end of the term) or when every forge read failed.
	Complete bool
}

// sweeperConfig assembles a sweeper.
type sweeperConfig struct {
	Runs  gaterun.Store // required
	Offer offerer       // required: the reconciler, in the server
	// Interval is the time between passes; 0 means DefaultSweepInterval.
	Interval time.Duration
	// Owner names the replica in SweepPass.
	Owner string
	// Now is the window clock; nil means time.Now.
	Now func() time.Time
	// Logger receives pass summaries and rate-limit stops, with the
	// attributes it carries (the server's carries the owner); nil discards.
	Logger *slog.Logger
	// OnPass is called synchronously after each pass; nil means none. It
	// must not block.
	OnPass func(SweepPass)
	// BackingOff, when set, shows how many runs are backing off (runs whose
	// pull request could not be read); nil: not shown.
	BackingOff prometheus.Gauge
	// Watchdog bounds each pass and ends a term whose passes keep failing
	// (lease.Every); the zero Watchdog bounds nothing.
	Watchdog lease.Watchdog
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
	deepCursor  gaterun.Cursor
	deepPending bool
	// backoff holds the runs whose pull request could not be read, by ID.
	backoff map[string]backoff
	// serverBackoff is the wait after a pass whose every forge read got a
	// 5xx, doubled by each such pass in a row; 0 after any other pass.
	serverBackoff time.Duration
}

// maxServerBackoff bounds the wait between passes while the forge answers
// 5xx, in intervals.
const maxServerBackoff = 8

// backoff is one unreadable run's wait: it is not offered before until,
// and each unreadable offer doubles delay, from two intervals up to the
// deep-pass period (DeepEvery intervals), so a pull request that is gone
// for good costs a request once per deep period, not once per pass.
type backoff struct {
	until time.Time
	delay time.Duration
}

// note records the outcome of offering run at now: unreadable starts or
// doubles its back-off, anything else but a failure ends it.
func (st *sweepTerm) note(run gaterun.Run, out outcome, now time.Time, interval time.Duration) {
	switch out {
	case outcomeUnreadable:
		b := st.backoff[run.ID]
		b.delay = min(max(2*b.delay, 2*interval), DeepEvery*interval)
		b.until = now.Add(b.delay)
		st.backoff[run.ID] = b
	case outcomeFailed:
		// Not the pull request's fault: the back-off, if any, stands.
	default:
		delete(st.backoff, run.ID)
	}
}

// Work serves one term: it makes a pass every interval until ctx is done,
// the first one interval after the term starts (docs/design.md,
// decision 3), so a term that flaps costs no forge request. Its forge
// requests are charged to lane merge-gate-sweeper.
//
// A pass is deep (deepWindow) when it is the term's first, every DeepEvery-th
// pass, or when the last deep pass stopped early, which it then resumes
// from its cursor; otherwise it is shallow (shallowWindow). A rate-limit
// error stops the pass; the ticks before the limit's reset are skipped and
// not counted as passes.
//
// A run whose pull request cannot be read (outcomeUnreadable) backs off on
// its own: it is skipped for two intervals, then four, doubling up to
// DeepEvery intervals, until an offer reads it again. The back-offs live in
// the term, like the deep cursor.
//
// A pass in which every forge read failed is not complete. While every
// forge read of a pass gets a 5xx, the next passes wait: two intervals,
// doubling up to maxServerBackoff intervals, until a read succeeds (the
// ticks before are skipped, as for a rate limit).
//
// sweeperConfig.Watchdog bounds each pass; when it ends the term (passes
// in a row that did not complete), Work logs why and returns, and the
// lease is released.
func (s *sweeper) Work(ctx context.Context) {
	st := &sweepTerm{term: int(s.terms.Add(1)), backoff: make(map[string]backoff)}
	defer s.showBackingOff(nil)
	err := lease.Every(forge.WithLane(ctx, forge.LaneMergeGateSweeper), s.cfg.Interval, s.cfg.Now,
		func(ctx context.Context) (time.Time, bool) {
			p, resume := s.pass(ctx, st)
			return resume, p.Complete
		},
		func(until time.Time) {
			s.cfg.Logger.Debug("sweep skipped: rate limited", "until", until)
		}, s.cfg.Watchdog)
	if err != nil {
		s.cfg.Logger.Warn("sweeper: stepping down", "err", err)
	}
}

// pass makes one pass of the term st and returns it, with the rate
// limit's reset when one stopped it (zero otherwise).
func (s *sweeper) pass(ctx context.Context, st *sweepTerm) (_ SweepPass, resume time.Time) {
	st.pass++
	p := SweepPass{Owner: s.cfg.Owner, Term: st.term, Pass: st.pass, At: s.cfg.Now(), Complete: true}
	p.Deep = st.pass == 1 || st.pass%DeepEvery == 0 || st.deepPending
	window, cur := shallowWindow, gaterun.Cursor{}
	if p.Deep {
		window, cur = deepWindow, st.deepCursor
	}
	p.Since = p.At.Add(-window)
	cur, p.Complete, resume = s.offerSince(ctx, st, &p, cur)
	if p.ForgeReads > 0 && p.ForgeErrors == p.ForgeReads {
		p.Complete = false // no run got a forge answer: nothing was checked
	}
	if resume.IsZero() {
		resume = st.backOffServer(p, s.cfg.Interval)
	}
	s.showBackingOff(st.backoff)
	if p.Deep {
		st.deepPending = !p.Complete
		st.deepCursor = gaterun.Cursor{}
		if !p.Complete {
			st.deepCursor = cur
		}
	}
	log := s.cfg.Logger.Debug
	if !p.Complete {
		log = s.cfg.Logger.Info
	}
	log("sweep pass", "term", p.Term, "pass", p.Pass, "deep", p.Deep,
		"since", p.Since, "offered", p.Offered, "backing_off", p.BackingOff,
		"forge_reads", p.ForgeReads, "forge_errors", p.ForgeErrors, "complete", p.Complete, "resume", resume)
	if s.cfg.OnPass != nil {
		s.cfg.OnPass(p)
	}
	return p, resume
}

// backOffServer returns when the next pass may start after p: while every
// forge read of the passes in a row got a 5xx, the wait doubles from two
// intervals (the next tick is skipped) up to maxServerBackoff intervals,
// since every replica asking would fail alike; zero (the next tick) after
// any other pass.
func (st *sweepTerm) backOffServer(p SweepPass, interval time.Duration) time.Time {
	if p.ForgeReads == 0 || p.ServerErrors < p.ForgeReads {
		st.serverBackoff = 0
		return time.Time{}
	}
	st.serverBackoff = min(max(2*st.serverBackoff, 2*interval), maxServerBackoff*interval)
	return p.At.Add(st.serverBackoff)
}

// showBackingOff sets the BackingOff gauge to the runs in backoff.
func (s *sweeper) showBackingOff(backoff map[string]backoff) {
	if s.cfg.BackingOff != nil {
		s.cfg.BackingOff.Set(float64(len(backoff)))
	}
}

// offerSince offers the unsettled runs of p's window that come after cur,
// listing them listPage at a time and offering each page in batches of
// sweepBatch, skipping the runs backing off at p.At, and counts them in p.
// It returns the cursor after the last batch it finished, whether it
// reached the end, and, when a rate limit stopped it, the limit's reset.
func (s *sweeper) offerSince(ctx context.Context, st *sweepTerm, p *SweepPass, cur gaterun.Cursor) (_ gaterun.Cursor, complete bool, resume time.Time) {
	for {
		page, err := s.cfg.Runs.Unsettled(ctx, p.Since, cur, listPage)
		if err != nil {
			s.cfg.Logger.Warn("sweep stopped: cannot list runs", "err", err)
			return cur, false, time.Time{}
		}
		for chunk := range slices.Chunk(page, sweepBatch) {
			if ctx.Err() != nil {
				return cur, false, time.Time{}
			}
			if limited, reset := s.offerChunk(ctx, st, p, chunk); limited {
				return cur, false, reset
			}
			cur = gaterun.CursorAt(chunk[len(chunk)-1])
		}
		if len(page) < listPage {
			return cur, ctx.Err() == nil, time.Time{}
		}
	}
}

// offerChunk offers, in one batch, the runs of chunk not backing off at
// p.At, notes their outcomes, and counts the batch in p. It reports
// whether a forge rate limit stopped the batch, with the limit's reset (an
// interval from now when the limit names none).
func (s *sweeper) offerChunk(ctx context.Context, st *sweepTerm, p *SweepPass, chunk []gaterun.Run) (limited bool, resume time.Time) {
	batch := make([]gaterun.Run, 0, len(chunk))
	for _, run := range chunk {
		if p.At.Before(st.backoff[run.ID].until) {
			p.BackingOff++
			continue
		}
		batch = append(batch, run)
	}
	if len(batch) == 0 {
		return false, time.Time{}
	}
	outs, err := s.cfg.Offer.OfferBatch(ctx, batch)
	for i, out := range outs {
		st.note(batch[i], out, p.At, s.cfg.Interval)
	}
	p.Offered += len(batch)
	if !errors.Is(err, forge.ErrRateLimited) {
		p.ForgeReads++
		if !slices.ContainsFunc(outs, func(o outcome) bool { return o != outcomeFailed }) {
			p.ForgeErrors++
			if errors.Is(err, forge.ErrServer) {
				p.ServerErrors++
			}
		}
		return false, time.Time{}
	}
	resume = s.cfg.Now().Add(s.cfg.Interval)
	if rl := (*forge.RateLimitError)(nil); errors.As(err, &rl) {
		resume = rl.Reset
	}
	s.cfg.Logger.Warn("sweep stopped: rate limited", "until", resume, "err", err)
	return true, resume
}

// SweepMode is how the sweeper reads the forge (Comparison.SweepMode).
type SweepMode string

// The sweep modes.
const (
	// SweepBatch reads each page of runs in one batch: one GraphQL query
	// for up to forge.MaxPullBatch pull requests and their head's
	// statuses, and REST writes only for the runs that drifted.
	SweepBatch SweepMode = "batch"
	// SweepREST offers each run on its own, as the event path does: a REST
	// read of its pull request and one of its head's combined status.
	// For comparison measurements only: its cost grows with open runs.
	SweepREST SweepMode = "rest"
)

// perRunOfferer is the SweepREST sweep: its OfferBatch offers each run
// through Offer, one after another, and stops at a forge rate limit,
// failing the runs it did not reach, as OfferBatch does when the limit
// stops its query.
type perRunOfferer struct{ offerer }

// OfferBatch offers runs one by one; one outcome per run, in order.
func (o perRunOfferer) OfferBatch(ctx context.Context, runs []gaterun.Run) ([]outcome, error) {
	outs := make([]outcome, len(runs))
	var errs []error
	for i, run := range runs {
		out, err := o.Offer(ctx, run)
		outs[i], errs = out, append(errs, err)
		if errors.Is(err, forge.ErrRateLimited) {
			for j := i + 1; j < len(runs); j++ {
				outs[j] = outcomeFailed
			}
			break
		}
	}
	return outs, errors.Join(errs...)
}
