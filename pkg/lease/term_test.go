package lease

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestGrantMovesTheDeadlineWithoutRunsGoroutine pins that a granted
// renewal moves the step-down deadline from the renewal's own goroutine: a
// term whose Run goroutine never gets to the answer (starved of a CPU, on
// a loaded machine) keeps working past the deadline the grant replaced,
// and steps down by the deadline the grant proved, not later.
func TestGrantMovesTheDeadlineWithoutRunsGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 300 * time.Millisecond
		st := NewMemoryStore()
		l := newLessee(st, "sweeper", "a", ttl, nil, nil, nil)
		won := time.Now()
		if ok, err := st.Acquire(context.Background(), "sweeper", "a", won, ttl); !ok || err != nil {
			t.Fatalf("Acquire = %v, %v", ok, err)
		}
		term := l.startTerm(context.Background(), won, "", func(ctx context.Context) { <-ctx.Done() })
		defer term.close()
		cause := func() string {
			term.mu.Lock()
			defer term.mu.Unlock()
			return term.cause
		}

		time.Sleep(ttl / 3)
		renewed := time.Now()
		term.sendRenewal() // what the tick does; nobody handles its answer
		time.Sleep(time.Until(l.deadline(won)) + time.Millisecond)
		synctest.Wait()
		if c := cause(); c != "" {
			t.Fatalf("past the winning Acquire's deadline the term stepped down (%s), want it working: the grant moved the deadline without Run's goroutine", c)
		}
		time.Sleep(time.Until(l.deadline(renewed)) + time.Millisecond)
		synctest.Wait()
		if c := cause(); c != ReasonDeadline {
			t.Errorf("past the renewal's deadline: cause %q, want %q: the grant proves its own send's expiry, no more", c, ReasonDeadline)
		}
	})
}

// TestGrantAnsweredAfterTheDeadlineFiredMovesNothing pins prove's rule: a
// renewal sent before the deadline but granted after the deadline's timer
// fired proves nothing. The term stepped down at the deadline and stays
// down, and its margin is the one of that step-down, TTL/6, not one
// measured from a deadline the late grant moved.
func TestGrantAnsweredAfterTheDeadlineFiredMovesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 300 * time.Millisecond
		l := newLessee(NewMemoryStore(), "sweeper", "a", ttl, nil, nil, nil)
		won := time.Now()
		term := l.startTerm(context.Background(), won, "", func(ctx context.Context) { <-ctx.Done() })
		defer term.close()
		time.Sleep(2 * ttl / 3)
		renewed := time.Now() // a renewal sent here, answered after the deadline
		time.Sleep(time.Until(l.deadline(won)) + time.Millisecond)
		synctest.Wait()
		term.prove(renewed) // what the renewal's goroutine does with its grant
		synctest.Wait()
		term.mu.Lock()
		cause, deadline := term.cause, term.deadline
		term.mu.Unlock()
		if cause != ReasonDeadline || !deadline.Equal(l.deadline(won)) {
			t.Errorf("got cause %q, deadline %v; want %q and the winning Acquire's deadline %v: a grant after the deadline fired moves nothing",
				cause, deadline.Sub(won), ReasonDeadline, l.deadline(won).Sub(won))
		}
		if m := term.margin(); m != ttl/6 {
			t.Errorf("got margin %v, want TTL/6 = %v: the step-down's, at the deadline", m, ttl/6)
		}
	})
}
