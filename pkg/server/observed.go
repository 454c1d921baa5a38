package server

import (
	"errors"
	"slices"
	"sync"
	"time"

	"iterion.dev/iterion/internal/mongostore"
	"iterion.dev/iterion/pkg/board"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/lease"
)

// observed is what this replica has seen that the stores do not keep: when
// each of its current terms began, and each unsettled run's last offer
// here. It is in memory, this replica's alone, and gone on restart. Safe for
// concurrent use.
type observed struct {
	mu     sync.Mutex
	terms  map[string]time.Time   // lease name → start of this replica's term
	offers map[string]offerRecord // run id → its last offer on this replica
	board  time.Time              // end of this replica's last complete board pass
	// others is, by lease group, the owners serving it with another shard
	// count in this replica's last survey (lease.GroupView.OtherOwners).
	others map[string][]string
}

// boardPassed notes a board pass that ended at end; only a complete pass
// with every repository synced moves the board's freshness.
func (o *observed) boardPassed(p board.Pass, end time.Time) {
	if !passSynced(p) {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.board = end
}

// lastBoardPass is the end of this replica's last complete board pass; zero
// when it has made none.
func (o *observed) lastBoardPass() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.board
}

// offerRecord is a run's last offer on one replica, as GET /api/runs and
// /runs show it.
type offerRecord struct {
	// Lane is who offered it: api, webhook or merge-gate-sweeper.
	Lane string `json:"lane"`
	// Outcome is what the offer did: gone, settled, current, published,
	// superseded, failed or unreadable.
	Outcome string `json:"outcome"`
	// At is when it ended.
	At time.Time `json:"at"`
	// Error is the failure of an outcomeFailed offer; "" otherwise.
	Error string `json:"error,omitempty"`
	// RetryAt, for an offer a forge rate limit refused, is the limit's
	// reset: no offer reaches the forge before it (the backoff).
	RetryAt time.Time `json:"retry_at,omitzero"`
}

// leaseEvent notes the start and end of this replica's terms.
func (o *observed) leaseEvent(ev lease.Event, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch ev.Kind {
	case lease.Elected:
		if o.terms == nil {
			o.terms = make(map[string]time.Time)
		}
		o.terms[ev.Name] = now
	case lease.SteppedDown:
		delete(o.terms, ev.Name)
	}
}

// surveyed notes the owners serving group with another shard count in
// this replica's latest survey, and reports whether they differ from
// the last survey's (none before the first).
func (o *observed) surveyed(group string, owners []string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if slices.Equal(o.others[group], owners) {
		return false
	}
	if o.others == nil {
		o.others = make(map[string][]string)
	}
	o.others[group] = owners
	return true
}

// termStart is when this replica's current term of lease name began; false
// when it holds none.
func (o *observed) termStart(name string) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	t, ok := o.terms[name]
	return t, ok
}

// offered notes an offer of run id; a settled or gone run is forgotten, as
// it will not be offered again.
func (o *observed) offered(id, lane string, out outcome, err error, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if out == outcomeSettled || out == outcomeGone {
		delete(o.offers, id)
		return
	}
	if o.offers == nil {
		o.offers = make(map[string]offerRecord)
	}
	rec := offerRecord{Lane: lane, Outcome: string(out), At: mongostore.Stamp(now)}
	if err != nil {
		rec.Error = err.Error()
	}
	if rl := (*forge.RateLimitError)(nil); errors.As(err, &rl) {
		rec.RetryAt = mongostore.Stamp(rl.Reset)
	}
	o.offers[id] = rec
}

// lastOffer is run id's last offer on this replica; false when none since
// the process started.
func (o *observed) lastOffer(id string) (offerRecord, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r, ok := o.offers[id]
	return r, ok
}
