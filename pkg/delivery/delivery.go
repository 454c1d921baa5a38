// Package delivery remembers which GitHub webhook deliveries were
// processed, so a replayed or redelivered one is acknowledged but not
// processed again, on whichever replica it lands.
//
// It holds the [Store] contract and its two twins, [MemoryStore] for one
// process and [MongoStore] shared by every replica, which pass one
// conformance suite, [iterion.dev/iterion/pkg/delivery/deliverytest]. The
// package knows nothing of webhooks' contents: the server claims an id
// naming the delivery (the SHA-256 of its signed body, which a replay
// cannot change as it can X-GitHub-Delivery) before processing an event
// and completes it once processed; a claim it never completes lapses on
// its own.
package delivery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"iterion.dev/iterion/internal/mongostore"
)

// DefaultWindow is how long a webhook delivery id is remembered:
// GitHub lets a delivery be redelivered for 3 days after it was sent
// (https://docs.github.com/en/webhooks/testing-and-troubleshooting-webhooks/redelivering-webhooks).
const DefaultWindow = 72 * time.Hour

// ErrInvalid reports a delivery id or window a store cannot use; errors
// that wrap it name the field and value.
var ErrInvalid = errors.New("delivery: invalid")

// ErrMalformed reports a stored delivery document of the wrong shape; the
// store returns it (wrapped, naming the id and the field) instead of an
// answer.
var ErrMalformed = errors.New("delivery: malformed delivery document")

// maxDeliveryID bounds an X-GitHub-Delivery id; GitHub's are GUIDs of 36
// characters (https://docs.github.com/en/webhooks/webhook-events-and-payloads#delivery-headers).
const maxDeliveryID = 100

// Claim is what Store.Claim found of a delivery id.
type Claim int

// The claims.
const (
	// Claimed: the id was neither processed nor being processed; the
	// caller has it for the hold and processes the delivery.
	Claimed Claim = iota + 1
	// Held: another claim of the id, not yet lapsed, is being processed;
	// the delivery is not processed yet, so the caller asks for it again
	// rather than acknowledge it.
	Held
	// Done: the delivery was processed within the window; acknowledge it
	// and do not process it again.
	Done
)

// String names c.
func (c Claim) String() string {
	switch c {
	case Claimed:
		return "claimed"
	case Held:
		return "held"
	case Done:
		return "done"
	}
	return fmt.Sprintf("Claim(%d)", int(c))
}

// Store remembers which webhook deliveries (X-GitHub-Delivery ids) were
// processed, so a replayed or redelivered one is acknowledged but not
// processed again, on whichever replica it lands, and which are being
// processed, so two replicas do not process one at once.
//
// A delivery is done only once it was processed (Complete). A claim is a
// hold with an expiry: a claim that is never completed (the process died,
// its answer was lost, the caller answered 503) lapses at its hold's end,
// and the next delivery of the id is claimed afresh. So no call needs to
// succeed to give a delivery back, and a lost answer or a failure never
// blocks a redelivery for longer than the hold.
//
// Implementations are safe for concurrent use and pass the suite in
// package deliverytest. An error means "no answer": the call may or may
// not have landed.
type Store interface {
	// Claim takes id for processing at now until now+hold, unless it is
	// Done (completed, within its window) or Held (claimed by an unlapsed
	// earlier claim); a claim lapses at its hold's end (exclusive). Of any
	// number of concurrent claims of an id that is neither, exactly one is
	// Claimed. An empty or over-long id or a hold under 1 ms is an error
	// wrapping ErrInvalid, and nothing is written.
	Claim(ctx context.Context, id string, now time.Time, hold time.Duration) (Claim, error)
	// Complete records id as processed at now, remembered as Done until
	// now+window (exclusive), whether or not a claim of it is still held.
	// An empty or over-long id or a window under 1 ms is an error wrapping
	// ErrInvalid, and nothing is written.
	Complete(ctx context.Context, id string, now time.Time, window time.Duration) error
}

// check validates an id and a duration for both twins; field names the
// duration.
func check(id, field string, d time.Duration) error {
	switch {
	case strings.TrimSpace(id) == "" || len(id) > maxDeliveryID:
		return fmt.Errorf("%w: delivery id %q: want 1 to %d characters", ErrInvalid, id, maxDeliveryID)
	case d < time.Millisecond:
		return fmt.Errorf("%w: delivery %s %v is under 1ms", ErrInvalid, field, d)
	}
	return nil
}

// MemoryStore is the in-memory Store twin, for one process
// and for tests: replicas do not share it. The zero value is ready to use;
// it is safe for concurrent use. Expired ids are dropped as it grows.
type MemoryStore struct {
	mu      sync.Mutex
	ids     map[string]entry
	pruneAt int // prune expired ids when the map reaches this size
}

// entry is one id's claim or completion and when it expires.
type entry struct {
	done    bool
	expires time.Time
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

// Claim implements Store.
func (s *MemoryStore) Claim(ctx context.Context, id string, now time.Time, hold time.Duration) (Claim, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("delivery: claim delivery: %w", err)
	}
	if err := check(id, "hold", hold); err != nil {
		return 0, err
	}
	now = mongostore.Stamp(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.ids[id]; ok && now.Before(e.expires) {
		if e.done {
			return Done, nil
		}
		return Held, nil
	}
	s.put(id, entry{expires: mongostore.Stamp(now.Add(hold))}, now)
	return Claimed, nil
}

// Complete implements Store.
func (s *MemoryStore) Complete(ctx context.Context, id string, now time.Time, window time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delivery: complete delivery: %w", err)
	}
	if err := check(id, "window", window); err != nil {
		return err
	}
	now = mongostore.Stamp(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.put(id, entry{done: true, expires: mongostore.Stamp(now.Add(window))}, now)
	return nil
}

// put sets id's entry, first dropping the ids expired at now when the map
// has grown enough; s.mu is held.
func (s *MemoryStore) put(id string, e entry, now time.Time) {
	if s.ids == nil {
		s.ids = make(map[string]entry)
	}
	if len(s.ids) >= s.pruneAt {
		for k, old := range s.ids {
			if !now.Before(old.expires) {
				delete(s.ids, k)
			}
		}
		s.pruneAt = max(1024, 2*len(s.ids))
	}
	s.ids[id] = e
}
