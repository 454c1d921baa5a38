// One sweep pass: its state, its time budget, the pages it lists and the
// batches it offers.

package server

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"iterion.dev/iterion/internal/clock"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/gaterun"
)

// passStop is why a window's sweep ended.
type passStop int

const (
	stopDone    passStop = iota // the window's end was reached
	stopTime                    // the time budget or the interval ran out
	stopFailed                  // a store error or the end of the term
	stopLimited                 // a forge rate limit
)

// sweepPassState is one pass in progress: its report, its clock budget,
// and the runs its shallow part offered.
type sweepPassState struct {
	st *sweepTerm
	p  *SweepPass
	// budget is the forge time the pass may spend; deadline is when it
	// must be done by: the end of its interval, or, in a deep part that
	// eases (deepEase), deepShare of it; batches is how many batches took
	// p.ForgeTime, sent how many were sent; most, when above 0, is the
	// most the pass may send (an easing deep part with no room in its
	// share sends one).
	budget   time.Duration
	deadline time.Time
	batches  int
	sent     int
	most     int
	// flying is how many batches are in flight (offerPage): their forge
	// calls, made in their own goroutines, each keep a whole GitHub
	// timeout of the budget free for the others (admitCall).
	flying atomic.Int64
	// offered holds the runs the shallow part offered (less those of a
	// batch that timed out, until offered again in halves), which going
	// round and the deep part skip; skip turns that on; deep is true in
	// the deep part.
	offered  map[string]bool
	skip     bool
	deep     bool
	timedOut bool
	// grown is when the batch size last grew, or a batch last timed out,
	// in this pass (from its start): a minute after it, the size grows
	// (growBatch).
	grown time.Time
	// again holds the shallow window's runs whose batch timed out at the
	// smallest size, offered once more before the deep part (offerAgain).
	again []gaterun.Run
}

// timeBudget is the forge time the sweeper may spend in any minute
// (cfg.Minute), whatever its interval: TimeShare of GitHub's GraphQL
// CPU-time limit per minute, on the sweeper's clock.
func (s *sweeper) timeBudget() time.Duration {
	return time.Duration(s.cfg.TimeShare * float64(forge.GraphQLCPUPerMinute) * float64(s.cfg.Minute) / float64(time.Minute))
}

// longestBatch is the most forge time one batch can be charged: GitHub
// stops a query at forge.ServerTimeout and charges no more, on the
// sweeper's clock (cfg.Minute). It is what the time budget keeps free for
// the next batch, whose time cannot be known before it answers.
func (s *sweeper) longestBatch() time.Duration {
	return queryTimeout(s.cfg.Minute)
}

// queryTimeout is GitHub's query timeout (forge.ServerTimeout) on the
// clock whose GitHub minute is minute.
func queryTimeout(minute time.Duration) time.Duration {
	return time.Duration(float64(forge.ServerTimeout) * float64(minute) / float64(time.Minute))
}

// longestWait is the longest a batch can keep the pass waiting: GitHub's
// timeout (longestBatch), or the forge client's own deadline
// (cfg.RequestTimeout) when it has one and that is shorter. A batch may
// begin only when it would end within the pass's interval by this bound.
func (s *sweeper) longestWait() time.Duration {
	return SweepBatchWait(s.cfg.Minute, s.cfg.RequestTimeout)
}

// SweepBatchWait is the longest one sweep batch can keep its pass waiting
// on the clock whose GitHub minute is minute (Config.ForgeMinute; 0 means
// a minute): GitHub's query timeout, or the forge client's deadline
// requestTimeout when it has one (above 0) and that is shorter. A pass
// begins a batch only when it would end within its interval by this.
func SweepBatchWait(minute, requestTimeout time.Duration) time.Duration {
	if minute <= 0 {
		minute = time.Minute
	}
	wait := queryTimeout(minute)
	if requestTimeout > 0 {
		wait = min(wait, requestTimeout)
	}
	return wait
}

// spentBatch is one forge call's time, by when it began.
type spentBatch struct {
	began time.Time
	took  time.Duration
}

// roomAt is the earliest time, now or later, at which the forge calls of
// the term begun within the window before it, plus next, fit in budget:
// now if they already do, else when enough of the oldest have left the
// window. It forgets the calls that left the window before now.
func (st *sweepTerm) roomAt(now time.Time, window, budget, next time.Duration) time.Time {
	st.mu.Lock()
	defer st.mu.Unlock()
	i := 0
	for i < len(st.spent) && !st.spent[i].began.After(now.Add(-window)) {
		i++
	}
	st.spent = st.spent[i:]
	var sum time.Duration
	for _, b := range st.spent {
		sum += b.took
	}
	at := now
	for _, b := range st.spent {
		if sum+next <= budget {
			break
		}
		sum -= b.took
		at = b.began.Add(window)
	}
	return at
}

