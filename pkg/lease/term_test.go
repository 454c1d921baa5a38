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
