package server

import (
	"context"
	"time"
)

// everyInterval drives one term of an elected net: it calls pass once per
// interval until ctx is done, the first call one interval after the term
// starts (ADR-117: "its first pass one tick later"), so a term that flaps
// costs nothing. pass returns the instant before which the next passes must
// wait (a rate limit's reset; zero for none): the ticks before it are
// skipped, with a call to skipped, and are not passes.
func everyInterval(ctx context.Context, interval time.Duration, now func() time.Time,
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
		if now().Before(resume) {
			skipped(resume)
			continue
		}
		resume = pass(ctx)
	}
}
