package lease_test

import (
	"context"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

// t0 is the benchmark's first instant.
var t0 = time.Date(2026, 9, 30, 15, 0, 0, 0, time.UTC)

// BenchmarkMemoryStore measures MemoryStore's Acquire (the holder's own,
// each a millisecond later) and Renew.
func BenchmarkMemoryStore(b *testing.B) {
	ctx := context.Background()
	for _, op := range []string{"Acquire", "Renew"} {
		b.Run(op, func(b *testing.B) {
			st := lease.NewMemoryStore()
			if _, err := st.Acquire(ctx, "n", "a", t0, time.Minute); err != nil {
				b.Fatal(err)
			}
			call := st.Acquire
			if op == "Renew" {
				call = st.Renew
			}
			b.ReportAllocs()
			now := t0
			for b.Loop() {
				now = now.Add(time.Millisecond)
				if ok, err := call(ctx, "n", "a", now, time.Minute); !ok || err != nil {
					b.Fatalf("%s = %v, %v; want true, nil", op, ok, err)
				}
			}
		})
	}
}