// charge adds a forge call of the term, begun at began and charged took,
// to its spent calls, in order of beginning.
func (st *sweepTerm) charge(began time.Time, took time.Duration) {
	st.mu.Lock()
	defer st.mu.Unlock()
	at := len(st.spent)
	for at > 0 && st.spent[at-1].began.After(began) {
		at--
	}
	st.spent = slices.Insert(st.spent, at, spentBatch{began, took})
}

// pass makes one pass of the term st and returns it, with the rate
// limit's reset when one stopped it (zero otherwise).
func (s *sweeper) pass(ctx context.Context, st *sweepTerm) (_ SweepPass, resume time.Time) {
	st.pass++
	skipped := &skippedRuns{}
	ctx = gaterun.WithSkipped(ctx, skipped.note)
	defer s.tellSkipped(skipped)
	p := SweepPass{Owner: s.cfg.Owner, Term: st.term, Pass: st.pass, At: s.cfg.Now(), Complete: true}
	if !st.deepPending && (st.pass == 1 || s.deepDue(st, p.At)) {
		st.deepPending, st.deepCursor, st.lastBegan, st.deepBegan, st.crowded = true, gaterun.Cursor{}, st.deepBegan, p.At, 0
		st.window++
		st.lastPace, st.pace = st.pace, nil
	}
	p.Deep = st.deepPending
	if p.Deep {
		p.DeepBegan = st.deepBegan
	}
	ps := &sweepPassState{st: st, p: &p, budget: s.timeBudget(), deadline: p.At.Add(s.cfg.Interval), offered: make(map[string]bool), grown: p.At}

	// Without a time budget a pass runs to its end, so a deep pass lists
	// the deep window alone (the shallow one is in it): one store read
	// fewer, which a store that scans per read (dev-mongo) feels.
	shallowSince, shallowCur := p.At.Add(-shallowWindow), st.shallowCursor
	alone := p.Deep && s.cfg.TimeShare < 0
	if alone {
		shallowSince, shallowCur, ps.deep = p.At.Add(-deepWindow), st.deepCursor, true
	}
	p.Since = shallowSince
	cur, stop, resume := s.offerSince(ctx, ps, shallowSince, shallowCur)
	age := intervalsAfter(st.deepBegan, p.At, s.cfg.Interval)
	easing := p.Deep && !alone && p.At.Before(st.deepBegan.Add(deepEase*s.cfg.Interval)) && !st.paceBehind(age)
	if stop == stopDone && !alone && shallowCur != (gaterun.Cursor{}) {
		// Resumed mid-window, the pass reached the window's end with time
		// left: it goes round to the window's start, skipping the runs it
		// offered, so every run of the window is checked this interval
		// and no interval's time is left idle while runs wait. (A deep
		// window read alone, without a time budget, resumes where a rate
		// limit or the term's end stopped it and does not go round: the
		// runs before its cursor were read the pass before.) A deep
		// pass past its easing goes on to the deep window instead when
		// the term's last round ran out of time (roundShort): a shallow
		// window longer than a pass would otherwise starve the deep one.
		// One easing takes what is left of its share after.
		if !p.Deep || easing || !st.roundShort {
			ps.skip = true
			cur, stop, resume = s.offerSince(ctx, ps, shallowSince, gaterun.Cursor{})
			ps.skip = false
			st.roundShort = stop == stopTime
		} else {
			st.roundShort = false // the deep window has this pass's rest
		}
	}
	if stop == stopDone && len(ps.again) > 0 {
		stop, resume = s.offerAgain(ctx, ps, ps.again)
	}
	// Only a pass out of time resumes the shallow window at its cursor;
	// after a failure or a limit it starts afresh, so no run of the last
	// hour is left for the deep window.
	st.shallowCursor = gaterun.Cursor{}
	if stop == stopTime {
		st.shallowCursor = cur
	}
	p.ShallowDone = stop == stopDone
	if stop == stopDone && len(st.deepAgain) > 0 {
		stop, resume = s.offerDeepAgain(ctx, ps)
	}
	// deepNow is whether this pass goes on to the deep window: it owes it
	// and, while the window eases, one more batch would end within
	// deepShare of the interval (the deep part then stops there), or the
	// shallow part met no timeout: one batch, and from the second such
	// pass since the window last had room whose shallow part offered more
	// runs than one query reads (sweepBatch), the whole budget (the
	// shallow window fills the share itself; easing would only make the
	// deep one wait). After a timeout the deep window waits for the next
	// pass.
	deepNow, deadline, most := p.Deep, ps.deadline, 0
	if eased := p.At.Add(time.Duration(deepShare * float64(s.cfg.Interval))); easing && stop == stopDone {
		switch at, wait := s.nextBatch(ps); {
		case !at.Add(wait).After(eased):
			deadline, st.crowded = eased, 0
		case p.Timeouts == 0:
			if p.Offered > sweepBatch {
				st.crowded++ // more than a query's runs filled the share: not one slow answer
			}
			if st.crowded < 2 {
				most = ps.sent + 1
			}
		default:
			deepNow = false
		}
	}
	if p.Deep && s.cfg.TimeShare < 0 {
		st.shallowCursor = gaterun.Cursor{}
		st.deepPending, st.deepCursor = stop != stopDone, gaterun.Cursor{}
		if stop != stopDone {
			st.deepCursor = cur
		}
	} else if stop == stopDone && deepNow {
		p.Since = p.At.Add(-deepWindow)
		ps.skip, ps.deep, ps.deadline, ps.most = true, true, deadline, most
		cur, stop, resume = s.offerSince(ctx, ps, p.Since, st.deepCursor)
		st.deepPending = stop != stopDone
		st.deepCursor = gaterun.Cursor{}
		if stop != stopDone {
			st.deepCursor = cur
		}
	}
	if p.Deep {
		st.notePace(age)
		if !st.deepPending {
			st.forgetUnlisted()
		}
	}
	p.Complete = stop == stopDone || stop == stopTime
	if p.ForgeReads > 0 && p.ForgeErrors == p.ForgeReads {
		p.Complete = false // no run got a forge answer: nothing was checked
	}
	p.Behind = !p.ShallowDone || st.deepBehind(p.At, s.cfg.Interval) || st.againOverdue(p.At, s.cfg.Interval)
	if !ps.timedOut && p.ForgeReads > p.ForgeErrors {
		st.batch = s.grownBatch(ps)
	}
	p.Batch = st.batch
	if resume.IsZero() {
		resume = st.backOffServer(p, s.cfg.Interval)
	}
	s.showBackingOff(st.backoff)
	if s.cfg.Behind != nil {
		s.cfg.Behind.Set(b2f(p.Behind))
	}
	if s.cfg.BehindPasses != nil && p.Behind {
		w := windowDeep
		if !p.ShallowDone {
			w = windowShallow
		}
		s.cfg.BehindPasses.WithLabelValues(w).Inc()
	}
	// Reported before it is logged: whoever reads the line finds the
	// pass recorded (the installations view, /readyz, the metrics).
	if s.cfg.OnPass != nil {
		s.cfg.OnPass(p)
	}
	log := s.cfg.Logger.Debug
	if !p.Complete || p.Behind {
		log = s.cfg.Logger.Info
	}
	log("sweep pass", "term", p.Term, "pass", p.Pass, "deep", p.Deep, "deep_began", p.DeepBegan,
		"since", p.Since, "offered", p.Offered, "backing_off", p.BackingOff,
		"forge_reads", p.ForgeReads, "forge_errors", p.ForgeErrors, "forge_time", p.ForgeTime, "waited", p.Waited,
		"batch", p.Batch, "complete", p.Complete, "behind", p.Behind, "resume", resume, "took", s.cfg.Now().Sub(p.At))
	return p, resume
}

