// Package leasetest is the conformance suite for [lease.Store]
// implementations. Any Store, ours or a user's, proves itself with one line:
//
//	func TestConformance(t *testing.T) { leasetest.Run(t, newStore) }
//
// Like testing/slogtest, the suite is a table of named cases, each with a
// one-line statement of the rule it checks (the rules of DESIGN.md's
// pkg/lease contract), each run as a subtest on a fresh store. It treats the
// store as a black box: it calls only the Store methods, and Holders when the
// store implements [lease.Inspector].
package leasetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

// Rounds and Candidates size the race cases: Candidates goroutines race for
// one lease, Rounds times, and each round must elect exactly one.
const (
	Rounds     = 50
	Candidates = 8
)

// Run runs every conformance case as a subtest of t, each on a fresh store
// from newStore, which may use t for setup and cleanup. A failure names the
// rule that broke. Run does not call t.Parallel.
func Run(t *testing.T, newStore func(t *testing.T) lease.Store) {
	t.Helper()
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("rule: %s", c.rule)
				}
			})
			c.f(t, newStore(t))
		})
	}
}

// testCase is one rule of the contract and the check that pins it.
type testCase struct {
	name string
	rule string // one line: what every Store must do
	f    func(t *testing.T, st lease.Store)
}

// t0 is the suite's reference instant, a millisecond boundary in UTC. It is
// never modified.
var t0 = time.Date(2026, 9, 30, 15, 0, 0, 0, time.UTC)

const ttl = 10 * time.Second

