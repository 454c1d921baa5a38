package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// DefaultDeliveryWindow is how long a webhook delivery id is remembered:
// GitHub lets a delivery be redelivered for 3 days after it was sent
// (https://docs.github.com/en/webhooks/testing-and-troubleshooting-webhooks/redelivering-webhooks).
const DefaultDeliveryWindow = 72 * time.Hour

// maxDeliveryID bounds an X-GitHub-Delivery id; GitHub's are GUIDs of 36
// characters (https://docs.github.com/en/webhooks/webhook-events-and-payloads#delivery-headers).
const maxDeliveryID = 100

// DeliveryStore remembers which webhook deliveries (X-GitHub-Delivery ids)
// were processed, so a replayed or redelivered one is acknowledged but not
// processed again, on whichever replica it lands. Implementations are safe
// for concurrent use and pass the suite in package deliverystoretest. An
// error means "no answer": the claim may or may not have landed.
type DeliveryStore interface {
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

// MemoryDeliveryStore is the in-memory DeliveryStore twin, for one process
// and for tests: replicas do not share it. The zero value is ready to use;
// it is safe for concurrent use. Expired ids are dropped as it grows.
type MemoryDeliveryStore struct {
	mu      sync.Mutex
	expires map[string]time.Time
	pruneAt int // prune expired ids when the map reaches this size
}

var _ DeliveryStore = (*MemoryDeliveryStore)(nil)

// NewMemoryDeliveryStore returns an empty MemoryDeliveryStore.
func NewMemoryDeliveryStore() *MemoryDeliveryStore { return &MemoryDeliveryStore{} }

// Claim implements DeliveryStore.
func (s *MemoryDeliveryStore) Claim(ctx context.Context, id string, now time.Time, window time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("server: claim delivery: %w", err)
	}
	if err := checkClaim(id, window); err != nil {
		return false, err
	}
	now = stamp(now)
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
	s.expires[id] = stamp(now.Add(window))
	return true, nil
}

// Forget implements DeliveryStore.
func (s *MemoryDeliveryStore) Forget(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("server: forget delivery: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.expires, id)
	return nil
}
