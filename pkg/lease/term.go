package lease

import (
	"context"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

// serve runs one term of l's lease whose first proven instant is sent and
// whose term token is token: it starts work, renews, steps down, waits for
// work, and releases. It re-panics work's panic after the release.
func (l *lessee) serve(ctx context.Context, sent time.Time, token string, work func(context.Context)) {
	l.event(Event{Kind: Elected})
	l.log.Info("lease: elected", "ttl", l.ttl, "step_down_by", l.deadline(sent).Sub(sent))
	t := l.startTerm(ctx, sent, token, work)
	defer t.close()
	t.stepDown(ctx, t.await(ctx))
}

// term is one term, from the winning Acquire to the release, over its
// lessee. The goroutine that serves it owns it; each method handles one
// event of the term, and await says which.
type term struct {
	l        *lessee
	ctx      context.Context    // ctx's values, not its cancellation: the release outlives ctx
	end      context.CancelFunc // cancels ctx: cuts a renewal in flight
	stopWork context.CancelFunc // cancels work's context, a child of ctx; use stopFor
	// mu guards cause (the reason the first stopFor gave), stopped,
	// deadline and deadlineT. The deadline's timer and a renewal's
	// goroutine act without waiting for the term's goroutine: the timer
	// steps down, a refused renewal steps down, a granted one moves the
	// deadline.
	mu      sync.Mutex
	cause   string
	stopped time.Time  // when the first stopFor cancelled work's context
	stuck   *stuckWork // Health's record of work from then until it returns
	token   string     // the term's token ("" without a TermStore)

	// returned delivers work's end: nil, or its panic. Once received, it is
	// nil (a nil channel never delivers) and panicked holds what it was.
	returned chan *workPanic
	panicked *workPanic
	// answer delivers the answer of the renewal in flight; nil when none is.
	answer chan renewal
	// due: a tick came while a renewal was in flight; send at its answer.
	due bool
	// failing: the last renewal failed and "renew failed" was logged, once
	// per episode.
	failing bool

	deadline time.Time // step down by: the last proven send's expiry − TTL/6
	// deadlineT cancels work's context at the deadline from its own
	// goroutine, so that nothing the term's goroutine is doing (a slow log sink)
	// delays the step-down, then signals expired. A granted renewal moves
	// it from the renewal's goroutine (prove), so the grant does not wait
	// for the term's goroutine either.
	deadlineT *time.Timer
	expired   chan struct{}
	next      time.Time // the next renewal: every TTL/3 from the winning send
	renewT    *time.Timer
}

// startTerm starts the term's timers, from sent, the winning Acquire's
// send, and then work in its own goroutine; token is the term's. A term
// whose deadline has passed by then (the win answered after its cut, or
// Run's goroutine held up on the way, as by a slow log sink) is over
// before it starts: work is not called, and the term steps down for
// ReasonDeadline, as a renewal answered past the deadline proves nothing.
func (l *lessee) startTerm(ctx context.Context, sent time.Time, token string, work func(context.Context)) *term {
	// The term's contexts keep ctx's values, not its cancellation: the term
	// ends when the term says so, and the release must outlive ctx.
	termCtx, end := context.WithCancel(context.WithoutCancel(ctx))
	workCtx, stopWork := context.WithCancel(termCtx)
	t := &term{l: l, ctx: termCtx, end: end, stopWork: stopWork, token: token,
		returned: make(chan *workPanic, 1), expired: make(chan struct{}, 1)}
	// The deadline's timer is armed before work starts, so that it cancels
	// work's context at the deadline however late work starts.
	t.deadline = l.deadline(sent)
	t.deadlineT = time.AfterFunc(time.Until(t.deadline), func() {
		t.stopFor(ReasonDeadline)
		t.expired <- struct{}{}
	})
	t.next = sent.Add(l.cut)
	t.renewT = time.NewTimer(time.Until(t.next))
	if !time.Now().Before(t.deadline) {
		t.stopFor(ReasonDeadline)
		t.returned <- nil
		return t
	}
	go runWork(workCtx, work, t.returned)
	return t
}

// await handles the term's events until one ends it, and returns why: one
// of the Reason constants, the step-down's cause when the deadline or a
// refusal already stepped the term down (work returning, say, is then its
// consequence).
func (t *term) await(ctx context.Context) string {
	for {
		var reason string
		select {
		case <-ctx.Done():
			reason = doneReason(ctx)
		case p := <-t.returned:
			reason = t.workReturned(p)
		case <-t.expired:
			reason = ReasonDeadline
		case <-t.renewT.C:
			t.tick()
		case res := <-t.answer:
			reason = t.answered(res)
		}
		if reason == "" {
			continue
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.cause != "" {
			return t.cause
		}
		return reason
	}
}

// stopFor cancels work's context for reason; the first call's reason is
// the step-down's cause. Safe for concurrent use.
func (t *term) stopFor(reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cause == "" {
		t.cause, t.stopped = reason, time.Now()
		// Health counts from the cancellation, not from when the term's
		// goroutine gets to the step-down.
		t.stuck = t.l.health.begin(t.l.name, t.l.owner)
	}
	t.stopWork()
}

// over reports whether work's context was cancelled: the term is over.
// Safe for concurrent use.
func (t *term) over() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cause != ""
}

// margin is how long before the store's expiry of the last proven send
// work's context was cancelled: the deadline plus TTL/6, less the
// step-down's instant. Zero or less: the step-down came when a successor
// could already be elected. Call it after stopFor. Safe for concurrent use.
func (t *term) margin() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.deadline.Add(t.l.ttl / 6).Sub(t.stopped)
}

