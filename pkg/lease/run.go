package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"
)

// Spec says which lease Run serves and how. The zero values of Logger,
// Metrics, Health and OnEvent mean none; Name, Owner and TTL are required.
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
	// Metrics counts terms, step-downs and store calls. nil counts nothing.
	Metrics *Metrics
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
	// Acquire whose answer did not arrive, or [ReasonCanceled] after an
	// Acquire won once ctx was done, which starts no term.
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
// label of the lease_step_downs_total metric and the reason log attribute),
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

// Store operations as the metrics and logs name them.
const (
	opAcquire = "acquire"
	opRenew   = "renew"
	opRelease = "release"
)

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
// [ErrLost] is logged as such, not as a success. If work panicked, Run
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
// held in the network until after this owner's next term began deletes that
// term's lease: the next renewal, at most TTL/3 later, is refused and Run
// steps down, but a successor may have been elected in between. This is the
// store round trip among the bounds of the package doc (ADR-117 decision 4).
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
// spec.Metrics and spec.Health, when set, count and track the same.
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
	spec.Metrics.init(spec.Name)
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
type runner struct {
	st    Store
	spec  Spec
	work  func(context.Context)
	cut   time.Duration // TTL/3: every store call's bound and the renewal period
	retry time.Duration
	log   *slog.Logger

	down      bool      // in a store-unreachable episode
	downSince time.Time // when that episode started
}