// deepDue reports whether a new deep window begins at at (the term's
// first pass aside): without a time budget, at every DeepEvery-th pass,
// which reads its window whole; with one, deepSpacing intervals after
// the window before began, by the intervals that window took (its pace
// marks, the last of them done).
func (s *sweeper) deepDue(st *sweepTerm, at time.Time) bool {
	if s.cfg.TimeShare < 0 {
		return st.pass%DeepEvery == 0
	}
	return intervalsAfter(st.deepBegan, at, s.cfg.Interval) >= deepSpacing(len(st.pace))
}

// grownBatch is the term's batch size grown one step, up to sweepBatch:
// doubled when the pass's batches answered, on average, in half GitHub's
// timeout (longestBatch) or less, else grown by half. A query of twice
// the runs asks for twice the nodes and pays its fixed cost once
// (aSlowMoment's reasoning), so batches that fast say twice their size
// would still answer within the timeout, and the size comes back in
// fewer passes (10 to 100 in 4, not 6); batches slower than that grow it
// by half, as a size near GitHub's timeout should.
func (s *sweeper) grownBatch(ps *sweepPassState) int {
	b := ps.st.batch
	if ps.batches > 0 && ps.meanBatch() <= s.longestBatch()/2 {
		return min(2*b, sweepBatch)
	}
	return min(b+(b+1)/2, sweepBatch)
}

