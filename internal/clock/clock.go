// Package clock holds the one context-aware sleep of the module's tools and
// test servers, so that every wait a caller may cancel is written once.
package clock

import (
	"context"
	"time"
)

// Sleep waits d or until ctx is done, whichever comes first. It reports
// whether the whole of d passed: false means ctx ended the wait (a d of zero
// or less returns at once, true unless ctx is already done). Its timer is
// stopped on return either way.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
