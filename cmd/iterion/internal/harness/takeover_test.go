package harness

import (
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/server"
)

// TestReleaseOfTellsAReleaseFromAnExpiry pins the instant a SIGTERM
// takeover is measured from. A clean stop releases the lease: its document
// goes (or is taken by the successor before the stopped leader's expiry,
// which only a released lease allows), and the delay runs from the last
// poll still naming the leader. A lease the stopping leader never released
// goes to the successor only once it expired: the document's change then
// marks the expiry, not a release, and measuring from it would hide a
// missing release behind a short delay. That stop is not released, and its
// delay runs from the signal.
func TestReleaseOfTellsAReleaseFromAnExpiry(t *testing.T) {
	t0 := time.Unix(1_000_000, 0) // the SIGTERM
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	const ttl = 1500 * time.Millisecond
	leader := holder{Name: "merge-gate-sweeper", Owner: "replica-01-x", Expires: at(1200)}
	// takenAt is the successor's document as its Acquire at ms wrote it.
	takenAt := func(ms int) holder {
		return holder{Name: "merge-gate-sweeper", Owner: "replica-02-y", Expires: at(ms).Add(ttl)}
	}
	renewed := leader
	renewed.Expires = at(1500)
	for _, tc := range []struct {
		name     string
		cs       []change[holder]
		from     time.Time
		released bool
		why      string
	}{
		{"deleted, then taken", []change[holder]{
			{at: at(-500), v: leader}, {since: at(40), at: at(55), v: holder{}}, {since: at(300), at: at(315), v: takenAt(310)},
		}, at(40), true, "the release deletes the document: measured from the last poll naming the leader"},
		{"taken within one poll of its deletion", []change[holder]{
			{at: at(-500), v: leader}, {since: at(40), at: at(55), v: takenAt(50)},
		}, at(40), true, "an unexpired lease is taken only once released"},
		{"taken before its expiry, seen after it", []change[holder]{
			{at: at(-500), v: leader}, {since: at(40), at: at(1300), v: takenAt(600)},
		}, at(40), true, "a poll answered after the expiry saw a document its new holder wrote before it: released"},
		{"taken at its expiry", []change[holder]{
			{at: at(-500), v: leader}, {since: at(1190), at: at(1205), v: takenAt(1200)},
		}, t0, false, "a lease never released goes only once it expired: no release to measure from, so from the signal"},
		{"renewed after the signal, taken at its new expiry", []change[holder]{
			{at: at(-500), v: leader}, {since: at(-20), at: at(5), v: renewed}, {since: at(1490), at: at(1510), v: takenAt(1500)},
		}, t0, false, "the last expiry counts, not the first seen"},
		{"renewed after the signal, taken before its new expiry", []change[holder]{
			{at: at(-500), v: leader}, {since: at(-20), at: at(5), v: renewed}, {since: at(1290), at: at(1305), v: takenAt(1295)},
		}, at(1290), true, "taken before the leader's last expiry, so released: the earlier expiry it renewed past does not count"},
		{"deleted only after its expiry", []change[holder]{
			{at: at(-500), v: leader}, {since: at(1190), at: at(1205), v: holder{}},
		}, at(1190), true, "only the owner's release deletes the document, expired or not: a late release is still one"},
		{"a holder before the leader, changed before the signal", []change[holder]{
			{at: at(-900), v: takenAt(-2400)}, {since: at(-520), at: at(-500), v: leader}, {since: at(40), at: at(55), v: holder{}},
		}, at(40), true, "the document's changes before the signal are not the stopped leader's release"},
		{"released before the first poll after the signal", []change[holder]{
			{at: at(-500), v: leader}, {since: at(-5), at: at(10), v: holder{}},
		}, t0, true, "the release came after the signal: never measured from before it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from, released, ok := releaseOf(tc.cs, t0, leader.Owner, ttl)
			if !ok || released != tc.released || !from.Equal(tc.from) {
				t.Errorf("got from %v, released %v (found %v); want from %v, released %v: %s",
					from.Sub(t0), released, ok, tc.from.Sub(t0), tc.released, tc.why)
			}
		})
	}
	if _, _, ok := releaseOf([]change[holder]{{at: at(-500), v: leader}}, t0, leader.Owner, ttl); ok {
		t.Errorf("got a release from a document that kept naming the leader, want none")
	}
}

