package lease

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// Spec says which lease Run serves and how. The zero values of Logger,
// Observer, Health and OnEvent mean none; Name, Owner and TTL are required.
type Spec struct {
	// Name is the lease's name, shared by every candidate for it.
	Name string
	// Owner names this candidate; each candidate needs its own.
	Owner string
	// TTL is how long a take or a renewal holds the lease. At least [MinTTL].
	TTL time.Duration
	// Retry is the campaign's period: one Acquire attempt every Retry, and
	// the pause after a term before the next attempt. 0 means TTL/3;
	// negative is invalid.
	Retry time.Duration
	// Logger receives the term's transitions. nil discards them.
	Logger *slog.Logger
	// Observer counts terms, step-downs and store calls (leaseprom.Metrics
	// is one). nil counts nothing.
	Observer Observer
	// Health tracks work that outlives its term. nil tracks nothing.
	Health *Health
	// OnEvent is called synchronously, from Run's goroutine, on each
	// transition. It must not block. nil means none.
	OnEvent func(Event)
}

// EventKind is the kind of a transition Run reports to Spec.OnEvent.
type EventKind int

const (
	// Elected: an Acquire won the lease; work is about to start.
	Elected EventKind = iota + 1
	// SteppedDown: the term ended; work's context has just been cancelled.
	// Event.Reason is one of the Reason constants.
	SteppedDown
	// Released: a Release was answered with success. Event.Reason is the
	// step-down reason of the term it ends, [ReasonUnanswered] after an
	// Acquire whose answer did not arrive (reported once per
	// store-unreachable episode, not once per attempt), or [ReasonCanceled]
	// after an Acquire won once ctx was done, which starts no term.
	Released
)

