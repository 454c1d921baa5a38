package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// TestAppModeInstallationsUnsweptCountsOneFailingInstallation pins
// merge_gate_installations_unswept, the signal IterionInstallationUnswept
// alerts on: from 3 intervals without a complete pass of one installation
// of three on, while the others pass every interval (so
// iterion_net_last_success_timestamp_seconds, moved by any installation's
// complete pass, stays within an interval of now, and IterionNetNoPass
// stays quiet), the replica counts that installation, at every interval,
// whether its forge answers 502 (it backs off, never parked) or never
// answers (parked for 3 intervals, then tried again); with every
// installation passing it counts none.
func TestAppModeInstallationsUnsweptCountsOneFailingInstallation(t *testing.T) {
	const interval = time.Minute
	for _, tc := range []struct {
		name string
		next func(http.RoundTripper) http.RoundTripper
		want func(k int) float64 // the count k and a half intervals after the start
	}{
		{"installation 2 answers 502", func(next http.RoundTripper) http.RoundTripper { return failingInstallation{next: next, id: 2} }, failingFrom3},
		{"installation 2 never answers", func(next http.RoundTripper) http.RoundTripper {
			return failingInstallation{next: next, id: 2, hang: true}
		}, failingFrom3},
		{"every installation passes", func(next http.RoundTripper) http.RoundTripper { return next }, func(int) float64 { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, next := newAppCluster(t, 3, true)
				startAppReplicas(t, c, tc.next(next), 1, interval, 1, nil)
				r := c.replicas[0]
				var got, want []float64
				stale := false
				time.Sleep(interval / 2) // off the intervals' boundaries
				for k := range 16 {
					synctest.Wait()
					got = append(got, metricValue(t, r.handler, "merge_gate_installations_unswept"))
					want = append(want, tc.want(k))
					if last := metricValue(t, r.handler, "iterion_net_last_success_timestamp_seconds"); k >= 1 && time.Since(time.Unix(0, int64(last*1e9))) > interval {
						stale = true
					}
					time.Sleep(interval)
				}
				r.stop()
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("merge_gate_installations_unswept at 0.5, 1.5, ... 15.5 intervals: got %v, want %v", got, want)
				}
				if stale {
					t.Errorf("iterion_net_last_success_timestamp_seconds fell more than an interval behind, want it kept fresh by installations 1 and 3")
				}
			})
		})
	}
}

// failingFrom3 is the count k and a half intervals after the start of a
// replica one of whose installations never completes a pass: none until
// 3 intervals after its sweep began (at the replica's election, at the
// start), one from then on.
func failingFrom3(k int) float64 {
	if k < 3 {
		return 0
	}
	return 1
}