// growBatch grows the term's batch size one step (grownBatch) when a
// minute (cfg.Minute) has passed in this pass since it last grew or a
// batch timed out. So a pass longer than a minute grows the size as a
// pass of a minute's interval would, one step a minute of GitHub's clock;
// a pass ending within its minute grows it only at its end.
func (s *sweeper) growBatch(ps *sweepPassState) {
	if now := s.cfg.Now(); now.Sub(ps.grown) >= s.cfg.Minute {
		ps.st.batch, ps.grown = s.grownBatch(ps), now
	}
}

// b2f is 1 for true, 0 for false.
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// backOffServer returns when the next pass may start after p: while every
// forge read of the passes in a row got a 5xx (GitHub stopping a slow
// query aside: see SweepPass.ServerErrors), the wait doubles from two
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

// offerSince offers the unsettled runs updated since since that come after
// cur, listing them listPage at a time and offering each page (offerPage),
// and counts them in p. It returns the cursor after the last run of the
// runs it offered in order, why it stopped, and, when a rate limit
// stopped it, the limit's reset.
func (s *sweeper) offerSince(ctx context.Context, ps *sweepPassState, since time.Time, cur gaterun.Cursor) (_ gaterun.Cursor, _ passStop, resume time.Time) {
	for {
		page, err := s.cfg.Runs.Unsettled(ctx, since, cur, listPage)
		if err != nil {
			s.cfg.Logger.Warn("sweep stopped: cannot list runs", "err", err)
			return cur, stopFailed, time.Time{}
		}
		ps.st.seenIn(page)
		done, stop, resume := s.offerPage(ctx, ps, page)
		if done > 0 {
			cur = gaterun.CursorAt(page[done-1])
		}
		if stop != stopDone {
			return cur, stop, resume
		}
		if len(page) < listPage {
			if ctx.Err() != nil {
				return cur, stopFailed, time.Time{}
			}
			return cur, stopDone, time.Time{}
		}
	}
}

// span is the runs page[from:to] of a page being offered.
type span struct{ from, to int }

// flown is a span's batch once its forge read answered.
type flown struct {
	sp   span
	sent sentBatch
}

// retried is a batch that timed out, while its runs are read again in
// smaller queries: its span, its size, and the time and runs of those
// queries so far.
type retried struct {
	sp       span
	size     int
	took     time.Duration
	answered int
}

// aSlowMoment reports whether the smaller queries that read all of a
// timed-out batch's runs again, taking took together, show the timeout
// was a slow moment of GitHub's rather than the batch's size: took is at
// most half of GitHub's timeout (longestBatch). One query asks for the
// same nodes as its parts and pays one query's fixed cost instead of
// several (forgesim's model: GraphQLBase plus GraphQLPerNode a node), so
// the whole batch would normally have answered in no more than that time.
func (s *sweeper) aSlowMoment(took time.Duration) bool {
	return took <= s.longestBatch()/2
}