// String returns the kind's lower-case name.
func (k EventKind) String() string {
	switch k {
	case Elected:
		return "elected"
	case SteppedDown:
		return "stepped down"
	case Released:
		return "released"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one transition of a Run. At is the instant Run observed it.
type Event struct {
	Name, Owner string
	Kind        EventKind
	At          time.Time
	Reason      string
}

// Reasons a term ends (Event.Reason of SteppedDown and Released, the reason
// of [Observer.SteppedDown] and the reason log attribute),
// and ReasonUnanswered, the reason of the release that follows an Acquire
// whose answer did not arrive.
const (
	ReasonRefused      = "refused"       // a renewal was refused: the lease moved on
	ReasonDeadline     = "deadline"      // no renewal proven within TTL − TTL/6 of its send
	ReasonCanceled     = "ctx_done"      // Run's context is done
	ReasonWorkReturned = "work_returned" // work returned while the lease was held
	ReasonWorkPanicked = "work_panicked" // work panicked; Run re-panics after the release
	ReasonUnanswered   = "unanswered_acquire"
)

// Store operations as [Observer.StoreCall] and the logs name them.
const (
	OpAcquire = "acquire"
	OpRenew   = "renew"
	OpRelease = "release"
)

// Observer receives what Run reports for counting: runs, terms and store
// calls. Package iterion.dev/iterion/pkg/lease/leaseprom implements it with
// Prometheus metrics. One Observer may serve every Run of a process, for the
// same lease or different ones, so its methods must be safe for concurrent
// use. Run calls them synchronously, from its own goroutines; they must not
// block.
type Observer interface {
	// Campaigning is called once per Run, after its arguments are checked
	// and before its first store call, with the lease's name.
	Campaigning(name string)
	// TermStarted is called when Run wins a term of the lease name, after
	// the [Elected] event and before work starts.
	TermStarted(name string)
	// SteppedDown is called once for each TermStarted, when the term ends
	// and work's context has just been cancelled, with one of the Reason
	// constants, before the [SteppedDown] event.
	SteppedDown(name, reason string)
	// StoreCall is called once per store call of the lease name that got an
	// answer or failed on its own: op is [OpAcquire], [OpRenew] or
	// [OpRelease], d its latency, failed true when it got no answer (an
	// error other than [ErrLost], which is an answer). A call cut because
	// Run's context was done or the term ended says nothing about the store
	// and is not reported.
	StoreCall(name, op string, d time.Duration, failed bool)
}

// Run serves terms of the lease spec.Name for spec.Owner on st, running work
// for each term, until ctx is done. It returns an error only for an unusable
// argument (wrapping [ErrInvalid] and naming the field), before any store
// call; otherwise it returns nil once ctx is done and any term has ended and
// been released. Store failures are never returned: Run logs them and
// retries. Run is safe to call concurrently, for the same lease with distinct
// owners or for different leases.
//
// # Campaign
//
// Run sends one Acquire every Retry (0 means TTL/3), each bounded by a
// timeout of TTL/3, never by Retry. Every Store call gets as now the instant
// it is sent. A store that cannot answer elects nobody: work does not start.
// An Acquire whose answer did not arrive (an error or the timeout) may still
// have landed, so Run follows it with a Release, so that a write that landed
// does not keep a successor waiting a TTL. The residual case is a write that
// lands after that Release: it keeps the lease one TTL, unrenewed, which is
// the bound of a crash. An Acquire answered with a win once ctx is done
// starts no term: Run releases the lease at once.
//
// # Term
//
// Once elected, Run calls work in its own goroutine with a context that is
// cancelled when the term ends, and renews every TTL/3, each renewal bounded
// by TTL/3, from the instant the winning Acquire was sent. The term ends
// (Run steps down, cancelling work's context) when:
//   - a renewal is refused: the lease moved on;
//   - no renewal Run can prove succeeded was sent within TTL − TTL/6 before
//     now. The store stamps a renewal sent at s to expire at
//     trunc(trunc(s)+TTL) (milliseconds), so the deadline is that expiry
//     minus TTL/6: the holder is gone TTL/6 before any successor can take
//     the lease. The winning Acquire's send is the first proven instant; a
//     successful renewal moves the deadline, a failed or unanswered one
//     does not end the term but leaves the deadline running;
//   - work returns (or panics);
//   - ctx is done.
//
// After stepping down, Run waits for work to return, then releases the lease
// on a context detached from ctx with its own TTL/3 timeout, so a rollout
// hands over within one Retry instead of a TTL. A release refused with
// [ErrLost] is logged as such, not as a success: a warning, except after a
// refused renewal or an unanswered attempt, where ErrLost is the expected
// answer (the step-down or the episode already warned), a debug line. If work panicked, Run
// re-panics with its value after the release. Timers use the monotonic clock.
//
// The lease is sticky: a healthy holder keeps its term for as long as work
// runs. Work returning ends the term; unless ctx is done, Run then campaigns
// again, Retry after the term ended. Each new term calls work afresh, so
// state built in work's closure starts anew with each term.
//
// # Limits
//
// The timing above bounds what Run does, not what the network does with a
// call after Run gave up on it. Besides the late Acquire above, a Release
// may be held in the network until after this owner's next term began.
// When st is a [TermStore] (both twins are), each attempt draws a random
// token, acquires with AcquireTerm and releases with ReleaseTerm, so that
// late Release deletes nothing. With a plain Store, Run falls back to
// Release, and the late Release deletes the later term's lease: its next
// renewal, at most TTL/3 later, is refused and Run steps down, but a
// successor may have been elected in between and overlap it for up to
// TTL/3. This is the store round trip among the bounds of the package doc
// (docs/design.md, decision 4).
//
// The deadline and a refused renewal cancel work's context from their own
// goroutines, before anything is logged: a slow log sink delays neither.
// Likewise a granted renewal moves the deadline from its own goroutine as
// soon as the store answers, so a term on a starved machine is not stepped
// down for a grant Run's goroutine had yet to handle.
//
// # Worked example
//
// TTL 3 minutes, Retry 1 minute. Attempts go out once a minute and each is cut
// after 1 minute. A holder renews every minute; a renewal is cut after a
// minute; the holder steps down 2m30s after the send of the last renewal it
// can prove succeeded, 30 s before the lease could expire in the store. A
// successor takes over within one Retry (1 minute) of a clean stop, and
// within TTL + Retry (4 minutes) of a crash.
//
// # Observing it
//
// Run logs through spec.Logger with attributes lease and owner: elected,
// renew failed (with the time left before the step-down), stepped down (with
// its reason), released, release failed, store unreachable and store
// reachable again. Each is logged once per episode, not once per attempt.
// spec.Observer and spec.Health, when set, count and track the same.
func Run(ctx context.Context, st Store, spec Spec, work func(context.Context)) error {
	if err := validate(st, spec, work); err != nil {
		return err
	}
	r := &runner{
		st:    st,
		spec:  spec,
		work:  work,
		cut:   spec.TTL / 3,
		retry: spec.Retry,
		log:   spec.Logger,
	}
	if r.retry == 0 {
		r.retry = r.cut
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.log = r.log.With("lease", spec.Name, "owner", spec.Owner)
	r.terms, _ = st.(TermStore)
	if spec.Observer != nil {
		spec.Observer.Campaigning(spec.Name)
	}
	r.run(ctx)
	return nil
}

// validate checks Run's arguments, naming the first bad field.
func validate(st Store, spec Spec, work func(context.Context)) error {
	switch {
	case st == nil:
		return fmt.Errorf("%w: store is nil", ErrInvalid)
	case work == nil:
		return fmt.Errorf("%w: work is nil", ErrInvalid)
	case strings.TrimSpace(spec.Name) == "":
		return fmt.Errorf("%w: Spec.Name %q is empty", ErrInvalid, spec.Name)
	case strings.TrimSpace(spec.Owner) == "":
		return fmt.Errorf("%w: Spec.Owner %q is empty", ErrInvalid, spec.Owner)
	case spec.TTL < MinTTL:
		return fmt.Errorf("%w: Spec.TTL %v is under %v", ErrInvalid, spec.TTL, MinTTL)
	case spec.Retry < 0:
		return fmt.Errorf("%w: Spec.Retry %v is negative", ErrInvalid, spec.Retry)
	}
	return nil
}

// runner is one Run's state. Run's goroutine owns it; a term's renewal
// goroutine uses it (call's episode fields) only while Run's goroutine waits
// for that renewal's answer on a channel, so they never touch it at once.
// A term's own state is a term.
type runner struct {
	st    Store
	spec  Spec
	work  func(context.Context)
	cut   time.Duration // TTL/3: every store call's bound and the renewal period
	retry time.Duration
	log   *slog.Logger

	terms TermStore // st as a TermStore, when it is one; nil otherwise

	down      bool      // in a store-unreachable episode
	downSince time.Time // when that episode started
	// quiet: this episode's release after an unanswered attempt was already
	// reported; the next ones in the same episode are not.
	quiet bool
}

// run campaigns until ctx is done, serving each term it wins.
func (r *runner) run(ctx context.Context) {
	for ctx.Err() == nil {
		start := time.Now()
		if sent, token, won := r.campaign(ctx); won {
			r.serve(ctx, sent, token)
			start = time.Now()
		}
		t := time.NewTimer(time.Until(start.Add(r.retry)))
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// campaign sends one Acquire and reports its send instant, its term token
// ("" when the store is no TermStore) and whether it won a term to serve. An
// unanswered Acquire is followed by a Release; so is a won one when ctx is
// done by the time it is answered.
func (r *runner) campaign(ctx context.Context) (sent time.Time, token string, won bool) {
	sent = time.Now()
	if r.terms != nil {
		token = rand.Text()
	}
	err := r.call(ctx, OpAcquire, func(ctx context.Context) error {
		var err error
		if r.terms != nil {
			won, err = r.terms.AcquireTerm(ctx, r.spec.Name, r.spec.Owner, sent, r.spec.TTL, token)
		} else {
			won, err = r.st.Acquire(ctx, r.spec.Name, r.spec.Owner, sent, r.spec.TTL)
		}
		return err
	})
	switch {
	case err != nil:
		r.release(ctx, ReasonUnanswered, token)
		return sent, token, false
	case won && ctx.Err() != nil:
		r.release(ctx, ReasonCanceled, token)
		return sent, token, false
	}
	return sent, token, won
}

// renewal is the outcome of one Renew.
type renewal struct {
	sent time.Time
	ok   bool
	err  error
}

// serve runs one term whose first proven instant is sent and whose term
// token is token: it starts work, renews, steps down, waits for work, and
// releases. It re-panics work's panic after the release.
func (r *runner) serve(ctx context.Context, sent time.Time, token string) {
	r.event(Elected, "")
	r.log.Info("lease: elected", "ttl", r.spec.TTL, "step_down_by", r.deadline(sent).Sub(sent))
	if r.spec.Observer != nil {
		r.spec.Observer.TermStarted(r.spec.Name)
	}
	t := r.startTerm(ctx, sent, token)
	defer t.close()
	t.stepDown(ctx, t.await(ctx))
}

// term is one term, from the winning Acquire to the release. Run's goroutine
// owns it; each method handles one event of the term, and await says which.
type term struct {
	r        *runner
	ctx      context.Context    // ctx's values, not its cancellation: the release outlives ctx
	end      context.CancelFunc // cancels ctx: cuts a renewal in flight
	stopWork context.CancelFunc // cancels work's context, a child of ctx; use stopFor
	// mu guards cause (the reason the first stopFor gave), deadline and
	// deadlineT. The deadline's timer and a renewal's goroutine act
	// without waiting for Run's goroutine: the timer steps down, a refused
	// renewal steps down, a granted one moves the deadline.
	mu    sync.Mutex
	cause string
	token string // the term's token ("" without a TermStore)

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
	// goroutine, so that nothing Run's goroutine is doing (a slow log sink)
	// delays the step-down, then signals expired. A granted renewal moves
	// it from the renewal's goroutine (prove), so the grant does not wait
	// for Run's goroutine either.
	deadlineT *time.Timer
	expired   chan struct{}
	next      time.Time // the next renewal: every TTL/3 from the winning send
	renewT    *time.Timer
}

// startTerm starts work in its own goroutine and the term's timers, from
// sent, the winning Acquire's send; token is the term's.
func (r *runner) startTerm(ctx context.Context, sent time.Time, token string) *term {
	// The term's contexts keep ctx's values, not its cancellation: the term
	// ends when the term says so, and the release must outlive ctx.
	termCtx, end := context.WithCancel(context.WithoutCancel(ctx))
	workCtx, stopWork := context.WithCancel(termCtx)
	t := &term{r: r, ctx: termCtx, end: end, stopWork: stopWork, token: token,
		returned: make(chan *workPanic, 1), expired: make(chan struct{}, 1)}
	go r.runWork(workCtx, t.returned)
	t.deadline = r.deadline(sent)
	t.deadlineT = time.AfterFunc(time.Until(t.deadline), func() {
		t.stopFor(ReasonDeadline)
		t.expired <- struct{}{}
	})
	t.next = sent.Add(r.cut)
	t.renewT = time.NewTimer(time.Until(t.next))
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
			reason = ReasonCanceled
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
		t.cause = reason
	}
	t.stopWork()
}

// tick is the renewal period's: it sends a renewal or, while one is in
// flight, marks one due when it answers (by its bound, now).
func (t *term) tick() {
	t.next = t.next.Add(t.r.cut)
	t.renewT.Reset(time.Until(t.next))
	if t.answer != nil {
		t.due = true
		return
	}
	t.sendRenewal()
}

// sendRenewal sends one Renew in its own goroutine; its answer comes on
// t.answer.
func (t *term) sendRenewal() {
	answer := make(chan renewal, 1)
	t.answer, t.due = answer, false
	go func() {
		res := t.r.renew(t.ctx)
		switch {
		case res.err == nil && !res.ok:
			// Refused: the lease moved on. Step down here, not once Run's
			// goroutine (perhaps in a slow log call) gets the answer.
			t.stopFor(ReasonRefused)
		case res.err == nil:
			// Granted: the deadline moves now, not once Run's goroutine
			// (perhaps waiting for a CPU) gets the answer.
			t.prove(res.sent)
		}
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
		t.deadline = t.r.deadline(sent)
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
			t.r.log.Warn("lease: renew failed", "err", res.err, "left", t.left())
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
	r := t.r
	// From here work's context is cancelled and the lease is no longer this
	// owner's to use. The step-down is reported before it is logged, so a
	// slow log sink delays neither.
	t.stopFor(reason)
	stuck := r.spec.Health.begin(r.spec.Name, r.spec.Owner)
	if r.spec.Observer != nil {
		r.spec.Observer.SteppedDown(r.spec.Name, reason)
	}
	level := slog.LevelInfo
	if reason == ReasonRefused || reason == ReasonDeadline || reason == ReasonWorkPanicked {
		level = slog.LevelWarn
	}
	r.event(SteppedDown, reason)
	if t.panicked != nil {
		r.log.Error("lease: work panicked", "panic", t.panicked.value, "stack", string(t.panicked.stack))
	}
	r.log.Log(ctx, level, "lease: stepped down", "reason", reason)

	t.end() // cuts a renewal in flight; its answer proves nothing now
	if t.answer != nil {
		<-t.answer
	}
	if t.returned != nil {
		t.panicked = <-t.returned
	}
	r.spec.Health.end(stuck)
	r.release(ctx, reason, t.token)
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
func (r *runner) runWork(ctx context.Context, returned chan<- *workPanic) {
	defer func() {
		if p := recover(); p != nil {
			returned <- &workPanic{value: p, stack: debug.Stack()}
			return
		}
		returned <- nil
	}()
	r.work(ctx)
}

// renew sends one Renew, bounded by TTL/3 and by termCtx.
func (r *runner) renew(termCtx context.Context) renewal {
	res := renewal{sent: time.Now()}
	res.err = r.call(termCtx, OpRenew, func(ctx context.Context) error {
		var err error
		res.ok, err = r.st.Renew(ctx, r.spec.Name, r.spec.Owner, res.sent, r.spec.TTL)
		return err
	})
	return res
}

// deadline is the instant to step down by when the last proven renewal (or
// the winning Acquire) was sent at sent: the store's expiry for it, minus
// TTL/6, carried on sent's monotonic reading. The expiry is truncated to the
// millisecond, up to 1 ms before sent+TTL (more with a sub-millisecond TTL).
func (r *runner) deadline(sent time.Time) time.Time {
	return sent.Add(Expiry(sent, r.spec.TTL).Sub(sent) - r.spec.TTL/6)
}

// release gives the lease up on a context detached from ctx, bounded by
// TTL/3, and logs the outcome. reason says why: a step-down reason, or
// ReasonUnanswered, whose failures the store-unreachable episode already
// reports. token is the term's (or the attempt's): with a TermStore, the
// release deletes only the lease that token's Acquire took.
func (r *runner) release(ctx context.Context, reason, token string) {
	send := r.call
	if reason == ReasonUnanswered {
		send = r.callOutsideEpisode
	}
	err := send(context.WithoutCancel(ctx), OpRelease, func(ctx context.Context) error {
		if r.terms != nil {
			return r.terms.ReleaseTerm(ctx, r.spec.Name, r.spec.Owner, token)
		}
		return r.st.Release(ctx, r.spec.Name, r.spec.Owner)
	})
	switch {
	case err == nil && reason == ReasonUnanswered && r.down && r.quiet:
		// This episode's first such release was reported: a store that
		// fails every Acquire but answers its Release would report one
		// per attempt.
	case err == nil:
		if reason == ReasonUnanswered && r.down {
			r.quiet = true
		}
		r.log.Info("lease: released", "reason", reason)
		r.event(Released, reason)
	case errors.Is(err, ErrLost) && (reason == ReasonUnanswered || reason == ReasonRefused):
		// The expected answer: after an unanswered attempt that did not
		// land, or a refused renewal, another owner holds the lease. The
		// step-down already warned of the refusal, and every follower
		// would warn on each attempt.
		r.log.Debug("lease: release refused as expected: another owner holds it", "reason", reason, "err", err)
	case errors.Is(err, ErrLost):
		r.log.Warn("lease: release refused: the lease moved on", "reason", reason, "err", err)
	case reason != ReasonUnanswered:
		r.log.Warn("lease: release failed", "reason", reason, "err", err)
	}
}

// call sends one store call (see callOutsideEpisode) and tracks the
// store-unreachable episode with its outcome: the first failure opens it,
// the first answer closes it, each logged once. A call cut because parent is
// done (shutdown, step-down) says nothing about the store and changes
// nothing. ErrLost is an answer, not a failure.
func (r *runner) call(parent context.Context, op string, f func(context.Context) error) error {
	start := time.Now()
	err := r.callOutsideEpisode(parent, op, f)
	if cutShort(parent, err) {
		return err
	}
	failed := err != nil && !errors.Is(err, ErrLost)
	switch {
	case failed && !r.down:
		r.down, r.downSince, r.quiet = true, start, false
		r.log.Warn("lease: store unreachable", "op", op, "err", err)
	case !failed && r.down:
		r.down = false
		r.log.Info("lease: store reachable again", "op", op, "down", time.Since(r.downSince))
	}
	return err
}

// callOutsideEpisode runs one store call bounded by TTL/3 and by parent, and
// reports it to spec.Observer, unless cut short. It leaves the
// store-unreachable episode alone: the release after an unanswered attempt
// uses it, since the failed attempt opened the episode, and a release
// answering between failing attempts would split one outage into an episode
// per attempt.
func (r *runner) callOutsideEpisode(parent context.Context, op string, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(parent, r.cut)
	defer cancel()
	start := time.Now()
	err := f(ctx)
	if cutShort(parent, err) || r.spec.Observer == nil {
		return err
	}
	r.spec.Observer.StoreCall(r.spec.Name, op, time.Since(start), err != nil && !errors.Is(err, ErrLost))
	return err
}

// cutShort reports whether a call failed because parent is done, which says
// nothing about the store.
func cutShort(parent context.Context, err error) bool {
	return err != nil && parent.Err() != nil
}

// event reports a transition to spec.OnEvent, when set.
func (r *runner) event(kind EventKind, reason string) {
	if r.spec.OnEvent != nil {
		r.spec.OnEvent(Event{Name: r.spec.Name, Owner: r.spec.Owner, Kind: kind, At: time.Now(), Reason: reason})
	}
}
