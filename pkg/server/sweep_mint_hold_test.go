package server

import (
	"testing"
	"time"
)

// TestMintHeldEndsWithinHalfAnIntervalOfItsEnd pins the slack of a mint
// hold (mintHeld): a pass's tick may read the clock a little before a
// whole number of intervals after the refused pass did, so a hold of one
// interval has ended for the tick that comes a millisecond early, and the
// installation is not skipped a whole interval more for it; half an
// interval before its end, it still holds.
func TestMintHeldEndsWithinHalfAnIntervalOfItsEnd(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	g := &installationSweeps{interval: time.Minute, mintHolds: map[int64]mintHold{7: {until: t0.Add(time.Minute), wait: time.Minute}}}
	for _, c := range []struct {
		at   time.Duration
		want bool
		why  string
	}{
		{0, true, "the refused pass's own instant"},
		{29 * time.Second, true, "more than half an interval before the hold's end"},
		{time.Minute - time.Millisecond, false, "the next tick, a millisecond early"},
		{time.Minute, false, "the next tick"},
	} {
		if _, held := g.mintHeld(7, t0.Add(c.at)); held != c.want {
			t.Errorf("mintHeld at %v after a one-interval hold began: %v, want %v: %s", c.at, held, c.want, c.why)
		}
	}
}