// offerPage offers page in batches of the term's batch size, skipping the
// runs backing off at p.At (and, in the deep part, those the shallow part
// offered), with up to the sweeper's Concurrency batches in flight at
// once (the time budget keeping a whole GitHub timeout free for each).
// A batch that times out is offered again in halves before the pass goes
// past it, down to minSweepBatch (the term's size is halved with it, and
// taken back when the halves show a slow moment: aSlowMoment), the last
// batch the time budget has room for reading all that is left of them
// (lastRoom); one that times out at that size is passed, and in the
// shallow part kept for offerAgain. A rate limit, the time budget or ctx stops the sending of
// batches; those in flight are waited for. It returns how many runs of
// the page, from its start, were all offered (the cursor goes after the
// last), why it stopped, and, when a rate limit stopped it, the limit's
// reset.
func (s *sweeper) offerPage(ctx context.Context, ps *sweepPassState, page []gaterun.Run) (done int, stop passStop, resume time.Time) {
	var (
		pending []span // halves of timed-out batches, offered first, in page order
		next    int    // the first run in no span yet
		offered = make([]bool, len(page))
		answers = make(chan flown, s.cfg.Concurrency)
		retries []retried // timed-out batches being read again
		redoEnd int       // the end of the timed-out batches' runs
	)
	// retrying notes an answered span's batch against the timed-out
	// batches whose runs it reads again: one that got no answer (it timed
	// out too, or failed) ends them, and the size stays halved; once
	// one's runs have all been read in half GitHub's timeout or less
	// (aSlowMoment), the term's batch size goes back to that batch's.
	retrying := func(sp span, took time.Duration, read bool) {
		kept := retries[:0]
		for _, r := range retries {
			if sp.from < r.sp.from || sp.to > r.sp.to {
				kept = append(kept, r)
				continue
			}
			if !read {
				continue
			}
			r.took += took
			r.answered += sp.to - sp.from
			switch {
			case r.answered < r.sp.to-r.sp.from:
				kept = append(kept, r)
			case s.aSlowMoment(r.took):
				ps.st.batch = max(ps.st.batch, r.size)
				s.cfg.Logger.Debug("sweep batch size restored: its runs read again in halves answered quickly", "batch", r.size, "took", r.took)
			}
		}
		retries = kept
	}
	finish := func(sp span) {
		for i := sp.from; i < sp.to; i++ {
			offered[i] = true
		}
		for done < len(page) && offered[done] {
			done++
		}
	}
	answered := func(f flown) {
		ps.flying.Add(-1)
		limited, reset, timedOut := s.record(ps, f.sent)
		n := f.sp.to - f.sp.from
		if timedOut {
			ps.grown = s.cfg.Now()
		}
		if !limited {
			retrying(f.sp, f.sent.took, !timedOut && f.sent.read())
		}
		switch {
		case limited:
			if stop != stopLimited {
				stop, resume = stopLimited, reset
			}
			return
		case ps.st.suspended:
			if stop == stopDone {
				stop = stopFailed
			}
			return
		case timedOut && n > minSweepBatch:
			// The same runs again, in smaller queries: no longer offered,
			// so going round (which skips the runs the pass offered)
			// offers them too.
			for _, r := range f.sent.runs {
				delete(ps.offered, r.ID)
			}
			ps.timedOut = true
			redoEnd = max(redoEnd, f.sp.to)
			retries = append(retries, retried{sp: f.sp, size: min(n, ps.st.batch)})
			ps.st.batch = min(ps.st.batch, max(n/2, minSweepBatch))
			if ps.flying.Load() == 0 && len(pending) == 0 && next == f.sp.to {
				next = f.sp.from // one at a time: from the batch's start, in the new size
				return
			}
			pending = insertSpans(pending, halves(f.sp, ps.st.batch))
			return
		case timedOut && !ps.deep:
			// Already the smallest query: once more after the rest of the
			// shallow window (offerAgain).
			ps.again = append(ps.again, f.sent.runs...)
		}
		ps.timedOut = ps.timedOut || timedOut
		finish(f.sp)
	}
	for {
		for stop == stopDone && ps.flying.Load() < int64(s.cfg.Concurrency) && (len(pending) > 0 || next < len(page)) {
			if flying := ps.flying.Load(); flying > 0 && !s.roomForAnother(ps, flying) {
				break // the next batch waits for one in flight
			}
			if why, must := s.mustStop(ctx, ps); must {
				if ps.flying.Load() == 0 {
					stop = why
				}
				break // else judged again once those in flight answered
			}
			var sp span
			if len(pending) > 0 {
				sp, pending = pending[0], pending[1:]
			} else {
				s.growBatch(ps)
				sp = span{next, min(next+ps.st.batch, len(page))}
				next = sp.to
			}
			if sp.from < redoEnd && ps.flying.Load() == 0 && s.lastRoom(ps) {
				sp, pending, next = widened(sp, pending, next, redoEnd)
			}
			batch := s.pick(ps, page[sp.from:sp.to])
			if len(batch) == 0 {
				finish(sp)
				continue
			}
			ps.flying.Add(1)
			ps.sent++
			go func() { answers <- flown{sp, s.send(ctx, ps, batch)} }()
		}
		if ps.flying.Load() == 0 {
			return done, stop, resume
		}
		answered(<-answers)
	}
}

// widened is sp grown up to end, the end of the timed-out batches whose
// runs are read again, and to at most sweepBatch runs, the most one query
// reads (forge.MaxPullBatch; the halves of two batches timed out at once
// could span twice that): by the pending spans that follow it without a
// gap and, when none is left and sp ends at next, by the page's runs from
// next (next moves past them). It returns the grown span, the pending
// spans left and next.
func widened(sp span, pending []span, next, end int) (span, []span, int) {
	end = min(end, sp.from+sweepBatch)
	for len(pending) > 0 && pending[0].from == sp.to && pending[0].to <= end {
		sp.to, pending = pending[0].to, pending[1:]
	}
	if len(pending) == 0 && sp.to == next && end > next {
		sp.to, next = end, end
	}
	return sp, pending, next
}

