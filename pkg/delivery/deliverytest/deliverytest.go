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
	"fmt"
	"strings"
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

const (
	hold   = time.Minute
	window = time.Hour
)

func claim(t *testing.T, s delivery.Store, id string, now time.Time) delivery.Claim {
	t.Helper()
	c, err := s.Claim(context.Background(), id, now, hold)
	if err != nil {
		t.Fatalf("Claim(%q): %v", id, err)
	}
	return c
}

func complete(t *testing.T, s delivery.Store, id string, now time.Time) {
	t.Helper()
	if err := s.Complete(context.Background(), id, now, window); err != nil {
		t.Fatalf("Complete(%q): %v", id, err)
	}
}

var cases = []conformance.Case[delivery.Store]{
	{Name: "FirstClaimWinsRepeatIsHeld", Rule: "a new id is Claimed; a repeat while the claim holds is Held, not Done: it was not processed yet", Check: func(t *testing.T, s delivery.Store) {
		if got := claim(t, s, "d-1", base); got != delivery.Claimed {
			t.Errorf("first claim: got %v, want claimed: a new id is processed", got)
		}
		if got := claim(t, s, "d-1", base.Add(hold-time.Millisecond)); got != delivery.Held {
			t.Errorf("repeat within the hold: got %v, want held: a delivery being processed is neither processed twice nor acknowledged", got)
		}
		if got := claim(t, s, "d-2", base); got != delivery.Claimed {
			t.Errorf("another id: got %v, want claimed: ids are independent", got)
		}
	}},
	{Name: "ALapsedClaimIsClaimedAgain", Rule: "a claim never completed (lost answer, 503, crash) lapses at its hold's end: the redelivery is processed, with nothing to forget", Check: func(t *testing.T, s delivery.Store) {
		claim(t, s, "d-1", base)
		if got := claim(t, s, "d-1", base.Add(hold)); got != delivery.Claimed {
			t.Errorf("claim at the hold's end: got %v, want claimed: an uncompleted claim never blocks the redelivery", got)
		}
		if got := claim(t, s, "d-1", base.Add(hold+time.Second)); got != delivery.Held {
			t.Errorf("claim after the re-claim: got %v, want held: the re-claim holds anew", got)
		}
	}},
	{Name: "CompletedIsDoneForTheWindow", Rule: "a completed id is Done until completion + window (exclusive), then claimable again", Check: func(t *testing.T, s delivery.Store) {
		claim(t, s, "d-1", base)
		complete(t, s, "d-1", base.Add(time.Second))
		if got := claim(t, s, "d-1", base.Add(time.Second+window-time.Millisecond)); got != delivery.Done {
			t.Errorf("claim within the window: got %v, want done: a processed delivery is acknowledged, not processed again", got)
		}
		if got := claim(t, s, "d-1", base.Add(time.Second+window)); got != delivery.Claimed {
			t.Errorf("claim at the window's end: got %v, want claimed", got)
		}
	}},
	{Name: "CompleteWithoutAClaim", Rule: "Complete records an id whose claim lapsed or was never seen (its claim's answer was lost)", Check: func(t *testing.T, s delivery.Store) {
		complete(t, s, "d-1", base)
		if got := claim(t, s, "d-1", base.Add(time.Minute)); got != delivery.Done {
			t.Errorf("claim after Complete: got %v, want done", got)
		}
	}},
	{Name: "BadArgumentsAreRefused", Rule: "an empty id, a hold or a window under 1ms is ErrInvalid and writes nothing", Check: func(t *testing.T, s delivery.Store) {
		if _, err := s.Claim(context.Background(), "", base, hold); !errors.Is(err, delivery.ErrInvalid) {
			t.Errorf("empty id: got %v, want ErrInvalid", err)
		}
		if _, err := s.Claim(context.Background(), "d-1", base, 0); !errors.Is(err, delivery.ErrInvalid) {
			t.Errorf("zero hold: got %v, want ErrInvalid", err)
		}
		if err := s.Complete(context.Background(), "d-1", base, 0); !errors.Is(err, delivery.ErrInvalid) {
			t.Errorf("zero window: got %v, want ErrInvalid", err)
		}
		if err := s.Complete(context.Background(), " ", base, window); !errors.Is(err, delivery.ErrInvalid) {
			t.Errorf("blank id: got %v, want ErrInvalid", err)
		}
		if got := claim(t, s, "d-1", base); got != delivery.Claimed {
			t.Errorf("claim after refused calls: got %v, want claimed: a refused call writes nothing", got)
		}
	}},
	{Name: "IDAndDurationBounds", Rule: "an id of 1 to 100 characters and a hold or window of 1ms or more are taken; a longer id or a shorter duration is ErrInvalid and writes nothing", Check: func(t *testing.T, s delivery.Store) {
		ctx := context.Background()
		longest, over := strings.Repeat("d", 100), strings.Repeat("d", 101)
		if _, err := s.Claim(ctx, over, base, hold); !errors.Is(err, delivery.ErrInvalid) {
			t.Errorf("Claim of a 101-character id: got %v, want ErrInvalid: an id is at most 100 characters", err)
		}
		if err := s.Complete(ctx, over, base, window); !errors.Is(err, delivery.ErrInvalid) {
			t.Errorf("Complete of a 101-character id: got %v, want ErrInvalid", err)
		}
		if _, err := s.Claim(ctx, "d-1", base, time.Millisecond-time.Nanosecond); !errors.Is(err, delivery.ErrInvalid) {
			t.Errorf("Claim with a hold just under 1ms: got %v, want ErrInvalid: a hold that lapses at once lets two replicas process one delivery", err)
		}
		if err := s.Complete(ctx, "d-1", base, time.Millisecond-time.Nanosecond); !errors.Is(err, delivery.ErrInvalid) {
			t.Errorf("Complete with a window just under 1ms: got %v, want ErrInvalid", err)
		}
		if got := claim(t, s, "d-1", base); got != delivery.Claimed {
			t.Errorf("claim after the refused calls: got %v, want claimed: a refused call writes nothing", got)
		}
		if got, err := s.Claim(ctx, longest, base, time.Millisecond); err != nil || got != delivery.Claimed {
			t.Errorf("Claim of a 100-character id for 1ms = %v, %v; want claimed, nil: the bounds are inclusive", got, err)
		}
		if err := s.Complete(ctx, longest, base, time.Millisecond); err != nil {
			t.Errorf("Complete of a 100-character id for 1ms: %v, want nil", err)
		}
	}},
	{Name: "HousekeepingKeepsLiveIDs", Rule: "however many ids a store holds, dropping or deleting expired ones never drops a live claim or completion: that would let a delivery be processed twice", Check: func(t *testing.T, s delivery.Store) {
		claim(t, s, "held", base)
		complete(t, s, "done", base)
		for i := range 1100 { // past the memory twin's first prune (at 1,024 ids) and four self-prunes of a Mongo twin without TTL indexes (every 256 claims)
			claim(t, s, fmt.Sprintf("other-%d", i), base.Add(time.Second))
		}
		if got := claim(t, s, "held", base.Add(2*time.Second)); got != delivery.Held {
			t.Errorf("claim of an id held before 1,100 others: got %v, want held: housekeeping dropped a live claim", got)
		}
		if got := claim(t, s, "done", base.Add(2*time.Second)); got != delivery.Done {
			t.Errorf("claim of an id completed before 1,100 others: got %v, want done: housekeeping dropped a live completion", got)
		}
	}},
	{Name: "DoneContextFails", Rule: "a call on a done context fails and records nothing", Check: func(t *testing.T, s delivery.Store) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := s.Claim(ctx, "d-1", base, hold); err == nil {
			t.Errorf("Claim on a done context: got nil error, want one")
		}
		if err := s.Complete(ctx, "d-1", base, window); err == nil {
			t.Errorf("Complete on a done context: got nil error, want one")
		}
		if got := claim(t, s, "d-1", base); got != delivery.Claimed {
			t.Errorf("claim after the failed calls: got %v, want claimed: they recorded nothing", got)
		}
	}},
	{Name: "RacingClaimsElectOne", Rule: "of many concurrent claims of one id, new or lapsed, exactly one is Claimed", Check: func(t *testing.T, s delivery.Store) {
		for _, at := range []time.Time{base, base.Add(hold)} { // new, then lapsed
			const n = 8
			var wg sync.WaitGroup
			claims := make(chan delivery.Claim, n)
			for range n {
				wg.Go(func() {
					c, err := s.Claim(context.Background(), "d-race", at, hold)
					if err != nil {
						t.Errorf("Claim: %v", err)
					}
					claims <- c
				})
			}
			wg.Wait()
			close(claims)
			won := 0
			for c := range claims {
				if c == delivery.Claimed {
					won++
				}
			}
			if won != 1 {
				t.Errorf("claims at %v: got %d claimed, want 1: a delivery is processed once across replicas", at.Sub(base), won)
			}
		}
	}},
}