// tick is the renewal period's: it sends a renewal or, while one is in
// flight, marks one due when it answers (by its bound, now).
func (t *term) tick() {
	t.next = t.next.Add(t.l.cut)
	t.renewT.Reset(time.Until(t.next))
	if t.answer != nil {
		t.due = true
		return
	}
	t.sendRenewal()
}

// sendRenewal sends one Renew in its own goroutine, which acts on the
// answer (a refusal steps down, a grant moves the deadline), then tracks
// the store-unreachable episode, then hands the answer on t.answer. It
// sends nothing once work's context was cancelled: the term is over, and
// await ends it next.
func (t *term) sendRenewal() {
	if t.over() {
		t.due = false
		return
	}
	answer := make(chan renewal, 1)
	t.answer, t.due = answer, false
	go func() {
		res := t.l.renew(t.ctx)
		switch {
		case res.err == nil && !res.ok:
			// Refused: the lease moved on. Step down here, not once the
			// term's goroutine (perhaps in a slow log call) gets the answer.
			t.stopFor(ReasonRefused)
		case res.err == nil:
			// Granted: the deadline moves now, not once the term's goroutine
			// (perhaps waiting for a CPU) gets the answer.
			t.prove(res.sent)
		}
		// Only then the episode, whose end may be a log line.
		t.l.track(t.ctx, OpRenew, res.sent, res.err)
		answer <- res
	}()
}

// prove moves the deadline to the one a granted renewal sent at sent
// proves. A deadline that already fired stepped the term down, and stays:
// await receives it next. Safe for concurrent use.
func (t *term) prove(sent time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.deadlineT.Stop() {
		t.deadline = t.l.deadline(sent)
		t.deadlineT.Reset(time.Until(t.deadline))
	}
}

// left is the time until the deadline. Safe for concurrent use.
func (t *term) left() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return time.Until(t.deadline)
}

// answered handles a renewal's answer and returns ReasonRefused when it ends
// the term. A success (which moved the deadline already, prove) ends a
// failing episode; a failure leaves the deadline running.
func (t *term) answered(res renewal) (reason string) {
	t.answer = nil
	switch {
	case res.err != nil:
		if !t.failing {
			t.failing = true
			t.l.log.Warn("lease: renew failed", "err", res.err, "left", t.left())
		}
	case !res.ok:
		return ReasonRefused
	default:
		t.failing = false
	}
	if t.due {
		t.sendRenewal()
	}
	return ""
}

// workReturned handles work's end, p its panic or nil, which ends the term.
func (t *term) workReturned(p *workPanic) (reason string) {
	t.returned, t.panicked = nil, p
	if p != nil {
		return ReasonWorkPanicked
	}
	return ReasonWorkReturned
}

// stepDown ends the term for reason: it cancels work's context, reports the
// step-down, waits for a renewal in flight and for work, and releases. It
// re-panics work's panic after the release.
func (t *term) stepDown(ctx context.Context, reason string) {
	l := t.l
	// From here work's context is cancelled and the lease is no longer this
	// owner's to use. The step-down is reported before it is logged, so a
	// slow log sink delays neither.
	t.stopFor(reason)
	margin := t.margin()
	level := slog.LevelInfo
	switch {
	case margin <= 0:
		// Fail-closed did not hold: a successor may have overlapped the
		// term (a stalled process, or a win handled past its deadline).
		level = slog.LevelError
	case reason == ReasonRefused || reason == ReasonDeadline || reason == ReasonWorkPanicked:
		level = slog.LevelWarn
	}
	l.event(Event{Kind: SteppedDown, Reason: reason, Margin: margin})
	if t.panicked != nil {
		l.log.Error("lease: work panicked", "panic", t.panicked.value, "stack", string(t.panicked.stack))
	}
	l.log.Log(ctx, level, "lease: stepped down", "reason", reason, "before_expiry", margin)

	t.end() // cuts a renewal in flight; its answer proves nothing now
	if t.answer != nil {
		<-t.answer
	}
	if t.returned != nil {
		t.panicked = <-t.returned
	}
	l.health.end(t.stuck) // stopFor set it, and nothing writes it after
	l.release(ctx, reason, t.token)
	if t.panicked != nil {
		panic(t.panicked.value)
	}
}

// close stops the term's timers and ends the term, also when stepDown
// panics.
func (t *term) close() {
	t.mu.Lock()
	t.deadlineT.Stop()
	t.mu.Unlock()
	t.renewT.Stop()
	t.end()
}

// workPanic carries a panic out of work's goroutine.
type workPanic struct {
	value any
	stack []byte
}

// runWork calls work and reports on returned how it ended: nil when it
// returned (or called runtime.Goexit), the panic and its stack otherwise.
func runWork(ctx context.Context, work func(context.Context), returned chan<- *workPanic) {
	defer func() {
		if p := recover(); p != nil {
			returned <- &workPanic{value: p, stack: debug.Stack()}
			return
		}
		returned <- nil
	}()
	work(ctx)
}