// lastRoom reports whether the pass's next batch is the last its time
// budget has room for: after it, charged what the pass's batches took on
// average, a batch charged the longest one can be (longestBatch) could
// not begin early enough to end by the pass's deadline (nextBatch's
// rule). A batch is charged at most GitHub's timeout whatever its size, so
// while a timed-out batch's runs are read again in smaller queries, the
// last room reads all that is left of them in one (widened): a pass whose
// query and one half timed out, 20 of a 30 s budget, then reads the other
// 75 runs in its last 10 s rather than 25. It is false without a time
// budget, before any batch answered, and in an easing deep part allowed a
// set number of batches (ps.most), whose time the easing bounds. It is
// asked just after mustStop found room for the next batch.
func (s *sweeper) lastRoom(ps *sweepPassState) bool {
	if s.cfg.TimeShare < 0 || ps.most > 0 || ps.batches == 0 {
		return false
	}
	after := ps.st.roomAt(s.cfg.Now(), s.cfg.Minute, ps.budget, ps.meanBatch()+s.longestBatch())
	return after.Add(s.batchWait(ps)).After(ps.deadline)
}

// halves splits sp into runs of at most size, as even as can be.
func halves(sp span, size int) []span {
	n := sp.to - sp.from
	k := (n + size - 1) / size
	out := make([]span, 0, k)
	for i := range k {
		out = append(out, span{sp.from + i*n/k, sp.from + (i+1)*n/k})
	}
	return out
}

// insertSpans is pending with add inserted in page order.
func insertSpans(pending, add []span) []span {
	out := append(pending, add...)
	slices.SortFunc(out, func(a, b span) int { return a.from - b.from })
	return out
}

// roomForAnother reports whether one more batch, or forge call, may be
// begun now beside flying batches: the time budget has room for it now
// with a whole GitHub timeout (longestBatch) kept free for each of them,
// and it could end within the pass's interval.
func (s *sweeper) roomForAnother(ps *sweepPassState, flying int64) bool {
	if s.cfg.TimeShare < 0 {
		return true
	}
	now, longest := s.cfg.Now(), s.longestBatch()
	reserve := time.Duration(flying) * longest
	if now.Add(s.longestWait()).After(ps.deadline) || ps.budget < reserve+longest {
		return false
	}
	return !ps.st.roomAt(now, s.cfg.Minute, ps.budget-reserve, longest).After(now)
}

// mustStop reports whether the pass must stop before its next batch, after
// waiting for room in its time budget when it may (outOfTime), and why:
// stopFailed when ctx ended, stopTime when the pass is out of time.
func (s *sweeper) mustStop(ctx context.Context, ps *sweepPassState) (_ passStop, must bool) {
	if ctx.Err() != nil {
		return stopFailed, true
	}
	if ps.most > 0 && ps.sent >= ps.most {
		return stopTime, true
	}
	if s.outOfTime(ctx, ps) {
		if ctx.Err() != nil {
			return stopFailed, true
		}
		return stopTime, true
	}
	return stopDone, false
}

// offerAgain offers runs once more, in batches of the term's size, within
// the time budget: the shallow window's runs whose batch timed out at the
// smallest size (ps.again), so one slow answer does not leave them
// unchecked for the interval, or the deep window's whose offer failed
// (offerDeepAgain); a batch that fails again is not retried in the pass.
// It returns why it stopped and, when a rate limit stopped it, the
// limit's reset.
func (s *sweeper) offerAgain(ctx context.Context, ps *sweepPassState, runs []gaterun.Run) (_ passStop, resume time.Time) {
	for len(runs) > 0 {
		if stop, must := s.mustStop(ctx, ps); must {
			return stop, time.Time{}
		}
		n := min(ps.st.batch, len(runs))
		if _, limited, reset, _ := s.offerChunk(ctx, ps, runs[:n]); limited {
			return stopLimited, reset
		}
		if ps.st.suspended {
			return stopFailed, time.Time{}
		}
		runs = runs[n:]
	}
	return stopDone, time.Time{}
}

