package mongolease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/lease/mongolease"
)

// TestModelMongoMatchesMemory drives random sequences of Acquire, Renew and
// Release over a few names, owners, TTLs and instants (around millisecond
// boundaries, mostly forward, sometimes backward) against MemoryStore and
// MongoStore side by side, and fails at the first answer where the twins
// differ: the bool, and the error's kind by errors.Is. Each sequence ends by
// comparing the twins' Holders.
func TestModelMongoMatchesMemory(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	coll := db.Collection(mongolease.Collection)
	mongoStore := mongolease.NewStore(db)
	var (
		steps = []time.Duration{0, 0, time.Nanosecond, 999 * time.Microsecond, time.Millisecond - time.Nanosecond,
			time.Millisecond, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, -time.Millisecond, -3 * time.Millisecond}
		names  = []string{"x", "x", "y", "y", " "}
		owners = []string{"a", "b", "c", ""}
		ttls   = []time.Duration{time.Millisecond, 2*time.Millisecond - time.Microsecond, 2 * time.Millisecond,
			3 * time.Millisecond, 5 * time.Millisecond, 999 * time.Microsecond}
		ops    = []string{"acquire", "acquire", "renew", "renew", "release", "acquireTerm", "acquireTerm", "releaseTerm", "releaseTerm"}
		tokens = []string{"T1", "T1", "T2", "T3", " "}
	)
	rapid.Check(t, func(rt *rapid.T) {
		if err := coll.Drop(ctx); err != nil {
			rt.Fatalf("drop the leases collection: %v", err)
		}
		mem := lease.NewMemoryStore()
		now := t0
		for i := range rapid.IntRange(1, 20).Draw(rt, "calls") {
			now = now.Add(rapid.SampledFrom(steps).Draw(rt, "step"))
			op := rapid.SampledFrom(ops).Draw(rt, "op")
			name := rapid.SampledFrom(names).Draw(rt, "name")
			owner := rapid.SampledFrom(owners).Draw(rt, "owner")
			var call string
			var memOK, mongoOK bool
			var memErr, mongoErr error
			switch op {
			case "acquire", "renew":
				ttl := rapid.SampledFrom(ttls).Draw(rt, "ttl")
				call = fmt.Sprintf("%s(%q, %q, t0%+v, %v)", op, name, owner, now.Sub(t0), ttl)
				if op == "acquire" {
					memOK, memErr = mem.Acquire(ctx, name, owner, now, ttl)
					mongoOK, mongoErr = mongoStore.Acquire(ctx, name, owner, now, ttl)
				} else {
					memOK, memErr = mem.Renew(ctx, name, owner, now, ttl)
					mongoOK, mongoErr = mongoStore.Renew(ctx, name, owner, now, ttl)
				}
			case "release":
				call = fmt.Sprintf("release(%q, %q)", name, owner)
				memErr = mem.Release(ctx, name, owner)
				mongoErr = mongoStore.Release(ctx, name, owner)
			case "acquireTerm":
				ttl := rapid.SampledFrom(ttls).Draw(rt, "ttl")
				token := rapid.SampledFrom(tokens).Draw(rt, "token")
				call = fmt.Sprintf("acquireTerm(%q, %q, t0%+v, %v, %q)", name, owner, now.Sub(t0), ttl, token)
				memOK, memErr = mem.AcquireTerm(ctx, name, owner, now, ttl, token)
				mongoOK, mongoErr = mongoStore.AcquireTerm(ctx, name, owner, now, ttl, token)
			case "releaseTerm":
				token := rapid.SampledFrom(tokens).Draw(rt, "token")
				call = fmt.Sprintf("releaseTerm(%q, %q, %q)", name, owner, token)
				memErr = mem.ReleaseTerm(ctx, name, owner, token)
				mongoErr = mongoStore.ReleaseTerm(ctx, name, owner, token)
			}
			if memOK != mongoOK || kind(memErr) != kind(mongoErr) {
				rt.Fatalf("call %d, %s: MongoStore answered %v, %v; MemoryStore %v, %v: the twins answer alike",
					i, call, mongoOK, mongoErr, memOK, memErr)
			}
			if k := kind(memErr); k == "unexpected" {
				rt.Fatalf("call %d, %s: error %v, want nil, ErrInvalid or ErrLost", i, call, memErr)
			}
		}
		memHolders, memErr := mem.Holders(ctx)
		mongoHolders, mongoErr := mongoStore.Holders(ctx)
		if memErr != nil || mongoErr != nil {
			rt.Fatalf("Holders: MongoStore error %v, MemoryStore error %v; want nil", mongoErr, memErr)
		}
		if fmt.Sprint(memHolders) != fmt.Sprint(mongoHolders) {
			rt.Fatalf("Holders: MongoStore %v, MemoryStore %v: the twins keep the same leases", mongoHolders, memHolders)
		}
	})
}

// kind classifies an error the way a caller of a Store may: by errors.Is.
func kind(err error) string {
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, lease.ErrInvalid):
		return "invalid"
	case errors.Is(err, lease.ErrLost):
		return "lost"
	}
	return "unexpected"
}
