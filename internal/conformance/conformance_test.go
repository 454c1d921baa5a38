package conformance_test

import (
	"testing"

	"iterion.dev/iterion/internal/conformance"
)

// TestRunGivesEveryCaseAFreshStore pins the runner's contract: each case is
// its own subtest, named as the case, on a store newStore made for it.
func TestRunGivesEveryCaseAFreshStore(t *testing.T) {
	made := 0
	var seen []string
	cases := []conformance.Case[*int]{
		{Name: "First", Rule: "the first rule", Check: func(t *testing.T, s *int) { *s++; seen = append(seen, t.Name()) }},
		{Name: "Second", Rule: "the second rule", Check: func(t *testing.T, s *int) {
			if *s != 0 {
				t.Errorf("store seen by Second = %d, want 0: every case gets a fresh store", *s)
			}
			seen = append(seen, t.Name())
		}},
	}
	conformance.Run(t, cases, func(*testing.T) *int { made++; return new(int) })
	if made != 2 || len(seen) != 2 || seen[0] != t.Name()+"/First" || seen[1] != t.Name()+"/Second" {
		t.Errorf("got %d stores and subtests %v, want 2 stores and subtests First, Second: one fresh store per named case", made, seen)
	}
}