// offerDeepAgain offers again the deep window's runs whose offer failed
// in an earlier pass of the term (sweepTerm.deepAgain), in the order they
// failed, after the shallow window and before the deep one (offerAgain),
// but those the shallow part offered this pass: the shallow window reads
// them every pass. A run stays kept until an offer reads it, so one that
// keeps failing costs a place in a query each pass and never holds the
// deep cursor; the pass is Behind once it has gone DeepEvery intervals
// unchecked (againOverdue).
func (s *sweeper) offerDeepAgain(ctx context.Context, ps *sweepPassState) (passStop, time.Time) {
	var kept []againRun
	for _, a := range ps.st.deepAgain {
		if a.failed.Before(ps.p.At) && !ps.offered[a.run.ID] {
			kept = append(kept, a)
		}
	}
	slices.SortFunc(kept, func(a, b againRun) int { return a.seq - b.seq })
	runs := make([]gaterun.Run, len(kept))
	for i, a := range kept {
		runs[i] = a.run
	}
	return s.offerAgain(ctx, ps, runs)
}

// outOfTime waits, when it must, until one more batch fits in the time
// budget, and reports whether the pass is out of time instead: the budget
// would have room only so late that the batch, keeping the pass waiting
// as long as a batch can (longestWait) or the mean of the pass's batches
// if longer, could end past the pass's interval, where the watchdog would
// cut the pass short; or ctx ended while it waited.
//
// The budget holds in every window of one minute (cfg.Minute), across
// passes and whatever the interval: the batches begun within the minute
// before a batch, plus the longest that batch can be charged
// (longestBatch, not a guess at its time), are at most the budget. So
// however slow the next answer, the forge time of any minute stays within
// the budget.
func (s *sweeper) outOfTime(ctx context.Context, ps *sweepPassState) bool {
	if s.cfg.TimeShare < 0 {
		return false
	}
	at, next := s.nextBatch(ps)
	if at.Add(next).After(ps.deadline) {
		return true
	}
	if wait := at.Sub(s.cfg.Now()); wait > 0 {
		ps.p.Waited += wait
		return !clock.Sleep(ctx, wait)
	}
	return false
}

// nextBatch is when the pass's next batch could begin within the time
// budget (now, or once enough of the minute's batches have left its
// window), and how long it is judged to keep the pass waiting (batchWait).
func (s *sweeper) nextBatch(ps *sweepPassState) (at time.Time, wait time.Duration) {
	return ps.st.roomAt(s.cfg.Now(), s.cfg.Minute, ps.budget, s.longestBatch()), s.batchWait(ps)
}

// batchWait is how long the pass's next batch is judged to keep it
// waiting: the longest a batch can (longestWait), or the mean of the
// pass's batches if longer.
func (s *sweeper) batchWait(ps *sweepPassState) time.Duration {
	return max(s.longestWait(), ps.meanBatch())
}

// meanBatch is the mean forge time of the pass's answered batches; 0
// before any.
func (ps *sweepPassState) meanBatch() time.Duration {
	if ps.batches == 0 {
		return 0
	}
	return ps.p.ForgeTime / time.Duration(ps.batches)
}

// offerChunk offers, in one batch, the runs of chunk not backing off at
// p.At (nor offered by the shallow part, when ps.skip), and records the
// batch (record). It returns the runs it offered, and reports whether a
// forge rate limit stopped the batch, with the limit's reset, and whether
// the query timed out.
func (s *sweeper) offerChunk(ctx context.Context, ps *sweepPassState, chunk []gaterun.Run) (batch []gaterun.Run, limited bool, resume time.Time, timedOut bool) {
	batch = s.pick(ps, chunk)
	if len(batch) == 0 {
		return nil, false, time.Time{}, false
	}
	ps.sent++
	sent := s.send(ctx, ps, batch)
	limited, resume, timedOut = s.record(ps, sent)
	return batch, limited, resume, timedOut
}

// pick is the runs of chunk to offer: those not backing off at p.At
// (counted in p.BackingOff), nor, when ps.skip, offered by the shallow
// part.
func (s *sweeper) pick(ps *sweepPassState, chunk []gaterun.Run) []gaterun.Run {
	batch := make([]gaterun.Run, 0, len(chunk))
	for _, run := range chunk {
		switch {
		case ps.skip && ps.offered[run.ID]:
			continue
		case ps.p.At.Before(ps.st.backoff[run.ID].until):
			ps.p.BackingOff++
			continue
		}
		batch = append(batch, run)
	}
	return batch
}

// sentBatch is one batch offered: its runs, their outcomes and the
// error, and the forge time it took.
type sentBatch struct {
	runs []gaterun.Run
	outs []outcome
	err  error
	took time.Duration
}

// read reports whether the batch's forge read answered for any of its
// runs: not every outcome failed, or every failure came after an answered
// read (afterRead: a status write GitHub failed, say one it stopped at its
// timeout), or a forge call was refused for want of room (errNoRoom),
// which only a call after the answered read can be.
func (b sentBatch) read() bool {
	return slices.ContainsFunc(b.outs, func(o outcome) bool { return o != outcomeFailed }) ||
		errors.As(b.err, new(afterRead)) || errors.Is(b.err, errNoRoom)
}

