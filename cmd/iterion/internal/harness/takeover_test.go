package harness

import (
	"testing"
	"time"
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
	leader := holder{Name: "merge-gate-sweeper", Owner: "replica-01-x", Expires: at(1200)}
	succ := holder{Name: "merge-gate-sweeper", Owner: "replica-02-y", Expires: at(2800)}
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
			{at: at(-500), v: leader}, {since: at(40), at: at(55), v: holder{}}, {since: at(300), at: at(315), v: succ},
		}, at(40), true, "the release deletes the document: measured from the last poll naming the leader"},
		{"taken within one poll of its deletion", []change[holder]{
			{at: at(-500), v: leader}, {since: at(40), at: at(55), v: succ},
		}, at(40), true, "an unexpired lease is taken only once released"},
		{"taken at its expiry", []change[holder]{
			{at: at(-500), v: leader}, {since: at(1190), at: at(1205), v: succ},
		}, t0, false, "a lease never released goes only once it expired: no release to measure from, so from the signal"},
		{"renewed after the signal, taken at its new expiry", []change[holder]{
			{at: at(-500), v: leader}, {since: at(-20), at: at(5), v: renewed}, {since: at(1490), at: at(1510), v: succ},
		}, t0, false, "the last expiry counts, not the first seen"},
		{"released before the first poll after the signal", []change[holder]{
			{at: at(-500), v: leader}, {since: at(-5), at: at(10), v: holder{}},
		}, t0, true, "the release came after the signal: never measured from before it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from, released, ok := releaseOf(tc.cs, t0, leader.Owner)
			if !ok || released != tc.released || !from.Equal(tc.from) {
				t.Errorf("got from %v, released %v (found %v); want from %v, released %v: %s",
					from.Sub(t0), released, ok, tc.from.Sub(t0), tc.released, tc.why)
			}
		})
	}
	if _, _, ok := releaseOf([]change[holder]{{at: at(-500), v: leader}}, t0, leader.Owner); ok {
		t.Errorf("got a release from a document that kept naming the leader, want none")
	}
}