// run campaigns until ctx is done, serving each term it wins.
func (r *runner) run(ctx context.Context) {
	for ctx.Err() == nil {
		start := time.Now()
		if sent, won := r.campaign(ctx); won {
			r.serve(ctx, sent)
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

// campaign sends one Acquire and reports its send instant and whether it won
// a term to serve. An unanswered Acquire is followed by a Release; so is a
// won one when ctx is done by the time it is answered.
func (r *runner) campaign(ctx context.Context) (sent time.Time, won bool) {
	sent = time.Now()
	err := r.call(ctx, opAcquire, true, func(ctx context.Context) error {
		var err error
		won, err = r.st.Acquire(ctx, r.spec.Name, r.spec.Owner, sent, r.spec.TTL)
		return err
	})
	switch {
	case err != nil:
		r.release(ctx, ReasonUnanswered)
		return sent, false
	case won && ctx.Err() != nil:
		r.release(ctx, ReasonCanceled)
		return sent, false
	}
	return sent, won
}

// renewal is the outcome of one Renew.
type renewal struct {
	sent time.Time
	ok   bool
	err  error
}

// serve runs one term whose first proven instant is sent: it starts work,
// renews, steps down, waits for work, and releases. It re-panics work's
// panic after the release.
func (r *runner) serve(ctx context.Context, sent time.Time) {
	r.event(Elected, "")
	r.log.Info("lease: elected", "ttl", r.spec.TTL, "step_down_by", r.deadline(sent).Sub(sent))
	r.spec.Metrics.elected(r.spec.Name)

	// The term's contexts keep ctx's values, not its cancellation: the term
	// ends when serve says so, and the release must outlive ctx.
	termCtx, endTerm := context.WithCancel(context.WithoutCancel(ctx))
	defer endTerm()
	workCtx, stopWork := context.WithCancel(termCtx)
	returned := make(chan *workPanic, 1)
	go r.runWork(workCtx, returned)

	deadline := r.deadline(sent)
	deadlineT := time.NewTimer(time.Until(deadline))
	defer deadlineT.Stop()
	next := sent.Add(r.cut)
	renewT := time.NewTimer(time.Until(next))
	defer renewT.Stop()
	results := make(chan renewal, 1)
	inFlight, due, failing := false, false, false
	startRenewal := func() {
		inFlight, due = true, false
		go func() { results <- r.renew(termCtx) }()
	}

	var reason string
	var panicked *workPanic
	workDone := false
	for reason == "" {
		select {
		case <-ctx.Done():
			reason = ReasonCanceled
		case panicked = <-returned:
			workDone = true
			reason = ReasonWorkReturned
			if panicked != nil {
				reason = ReasonWorkPanicked
			}
		case <-deadlineT.C:
			reason = ReasonDeadline
		case <-renewT.C:
			next = next.Add(r.cut)
			renewT.Reset(time.Until(next))
			if inFlight {
				due = true // the previous renewal answers by its bound, now
			} else {
				startRenewal()
			}
		case res := <-results:
			inFlight = false
			switch {
			case res.err != nil:
				if !failing {
					failing = true
					r.log.Warn("lease: renew failed", "error", res.err, "left", time.Until(deadline))
				}
			case !res.ok:
				reason = ReasonRefused
			default:
				failing = false
				deadline = r.deadline(res.sent)
				deadlineT.Reset(time.Until(deadline))
			}
			if due && reason == "" {
				startRenewal()
			}
		}
	}

	// Step down: from here work's context is cancelled and the lease is no
	// longer this owner's to use.
	stopWork()
	stuck := r.spec.Health.begin(r.spec.Name, r.spec.Owner)
	r.spec.Metrics.steppedDown(r.spec.Name, reason)
	level := slog.LevelInfo
	if reason == ReasonRefused || reason == ReasonDeadline || reason == ReasonWorkPanicked {
		level = slog.LevelWarn
	}
	if panicked != nil {
		r.log.Error("lease: work panicked", "panic", panicked.value, "stack", string(panicked.stack))
	}
	r.log.Log(ctx, level, "lease: stepped down", "reason", reason)
	r.event(SteppedDown, reason)

	endTerm() // cuts a renewal in flight; its answer proves nothing now
	if inFlight {
		<-results
	}
	if !workDone {
		panicked = <-returned
	}
	r.spec.Health.end(stuck)
	r.release(ctx, reason)
	if panicked != nil {
		panic(panicked.value)
	}
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
	res.err = r.call(termCtx, opRenew, true, func(ctx context.Context) error {
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
	return sent.Add(expiry(sent, r.spec.TTL).Sub(sent) - r.spec.TTL/6)
}

// release gives the lease up on a context detached from ctx, bounded by
// TTL/3, and logs the outcome. reason says why: a step-down reason, or
// ReasonUnanswered, whose failures the store-unreachable episode already
// reports.
func (r *runner) release(ctx context.Context, reason string) {
	err := r.call(context.WithoutCancel(ctx), opRelease, reason != ReasonUnanswered, func(ctx context.Context) error {
		return r.st.Release(ctx, r.spec.Name, r.spec.Owner)
	})
	switch {
	case err == nil:
		r.log.Info("lease: released", "reason", reason)
		r.event(Released, reason)
	case errors.Is(err, ErrLost) && reason == ReasonUnanswered:
		// The expected answer when the lost Acquire did not land: another
		// owner holds the lease. Every follower would warn on each attempt.
		r.log.Debug("lease: release after an unanswered attempt: another owner holds it", "error", err)
	case errors.Is(err, ErrLost):
		r.log.Warn("lease: release refused: the lease moved on", "reason", reason, "error", err)
	case reason != ReasonUnanswered:
		r.log.Warn("lease: release failed", "reason", reason, "error", err)
	}
}

// call runs one store call bounded by TTL/3 and by parent, times it, and,
// when episode is set, tracks the store-unreachable episode. The release
// after an unanswered attempt does not: the failed attempt opened the
// episode, and a release answering between failing attempts would split one
// outage into an episode per attempt. A call cut because parent is done
// (shutdown, step-down) says nothing about the store and is not counted.
// ErrLost is an answer, not a failure.
func (r *runner) call(parent context.Context, op string, episode bool, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(parent, r.cut)
	defer cancel()
	start := time.Now()
	err := f(ctx)
	if err != nil && parent.Err() != nil {
		return err
	}
	failed := err != nil && !errors.Is(err, ErrLost)
	r.spec.Metrics.observe(op, time.Since(start), failed)
	switch {
	case !episode:
	case failed && !r.down:
		r.down, r.downSince = true, start
		r.log.Warn("lease: store unreachable", "op", op, "error", err)
	case !failed && r.down:
		r.down = false
		r.log.Info("lease: store reachable again", "op", op, "down", time.Since(r.downSince))
	}
	return err
}

// event reports a transition to spec.OnEvent, when set.
func (r *runner) event(kind EventKind, reason string) {
	if r.spec.OnEvent != nil {
		r.spec.OnEvent(Event{Name: r.spec.Name, Owner: r.spec.Owner, Kind: kind, At: time.Now(), Reason: reason})
	}
}
