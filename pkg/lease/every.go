package lease

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrPassTimeout is the cause of a pass's context ending at its timeout
// (context.Cause): the pass outlived its deadline and was cancelled.
var ErrPassTimeout = errors.New("lease: pass outlived its deadline")

// ErrStalled is what [Every] returns when the term's work completed no pass
// for Watchdog.StallAfter passes in a row: the holder steps down, so
// another replica may try.
var ErrStalled = errors.New("lease: no pass completed; stepping down")

// Watchdog bounds the passes of an elected net's term ([Every]). The zero
// Watchdog bounds nothing: passes end with the term's context, and the
// term with ctx.
type Watchdog struct {
	// Name names the net in errors and in Health.
	Name string
	// PassTimeout bounds each pass: its context ends PassTimeout after the
	// pass began, with cause ErrPassTimeout. 0: no bound but the term's.
	PassTimeout time.Duration
	// StallAfter ends the term when this many passes in a row did not
	// complete (timed out or reported incomplete); a pass stopped by a rate
	// limit (a non-zero resume) counts neither way, since every replica
	// shares the forge's budget. 0: never.
	StallAfter int
	// Health, when set, fails its Check while a pass has run past its
	// timeout plus the Health's bound: a pass that ignores its
	// cancellation, which neither Every nor Run can end.
	Health *Health
	// TimedOut is called after each pass whose timeout cancelled it; nil:
	// none. It must not block.
	TimedOut func()
	// Stalled is called when Every ends the term for StallAfter failed
	// passes, before it returns; nil: none. It must not block.
	Stalled func()
}

// Every is the cadence of an elected net's term: it calls pass once per
// interval until ctx is done, the first call one interval after Every
// starts (docs/design.md, decision 3), so a term that flaps
// costs nothing. Call it from the work that [Run] serves, with the term's
// context, and return when it does: it returns nil when ctx is done, or an
// error wrapping ErrStalled when wd.StallAfter passes in a row did not
// complete, which ends the term.
//
// No pass starts once ctx is done, even when a tick and the end of the
// term arrive together. Each pass's context ends at wd.PassTimeout, when
// set (cause ErrPassTimeout). pass returns the instant before which the next passes
// must wait (a rate limit's reset; zero for none) and whether it
// completed: the ticks before resume are skipped, with a call to skipped,
// and are not passes. now is the clock resume is compared with. interval
// must be positive.
func Every(ctx context.Context, interval time.Duration, now func() time.Time,
	pass func(context.Context) (resume time.Time, complete bool), skipped func(until time.Time), wd Watchdog) error {
	return EveryAfter(ctx, interval, interval, now, pass, skipped, wd)
}

// EveryAfter is [Every] with its first pass first after it starts (at
// once when first is 0 or less) rather than one interval after; the
// passes after it come once an interval from the first. Every's rules
// (decision 3's included) are the caller's to keep.
func EveryAfter(ctx context.Context, first, interval time.Duration, now func() time.Time,
	pass func(context.Context) (resume time.Time, complete bool), skipped func(until time.Time), wd Watchdog) error {
	wait := time.NewTimer(max(first, 0))
	defer wait.Stop()
	var tick *time.Ticker
	next := wait.C
	var resume time.Time
	failed := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-next:
		}
		if tick == nil { // the first tick: the cadence starts here
			tick = time.NewTicker(interval)
			defer tick.Stop()
			next = tick.C
		}
		// select picks at random among ready cases: a tick that came with
		// the end of the term must not start a pass in a term that is over.
		if ctx.Err() != nil {
			return nil
		}
		if now().Before(resume) {
			skipped(resume)
			continue
		}
		var complete bool
		wd.Bound(ctx, func(ctx context.Context) { resume, complete = pass(ctx) })
		switch {
		case complete:
			failed = 0
		case resume.IsZero() && ctx.Err() == nil:
			failed++
		}
		if wd.StallAfter > 0 && failed >= wd.StallAfter {
			if wd.Stalled != nil {
				wd.Stalled()
			}
			return fmt.Errorf("%w: net %q: %d passes in a row did not complete (pass timeout %v)", ErrStalled, wd.Name, failed, wd.PassTimeout)
		}
	}
}

// Bound runs pass once as [Every] runs each of its passes: under
// PassTimeout from the call (its context ends then, with cause
// ErrPassTimeout), tracked by Health while it runs, and followed by a
// call to TimedOut when the timeout cancelled it. With no PassTimeout,
// pass runs under ctx alone, untracked. It is for a caller whose pass
// must wait for something before its deadline starts (a slot shared with
// other passes): Every's pass does the wait, and Bound the pass proper,
// under a Watchdog with PassTimeout and Health while Every's has neither.
func (wd Watchdog) Bound(ctx context.Context, pass func(context.Context)) {
	if wd.PassTimeout <= 0 {
		pass(ctx)
		return
	}
	pctx, cancel := context.WithTimeoutCause(ctx, wd.PassTimeout, ErrPassTimeout)
	defer cancel()
	w := wd.Health.beginPass(wd.Name, time.Now().Add(wd.PassTimeout))
	defer wd.Health.end(w)
	pass(pctx)
	if errors.Is(context.Cause(pctx), ErrPassTimeout) && wd.TimedOut != nil {
		wd.TimedOut()
	}
}
