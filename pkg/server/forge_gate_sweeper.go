package server

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync"
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
	// DeepEvery is the deep-pass period: each open run is checked at least
	// once every DeepEvery intervals. The first pass of every term is
	// deep. Without a time budget, every DeepEvery-th pass is deep too and
	// reads its window whole; with one, a deep window spans passes, and
	// the next begins DeepEvery-deepSlack intervals after the one before
	// began, or sooner after a window that took long, so it may lag that
	// one by up to deepSlack intervals at a run's place in the listing,
	// or take longer than it, and still check the run within DeepEvery
	// intervals (deepDue, deepSpacing, paceBehind).
	DeepEvery = 30
	// deepEase and deepShare spread a deep window over passes: for its
	// first deepEase intervals, a deep window's sweep begins a batch only
	// while that batch, however slow (longestWait), would end within
	// deepShare of the pass's interval from the pass's start, so each pass
	// of it fits in a quarter of its interval beside the shallow window's
	// runs. The shallow window keeps its priority (a pass goes round it
	// first; past the easing, unless the term's last round ran out of
	// time). A pass whose shallow part left no room for one
	// such batch reads one deep batch, or, after a query timed out, none;
	// from the second such pass, since the window began or last had room,
	// whose shallow part offered more runs than one query reads (a
	// shallow window that fills the share itself, which easing would only
	// make wait), the whole time budget.
	// A deep window not done after deepEase intervals goes on at the whole
	// time budget, so it still ends within the deep-pass period. Without a
	// time budget (Comparison.NoSweepTimeBudget) a deep pass reads its
	// window whole.
	deepEase  = DeepEvery / 3
	deepShare = 0.25
	// deepSlack is how many intervals short of DeepEvery a deep window
	// begins after the one before began, at most. A window eases no more
	// while, at the start of its a-th interval, it stands behind where
	// the one before stood at the end of its own
	// (a-deepSlack+paceAhead)-th: three intervals earlier into its span
	// (paceBehind). deepStretch begins the next window sooner after one
	// that took long (deepSpacing).
	// Under GitHub's latency model, 5,000 open runs with 500 in the
	// shallow window, at 16 seeds over 66 intervals, windows every 30
	// intervals left a run unchecked for 31 to 37 of them at every seed;
	// every 24, 25 to 31 (one seed past 30); every 23, with the batch size
	// doubled back after a fast pass (grownBatch), 24 to 30. At 32 seeds,
	// every 23 left 24 to 30 (27 on average); with deepStretch 1.3, 17 to
	// 28 (22.7) (docs/benchmarks.md).
	deepSlack   = 7
	paceAhead   = 4
	deepStretch = 1.3
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
	// minSweepBatch is the floor a batch that times out is halved to.
	minSweepBatch = 10
	// windowShallow and windowDeep are merge_gate_sweep_passes_behind_total's
	// window label values (sweeperConfig.BehindPasses).
	windowShallow = "shallow"
	windowDeep    = "deep"
	// DefaultSweepTimeShare is the share of GitHub's GraphQL CPU-time limit
	// (forge.GraphQLCPUPerMinute) the sweeper may spend in any minute:
	// half, leaving the rest to the event path and other clients of the
	// installation.
	DefaultSweepTimeShare = 0.5
	// MaxSweepConcurrency bounds Config.SweepConcurrency: GitHub asks
	// integrations to send their requests serially, so more than a few
	// in flight for one installation is not offered.
	MaxSweepConcurrency = 4
)

// behindWindows are merge_gate_sweep_passes_behind_total's window values,
// each series from the start.
var behindWindows = []string{windowShallow, windowDeep}

