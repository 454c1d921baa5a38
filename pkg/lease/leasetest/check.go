package leasetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

// acquire, renew and release make one call and fail t with the rule (why)
// when its answer is not want.
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