func cases() []testCase {
	return []testCase{
		{"AcquireFree", "a lease nobody holds goes to the first owner who asks",
			func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, ttl, true, "the lease is free")
				acquire(t, st, "n", "b", t0, ttl, false, "a holds it unexpired")
			}},
		{"AcquireOwn", "Acquire of the caller's own unexpired lease succeeds and extends it",
			func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, ttl, true, "the lease is free")
				acquire(t, st, "n", "a", t0.Add(time.Second), ttl, true, "the lease is already a's")
				acquire(t, st, "n", "b", t0.Add(ttl), ttl, false, "a's second Acquire moved the expiry to t0+1s+ttl")
				acquire(t, st, "n", "b", t0.Add(time.Second+ttl), ttl, true, "the lease is expired at t0+1s+ttl")
			}},
		{"NamesIndependent", "leases with different names do not affect each other",
			func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, ttl, true, "n is free")
				acquire(t, st, "m", "b", t0, ttl, true, "m is free, whoever holds n")
				release(t, st, "m", "b", nil, "b holds m")
				acquire(t, st, "n", "b", t0, ttl, false, "releasing m leaves n with a")
			}},
		{"ExpiryInclusive", "a lease is expired at its expiry instant, and held one millisecond before",
			func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, ttl, true, "the lease is free")
				acquire(t, st, "n", "b", t0.Add(ttl-time.Millisecond), ttl, false, "held until its expiry t0+ttl")
				acquire(t, st, "n", "b", t0.Add(ttl), ttl, true, "expired at its expiry instant t0+ttl")
				acquire(t, st, "n", "a", t0.Add(ttl), ttl, false, "b took it over")
			}},
		{"NowTruncated", "now is truncated to the millisecond: expiry = trunc(trunc(now)+ttl)",
			func(t *testing.T, st lease.Store) {
				// Taken at t0+0.999999ms, it expires at t0+10ms, not t0+10.999999ms.
				acquire(t, st, "n", "a", t0.Add(time.Millisecond-time.Nanosecond), 10*time.Millisecond, true, "the lease is free")
				acquire(t, st, "n", "b", t0.Add(10*time.Millisecond-time.Nanosecond), ttl, false, "t0+9.999999ms truncates to t0+9ms, before the expiry")
				acquire(t, st, "n", "b", t0.Add(10*time.Millisecond), ttl, true, "expiry is trunc(t0+0.999999ms)+10ms = t0+10ms")
			}},
		{"NowTruncatedBeforeTTLAdded", "now is truncated before ttl is added: taken at t0+0.6ms for 1.6ms, it expires at trunc(t0+1.6ms) = t0+1ms, not trunc(t0+2.2ms)",
			func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0.Add(600*time.Microsecond), 1600*time.Microsecond, true, "the lease is free")
				wantHolders(t, st, []lease.Holder{{Name: "n", Owner: "a", Expires: t0.Add(time.Millisecond)}}, "expiry = trunc(trunc(now)+ttl) = t0+1ms")
				acquire(t, st, "n", "b", t0.Add(time.Millisecond-time.Nanosecond), ttl, false, "held until its expiry t0+1ms")
				acquire(t, st, "n", "b", t0.Add(time.Millisecond), ttl, true, "expiry is trunc(trunc(t0+0.6ms)+1.6ms) = t0+1ms, not trunc(t0+0.6ms+1.6ms) = t0+2ms")
			}},
		{"TTLTruncated", "the expiry is truncated to the millisecond: a 1.999ms TTL from t0 expires at t0+1ms",
			func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, 2*time.Millisecond-time.Microsecond, true, "the lease is free")
				acquire(t, st, "n", "b", t0.Add(time.Millisecond), ttl, true, "expiry is trunc(t0+1.999ms) = t0+1ms")
			}},
		{"TTLOneMillisecond", "a TTL of exactly 1ms is valid and lasts one millisecond",
			func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0.Add(500*time.Microsecond), lease.MinTTL, true, "the lease is free")
				acquire(t, st, "n", "b", t0.Add(time.Millisecond-time.Nanosecond), ttl, false, "held through the millisecond it was taken in")
				acquire(t, st, "n", "b", t0.Add(time.Millisecond), ttl, true, "expired at t0+1ms")
			}},
		{"UTC", "instants are compared as instants, whatever their location, and reported in UTC",
			func(t *testing.T, st lease.Store) {
				kolkata := time.FixedZone("IST", 5*3600+1800)
				acquire(t, st, "n", "a", t0.In(kolkata), ttl, true, "the lease is free")
				acquire(t, st, "n", "b", t0.Add(ttl-time.Millisecond), ttl, false, "held until t0+ttl, whatever now's location")
				acquire(t, st, "n", "b", t0.Add(ttl).In(time.FixedZone("PDT", -7*3600)), ttl, true, "expired at t0+ttl, whatever now's location")
				wantHolders(t, st, []lease.Holder{{Name: "n", Owner: "b", Expires: t0.Add(2 * ttl)}}, "Expires is kept in UTC")
			}},
		{"RefusalIsNotAnError", "a lease held by another is refused with false, nil: an error means no answer, never refused",
			func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, ttl, true, "the lease is free")
				acquire(t, st, "n", "b", t0, ttl, false, "a holds it")
				renew(t, st, "n", "b", t0, ttl, false, "b does not hold it")
				renew(t, st, "absent", "b", t0, ttl, false, "nobody holds it")
			}},
		{"RenewSameMillisecond", "a renewal that stamps the same expiry modifies nothing and is still a renewal",
			func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, ttl, true, "the lease is free")
				renew(t, st, "n", "a", t0, ttl, true, "same now and ttl: same expiry, still a's")
				renew(t, st, "n", "a", t0.Add(999*time.Microsecond), ttl, true, "same millisecond: same expiry, still a's")
				acquire(t, st, "n", "a", t0.Add(999*time.Microsecond), ttl, true, "Acquire in the same millisecond is a's too")
			}},
		{"ExpiryNeverBackward", "a late, older stamp or a shorter TTL keeps the later expiry",
			func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, ttl, true, "the lease is free")
				renew(t, st, "n", "a", t0.Add(-5*time.Second), ttl, true, "an older stamp is still a's renewal")
				renew(t, st, "n", "a", t0.Add(time.Second), time.Millisecond, true, "a shorter TTL is still a's renewal")
				acquire(t, st, "n", "a", t0.Add(-time.Minute), time.Millisecond, true, "an older Acquire of a's own lease succeeds")
				acquire(t, st, "n", "b", t0.Add(ttl-time.Millisecond), ttl, false, "the expiry stayed t0+ttl, not earlier")
				acquire(t, st, "n", "b", t0.Add(ttl), ttl, true, "the expiry stayed t0+ttl, not later")
			}},
		{"ExpiredStillRenewable", "a lease past its expiry that nobody took is still its owner's and renewable",
			func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, time.Second, true, "the lease is free")
				renew(t, st, "n", "a", t0.Add(5*time.Second), time.Second, true, "expired at t0+1s but untaken")
				acquire(t, st, "n", "b", t0.Add(6*time.Second-time.Millisecond), ttl, false, "renewed to t0+6s")
				acquire(t, st, "n", "b", t0.Add(6*time.Second), ttl, true, "expired at t0+6s")
				renew(t, st, "n", "a", t0.Add(7*time.Second), ttl, false, "taken over by b")
			}},
		{"RenewNeverCreates", "Renew of a lease nobody holds refuses and creates nothing",
			func(t *testing.T, st lease.Store) {
				renew(t, st, "n", "a", t0, ttl, false, "nobody holds it")
				wantHolders(t, st, nil, "a refused Renew writes nothing")
				acquire(t, st, "n", "b", t0, ttl, true, "the refused Renew left the lease free")
			}},
		{"RenewNeverTakes", "Renew of another's lease, even expired, refuses and changes nothing",
			func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, time.Second, true, "the lease is free")
				renew(t, st, "n", "b", t0.Add(time.Millisecond), ttl, false, "a holds it unexpired")
				renew(t, st, "n", "b", t0.Add(5*time.Second), ttl, false, "a's expired lease is still a's")
				wantHolders(t, st, []lease.Holder{{Name: "n", Owner: "a", Expires: t0.Add(time.Second)}}, "a refused Renew changes nothing")
				renew(t, st, "n", "a", t0.Add(5*time.Second), time.Second, true, "a still holds it")
			}},
		{"RenewAfterRelease", "a renewal that lands after its holder released changes nothing",
			func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, ttl, true, "the lease is free")
				release(t, st, "n", "a", nil, "a holds it")
				renew(t, st, "n", "a", t0.Add(time.Millisecond), ttl, false, "a released it")
				wantHolders(t, st, nil, "a late Renew does not resurrect a released lease")
				acquire(t, st, "n", "b", t0.Add(time.Millisecond), ttl, true, "the lease is free after a's release")
			}},
		{"ReleaseOwn", "Release of the caller's lease, expired or not, frees it",
			func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, ttl, true, "the lease is free")
				release(t, st, "n", "a", nil, "a holds it")
				acquire(t, st, "n", "b", t0, ttl, true, "a released it")
				release(t, st, "n", "b", nil, "b holds it")
				wantHolders(t, st, nil, "a released lease is gone")
			}},
		{"ReleaseNobodys", "Release of a lease nobody holds is a no-op",
			func(t *testing.T, st lease.Store) {
				release(t, st, "n", "a", nil, "nobody holds it")
				acquire(t, st, "n", "a", t0, ttl, true, "the lease is free")
				release(t, st, "n", "a", nil, "a holds it")
				release(t, st, "n", "a", nil, "a second Release finds nobody's lease")
			}},
		{"ReleaseAnothers", "Release of another's lease returns ErrLost and changes nothing",
			func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, time.Second, true, "the lease is free")
				release(t, st, "n", "b", lease.ErrLost, "a holds it")
				acquire(t, st, "n", "b", t0.Add(time.Second), ttl, true, "a's expired lease is taken over")
				release(t, st, "n", "a", lease.ErrLost, "b took a's lease over")
				acquire(t, st, "n", "c", t0.Add(time.Second+ttl-time.Millisecond), ttl, false, "a's refused Release left b's lease")
			}},
		{"DoneContext", "a call on a done context fails and changes nothing",
			func(t *testing.T, st lease.Store) {
				cancelled, cancel := context.WithCancel(context.Background())
				cancel()
				expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(1, 0))
				defer cancel2()
				for _, ctx := range []context.Context{cancelled, expired} {
					ok, err := st.Acquire(ctx, "n", "a", t0, ttl)
					wantCtxErr(t, ctx, ok, err, "Acquire")
					ok, err = st.Renew(ctx, "n", "a", t0, ttl)
					wantCtxErr(t, ctx, ok, err, "Renew")
				}
				wantHolders(t, st, nil, "calls on a done context write nothing")
				acquire(t, st, "n", "a", t0, time.Second, true, "the lease is free")
				for _, ctx := range []context.Context{cancelled, expired} {
					ok, err := st.Renew(ctx, "n", "a", t0.Add(time.Second), ttl)
					wantCtxErr(t, ctx, ok, err, "Renew")
					ok, err = st.Acquire(ctx, "n", "a", t0.Add(time.Second), ttl)
					wantCtxErr(t, ctx, ok, err, "Acquire")
					ok, err = st.Acquire(ctx, "n", "b", t0.Add(time.Second), ttl)
					wantCtxErr(t, ctx, ok, err, "Acquire")
					wantCtxErr(t, ctx, false, st.Release(ctx, "n", "a"), "Release")
				}
				wantHolders(t, st, []lease.Holder{{Name: "n", Owner: "a", Expires: t0.Add(time.Second)}}, "calls on a done context change nothing")
				acquire(t, st, "n", "b", t0.Add(time.Second-time.Millisecond), ttl, false, "a still holds it until t0+1s")
				acquire(t, st, "n", "b", t0.Add(time.Second), ttl, true, "nothing extended a's lease past t0+1s")
			}},
		{"InvalidArguments", "a blank name or owner, or a TTL under 1ms, is an ErrInvalid naming the field, and writes nothing",
			func(t *testing.T, st lease.Store) {
				ctx := context.Background()
				for _, blank := range []string{"", " ", "\t\n"} {
					ok, err := st.Acquire(ctx, blank, "a", t0, ttl)
					wantInvalid(t, ok, err, "name", fmt.Sprintf("Acquire(name %q)", blank))
					ok, err = st.Acquire(ctx, "n", blank, t0, ttl)
					wantInvalid(t, ok, err, "owner", fmt.Sprintf("Acquire(owner %q)", blank))
					ok, err = st.Renew(ctx, blank, "a", t0, ttl)
					wantInvalid(t, ok, err, "name", fmt.Sprintf("Renew(name %q)", blank))
					ok, err = st.Renew(ctx, "n", blank, t0, ttl)
					wantInvalid(t, ok, err, "owner", fmt.Sprintf("Renew(owner %q)", blank))
					wantInvalid(t, false, st.Release(ctx, blank, "a"), "name", fmt.Sprintf("Release(name %q)", blank))
					wantInvalid(t, false, st.Release(ctx, "n", blank), "owner", fmt.Sprintf("Release(owner %q)", blank))
				}
				for _, bad := range []time.Duration{0, -time.Second, time.Millisecond - time.Nanosecond, 999 * time.Microsecond} {
					ok, err := st.Acquire(ctx, "n", "a", t0, bad)
					wantInvalid(t, ok, err, "ttl", fmt.Sprintf("Acquire(ttl %v)", bad))
				}
				wantHolders(t, st, nil, "invalid calls write nothing")
				acquire(t, st, "n", "b", t0, time.Second, true, "invalid Acquires left the lease free")
				for _, bad := range []time.Duration{0, -time.Second, 999 * time.Microsecond} {
					ok, err := st.Renew(ctx, "n", "b", t0.Add(time.Millisecond), bad)
					wantInvalid(t, ok, err, "ttl", fmt.Sprintf("Renew(ttl %v)", bad))
				}
				acquire(t, st, "n", "a", t0.Add(time.Second), ttl, true, "an invalid Renew does not extend b's lease past t0+1s")
			}},
		{"RaceForFreeLease", fmt.Sprintf("%d candidates racing for a lease nobody holds: exactly one wins, %d rounds out of %d", Candidates, Rounds, Rounds),
			func(t *testing.T, st lease.Store) {
				for round := range Rounds {
					name := fmt.Sprintf("free-%d", round)
					wantOneWinner(t, st, name, t0, fmt.Sprintf("round %d, a free lease", round))
				}
			}},
		{"RaceForExpiredLease", fmt.Sprintf("%d candidates racing for an expired lease: exactly one wins, %d rounds out of %d", Candidates, Rounds, Rounds),
			func(t *testing.T, st lease.Store) {
				for round := range Rounds {
					name := fmt.Sprintf("expired-%d", round)
					acquire(t, st, name, "old", t0, time.Second, true, "the lease is free")
					wantOneWinner(t, st, name, t0.Add(time.Second), fmt.Sprintf("round %d, a lease expired at now", round))
				}
			}},
		{"Holders", "an Inspector lists every lease, expired ones included, sorted by name, as last recorded",
			func(t *testing.T, st lease.Store) {
				if _, ok := st.(lease.Inspector); !ok {
					t.Skip("the store does not implement lease.Inspector")
				}
				wantHolders(t, st, nil, "a fresh store holds nothing")
				acquire(t, st, "b", "y", t0, ttl, true, "b is free")
				acquire(t, st, "a", "x", t0.Add(time.Millisecond), time.Second, true, "a is free")
				acquire(t, st, "c", "z", t0, ttl, true, "c is free")
				renew(t, st, "b", "y", t0.Add(time.Second), ttl, true, "y holds b")
				release(t, st, "c", "z", nil, "z holds c")
				wantHolders(t, st, []lease.Holder{
					{Name: "a", Owner: "x", Expires: t0.Add(time.Second + time.Millisecond)},
					{Name: "b", Owner: "y", Expires: t0.Add(time.Second + ttl)},
				}, "acquisitions, renewals and releases, sorted by name")
			}},
	}
}

