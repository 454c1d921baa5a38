// Package delivery remembers which GitHub webhook deliveries were
// processed, so a replayed or redelivered one is acknowledged but not
// processed again, on whichever replica it lands.
//
// It holds the [Store] contract and its two twins, [MemoryStore] for one
// process and [MongoStore] shared by every replica, which pass one
// conformance suite, [iterion.dev/iterion/pkg/delivery/deliverytest]. The
// package knows nothing of webhooks' contents: the server claims the
// X-GitHub-Delivery id before processing an event and forgets it when
// processing fails.
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

// maxDeliveryID bounds an X-GitHub-Delivery id; GitHub's are GUIDs of 36
// characters (https://docs.github.com/en/webhooks/webhook-events-and-payloads#delivery-headers).
const maxDeliveryID = 100

// Store remembers which webhook deliveries (X-GitHub-Delivery ids)
// were processed, so a replayed or redelivered one is acknowledged but not
// processed again, on whichever replica it lands. Implementations are safe
// for concurrent use and pass the suite in package deliverytest. An
// error means "no answer": the claim may or may not have landed.
type Store interface {
	// Claim records id as seen at now, remembered until now+window. first
	// is true for exactly one of any number of concurrent claims of an id
	// not remembered at now; false while an earlier claim is remembered.
	// An empty or over-long id or a window under 1 ms is an error wrapping
	// ErrInvalid, and nothing is written.
	Claim(ctx context.Context, id string, now time.Time, window time.Duration) (first bool, err error)
	// Forget drops id, so its next delivery is processed: a claim whose
	// processing failed is given back. Forgetting an unknown id is a no-op.
	Forget(ctx context.Context, id string) error
}

// checkClaim validates Claim's arguments for both twins.
func checkClaim(id string, window time.Duration) error {
	switch {
	case strings.TrimSpace(id) == "" || len(id) > maxDeliveryID:
		return fmt.Errorf("%w: delivery id %q: want 1 to %d characters", ErrInvalid, id, maxDeliveryID)
	case window < time.Millisecond:
		return fmt.Errorf("%w: delivery window %v is under 1ms", ErrInvalid, window)
	}
	return nil
}

// MemoryStore is the in-memory Store twin, for one process
// and for tests: replicas do not share it. The zero value is ready to use;
// it is safe for concurrent use. Expired ids are dropped as it grows.
type MemoryStore struct {
	mu      sync.Mutex
	expires map[string]time.Time
	pruneAt int // prune expired ids when the map reaches this size
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

// Claim implements Store.
func (s *MemoryStore) Claim(ctx context.Context, id string, now time.Time, window time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("delivery: claim delivery: %w", err)
	}
	if err := checkClaim(id, window); err != nil {
		return false, err
	}
	now = mongostore.Stamp(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.expires == nil {
		s.expires = make(map[string]time.Time)
	}
	if exp, ok := s.expires[id]; ok && now.Before(exp) {
		return false, nil
	}
	if len(s.expires) >= s.pruneAt {
		for k, exp := range s.expires {
			if !now.Before(exp) {
				delete(s.expires, k)
			}
		}
		s.pruneAt = max(1024, 2*len(s.expires))
	}
	s.expires[id] = mongostore.Stamp(now.Add(window))
	return true, nil
}

// Forget implements Store.
func (s *MemoryStore) Forget(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delivery: forget delivery: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.expires, id)
	return nil
}