// TestTakeoverVerdictIsTheLongestMeasuredDelay pins the takeover row's
// figures and its verdict: after SIGTERM the delays are measured from the
// stopped leader's release (the ADR's clean stop), not from the signal;
// the verdict is on the longest of them, never the median; and a delay
// within the bound plus the polling resolution (a delay is seen up to
// pollEvery late) is within it, one nanosecond more is not.
func TestTakeoverVerdictIsTheLongestMeasuredDelay(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	bound := ms(500)
	res := TakeoverResult{Signal: "SIGTERM", Bound: bound,
		FromSignal:  []time.Duration{ms(900), ms(950), ms(1000)},
		FromRelease: []time.Duration{ms(100), ms(200), bound + pollEvery}}
	if got := res.Median(); got != ms(200) {
		t.Errorf("got median %v, want 200ms: the median of the delays from the release", got)
	}
	if got := res.Max(); got != bound+pollEvery {
		t.Errorf("got max %v, want %v: the longest delay from the release", got, bound+pollEvery)
	}
	if !res.Within() {
		t.Errorf("got not within for a longest delay of the bound %v + the polling %v, want within: a delay is seen up to pollEvery late", bound, pollEvery)
	}
	res.FromRelease[2] += time.Nanosecond
	if res.Within() {
		t.Errorf("got within for a longest delay of %v, want over the bound %v + polling %v: the verdict is on the longest delay, whatever the median", res.Max(), bound, pollEvery)
	}
	md := (&Report{Takeover: []TakeoverResult{res}}).Markdown("bench")
	if want := "| SIGTERM | 3 | 200ms | 510ms | 500ms | no | 950ms / 1s | 0 | 0 |"; !strings.Contains(md, want) {
		t.Errorf("the takeover table lacks %q:\n%s\nwant the release's median and max, the verdict, then the signal's median and max", want, md)
	}
	crash := TakeoverResult{Signal: "SIGKILL", Bound: bound, FromSignal: []time.Duration{ms(100), bound + pollEvery + 1}}
	if crash.Max() != bound+pollEvery+1 || crash.Within() {
		t.Errorf("SIGKILL: got max %v, within %v; want %v, not within: without releases the delays run from the signal", crash.Max(), crash.Within(), bound+pollEvery+1)
	}
}

// TestTakeoverBoundIsTheADRs pins the bounds the takeovers are judged
// against: retry + one tick after a clean stop, which releases the lease;
// TTL + retry + one tick after a crash, whose lease must expire first.
func TestTakeoverBoundIsTheADRs(t *testing.T) {
	ttl, retry, tick := 3*time.Second, time.Second, 1100*time.Millisecond
	if got, want := takeoverBound(syscall.SIGTERM, ttl, retry, tick), retry+tick; got != want {
		t.Errorf("SIGTERM: got bound %v, want retry + tick = %v", got, want)
	}
	if got, want := takeoverBound(syscall.SIGKILL, ttl, retry, tick), ttl+retry+tick; got != want {
		t.Errorf("SIGKILL: got bound %v, want TTL + retry + tick = %v", got, want)
	}
}

// TestDoubleSweepIsTwoFollowersSweeping pins the takeover's double-sweep
// count: two followers whose sweeper requests grew after a stop are two
// holders working at once, and are reported; one is the successor.
func TestDoubleSweepIsTwoFollowersSweeping(t *testing.T) {
	q := func(tok string, n int64) simRequests { return simRequests{Token: tok, Route: graphqlRoute, Count: n} }
	base := simStats{Requests: []simRequests{q("a", 1), q("b", 1), q("c", 1)}}
	one := simStats{Requests: []simRequests{q("a", 3), q("b", 1), q("c", 1)}}
	two := simStats{Requests: []simRequests{q("a", 3), q("b", 2), q("c", 1)}}
	others := []string{"a", "b", "c"}
	if doubleSweep(base, one, others) {
		t.Errorf("got a double sweep when only a swept, want none: one successor")
	}
	if !doubleSweep(base, two, others) {
		t.Errorf("got no double sweep when a and b both swept, want one: two holders at once must be reported")
	}
}

// TestAStopNotReleasedIsNamedAndKeepsTheLogs pins what a run tells of a
// clean stop whose lease went to the successor only once it expired: the
// takeover table names the stopped replica beside the count, and the run
// keeps its logs (Report.unreleased) so that the missing release can be
// read; a run whose every clean stop released its lease keeps none.
func TestAStopNotReleasedIsNamedAndKeepsTheLogs(t *testing.T) {
	clean := TakeoverResult{Signal: "SIGTERM", Bound: time.Second, FromSignal: []time.Duration{time.Second}, FromRelease: []time.Duration{time.Second}}
	crash := TakeoverResult{Signal: "SIGKILL", Bound: time.Second, FromSignal: []time.Duration{time.Second}}
	if (&Report{Takeover: []TakeoverResult{clean, crash}}).unreleased() {
		t.Error("got logs kept for a run whose every clean stop released its lease, want them removed")
	}
	clean.Unreleased = []string{"replica-04", "replica-09"}
	rep := &Report{Takeover: []TakeoverResult{clean, crash}}
	if !rep.unreleased() {
		t.Error("got logs removed for a run with 2 clean stops not released, want them kept")
	}
	if want := "| 0 | 2 (replica-04, replica-09) |"; !strings.Contains(rep.Markdown("bench"), want) {
		t.Errorf("the takeover table lacks %q: want the stops not released counted and their replicas named", want)
	}
}