// wantOneWinner races Candidates owners for name at now and fails unless
// exactly one wins, every loser is refused with false, nil, and the winner
// holds the lease afterwards.
func wantOneWinner(t *testing.T, st lease.Store, name string, now time.Time, why string) {
	t.Helper()
	type answer struct {
		ok  bool
		err error
	}
	answers := make([]answer, Candidates)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range Candidates {
		wg.Go(func() {
			<-start
			ok, err := st.Acquire(context.Background(), name, fmt.Sprintf("candidate-%d", i), now, ttl)
			answers[i] = answer{ok, err}
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, a := range answers {
		switch {
		case a.err != nil:
			t.Errorf("%s: candidate-%d got error %v, want true or false, nil: a lost race is a refusal, not an error", why, i, a.err)
		case a.ok && winner >= 0:
			t.Errorf("%s: got winners candidate-%d and candidate-%d, want exactly one", why, winner, i)
		case a.ok:
			winner = i
		}
	}
	if winner < 0 {
		t.Errorf("%s: got no winner among %d candidates, want exactly one", why, Candidates)
		return
	}
	acquire(t, st, name, "late", now, ttl, false, fmt.Sprintf("%s: candidate-%d won", why, winner))
	renew(t, st, name, fmt.Sprintf("candidate-%d", winner), now, ttl, true, fmt.Sprintf("%s: candidate-%d won", why, winner))
}

func acquire(t *testing.T, st lease.Store, name, owner string, now time.Time, ttl time.Duration, want bool, why string) {
	t.Helper()
	ok, err := st.Acquire(context.Background(), name, owner, now, ttl)
	if ok != want || err != nil {
		t.Errorf("Acquire(%q, %q, %s, %v) = %v, %v; want %v, nil: %s", name, owner, at(now), ttl, ok, err, want, why)
	}
}

func renew(t *testing.T, st lease.Store, name, owner string, now time.Time, ttl time.Duration, want bool, why string) {
	t.Helper()
	ok, err := st.Renew(context.Background(), name, owner, now, ttl)
	if ok != want || err != nil {
		t.Errorf("Renew(%q, %q, %s, %v) = %v, %v; want %v, nil: %s", name, owner, at(now), ttl, ok, err, want, why)
	}
}

func release(t *testing.T, st lease.Store, name, owner string, want error, why string) {
	t.Helper()
	err := st.Release(context.Background(), name, owner)
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Errorf("Release(%q, %q) = %v; want %v: %s", name, owner, err, want, why)
	}
}

// wantHolders checks the store's Holders when it is an Inspector, and does
// nothing otherwise: the other checks of each case pin the same rule through
// Acquire and Renew.
func wantHolders(t *testing.T, st lease.Store, want []lease.Holder, why string) {
	t.Helper()
	in, ok := st.(lease.Inspector)
	if !ok {
		return
	}
	got, err := in.Holders(context.Background())
	if err != nil {
		t.Errorf("Holders() error %v, want nil: %s", err, why)
		return
	}
	same := len(got) == len(want)
	for i := 0; same && i < len(got); i++ {
		g, w := got[i], want[i]
		same = g.Name == w.Name && g.Owner == w.Owner && g.Expires.Equal(w.Expires) && g.Expires.Location() == time.UTC
	}
	if !same {
		t.Errorf("Holders() = %s; want %s: %s", holders(got), holders(want), why)
	}
}

func wantCtxErr(t *testing.T, ctx context.Context, ok bool, err error, call string) {
	t.Helper()
	if ok || !errors.Is(err, ctx.Err()) {
		t.Errorf("%s on a done context = %v, %v; want false and an error wrapping %v: a done context fails", call, ok, err, ctx.Err())
	}
}

func wantInvalid(t *testing.T, ok bool, err error, field, call string) {
	t.Helper()
	if ok || !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), field) {
		t.Errorf("%s = %v, %v; want false and an ErrInvalid naming %s", call, ok, err, field)
	}
}

// at formats an instant relative to t0, which keeps failure messages short.
func at(now time.Time) string { return "t0" + signed(now.Sub(t0)) + zone(now) }

func signed(d time.Duration) string {
	if d < 0 {
		return d.String()
	}
	return "+" + d.String()
}

func zone(now time.Time) string {
	if now.Location() == time.UTC {
		return ""
	}
	name, _ := now.Zone()
	return " (" + name + ")"
}

func holders(hs []lease.Holder) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = fmt.Sprintf("{%s %s until %s %s}", h.Name, h.Owner, at(h.Expires), h.Expires.Location())
	}
	return "[" + strings.Join(parts, " ") + "]"
}
