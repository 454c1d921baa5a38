// Package tokenstest is the conformance suite for forge.TokenStore: any
// store proves itself with one line,
//
//	func TestConformance(t *testing.T) { tokenstest.Run(t, newStore) }
//
// Each case runs as a subtest on a fresh store and treats it as a black box.
package tokenstest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"iterion.dev/iterion/internal/conformance"
	"iterion.dev/iterion/pkg/forge"
)

// Run runs every conformance case against a fresh store from newStore.
func Run(t *testing.T, newStore func(t *testing.T) forge.TokenStore) {
	t.Helper()
	conformance.Run(t, cases, newStore)
}

// base is the suite's clock origin; it has sub-millisecond digits on
// purpose, so truncation shows.
var base = time.Date(2026, 9, 30, 9, 0, 0, 123456789, time.UTC)

// token is installation id's token named secret, minted by owner at base,
// expiring an hour later.
func token(id int64, secret, owner string) forge.InstallationToken {
	return forge.InstallationToken{Installation: id, Token: secret, ExpiresAt: base.Add(time.Hour), MintedBy: owner, MintedAt: base}
}

func put(t *testing.T, s forge.TokenStore, tok forge.InstallationToken) {
	t.Helper()
	if err := s.Put(context.Background(), tok); err != nil {
		t.Fatalf("Put(%v): %v", tok, err)
	}
}

// get is installation id's stored secret, "" when none.
func get(t *testing.T, s forge.TokenStore, id int64) string {
	t.Helper()
	tok, ok, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%d): %v", id, err)
	}
	if ok != (tok.Token != "") {
		t.Fatalf("Get(%d) = %v, ok %v: a token is returned with ok, and only then", id, tok, ok)
	}
	return tok.Token
}

var cases = []conformance.Case[forge.TokenStore]{
	{Name: "EmptyHasNone", Rule: "Get of an installation never stored is ok false, no error", Check: func(t *testing.T, s forge.TokenStore) {
		if got := get(t, s, 7); got != "" {
			t.Errorf("Get(7) on an empty store = a token, want none")
		}
	}},
	{Name: "PutThenGetRoundTrips", Rule: "Get returns what Put stored, times in UTC to the millisecond", Check: func(t *testing.T, s forge.TokenStore) {
		want := token(7, "ghs_a", "web-1")
		put(t, s, want)
		got, ok, err := s.Get(context.Background(), 7)
		if err != nil || !ok {
			t.Fatalf("Get(7) after Put: ok %v, %v", ok, err)
		}
		ms := func(x time.Time) time.Time { return x.UTC().Truncate(time.Millisecond) }
		if got.Installation != 7 || got.Token != "ghs_a" || got.MintedBy != "web-1" ||
			!got.ExpiresAt.Equal(ms(want.ExpiresAt)) || got.ExpiresAt.Location() != time.UTC ||
			!got.MintedAt.Equal(ms(want.MintedAt)) {
			t.Errorf("Get(7) = %v (minted at %v), want %v (minted at %v), times truncated to the millisecond in UTC", got, got.MintedAt, want, ms(want.MintedAt))
		}
	}},
	{Name: "GetAnswersTheInstallationAsked", Rule: "the token Get returns is the installation's asked for, never another's", Check: func(t *testing.T, s forge.TokenStore) {
		put(t, s, token(7, "ghs_a", "web-1"))
		put(t, s, token(8, "ghs_b", "web-1"))
		for id, want := range map[int64]string{7: "ghs_a", 8: "ghs_b"} {
			got, ok, err := s.Get(context.Background(), id)
			if err != nil || !ok || got.Installation != id || got.Token != want {
				t.Errorf("Get(%d) = installation %d's token (ok %v, %v), want installation %d's own", id, got.Installation, ok, err, id)
			}
		}
	}},
	{Name: "LastPutWins", Rule: "Put replaces the installation's stored token, whoever minted it", Check: func(t *testing.T, s forge.TokenStore) {
		put(t, s, token(7, "ghs_a", "web-1"))
		put(t, s, token(7, "ghs_b", "web-2"))
		if got := get(t, s, 7); got != "ghs_b" {
			t.Errorf("Get(7) after two Puts = the first token, want the second: the last Put wins")
		}
	}},
	{Name: "InstallationsAreApart", Rule: "one installation's Put and Drop never touch another's token", Check: func(t *testing.T, s forge.TokenStore) {
		put(t, s, token(7, "ghs_a", "web-1"))
		put(t, s, token(8, "ghs_b", "web-1"))
		if err := s.Drop(context.Background(), 7, "ghs_a"); err != nil {
			t.Fatal(err)
		}
		if get(t, s, 7) != "" || get(t, s, 8) != "ghs_b" {
			t.Errorf("after dropping 7's token: 7 still has one or 8 lost its own; want only 7's gone")
		}
	}},
	{Name: "DropComparesTheToken", Rule: "Drop removes the stored token only if it is the one named, so a refused token never drops a newer one", Check: func(t *testing.T, s forge.TokenStore) {
		put(t, s, token(7, "ghs_new", "web-2"))
		if err := s.Drop(context.Background(), 7, "ghs_old"); err != nil {
			t.Fatal(err)
		}
		if get(t, s, 7) != "ghs_new" {
			t.Errorf("Drop of an older token removed the newer one stored")
		}
		if err := s.Drop(context.Background(), 9, "ghs_x"); err != nil {
			t.Errorf("Drop of an installation with no token: %v, want nil", err)
		}
	}},
	{Name: "PutRefusesMalformed", Rule: "Put refuses a token without its installation, token or expiry (ErrMalformedToken), naming no secret", Check: func(t *testing.T, s forge.TokenStore) {
		for _, bad := range []forge.InstallationToken{
			{Token: "ghs_secret", ExpiresAt: base},
			{Installation: 7, ExpiresAt: base},
			{Installation: 7, Token: "ghs_secret"},
		} {
			err := s.Put(context.Background(), bad)
			if !errors.Is(err, forge.ErrMalformedToken) {
				t.Errorf("Put(%v) = %v, want ErrMalformedToken", bad, err)
			} else if strings.Contains(err.Error(), "ghs_secret") {
				t.Errorf("Put's error %q carries the token", err)
			}
		}
		if got := get(t, s, 7); got != "" {
			t.Errorf("Get(7) after refused Puts = a token, want none")
		}
	}},
	{Name: "ConcurrentPutsLeaveOne", Rule: "concurrent Puts of one installation leave exactly one of their tokens", Check: func(t *testing.T, s forge.TokenStore) {
		var wg sync.WaitGroup
		for _, secret := range []string{"ghs_a", "ghs_b", "ghs_c", "ghs_d"} {
			wg.Go(func() {
				if err := s.Put(context.Background(), token(7, secret, "web")); err != nil {
					t.Errorf("Put: %v", err)
				}
			})
		}
		wg.Wait()
		if got := get(t, s, 7); got == "" || !strings.Contains("ghs_a ghs_b ghs_c ghs_d", got) {
			t.Errorf("Get(7) after concurrent Puts: %q, want one of the tokens put", got)
		}
	}},
}
