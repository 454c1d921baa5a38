package lease

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Spec says which lease Run serves and how. Name, Owner and TTL are
// required; the zero values of Retry, Logger, Health and OnEvent mean their
// defaults.
type Spec struct {
	// Name is the lease's name, shared by every candidate for it.
	Name string
	// Owner names this candidate; each candidate needs its own.
	Owner string
	// TTL is how long a take or a renewal holds the lease. At least [MinTTL].
	TTL time.Duration
	// Retry is the campaign's period: one Acquire attempt every Retry, and
	// the pause after a term before the next attempt, but never two
	// attempts, or an attempt and the last renewal, in one millisecond
	// (see TermStore). 0 means TTL/3; negative is invalid.
	Retry time.Duration
	// Logger receives the term's transitions, with attributes lease and
	// owner. nil discards them.
	Logger *slog.Logger
	// Health tracks work that outlives its term. nil tracks nothing.
	Health *Health
	// OnEvent receives every [Event] of the Run: its transitions and each
	// store call (leaseprom.Metrics.Observe counts them). Run calls it
	// synchronously from its own goroutines, Elected before work starts
	// and SteppedDown right after work's context is cancelled, so the
	// order of one Run's transitions is the order they happened in. It may
	// be called concurrently, and must not block. nil means none.
	OnEvent func(Event)
}

// Run serves terms of the lease spec.Name for spec.Owner on st, running work
// for each term, until ctx is done (the package doc says how).
//
// A caller may rely on this: work runs only while this owner holds the
// lease, in its own goroutine, with a context that is cancelled when the
// term ends, TTL/6 before the store could elect a successor; each term
// calls work afresh. A store that cannot answer elects nobody. Once a term
// ends, Run waits for work to return and releases the lease, on a context
// detached from ctx; if work panicked, Run re-panics with its value after
// the release.
//
// Run returns an error only for an unusable argument (wrapping [ErrInvalid]
// and naming the field), before any store call; otherwise it returns nil
// once ctx is done and any term has ended and been released. Store failures
// are never returned: Run logs them and retries. Run is safe to call
// concurrently, for the same lease with distinct owners or for different
// leases.
func Run(ctx context.Context, st Store, spec Spec, work func(context.Context)) error {
	if err := validate(st, spec, work); err != nil {
		return err
	}
	r := &runner{
		l:     newLessee(st, spec.Name, spec.Owner, spec.TTL, spec.Logger, spec.Health, spec.OnEvent),
		work:  work,
		retry: spec.Retry,
	}
	if r.retry == 0 {
		r.retry = r.l.cut
	}
	r.l.event(Event{Kind: Campaigning})
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

// runner is one Run's campaign: a lessee, the work and the retry period.
// Run's goroutine owns it.
type runner struct {
	l     *lessee
	work  func(context.Context)
	retry time.Duration
}

// run campaigns until ctx is done, serving each term it wins.
func (r *runner) run(ctx context.Context) {
	for ctx.Err() == nil {
		start := time.Now()
		sent, token, won := r.l.campaign(ctx)
		last := sent // the latest Acquire or Renew sent
		if won {
			r.l.serve(ctx, sent, token, r.work)
			start = time.Now()
			last = start
		}
		// The next attempt goes out Retry after start, and in a later
		// millisecond than the last Acquire or Renew, so that the store
		// sees its term as later (see TermStore).
		next := start.Add(r.retry)
		if floor := Stamp(last).Add(time.Millisecond); next.Before(floor) {
			next = floor
		}
		t := time.NewTimer(time.Until(next))
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
// done by the time it is answered, released for ctx's reason (doneReason):
// a shard its group gave up meanwhile does not wait for the group's
// shutdown.
func (l *lessee) campaign(ctx context.Context) (sent time.Time, token string, won bool) {
	sent = time.Now()
	if l.terms != nil {
		token = rand.Text()
	}
	err := l.call(ctx, OpAcquire, func(ctx context.Context) error {
		var err error
		if l.terms != nil {
			won, err = l.terms.AcquireTerm(ctx, l.name, l.owner, sent, l.ttl, token)
		} else {
			won, err = l.st.Acquire(ctx, l.name, l.owner, sent, l.ttl)
		}
		return err
	})
	switch {
	case err != nil:
		l.release(ctx, ReasonUnanswered, token)
		return sent, token, false
	case won && ctx.Err() != nil:
		l.release(ctx, doneReason(ctx), token)
		return sent, token, false
	}
	return sent, token, won
}