// TestTakeoverIsMeasuredFromTheSignal pins the instants a takeover is
// measured between, in virtual time: from the signal to the leader (not
// the random phase waited before it, nor any later instant, which would
// make takeovers look shorter than they are) to the first poll of the
// simulator's counts that shows a follower's sweeper request; after
// SIGTERM, also from the last poll of a follower's /leases that still
// named the stopped leader; and a SIGTERM whose lease was not released,
// but taken by its successor from its expiry on, is counted and named,
// and measured from the signal. The simulator and the replicas are
// scripted: the leader sweeps every interval until it is signalled, the
// lease document goes releaseAfter the signal (a clean stop that
// releases it; a crash, or one that does not, leaves it to expire), and a
// follower takes it and sends its first sweeper request sweepAfter it.
func TestTakeoverIsMeasuredFromTheSignal(t *testing.T) {
	const (
		iv           = time.Second
		releaseAfter = 300 * time.Millisecond
		sweepAfter   = 730 * time.Millisecond // a multiple of pollEvery: seen by the poll at that very instant
	)
	for _, tc := range []struct {
		name        string
		sig         syscall.Signal
		releases    bool
		fromRelease []time.Duration
		unreleased  []string
	}{
		// The last poll naming the leader was sent pollEvery before the
		// release: the delay from it errs long by up to one poll.
		{"SIGTERM", syscall.SIGTERM, true, []time.Duration{sweepAfter - releaseAfter + pollEvery}, nil},
		{"SIGTERM not released", syscall.SIGTERM, false, []time.Duration{sweepAfter}, []string{"replica-01"}},
		{"SIGKILL", syscall.SIGKILL, false, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				var leader *signalled
				signalledAt := func() time.Time { _, at := leader.first(); return at }
				stats := func(w http.ResponseWriter, r *http.Request) {
					now, at := time.Now(), signalledAt()
					led := now
					if !at.IsZero() {
						led = at
					}
					st := simStats{Requests: []simRequests{
						{Token: "replica-01", Route: graphqlRoute, Count: int64(led.Sub(start)/iv) + 1},
					}}
					if !at.IsZero() && !now.Before(at.Add(sweepAfter)) {
						st.Requests = append(st.Requests, simRequests{Token: "replica-02", Route: graphqlRoute, Count: int64(now.Sub(at.Add(sweepAfter))/iv) + 1})
					}
					writeJSON(t, w, st)
				}
				leases := func(w http.ResponseWriter, r *http.Request) {
					// Until the signal, the leader's lease is renewed at
					// each poll; after it, the document shows the expiry
					// at which the successor takes it, sweepAfter the
					// signal, when the leader does not release it.
					now, at := time.Now(), signalledAt()
					ttl := server.MergeGateSweeper().TTL(iv)
					renewed := now
					if !at.IsZero() {
						renewed = at.Add(sweepAfter - ttl)
					}
					h := []holder{{Name: server.MergeGateSweeper().Name, Owner: "owner-1", Expires: renewed.Add(ttl)}}
					switch {
					case at.IsZero():
					case !now.Before(at.Add(sweepAfter)):
						h[0].Owner, h[0].Expires = "owner-2", at.Add(sweepAfter+ttl)
					case tc.releases && !now.Before(at.Add(releaseAfter)):
						h = nil // released: the document deleted
					}
					writeJSON(t, w, h)
				}
				simMux, replicaMux := http.NewServeMux(), http.NewServeMux()
				simMux.HandleFunc("GET /_sim/stats", stats)
				replicaMux.HandleFunc("GET /leases", leases)
				r1, p1 := scriptedReplica(t, "replica-01", "owner-1", replicaMux)
				r2, p2 := scriptedReplica(t, "replica-02", "owner-2", replicaMux)
				r3, p3 := scriptedReplica(t, "replica-03", "owner-3", replicaMux)
				leader = p1
				c := &cluster{interval: iv, sim: scriptedSim(simMux), replicas: []*replica{r1, r2, r3}}
				res := TakeoverResult{Signal: sigName(tc.sig), Bound: takeoverBound(tc.sig, c.ttl(), c.retry(), iv)}
				if err := takeoverOnce(t.Context(), c, tc.sig, &res); err != nil {
					t.Fatal(err)
				}
				if sig, at := p1.first(); sig != tc.sig || at.IsZero() {
					t.Fatalf("got %v sent to the leader, want %v", sig, tc.sig)
				}
				for _, p := range []*signalled{p2, p3} {
					if _, at := p.first(); !at.IsZero() {
						t.Errorf("got a follower signalled, want the leader alone")
					}
				}
				if len(res.FromSignal) != 1 || res.FromSignal[0] != sweepAfter {
					t.Errorf("got delays from the signal %v, want [%v]: from the signal to the poll that saw the successor's first request", res.FromSignal, sweepAfter)
				}
				if !slices.Equal(res.FromRelease, tc.fromRelease) || !slices.Equal(res.Unreleased, tc.unreleased) {
					t.Errorf("got delays from the release %v (%d unreleased: %v), want %v (%v): from the last poll naming the stopped leader, or from the signal for a lease not released",
						res.FromRelease, len(res.Unreleased), res.Unreleased, tc.fromRelease, tc.unreleased)
				}
				if res.Doubles != 0 || len(c.replicas) != 2 {
					t.Errorf("got %d double sweeps and %d replicas left, want 0 and 2: one successor, the stopped leader forgotten", res.Doubles, len(c.replicas))
				}
			})
		})
	}
}
