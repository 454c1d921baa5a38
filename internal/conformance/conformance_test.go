package conformance_test

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"iterion.dev/iterion/internal/conformance"
)

// TestRunGivesEveryCaseAFreshStore pins the runner's contract: each case is
// its own subtest, named as the case, on a store newStore made for it, with
// that subtest's t (so the store's cleanup runs when its case ends).
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
	var madeFor []string
	conformance.Run(t, cases, func(st *testing.T) *int { made++; madeFor = append(madeFor, st.Name()); return new(int) })
	if made != 2 || len(seen) != 2 || seen[0] != t.Name()+"/First" || seen[1] != t.Name()+"/Second" {
		t.Errorf("got %d stores and subtests %v, want 2 stores and subtests First, Second: one fresh store per named case", made, seen)
	}
	if !slices.Equal(madeFor, seen) {
		t.Errorf("stores made with the t of %v, want %v: each store with its case's t", madeFor, seen)
	}
}

// TestRunFailsTheSuiteOnAFailingCase pins what a store that breaks one rule
// gets: its case fails, and so the suite (the test calling Run) and the
// test binary; the failing case logs its rule, a passing one does not; the
// cases after it still run. Run in a child process, since a failing
// subtest fails its parent.
func TestRunFailsTheSuiteOnAFailingCase(t *testing.T) {
	if os.Getenv("CONFORMANCE_CHILD") == "1" {
		cases := []conformance.Case[*int]{
			{Name: "Kept", Rule: "the kept rule", Check: func(*testing.T, *int) {}},
			{Name: "Broken", Rule: "the broken rule", Check: func(t *testing.T, _ *int) { t.Fatal("the store broke it") }},
			{Name: "After", Rule: "the rule after", Check: func(*testing.T, *int) {}},
		}
		conformance.Run(t, cases, func(*testing.T) *int { return new(int) })
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunFailsTheSuiteOnAFailingCase$", "-test.v")
	cmd.Env = append(os.Environ(), "CONFORMANCE_CHILD=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child test: %v, want it to exit failing:\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{
		"--- FAIL: TestRunFailsTheSuiteOnAFailingCase/Broken", "rule: the broken rule",
		"--- PASS: TestRunFailsTheSuiteOnAFailingCase/Kept", "--- PASS: TestRunFailsTheSuiteOnAFailingCase/After",
		"--- FAIL: TestRunFailsTheSuiteOnAFailingCase ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("child output lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"rule: the kept rule", "rule: the rule after"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("child output has %q: only a failing case logs its rule:\n%s", unwanted, got)
		}
	}
}
