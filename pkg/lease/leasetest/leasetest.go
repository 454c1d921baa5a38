// Package leasetest is the conformance suite for [lease.Store]
// implementations. Any Store, ours or a user's, proves itself with one line:
//
//	func TestConformance(t *testing.T) { leasetest.Run(t, newStore) }
//
// Like testing/slogtest, the suite is a table of named cases, each with a
// one-line statement of the rule it checks (the store contract of
// docs/design.md, decision 1), each run as a subtest on a fresh store. It treats the
// store as a black box: it calls only the Store methods, and Holders when the
// store implements [lease.Inspector], and AcquireTerm and ReleaseTerm when
// it implements [lease.TermStore] (the Term cases skip otherwise).
package leasetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"iterion.dev/iterion/internal/conformance"
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
	conformance.Run(t, cases(), newStore)
}

// testCase is one rule of the contract and the check that pins it.
type testCase = conformance.Case[lease.Store]

// t0 is the suite's reference instant, a millisecond boundary in UTC. It is
// never modified.
var t0 = time.Date(2026, 9, 30, 15, 0, 0, 0, time.UTC)

const ttl = 10 * time.Second

func cases() []testCase {
	return []testCase{
		{Name: "AcquireFree", Rule: "a lease nobody holds goes to the first owner who asks",
			Check: func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, ttl, true, "the lease is free")
				acquire(t, st, "n", "b", t0, ttl, false, "a holds it unexpired")
			}},
		{Name: "AcquireOwn", Rule: "Acquire of the caller's own unexpired lease succeeds and extends it",
			Check: func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, ttl, true, "the lease is free")
				acquire(t, st, "n", "a", t0.Add(time.Second), ttl, true, "the lease is already a's")
				acquire(t, st, "n", "b", t0.Add(ttl), ttl, false, "a's second Acquire moved the expiry to t0+1s+ttl")
				acquire(t, st, "n", "b", t0.Add(time.Second+ttl), ttl, true, "the lease is expired at t0+1s+ttl")
			}},
		{Name: "NamesIndependent", Rule: "leases with different names do not affect each other",
			Check: func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, ttl, true, "n is free")
				acquire(t, st, "m", "b", t0, ttl, true, "m is free, whoever holds n")
				release(t, st, "m", "b", nil, "b holds m")
				acquire(t, st, "n", "b", t0, ttl, false, "releasing m leaves n with a")
			}},
		{Name: "ExpiryInclusive", Rule: "a lease is expired at its expiry instant, and held one millisecond before",
			Check: func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, ttl, true, "the lease is free")
				acquire(t, st, "n", "b", t0.Add(ttl-time.Millisecond), ttl, false, "held until its expiry t0+ttl")
				acquire(t, st, "n", "b", t0.Add(ttl), ttl, true, "expired at its expiry instant t0+ttl")
				acquire(t, st, "n", "a", t0.Add(ttl), ttl, false, "b took it over")
			}},
		{Name: "NowTruncated", Rule: "now is truncated to the millisecond: expiry = trunc(trunc(now)+ttl)",
			Check: func(t *testing.T, st lease.Store) {
				// Taken at t0+0.999999ms, it expires at t0+10ms, not t0+10.999999ms.
				acquire(t, st, "n", "a", t0.Add(time.Millisecond-time.Nanosecond), 10*time.Millisecond, true, "the lease is free")
				acquire(t, st, "n", "b", t0.Add(10*time.Millisecond-time.Nanosecond), ttl, false, "t0+9.999999ms truncates to t0+9ms, before the expiry")
				acquire(t, st, "n", "b", t0.Add(10*time.Millisecond), ttl, true, "expiry is trunc(t0+0.999999ms)+10ms = t0+10ms")
			}},
		{Name: "NowTruncatedBeforeTTLAdded", Rule: "now is truncated before ttl is added: taken at t0+0.6ms for 1.6ms, it expires at trunc(t0+1.6ms) = t0+1ms, not trunc(t0+2.2ms)",
			Check: func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0.Add(600*time.Microsecond), 1600*time.Microsecond, true, "the lease is free")
				wantHolders(t, st, []lease.Holder{{Name: "n", Owner: "a", Expires: t0.Add(time.Millisecond)}}, "expiry = trunc(trunc(now)+ttl) = t0+1ms")
				acquire(t, st, "n", "b", t0.Add(time.Millisecond-time.Nanosecond), ttl, false, "held until its expiry t0+1ms")
				acquire(t, st, "n", "b", t0.Add(time.Millisecond), ttl, true, "expiry is trunc(trunc(t0+0.6ms)+1.6ms) = t0+1ms, not trunc(t0+0.6ms+1.6ms) = t0+2ms")
			}},
		{Name: "TTLTruncated", Rule: "the expiry is truncated to the millisecond: a 1.999ms TTL from t0 expires at t0+1ms",
			Check: func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, 2*time.Millisecond-time.Microsecond, true, "the lease is free")
				acquire(t, st, "n", "b", t0.Add(time.Millisecond), ttl, true, "expiry is trunc(t0+1.999ms) = t0+1ms")
			}},
		{Name: "TTLOneMillisecond", Rule: "a TTL of exactly 1ms is valid and lasts one millisecond",
			Check: func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0.Add(500*time.Microsecond), lease.MinTTL, true, "the lease is free")
				acquire(t, st, "n", "b", t0.Add(time.Millisecond-time.Nanosecond), ttl, false, "held through the millisecond it was taken in")
				acquire(t, st, "n", "b", t0.Add(time.Millisecond), ttl, true, "expired at t0+1ms")
			}},
		{Name: "UTC", Rule: "instants are compared as instants, whatever their location, and reported in UTC",
			Check: func(t *testing.T, st lease.Store) {
				kolkata := time.FixedZone("IST", 5*3600+1800)
				acquire(t, st, "n", "a", t0.In(kolkata), ttl, true, "the lease is free")
				acquire(t, st, "n", "b", t0.Add(ttl-time.Millisecond), ttl, false, "held until t0+ttl, whatever now's location")
				acquire(t, st, "n", "b", t0.Add(ttl).In(time.FixedZone("PDT", -7*3600)), ttl, true, "expired at t0+ttl, whatever now's location")
				wantHolders(t, st, []lease.Holder{{Name: "n", Owner: "b", Expires: t0.Add(2 * ttl)}}, "Expires is kept in UTC")
			}},
		{Name: "RefusalIsNotAnError", Rule: "a lease held by another is refused with false, nil: an error means no answer, never refused",
			Check: func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, ttl, true, "the lease is free")
				acquire(t, st, "n", "b", t0, ttl, false, "a holds it")
				renew(t, st, "n", "b", t0, ttl, false, "b does not hold it")
				renew(t, st, "absent", "b", t0, ttl, false, "nobody holds it")
			}},
		{Name: "RenewSameMillisecond", Rule: "a renewal that stamps the same expiry modifies nothing and is still a renewal",
			Check: func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, ttl, true, "the lease is free")
				renew(t, st, "n", "a", t0, ttl, true, "same now and ttl: same expiry, still a's")
				renew(t, st, "n", "a", t0.Add(999*time.Microsecond), ttl, true, "same millisecond: same expiry, still a's")
				acquire(t, st, "n", "a", t0.Add(999*time.Microsecond), ttl, true, "Acquire in the same millisecond is a's too")
			}},
		{Name: "RenewTruncated", Rule: "a renewal's expiry is trunc(trunc(now)+ttl), as a take's: renewed at t0+0.6ms for 2.9ms, it expires at t0+2ms",
			Check: func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, lease.MinTTL, true, "the lease is free")
				renew(t, st, "n", "a", t0.Add(600*time.Microsecond), 2900*time.Microsecond, true, "a holds it")
				wantHolders(t, st, []lease.Holder{{Name: "n", Owner: "a", Expires: t0.Add(2 * time.Millisecond)}}, "expiry = trunc(trunc(t0+0.6ms)+2.9ms) = t0+2ms")
				acquire(t, st, "n", "b", t0.Add(2*time.Millisecond), ttl, true, "expired at t0+2ms, not t0+2.9ms")
			}},
		{Name: "ExpiryNeverBackward", Rule: "a late, older stamp or a shorter TTL keeps the later expiry",
			Check: func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, ttl, true, "the lease is free")
				renew(t, st, "n", "a", t0.Add(-5*time.Second), ttl, true, "an older stamp is still a's renewal")
				renew(t, st, "n", "a", t0.Add(time.Second), time.Millisecond, true, "a shorter TTL is still a's renewal")
				acquire(t, st, "n", "a", t0.Add(-time.Minute), time.Millisecond, true, "an older Acquire of a's own lease succeeds")
				acquire(t, st, "n", "b", t0.Add(ttl-time.Millisecond), ttl, false, "the expiry stayed t0+ttl, not earlier")
				acquire(t, st, "n", "b", t0.Add(ttl), ttl, true, "the expiry stayed t0+ttl, not later")
			}},
		{Name: "ExpiredStillRenewable", Rule: "a lease past its expiry that nobody took is still its owner's and renewable",
			Check: func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, time.Second, true, "the lease is free")
				renew(t, st, "n", "a", t0.Add(5*time.Second), time.Second, true, "expired at t0+1s but untaken")
				acquire(t, st, "n", "b", t0.Add(6*time.Second-time.Millisecond), ttl, false, "renewed to t0+6s")
				acquire(t, st, "n", "b", t0.Add(6*time.Second), ttl, true, "expired at t0+6s")
				renew(t, st, "n", "a", t0.Add(7*time.Second), ttl, false, "taken over by b")
			}},
		{Name: "RenewNeverCreates", Rule: "Renew of a lease nobody holds refuses and creates nothing",
			Check: func(t *testing.T, st lease.Store) {
				renew(t, st, "n", "a", t0, ttl, false, "nobody holds it")
				wantHolders(t, st, nil, "a refused Renew writes nothing")
				acquire(t, st, "n", "b", t0, ttl, true, "the refused Renew left the lease free")
			}},
		{Name: "RenewNeverTakes", Rule: "Renew of another's lease, even expired, refuses and changes nothing",
			Check: func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, time.Second, true, "the lease is free")
				renew(t, st, "n", "b", t0.Add(time.Millisecond), ttl, false, "a holds it unexpired")
				renew(t, st, "n", "b", t0.Add(5*time.Second), ttl, false, "a's expired lease is still a's")
				wantHolders(t, st, []lease.Holder{{Name: "n", Owner: "a", Expires: t0.Add(time.Second)}}, "a refused Renew changes nothing")
				renew(t, st, "n", "a", t0.Add(5*time.Second), time.Second, true, "a still holds it")
			}},
		{Name: "RenewAfterRelease", Rule: "a renewal that lands after its holder released changes nothing",
			Check: func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, ttl, true, "the lease is free")
				release(t, st, "n", "a", nil, "a holds it")
				renew(t, st, "n", "a", t0.Add(time.Millisecond), ttl, false, "a released it")
				wantHolders(t, st, nil, "a late Renew does not resurrect a released lease")
				acquire(t, st, "n", "b", t0.Add(time.Millisecond), ttl, true, "the lease is free after a's release")
			}},
		{Name: "ReleaseOwn", Rule: "Release of the caller's lease, expired or not, frees it",
			Check: func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, ttl, true, "the lease is free")
				release(t, st, "n", "a", nil, "a holds it")
				acquire(t, st, "n", "b", t0, ttl, true, "a released it")
				release(t, st, "n", "b", nil, "b holds it")
				wantHolders(t, st, nil, "a released lease is gone")
			}},
		{Name: "ReleaseNobodys", Rule: "Release of a lease nobody holds is a no-op",
			Check: func(t *testing.T, st lease.Store) {
				release(t, st, "n", "a", nil, "nobody holds it")
				acquire(t, st, "n", "a", t0, ttl, true, "the lease is free")
				release(t, st, "n", "a", nil, "a holds it")
				release(t, st, "n", "a", nil, "a second Release finds nobody's lease")
			}},
		{Name: "ReleaseAnothers", Rule: "Release of another's lease returns ErrLost and changes nothing",
			Check: func(t *testing.T, st lease.Store) {
				acquire(t, st, "n", "a", t0, time.Second, true, "the lease is free")
				release(t, st, "n", "b", lease.ErrLost, "a holds it")
				acquire(t, st, "n", "b", t0.Add(time.Second), ttl, true, "a's expired lease is taken over")
				release(t, st, "n", "a", lease.ErrLost, "b took a's lease over")
				acquire(t, st, "n", "c", t0.Add(time.Second+ttl-time.Millisecond), ttl, false, "a's refused Release left b's lease")
			}},
		{Name: "DoneContext", Rule: "a call on a done context fails and changes nothing",
			Check: func(t *testing.T, st lease.Store) {
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
		{Name: "InvalidArguments", Rule: "a blank name or owner, or a TTL under 1ms, is an ErrInvalid naming the field, and writes nothing",
			Check: func(t *testing.T, st lease.Store) {
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
		{Name: "RaceForFreeLease", Rule: fmt.Sprintf("%d candidates racing for a lease nobody holds: exactly one wins, %d rounds out of %d", Candidates, Rounds, Rounds),
			Check: func(t *testing.T, st lease.Store) {
				for round := range Rounds {
					name := fmt.Sprintf("free-%d", round)
					wantOneWinner(t, st, name, t0, fmt.Sprintf("round %d, a free lease", round))
				}
			}},
		{Name: "RaceForExpiredLease", Rule: fmt.Sprintf("%d candidates racing for an expired lease: exactly one wins, %d rounds out of %d", Candidates, Rounds, Rounds),
			Check: func(t *testing.T, st lease.Store) {
				for round := range Rounds {
					name := fmt.Sprintf("expired-%d", round)
					acquire(t, st, name, "old", t0, time.Second, true, "the lease is free")
					wantOneWinner(t, st, name, t0.Add(time.Second), fmt.Sprintf("round %d, a lease expired at now", round))
				}
			}},
		{Name: "Holders", Rule: "an Inspector lists every lease, expired ones included, sorted by name, as last recorded",
			Check: func(t *testing.T, st lease.Store) {
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
		{Name: "TermReleaseOwnTerm", Rule: "a TermStore's ReleaseTerm of the term that took the lease deletes it",
			Check: termCase(func(t *testing.T, st lease.TermStore) {
				acquireTerm(t, st, "n", "a", t0, "T1", true, "the lease is free")
				releaseTerm(t, st, "n", "a", "T1", nil, "T1 took the lease")
				wantHolders(t, st, nil, "the release deleted the lease")
				acquire(t, st, "n", "b", t0, ttl, true, "the lease is free again")
			})},
		{Name: "TermLateReleaseKeepsLaterTerm", Rule: "a late ReleaseTerm of an earlier term of the same owner never deletes a later term's lease",
			Check: termCase(func(t *testing.T, st lease.TermStore) {
				acquireTerm(t, st, "n", "a", t0, "T1", true, "the lease is free")
				releaseTerm(t, st, "n", "a", "T1", nil, "T1 took the lease")
				acquireTerm(t, st, "n", "a", t0.Add(time.Second), "T2", true, "the lease is free")
				releaseTerm(t, st, "n", "a", "T1", lease.ErrLost, "T2 holds the lease now: a late release of T1")
				acquire(t, st, "n", "b", t0.Add(time.Second), ttl, false, "T2's lease survived T1's late release")
				releaseTerm(t, st, "n", "a", "T2", nil, "T2 holds the lease")
			})},
		{Name: "TermReacquireMovesTerm", Rule: "a successful AcquireTerm of the owner's own lease makes its token the term",
			Check: termCase(func(t *testing.T, st lease.TermStore) {
				acquireTerm(t, st, "n", "a", t0, "T1", true, "the lease is free")
				acquireTerm(t, st, "n", "a", t0.Add(time.Second), "T2", true, "the lease is already a's")
				releaseTerm(t, st, "n", "a", "T1", lease.ErrLost, "T2 re-took the lease")
				releaseTerm(t, st, "n", "a", "T2", nil, "T2 is the term")
			})},
		{Name: "TermLateAcquireKeepsLaterTerm", Rule: "an AcquireTerm of the owner's own lease that does not move its expiry forward (a late, older send) leaves the term alone, so that term's late ReleaseTerm deletes nothing",
			Check: termCase(func(t *testing.T, st lease.TermStore) {
				acquireTerm(t, st, "n", "a", t0.Add(time.Second), "T2", true, "the lease is free")
				acquireTerm(t, st, "n", "a", t0, "T1", true, "the lease is already a's: a late T1, sent a second before T2")
				releaseTerm(t, st, "n", "a", "T1", lease.ErrLost, "T2 is still the term")
				wantHolders(t, st, []lease.Holder{{Name: "n", Owner: "a", Expires: lease.Expiry(t0.Add(time.Second), ttl)}}, "the late T1 moved no expiry back")
				acquireTerm(t, st, "n", "a", t0.Add(time.Second), "T3", true, "the lease is a's: a T3 sent in T2's millisecond")
				releaseTerm(t, st, "n", "a", "T3", lease.ErrLost, "an equal expiry is no move forward: T2 is still the term")
				releaseTerm(t, st, "n", "a", "T2", nil, "T2 is the term")
			})},
		{Name: "TermTakeover", Rule: "an AcquireTerm taking over an expired lease starts a new term: the old term's release is refused",
			Check: termCase(func(t *testing.T, st lease.TermStore) {
				acquireTerm(t, st, "n", "a", t0, "T1", true, "the lease is free")
				acquireTerm(t, st, "n", "b", t0.Add(ttl), "T2", true, "a's lease is expired at t0+ttl")
				releaseTerm(t, st, "n", "a", "T1", lease.ErrLost, "b took the lease over")
				releaseTerm(t, st, "n", "b", "T1", lease.ErrLost, "b's term is T2, whatever the token's origin")
				releaseTerm(t, st, "n", "b", "T2", nil, "b's term is T2")
			})},
		{Name: "TermRefusedRecordsNothing", Rule: "a refused AcquireTerm leaves the holder's term alone",
			Check: termCase(func(t *testing.T, st lease.TermStore) {
				acquireTerm(t, st, "n", "a", t0, "T1", true, "the lease is free")
				acquireTerm(t, st, "n", "b", t0, "T2", false, "a holds the lease unexpired")
				releaseTerm(t, st, "n", "a", "T1", nil, "the refusal recorded nothing")
			})},
		{Name: "TermRenewKeepsTerm", Rule: "Renew keeps the term; a plain Release deletes the lease whatever its term",
			Check: termCase(func(t *testing.T, st lease.TermStore) {
				acquireTerm(t, st, "n", "a", t0, "T1", true, "the lease is free")
				renew(t, st, "n", "a", t0.Add(time.Second), ttl, true, "a holds the lease")
				releaseTerm(t, st, "n", "a", "T2", lease.ErrLost, "the renewal kept T1")
				releaseTerm(t, st, "n", "a", "T1", nil, "the renewal kept T1")
				acquireTerm(t, st, "n", "a", t0, "T3", true, "the lease is free")
				release(t, st, "n", "a", nil, "a plain Release ignores the term")
				wantHolders(t, st, nil, "the plain Release deleted the lease")
			})},
		{Name: "TermPlainAcquireClearsTerm", Rule: "a plain Acquire records no term, so any ReleaseTerm of its owner deletes its lease",
			Check: termCase(func(t *testing.T, st lease.TermStore) {
				acquireTerm(t, st, "n", "a", t0, "T1", true, "the lease is free")
				acquire(t, st, "n", "a", t0.Add(time.Second), ttl, true, "the lease is a's")
				releaseTerm(t, st, "n", "a", "T2", nil, "the plain Acquire cleared T1: a lease without a term")
				acquire(t, st, "n", "a", t0, ttl, true, "the lease is free")
				releaseTerm(t, st, "n", "b", "T2", lease.ErrLost, "a holds the lease, whatever the token")
				releaseTerm(t, st, "m", "a", "T2", nil, "nobody holds m")
			})},
		{Name: "TermPlainAcquireSameMillisecondClearsTerm", Rule: "a plain Acquire clears the term even when it moves no expiry (sent in the term's millisecond): it never keeps a token",
			Check: termCase(func(t *testing.T, st lease.TermStore) {
				acquireTerm(t, st, "n", "a", t0, "T1", true, "the lease is free")
				acquire(t, st, "n", "a", t0, ttl, true, "the lease is a's; same millisecond, same expiry")
				releaseTerm(t, st, "n", "a", "T2", nil, "the plain Acquire cleared T1 though it moved no expiry: a lease without a term")
			})},
		{Name: "TermInvalidArguments", Rule: "a blank token is ErrInvalid naming the token, and writes nothing",
			Check: termCase(func(t *testing.T, st lease.TermStore) {
				ctx := context.Background()
				for _, blank := range []string{"", " "} {
					ok, err := st.AcquireTerm(ctx, "n", "a", t0, ttl, blank)
					wantInvalid(t, ok, err, "token", fmt.Sprintf("AcquireTerm(token %q)", blank))
				}
				wantHolders(t, st, nil, "invalid calls write nothing")
				acquireTerm(t, st, "n", "a", t0, "T1", true, "the invalid AcquireTerms left the lease free")
				wantInvalid(t, false, st.ReleaseTerm(ctx, "n", "a", ""), "token", `ReleaseTerm(token "")`)
				acquire(t, st, "n", "b", t0, ttl, false, "the invalid ReleaseTerm left a's lease")
				done, cancel := context.WithCancel(ctx)
				cancel()
				ok, err := st.AcquireTerm(done, "n", "b", t0.Add(ttl), ttl, "T2")
				wantCtxErr(t, done, ok, err, "AcquireTerm")
				wantCtxErr(t, done, false, st.ReleaseTerm(done, "n", "a", "T1"), "ReleaseTerm")
				releaseTerm(t, st, "n", "a", "T1", nil, "calls on a done context change nothing")
			})},
	}
}

// termCase is a case for stores that implement lease.TermStore; it skips
// the others, which Run serves with the plain Release.
func termCase(f func(t *testing.T, st lease.TermStore)) func(t *testing.T, st lease.Store) {
	return func(t *testing.T, st lease.Store) {
		ts, ok := st.(lease.TermStore)
		if !ok {
			t.Skip("the store does not implement lease.TermStore")
		}
		f(t, ts)
	}
}

func acquireTerm(t *testing.T, st lease.TermStore, name, owner string, now time.Time, token string, want bool, why string) {
	t.Helper()
	ok, err := st.AcquireTerm(context.Background(), name, owner, now, ttl, token)
	if ok != want || err != nil {
		t.Errorf("AcquireTerm(%q, %q, %s, %v, %q) = %v, %v; want %v, nil: %s", name, owner, at(now), ttl, token, ok, err, want, why)
	}
}

func releaseTerm(t *testing.T, st lease.TermStore, name, owner, token string, want error, why string) {
	t.Helper()
	err := st.ReleaseTerm(context.Background(), name, owner, token)
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Errorf("ReleaseTerm(%q, %q, %q) = %v; want %v: %s", name, owner, token, err, want, why)
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
