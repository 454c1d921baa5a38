package lease

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// ErrStuck reports work that has not returned within its bound after its
// term ended: a stuck holder, the one case in which a lease overlaps a
// successor (see the package doc). An orchestrator should restart it.
var ErrStuck = errors.New("lease: work has not returned after its term ended")

// ErrPassStuck reports a pass of [Every] that has not returned within the
// bound after its deadline cancelled it: the work stalls while its term
// may go on, and an orchestrator should restart it.
var ErrPassStuck = errors.New("lease: pass has not returned after its deadline")

// Health tracks, for the Runs that share it, work whose term has ended (its
// context is cancelled) but which has not returned yet, and, for the
// passes of [Every] given it in their Watchdog, passes past their
// deadline that have not returned yet. Wire Check into a
// /healthz handler. A Health is safe for concurrent use; a nil *Health
// tracks nothing.
type Health struct {
	bound time.Duration

	mu    sync.Mutex
	stuck map[*stuckWork]struct{}
}

// stuckWork is one term's work from its step-down until it returns, or
// one pass from its start (since is then its deadline) until it returns.
type stuckWork struct {
	name, owner string
	since       time.Time
	pass        bool
}

// NewHealth returns a Health whose Check fails once some work has not
// returned bound after its context was cancelled. A negative bound counts
// as 0: any work still running after its step-down is unhealthy.
func NewHealth(bound time.Duration) *Health {
	return &Health{bound: max(bound, 0)}
}

// Check returns nil when every term's work returned within the bound of its
// step-down (or is still within it), and otherwise an error wrapping
// ErrStuck for each late one, naming its lease and owner and how long ago its
// context was cancelled; likewise ErrPassStuck for each pass still running
// the bound past its deadline. A nil *Health is always healthy.
func (h *Health) Check() error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	late := make([]*stuckWork, 0, len(h.stuck))
	for w := range h.stuck {
		if time.Since(w.since) >= h.bound {
			late = append(late, w)
		}
	}
	h.mu.Unlock()
	slices.SortFunc(late, func(a, b *stuckWork) int { return a.since.Compare(b.since) })
	errs := make([]error, len(late))
	for i, w := range late {
		if w.pass {
			errs[i] = fmt.Errorf("%w: net %q: past its deadline by %v (bound %v)", ErrPassStuck, w.name, time.Since(w.since), h.bound)
			continue
		}
		errs[i] = fmt.Errorf("%w: lease %q owner %q: cancelled %v ago (bound %v)",
			ErrStuck, w.name, w.owner, time.Since(w.since), h.bound)
	}
	return errors.Join(errs...)
}

// begin starts tracking a term's work at its step-down.
func (h *Health) begin(name, owner string) *stuckWork {
	return h.track(&stuckWork{name: name, owner: owner, since: time.Now()})
}

// beginPass starts tracking a pass of net name due to end by deadline.
func (h *Health) beginPass(name string, deadline time.Time) *stuckWork {
	return h.track(&stuckWork{name: name, since: deadline, pass: true})
}

// track starts tracking w.
func (h *Health) track(w *stuckWork) *stuckWork {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	if h.stuck == nil {
		h.stuck = make(map[*stuckWork]struct{})
	}
	h.stuck[w] = struct{}{}
	h.mu.Unlock()
	return w
}

// end stops tracking w: its work or pass returned.
func (h *Health) end(w *stuckWork) {
	if h == nil {
		return
	}
	h.mu.Lock()
	delete(h.stuck, w)
	h.mu.Unlock()
}
