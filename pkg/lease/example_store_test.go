package lease_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

// A MemoryStore elects among the goroutines of one process. The clock is the
// caller's: every call takes now, and the store keeps it to the millisecond.
func ExampleMemoryStore() {
	ctx := context.Background()
	var st lease.MemoryStore // the zero value is ready to use
	now := time.Date(2026, 9, 30, 15, 0, 0, 0, time.UTC)
	const name, ttl = "merge-gate-sweeper", 3 * time.Minute

	ok, err := st.Acquire(ctx, name, "replica-a", now, ttl)
	fmt.Println("a acquires:", ok, err)
	ok, err = st.Acquire(ctx, name, "replica-b", now.Add(time.Minute), ttl)
	fmt.Println("b acquires while a holds it:", ok, err)
	ok, err = st.Renew(ctx, name, "replica-a", now.Add(time.Minute), ttl)
	fmt.Println("a renews:", ok, err)
	err = st.Release(ctx, name, "replica-b")
	fmt.Println("b releases a's lease:", errors.Is(err, lease.ErrLost))

	hs, _ := st.Holders(ctx)
	for _, h := range hs {
		fmt.Println(h.Name, "held by", h.Owner, "until", h.Expires.Format(time.RFC3339))
	}
	ok, err = st.Acquire(ctx, name, "replica-b", now.Add(4*time.Minute), ttl)
	fmt.Println("b acquires at a's expiry:", ok, err)
	ok, err = st.Renew(ctx, name, "replica-a", now.Add(4*time.Minute), ttl)
	fmt.Println("a's late renewal:", ok, err)
	// Output:
	// a acquires: true <nil>
	// b acquires while a holds it: false <nil>
	// a renews: true <nil>
	// b releases a's lease: true
	// merge-gate-sweeper held by replica-a until 2026-09-30T15:04:00Z
	// b acquires at a's expiry: true <nil>
	// a's late renewal: false <nil>
}
