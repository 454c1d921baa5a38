package lease_test

import (
	"testing"

	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/lease/leasetest"
)

// TestConformance runs the conformance suite on the zero MemoryStore.
func TestConformance(t *testing.T) {
	leasetest.Run(t, func(*testing.T) lease.Store { return new(lease.MemoryStore) })
}

// TestGroupConformance runs the lease-group cases on MemoryStore.
func TestGroupConformance(t *testing.T) {
	leasetest.RunGroup(t, func(*testing.T) lease.Store { return new(lease.MemoryStore) })
}

// TestGroupGoals runs the lease-group goals at 64 shards and 10 members on
// MemoryStore (docs/benchmarks.md records its figures).
func TestGroupGoals(t *testing.T) {
	leasetest.RunGroupGoals(t, func(*testing.T) lease.Store { return new(lease.MemoryStore) })
}