// send offers batch in one forge read, timing it: each forge call is
// charged to the term's budget as it ends (chargeCall), and each after the
// batch's query (the status writes of drifted runs, and the REST reads of
// one changed since the listing) is made only when admitCall allows it;
// a run whose call was refused comes back failed, left for the next
// offer. It touches the pass's state only through those, so batches may
// be sent concurrently.
func (s *sweeper) send(ctx context.Context, ps *sweepPassState, batch []gaterun.Run) sentBatch {
	tctx, timer := withForgeTimer(ctx, s.cfg.Now, func() bool { return s.admitCall(ps) },
		func(began time.Time, took time.Duration, err error) { s.chargeCall(ps.st, began, took, err) })
	outs, err := s.cfg.Offer.OfferBatch(tctx, batch)
	return sentBatch{runs: batch, outs: outs, err: err, took: timer.Took()}
}

// admitCall reports whether a batch in flight may make one more forge
// call now: as for a batch (roomForAnother), the time budget has room for
// a whole GitHub timeout more with one kept free for each other batch in
// flight, and the call, however slow, would end within the pass's
// deadline. So a batch's writes keep the budget's guarantee as its query
// does, and a drifted backlog is repaired over passes, as many writes a
// minute as the budget leaves room for, rather than in one batch that
// outruns the budget and the interval.
func (s *sweeper) admitCall(ps *sweepPassState) bool {
	return s.roomForAnother(ps, max(ps.flying.Load()-1, 0))
}

// chargeCall charges a forge call of a sweep batch, begun at began, to the
// term's budget (sweepTerm.charge): what it took, but a query the forge
// client gave up on at its own deadline, before GitHub answered, may go on
// running at GitHub until its timeout and be charged for it (the
// simulator charges its whole modelled time): the budget counts it as the
// longest a batch can be charged.
func (s *sweeper) chargeCall(st *sweepTerm, began time.Time, took time.Duration, err error) {
	if errors.Is(err, forge.ErrQueryTimeout) && !errors.Is(err, forge.ErrServer) {
		took = max(took, s.longestBatch())
	}
	st.charge(began, took)
}

// record notes a sent batch's outcomes and counts it and its time in p
// (its forge calls were charged to the term's budget as they ended). It
// reports whether a forge rate limit stopped the batch, with the limit's
// reset (an interval from now when the limit names none), and whether the
// query timed out.
func (s *sweeper) record(ps *sweepPassState, b sentBatch) (limited bool, resume time.Time, timedOut bool) {
	st, p := ps.st, ps.p
	p.ForgeTime += b.took
	ps.batches++
	limited = errors.Is(b.err, forge.ErrRateLimited)
	if errors.Is(b.err, forge.ErrSuspended) {
		// GitHub blocks the installation: no batch after this one is
		// sent, and the installation is checked after the pass.
		st.suspended = true
		s.cfg.Logger.Warn("sweep stopped: GitHub refused a read for the installation's suspension", "err", b.err)
	}
	for i, out := range b.outs {
		st.note(b.runs[i], out, p.At, s.cfg.Interval)
		if !limited { // a limited batch's runs are offered again from the cursor before them
			st.noteDeep(b.runs[i], out, ps.deep, p.At, s.cfg.Interval)
		}
		if !ps.deep {
			ps.offered[b.runs[i].ID] = true
		}
	}
	p.Offered += len(b.runs)
	if !limited {
		p.ForgeReads++
		if !b.read() {
			p.ForgeErrors++
			// A 502 or 504 that came once the query had run as long as
			// GitHub lets one run is GitHub stopping the query: it was too
			// slow, GitHub is not down, so the batch is halved and no pass
			// is skipped for it. One that came sooner is a failing forge.
			stopped := errors.Is(b.err, forge.ErrQueryTimeout) && b.took >= s.longestBatch()
			if errors.Is(b.err, forge.ErrServer) && !stopped {
				p.ServerErrors++
			}
		}
		if errors.Is(b.err, forge.ErrQueryTimeout) {
			p.Timeouts++
			timedOut = true
		}
		return false, time.Time{}, timedOut
	}
	resume = s.cfg.Now().Add(s.cfg.Interval)
	rl := (*forge.RateLimitError)(nil)
	if errors.As(b.err, &rl) {
		resume = rl.Reset
		p.Limited = rl.Cause
	}
	s.cfg.Logger.Warn("sweep stopped: rate limited", "until", resume, "err", b.err)
	return true, resume, false
}