// SweepPass reports one pass of the sweeper to sweeperConfig.OnPass.
type SweepPass struct {
	// Owner is the replica that swept.
	Owner string
	// Installation is the App installation whose runs the pass swept, in
	// App mode; 0 for the one sweeper of a token or single installation.
	Installation int64
	// Term counts the terms this sweeper served, from 1; Pass counts the
	// passes of the term, from 1.
	Term, Pass int
	// Deep is true when the pass owes the 192-hour window (after the
	// shallow one); DeepBegan is then when the deep window it owes began
	// (the pass that began it, At), else zero. A window may begin at the
	// pass after the one before ends (deepSpacing), so DeepBegan, not
	// Deep, tells two windows apart.
	Deep      bool
	DeepBegan time.Time
	// At is when the pass began; Since is the start of the last window it
	// swept: the deep window's once it reached it, else the shallow one's.
	At, Since time.Time
	// Offered is how many runs were offered; BackingOff how many the pass
	// skipped because their pull request could not be read lately.
	Offered, BackingOff int
	// ForgeReads is how many batches the pass offered (one forge read
	// each); ForgeErrors how many of them failed whole (no run got a
	// forge answer), ServerErrors how many of those with a 5xx, but for
	// a 502 or 504 that came once the query had run as long as GitHub lets
	// one run (forge.ServerTimeout, scaled to the interval): GitHub
	// stopping a slow query, counted in Timeouts alone.
	ForgeReads, ForgeErrors, ServerErrors int
	// Timeouts is how many batches timed out (forge.ErrQueryTimeout); Batch
	// is the batch size the next pass starts with.
	Timeouts, Batch int
	// ForgeTime is the forge's response time to the pass's batches (each
	// one's query and the REST calls of its drifted runs), the estimate of
	// GitHub's CPU time that GitHub documents; the store's reads and writes
	// between those calls are not in it. Waited is how long the pass
	// waited for room in its time budget.
	ForgeTime, Waited time.Duration
	// Limited is the cause of the rate limit that stopped the pass, "" if
	// none did.
	Limited forge.RateLimitCause
	// ShallowDone is true when the pass reached the end of the shallow
	// window; a pass that ran out of time resumes it next interval.
	ShallowDone bool
	// Behind is true when the pass could not keep up: its shallow window
	// is unfinished, or the deep window is unfinished and has taken
	// DeepEvery intervals or more, or the run it reads next was last
	// checked (by the window before) DeepEvery intervals ago or more, so
	// that run is checked past the deep-pass period (deepBehind), or a
	// deep-window run whose offer failed has gone DeepEvery intervals
	// unchecked (againOverdue).
	Behind bool
	// Complete is false when the pass stopped early (a rate limit, a store
	// error or the end of the term) or when every forge read failed. A
	// pass stopped by its time budget is complete, and Behind if its
	// shallow window is unfinished.
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
	// OnPass is called synchronously after each pass, before the pass's
	// line is logged; nil means none. It must not block.
	OnPass func(SweepPass)
	// BackingOff, when set, shows how many runs are backing off (runs whose
	// pull request could not be read, while a deep window still lists
	// them: forgetUnlisted); nil: not shown.
	BackingOff prometheus.Gauge
	// Watchdog bounds each pass and ends a term whose passes keep failing
	// (lease.Every); the zero Watchdog bounds nothing.
	Watchdog lease.Watchdog
	// TimeShare is the share of forge.GraphQLCPUPerMinute the batches may
	// spend in any minute (Minute), measured as their response time,
	// whatever Interval is; 0 means DefaultSweepTimeShare, a negative
	// share no time budget and no interval stop
	// (Comparison.NoSweepTimeBudget).
	TimeShare float64
	// Minute is GitHub's minute on Now's clock, the time budget's window;
	// GitHub's query timeout (forge.ServerTimeout) is scaled by it too. 0
	// means time.Minute; a run that compresses GitHub's minute
	// (forgesim.WithMinute) sets the same length.
	Minute time.Duration
	// Behind, when set, is 1 while the last pass of the current term was
	// Behind, else 0 (0 once the term ends).
	Behind prometheus.Gauge
	// BehindPasses, when set, counts the passes that were Behind by the
	// label window: windowShallow when the shallow window is unfinished
	// (ShallowDone false), whatever the deep window's state, else
	// windowDeep. Several sweepers may share one.
	BehindPasses *prometheus.CounterVec
	// Malformed, when set, counts the run documents the store could not
	// read as runs that a pass's listings skipped (gaterun.WithSkipped),
	// each once a pass. Several sweepers may share one.
	Malformed prometheus.Counter
	// Concurrency is how many batches a pass may have in flight at once;
	// 0 means 1: one at a time, as GitHub advises.
	Concurrency int
	// RequestTimeout is the forge client's deadline for each request
	// (forge.Client.Timeout); 0 means none, so a batch may keep a pass
	// waiting GitHub's whole query timeout.
	RequestTimeout time.Duration
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
	if cfg.Minute <= 0 {
		cfg.Minute = time.Minute
	}
	if cfg.TimeShare == 0 {
		cfg.TimeShare = DefaultSweepTimeShare
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Concurrency = max(cfg.Concurrency, 1)
	return &sweeper{cfg: cfg}
}

// sweepTerm is what the sweeper keeps in memory for one term, and nothing
// outlives it: the next term starts afresh, with a deep pass.
type sweepTerm struct {
	term, pass int
	// shallowCursor is where a shallow window stopped at its time budget:
	// the next pass resumes it there (the zero Cursor: from the start).
	shallowCursor gaterun.Cursor
	// deepCursor is where an unfinished deep pass stopped; deepPending
	// makes the next pass a deep one that resumes there. deepBegan is
	// when the deep window being swept began, lastBegan when the one
	// before it began (lastPace's start). crowded counts the passes,
	// since it began or last had room, in which its shallow part,
	// offering more runs than one query reads and meeting no timeout, left
	// the easing deep window no room; from 2, such a pass reads the window
	// at the whole budget (deepEase). roundShort is true from a pass that
	// went round the shallow window and ran out of time there until a
	// pass goes round to the window's end, or a deep pass past its easing
	// reaches the end without going round for it (and goes on to the
	// deep window).
	deepCursor  gaterun.Cursor
	deepPending bool
	deepBegan   time.Time
	lastBegan   time.Time
	crowded     int
	roundShort  bool
	// pace is where the deep window being swept stood at the end of each
	// interval since it began (by the interval's index); lastPace is the
	// window's before it, up to the interval it was done in. A window
	// that stands behind lastPace eases no more until it catches up
	// (paceBehind).
	pace, lastPace []paceMark
	// spent is the forge time of the calls begun within the last minute,
	// oldest first: the window the time budget holds in. mu guards it, as
	// the calls of batches in flight are charged as they end.
	mu    sync.Mutex
	spent []spentBatch
	// batch is the batch size that last worked: halved by a query that
	// timed out, down to minSweepBatch, unless its halves, read at once,
	// show the timeout was a slow moment of GitHub's (aSlowMoment); grown
	// back a step after each pass without a timeout, up to sweepBatch
	// (grownBatch).
	batch int
	// backoff holds the runs whose pull request could not be read, by ID.
	// window numbers the deep windows of the term, from 1: the one being
	// swept, or the last done. A back-off records the window that last
	// listed its run (seenIn); one that a whole window did not list is
	// dropped at the window's end (forgetUnlisted), so the map holds only
	// runs the current or the last deep window listed unsettled.
	backoff map[string]backoff
	window  int
	// unreadable, when keepUnreadable (App mode), collects the runs
	// found unreadable since takeUnreadable last took them, for their
	// installation to be checked (installationSweeps.rehome).
	keepUnreadable bool
	unreadable     []gaterun.Run
	// deepAgain holds, by ID, the runs of the deep part whose offer failed
	// (their batch got no read, or they failed alone): the deep cursor
	// goes past them, and every later pass offers them again before the
	// deep window (offerDeepAgain) until an offer reads them, or until the
	// run is no longer listed unsettled, on the back-off's occasions and
	// rules (forgetUnlisted; in App mode also keepListed): a run settled,
	// deleted or moved while the forge kept failing its offers would
	// otherwise be offered, and keep the pass Behind (againOverdue), for
	// the rest of the term. againSeq numbers them in the order they
	// failed, the listing's.
	deepAgain map[string]againRun
	againSeq  int
	// serverBackoff is the wait after a pass whose every forge read got a
	// 5xx, doubled by each such pass in a row; 0 after any other pass.
	serverBackoff time.Duration
	// suspended is set when GitHub refused a batch's read for the
	// installation's suspension (forge.ErrSuspended): the pass sends no
	// more batches (record, offerPage), and its installation is checked
	// (installationSweeps.pass, takeSuspended).
	suspended bool
}

// takeSuspended reports whether a read of the term was refused for its
// installation's suspension since it was last asked.
func (st *sweepTerm) takeSuspended() bool {
	was := st.suspended
	st.suspended = false
	return was
}

// paceMark is where a deep window stood at the end of an interval: its
// cursor, or done.
type paceMark struct {
	cur  gaterun.Cursor
	done bool
}

// intervalsAfter is the index of the interval at at, counted from the
// one that began at from (0), to the nearest interval: passes keep their
// interval's start only to within a tick.
func intervalsAfter(from, at time.Time, interval time.Duration) int {
	return int((at.Sub(from) + interval/2) / interval)
}

// past reports whether m stands past cur in listing order: done, or at a
// cursor after cur.
func (m paceMark) past(cur gaterun.Cursor) bool {
	return m.done || cur.Before(gaterun.Run{ID: m.cur.ID, Updated: m.cur.Updated})
}

// notePace records where the deep window stands at the end of the pass
// of interval age: at deepCursor, or done when no deep pass is pending.
func (st *sweepTerm) notePace(age int) {
	m := paceMark{cur: st.deepCursor, done: !st.deepPending}
	for len(st.pace) < age {
		last := paceMark{}
		if n := len(st.pace); n > 0 {
			last = st.pace[n-1]
		}
		st.pace = append(st.pace, last) // an interval without a pass stood where the one before ended
	}
	st.pace = append(st.pace[:age], m)
}

// deepBehind reports whether the deep window keeps the pass of interval
// at behind: it is unfinished, and it began DeepEvery intervals ago or
// more, or the run it reads next has gone DeepEvery intervals or more
// unchecked since the window before read it (overdue). That window read
// the run in the interval of lastPace's first mark past the cursor,
// counted from lastBegan; windows read in listing order, so of the runs
// the window has still to read, the window before read that one first.
// The term's first window has no window before it: its age alone
// counts.
func (st *sweepTerm) deepBehind(at time.Time, interval time.Duration) bool {
	if !st.deepPending {
		return false
	}
	if !at.Before(st.deepBegan.Add(DeepEvery * interval)) {
		return true
	}
	for j, m := range st.lastPace {
		if m.past(st.deepCursor) {
			return intervalsAfter(st.lastBegan, at, interval)-j >= DeepEvery
		}
	}
	return false
}

// deepSpacing is how many intervals after a deep window began the next
// begins, given the intervals the window took: DeepEvery-deepSlack, or
// DeepEvery-deepStretch×took when that is sooner. A window then checks
// each run within DeepEvery intervals of the window before's check
// while it lags that window by at most deepSlack intervals at the run's
// place in the listing, and, when the window before took long, while it
// takes up to 1+deepStretch times as long (GitHub grown slow, more
// timeouts): the run the window before read last waits the spacing plus
// the difference of the two windows' lengths. At most 0 for a window
// that took DeepEvery/deepStretch intervals or more: the next begins at
// once.
func deepSpacing(took int) int {
	return min(DeepEvery-deepSlack, DeepEvery-int(deepStretch*float64(took)))
}

// paceBehind reports whether the deep window being swept, at its cursor
// at the start of the pass of interval age, stands behind where the
// window before it stood at the end of interval age-deepSlack+paceAhead
// (done, or past that cursor in listing order). Windows begin at most
// DeepEvery-deepSlack intervals apart (deepSpacing), so a window that
// stands by the end of each interval where the one before stood
// deepSlack intervals earlier checks each run within DeepEvery intervals
// of the last check; a window begun sooner is judged at the same point,
// so it keeps the earlier start as slack. Judging
// paceAhead intervals ahead of that lets a window that fell behind catch
// up at the whole budget over a few passes, where the window before went
// faster. False for the term's first window, which has none before it,
// and in a window's first intervals, which have nothing to keep up with.
func (st *sweepTerm) paceBehind(age int) bool {
	age += paceAhead - deepSlack
	if len(st.lastPace) == 0 || age < 0 {
		return false
	}
	if age >= len(st.lastPace) {
		return true // the window before was done by then
	}
	return st.lastPace[age].past(st.deepCursor)
}

// newTerm counts a new term of s and returns its fresh state: its first
// pass is deep.
func (s *sweeper) newTerm() *sweepTerm {
	return &sweepTerm{term: int(s.terms.Add(1)), backoff: make(map[string]backoff), deepAgain: make(map[string]againRun), batch: sweepBatch}
}

// againRun is a deep-window run whose offer failed (sweepTerm.deepAgain):
// the run as the store listed it (the reconciler re-reads it before any
// write), the pass it failed in, its place in the failing order, when
// it was last known checked: when the window before read it (its pace
// marks), or, in the term's first window, when that window began, and
// the deep window that last listed it (sweepTerm.window, as a back-off's).
type againRun struct {
	run     gaterun.Run
	failed  time.Time
	seq     int
	checked time.Time
	window  int
}

// noteDeep keeps run in deepAgain when its offer in the deep part of the
// pass at at failed, and drops it once an offer reads it (any outcome but
// failed), wherever in a pass.
func (st *sweepTerm) noteDeep(run gaterun.Run, out outcome, deep bool, at time.Time, interval time.Duration) {
	if out != outcomeFailed {
		delete(st.deepAgain, run.ID)
		return
	}
	if _, kept := st.deepAgain[run.ID]; kept || !deep {
		return
	}
	checked := st.deepBegan
	for j, m := range st.lastPace {
		if m.done || !m.cur.Before(run) {
			checked = st.lastBegan.Add(time.Duration(j) * interval)
			break
		}
	}
	st.againSeq++
	st.deepAgain[run.ID] = againRun{run: run, failed: at, seq: st.againSeq, checked: checked, window: st.window}
}

// againOverdue reports whether a run of deepAgain has gone DeepEvery
// intervals or more unchecked at at: it is checked past the deep-pass
// period, as deepBehind says of the deep cursor's run.
func (st *sweepTerm) againOverdue(at time.Time, interval time.Duration) bool {
	for _, a := range st.deepAgain {
		if intervalsAfter(a.checked, at, interval) >= DeepEvery {
			return true
		}
	}
	return false
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
	// window is the deep window (sweepTerm.window) that last listed the
	// run, or in which it was last offered.
	window int
	// uncovered: the last look-up of the run's repository found no
	// installation of the App covering it (installationSweeps.rehome).
	uncovered bool
}

// note records the outcome of offering run at now: unreadable starts or
// doubles its back-off (and, with keepUnreadable, keeps the run for
// takeUnreadable), anything else but a failure ends it.
func (st *sweepTerm) note(run gaterun.Run, out outcome, now time.Time, interval time.Duration) {
	switch out {
	case outcomeUnreadable:
		b := st.backoff[run.ID]
		b.delay = min(max(2*b.delay, 2*interval), DeepEvery*interval)
		b.until, b.window = now.Add(b.delay), st.window
		st.backoff[run.ID] = b
		if st.keepUnreadable {
			st.unreadable = append(st.unreadable, run)
		}
	case outcomeFailed:
		// Not the pull request's fault: the back-off, if any, stands.
	default:
		delete(st.backoff, run.ID)
	}
}

// seenIn marks the back-offs and the deepAgain entries of the runs of
// page, as listed unsettled, in the current deep window.
func (st *sweepTerm) seenIn(page []gaterun.Run) {
	if len(st.backoff) == 0 && len(st.deepAgain) == 0 {
		return
	}
	for _, run := range page {
		if b, ok := st.backoff[run.ID]; ok && b.window != st.window {
			b.window = st.window
			st.backoff[run.ID] = b
		}
		if a, ok := st.deepAgain[run.ID]; ok && a.window != st.window {
			a.window = st.window
			st.deepAgain[run.ID] = a
		}
	}
}

// forgetUnlisted drops, at the end of a deep window, the back-offs and
// the deepAgain entries of the runs it never listed. A window lists every
// run unsettled and updated within deepWindow all through it (a run's
// place in the listing only moves on, by its update, so the cursor cannot
// pass it unlisted), so a run it did not list was settled, moved to
// another installation, deleted, or left the deep window: no pass would
// offer it from a listing again. Its back-off would only be counted and
// kept for the rest of the term; its deepAgain entry would be offered
// again every pass, by the forge's failures kept for the rest of the
// term, and hold the pass Behind once overdue (againOverdue).
func (st *sweepTerm) forgetUnlisted() {
	maps.DeleteFunc(st.backoff, func(_ string, b backoff) bool { return b.window < st.window })
	maps.DeleteFunc(st.deepAgain, func(_ string, a againRun) bool { return a.window < st.window })
}

// takeUnreadable returns the runs note found unreadable since the last
// call, and forgets them.
func (st *sweepTerm) takeUnreadable() []gaterun.Run {
	runs := st.unreadable
	st.unreadable = nil
	return runs
}

// Work serves one term: it makes a pass every interval until ctx is done,
// the first one interval after the term starts (docs/design.md,
// decision 3), so a term that flaps costs no forge request. Its forge
// requests are charged to lane merge-gate-sweeper, and go out one at a
// time, or up to sweeperConfig.Concurrency batches at once (offerPage).
//
// Every pass sweeps the shallow window (shallowWindow) first. A pass is
// also deep (deepWindow) when it is the term's first, when a new deep
// window is due (deepDue: deepSpacing intervals after the last began,
// at most DeepEvery-deepSlack, or every DeepEvery-th pass without a
// time budget), or when the
// last deep pass stopped early, which it then resumes from its cursor;
// the deep part skips the runs the shallow part offered. A deep window
// that stands behind the pace of the one before it eases no more
// (paceBehind).
// For the first deepEase intervals of a deep window, its part of a pass
// stops, at its cursor, where one more batch could take the pass past
// deepShare of its interval, so the window spreads over a few light
// passes; a pass whose shallow part left no room for one batch in that
// share reads one deep batch (none after a timeout), or, from the second
// since the window last had room whose shallow part offered more runs
// than one query reads, the whole budget; after deepEase intervals it has
// the whole budget.
// A rate-limit error stops the pass; the ticks before the limit's reset
// are skipped and not counted as passes.
//
// The sweeper spends at most its time budget (sweeperConfig.TimeShare) in
// any window of one minute (sweeperConfig.Minute), across passes: before
// each batch it counts the forge time of the calls begun within the
// minute before, adds the longest a batch can be charged (GitHub's
// forge.ServerTimeout, on the sweeper's minute), and waits until that
// fits. A batch's later calls (a drifted run's status write) are made
// only while that fits at once and they could end within the interval
// (admitCall); a run not written is left drifted for the next pass, so
// a drifted backlog is repaired over passes, as many writes a minute as
// the budget leaves room for beside the queries. A pass stops, at its cursor, when the wait and the batch (judged
// by the longest it can keep the pass waiting, longestWait, or the mean of
// its batches if longer) could take it past its interval; the next pass resumes the window
// there, and when it reaches the window's end with time left, goes round
// to the window's start, up to the runs it offered (a deep pass past its
// easing does not when the term's last round ran out of time, so a
// shallow window longer than a pass leaves the deep window the rest of
// the pass). Such a pass is complete (it did its share) but Behind.
//
// A batch that times out (forge.ErrQueryTimeout) is offered again in
// halves at once, down to minSweepBatch, and the pass goes on; the term
// keeps the size that worked and grows it back a step after each pass
// without a timeout: doubled when the pass's batches answered in half
// GitHub's timeout on average, else by half (grownBatch). A shallow-window batch that times out at
// minSweepBatch runs or fewer is offered once more after the rest of the
// shallow window, before the deep window, if the time budget allows. A
// deep-window run whose offer failed otherwise (a batch without an
// answer, or the run alone) does not hold the deep cursor: every later
// pass offers it again there until an offer reads it (offerDeepAgain).
//
// A run whose pull request cannot be read (outcomeUnreadable) backs off on
// its own: it is skipped for two intervals, then four, doubling up to
// DeepEvery intervals, until an offer reads it again. The back-offs live in
// the term, like the cursors and the batch size; at the end of each deep
// window, those of the runs the window never listed (settled, moved,
// deleted or past the deep window) are dropped (forgetUnlisted), as are
// the failed deep-window runs kept to be offered again.
//
// A pass in which every forge read failed is not complete. While every
// forge read of a pass gets a 5xx but GitHub stopping a slow query (a
// 502 or 504 after forge.ServerTimeout, scaled to the interval: the query
// was slow, the forge is not down), the next passes wait: two intervals,
// doubling up to maxServerBackoff intervals, until a read succeeds (the
// ticks before are skipped, as for a rate limit).
//
// sweeperConfig.Watchdog bounds each pass; when it ends the term (passes
// in a row that did not complete), Work logs why and returns, and the
// lease is released.
func (s *sweeper) Work(ctx context.Context) {
	st := s.newTerm()
	defer s.showBackingOff(nil)
	if s.cfg.Behind != nil {
		defer s.cfg.Behind.Set(0)
	}
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
// through Offer, one after another, and stops at a forge rate limit, at
// a read refused for the installation's suspension, or when ctx ends (the term's end), failing the runs it did not reach, as
// OfferBatch does when the limit stops its query. A run not reached is
// not offered, so it is not counted as an offer either.
type perRunOfferer struct{ offerer }

// OfferBatch offers runs one by one; one outcome per run, in order.
func (o perRunOfferer) OfferBatch(ctx context.Context, runs []gaterun.Run) ([]outcome, error) {
	outs := make([]outcome, len(runs))
	var errs []error
	for i, run := range runs {
		if err := ctx.Err(); err != nil {
			failRest(outs, i)
			errs = append(errs, err)
			break
		}
		out, err := o.Offer(ctx, run)
		outs[i], errs = out, append(errs, err)
		if errors.Is(err, forge.ErrRateLimited) || errors.Is(err, forge.ErrSuspended) {
			failRest(outs, i+1)
			break
		}
	}
	return outs, errors.Join(errs...)
}

// failRest sets outs[from:] to outcomeFailed: the runs a batch did not
// reach.
func failRest(outs []outcome, from int) {
	for j := from; j < len(outs); j++ {
		outs[j] = outcomeFailed
	}
}
