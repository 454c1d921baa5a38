package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// measureAttempts is how many times the cost, scale and clock scenarios
// measure a configuration, each time on fresh replicas, before a handover
// in every window (errHandover) fails the scenario.
const measureAttempts = 3

// errHandover is a measuring window in which an elected lease changed
// hands: a term stepped down (on a loaded machine, a renewal late past its
// deadline) and the next term's first pass, deep and on a fresh ETag
// cache, fell in the window. The window measured a handover, which the
// takeover and faults scenarios measure, rather than the steady state, so
// the configuration is measured again on fresh replicas.
var errHandover = fmt.Errorf("%w: a lease changed hands in the measuring window", ErrMeasure)

// turns is the terms of one lease the replicas of a configuration won and
// stepped down, at one instant.
type turns struct {
	lease     string
	terms     int64              // summed over the replicas
	stepDowns []map[string]int64 // by replica, by reason
}

// turnsOf scrapes each replica of rs once for the terms and step-downs of
// each of leases, and returns them in the order of leases.
func turnsOf(ctx context.Context, rs []*replica, leases ...string) ([]turns, error) {
	out := make([]turns, len(leases))
	for i, l := range leases {
		out[i].lease = l
	}
	for _, r := range rs {
		terms, downs, err := r.api.leaseTurns(ctx, leases...)
		if err != nil {
			return nil, err
		}
		for i := range leases {
			out[i].terms += terms[i]
			out[i].stepDowns = append(out[i].stepDowns, downs[i])
		}
	}
	return out, nil
}

// handoversBetween is handoverBetween for each lease of two readings a
// and b of rs (turnsOf, with the same leases): the first handover found.
func handoversBetween(rs []*replica, a, b []turns) error {
	for i := range b {
		if err := handoverBetween(rs, a[i], b[i]); err != nil {
			return err
		}
	}
	return nil
}

// handoverBetween returns errHandover, naming the lease and each
// replica's step-downs by reason ("replica-05 deadline 1"), when the lease
// changed hands between two readings a and b of rs: a term stepped down,
// and at most as many began. A term begun with no step-down to make room
// for it would be a second holder: it returns nil, so that the scenario's
// own check of one sweeper (or syncer) fails on it.
func handoverBetween(rs []*replica, a, b turns) error {
	var downs int64
	var named []string
	for i, r := range rs {
		var reasons []string
		for reason, n := range b.stepDowns[i] {
			if d := n - a.stepDowns[i][reason]; d > 0 {
				downs += d
				reasons = append(reasons, fmt.Sprintf("%s %d", reason, d))
			}
		}
		if len(reasons) > 0 {
			slices.Sort(reasons)
			named = append(named, r.name+" "+strings.Join(reasons, ", "))
		}
	}
	began := b.terms - a.terms
	if downs == 0 || began > downs {
		return nil
	}
	return fmt.Errorf("%w: %s: %d stepped down (%s), %d began", errHandover, b.lease, downs, strings.Join(named, "; "), began)
}

// remeasured calls measure up to measureAttempts times while it returns
// errHandover, logging each discarded measurement with what, and returns
// the last result and why each earlier one was discarded.
func remeasured[R any](logf func(format string, args ...any), what string, measure func() (R, error)) (R, []string, error) {
	var discarded []string
	for attempt := 1; ; attempt++ {
		row, err := measure()
		if !errors.Is(err, errHandover) || attempt == measureAttempts {
			return row, discarded, err
		}
		discarded = append(discarded, err.Error())
		logf("%s measured again on fresh replicas: %v", what, err)
	}
}
