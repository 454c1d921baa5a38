// Package deliverytest is the conformance suite for
// delivery.Store: any store proves itself with one line,
//
//	func TestConformance(t *testing.T) { deliverytest.Run(t, newStore) }
//
// Each case runs as a subtest on a fresh store and treats it as a black box.
package deliverytest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"iterion.dev/iterion/internal/conformance"
	"iterion.dev/iterion/pkg/delivery"
)

// Run runs every conformance case against a fresh store from newStore.
func Run(t *testing.T, newStore func(t *testing.T) delivery.Store) {
	t.Helper()
	conformance.Run(t, cases, newStore)
}

var base = time.Date(2026, 9, 30, 9, 0, 0, 123456789, time.UTC)

const window = time.Hour

func claim(t *testing.T, s delivery.Store, id string, now time.Time) bool {
	t.Helper()
	first, err := s.Claim(context.Background(), id, now, window)
	if err != nil {
		t.Fatalf("Claim(%q): %v", id, err)
	}
	return first
}

var cases = []conformance.Case[delivery.Store]{
	{Name: "FirstClaimWinsRepeatLoses", Rule: "an id is processed once: the first claim is first, a repeat within the window is not", Check: func(t *testing.T, s delivery.Store) {
		if got := claim(t, s, "d-1", base); !got {
			t.Errorf("first claim: got %v, want true: a new id is first", got)
		}
		if got := claim(t, s, "d-1", base.Add(window-time.Millisecond)); got {
			t.Errorf("repeat within the window: got %v, want false: a replay is not processed again", got)
		}
		if got := claim(t, s, "d-2", base); !got {
			t.Errorf("another id: got %v, want true: ids are independent", got)
		}
	}},
	{Name: "ForgottenAfterTheWindow", Rule: "an id is remembered until claim time + window (exclusive), then claimable again", Check: func(t *testing.T, s delivery.Store) {
		claim(t, s, "d-1", base)
		if got := claim(t, s, "d-1", base.Add(window)); !got {
			t.Errorf("claim at the window's end: got %v, want true: the window has passed", got)
		}
		if got := claim(t, s, "d-1", base.Add(window+time.Second)); got {
			t.Errorf("claim after the re-claim: got %v, want false: the re-claim opened a new window", got)
		}
	}},
	{Name: "ForgetGivesTheIdBack", Rule: "a forgotten id is processed on its next delivery; forgetting an unknown id is a no-op", Check: func(t *testing.T, s delivery.Store) {
		claim(t, s, "d-1", base)
		if err := s.Forget(context.Background(), "d-1"); err != nil {
			t.Fatalf("Forget: %v", err)
		}
		if got := claim(t, s, "d-1", base); !got {
			t.Errorf("claim after Forget: got %v, want true", got)
		}
		if err := s.Forget(context.Background(), "never-seen"); err != nil {
			t.Errorf("Forget(unknown): got %v, want nil: no-op", err)
		}
	}},
	{Name: "BadArgumentsAreRefused", Rule: "an empty id or a window under 1ms is ErrInvalid and writes nothing", Check: func(t *testing.T, s delivery.Store) {
		if _, err := s.Claim(context.Background(), "", base, window); !errors.Is(err, delivery.ErrInvalid) {
			t.Errorf("empty id: got %v, want ErrInvalid", err)
		}
		if _, err := s.Claim(context.Background(), "d-1", base, 0); !errors.Is(err, delivery.ErrInvalid) {
			t.Errorf("zero window: got %v, want ErrInvalid", err)
		}
		if got := claim(t, s, "d-1", base); !got {
			t.Errorf("claim after a refused one: got %v, want true: a refused claim writes nothing", got)
		}
	}},
	{Name: "DoneContextFails", Rule: "a call on a done context fails and records nothing", Check: func(t *testing.T, s delivery.Store) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := s.Claim(ctx, "d-1", base, window); err == nil {
			t.Errorf("Claim on a done context: got nil error, want one")
		}
		if got := claim(t, s, "d-1", base); !got {
			t.Errorf("claim after the failed one: got %v, want true: it recorded nothing", got)
		}
	}},
	{Name: "RacingClaimsElectOne", Rule: "of many concurrent claims of one id exactly one is first", Check: func(t *testing.T, s delivery.Store) {
		const n = 8
		var wg sync.WaitGroup
		firsts := make(chan bool, n)
		for range n {
			wg.Go(func() {
				first, err := s.Claim(context.Background(), "d-race", base, window)
				if err != nil {
					t.Errorf("Claim: %v", err)
				}
				firsts <- first
			})
		}
		wg.Wait()
		close(firsts)
		won := 0
		for f := range firsts {
			if f {
				won++
			}
		}
		if won != 1 {
			t.Errorf("first claims: got %d, want 1: a delivery is processed once across replicas", won)
		}
	}},
}
