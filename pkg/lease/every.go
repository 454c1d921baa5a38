package lease

import (
	"context"
	"time"
)

// Every is the cadence of an elected net's term: it calls pass once per
// interval until ctx is done, the first call one interval after Every
// starts (docs/design.md, decision 3), so a term that flaps
// costs nothing. Call it from the work that [Run] serves, with the term's
// context.
//
// No pass starts once ctx is done, even when a tick and the end of the
// term arrive together. pass returns the instant before which the next
// passes must wait (a rate limit's reset; zero for none): the ticks before
// it are skipped, with a call to skipped, and are not passes. now is the
// clock resume is compared with. interval must be positive.
func Every(ctx context.Context, interval time.Duration, now func() time.Time,
	pass func(context.Context) (resume time.Time), skipped func(until time.Time)) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var resume time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// select picks at random among ready cases: a tick that came with
		// the end of the term must not start a pass in a term that is over.
		if ctx.Err() != nil {
			return
		}
		if now().Before(resume) {
			skipped(resume)
			continue
		}
		resume = pass(ctx)
	}
}
