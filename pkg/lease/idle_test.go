package lease_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

// TestIdleTermCostsThreeRenewalsPerTTL measures the store calls of one idle
// term over its first hour, the figure docs/benchmarks.md records: one Acquire,
// then 3 renewals per TTL, nothing more, whatever the TTL (the sweeper's is
// 3 minutes).
func TestIdleTermCostsThreeRenewalsPerTTL(t *testing.T) {
	for _, ttl := range []time.Duration{time.Minute, 3 * time.Minute, 10 * time.Minute} {
		t.Run("TTL "+ttl.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				st := newFaultStore(lease.NewMemoryStore(), nil)
				ctx, cancel := context.WithCancel(t.Context())
				spec := h.spec("a", ttl/3)
				spec.TTL = ttl
				done := h.start(ctx, st, spec, h.work("a", nil))
				h.sleepUntil(time.Hour + ttl/6) // past the hour, before the next renewal
				cancel()
				<-done
				count := map[string]int{}
				for _, c := range st.Calls("", "") {
					if !c.At.After(h.at(time.Hour)) {
						count[c.Op]++
					}
				}
				ttls := int(time.Hour / ttl)
				want := map[string]int{"acquire": 1, "renew": 3 * ttls}
				if fmt.Sprint(count) != fmt.Sprint(want) {
					t.Errorf("got %v store calls in the term's first hour, want %v: 3 renewals per TTL, nothing more", count, want)
				}
				t.Logf("one idle term, TTL %v, first hour: %d acquire, %d renewals, %d releases = %.1f renewals per TTL",
					ttl, count["acquire"], count["renew"], count["release"], float64(count["renew"])/float64(ttls))
			})
		})
	}
}
