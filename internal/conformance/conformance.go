// Package conformance runs a store contract's cases, the one table runner of
// the module's exported suites (leasetest, boardtest, gateruntest,
// deliverytest): like testing/slogtest, each case is a named rule and the
// check that pins it, run as a subtest on a fresh store.
package conformance

import "testing"

// Case is one rule of a store contract and the check that pins it.
type Case[S any] struct {
	// Name names the subtest.
	Name string
	// Rule says in one line what every store must do; a failing case logs it.
	Rule string
	// Check runs the case against a fresh store.
	Check func(t *testing.T, s S)
}

// Run runs every case as a subtest of t, each on a fresh store from
// newStore, which may use t for setup and cleanup. A failing case logs its
// rule. Run does not call t.Parallel.
func Run[S any](t *testing.T, cases []Case[S], newStore func(t *testing.T) S) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("rule: %s", c.Rule)
				}
			})
			c.Check(t, newStore(t))
		})
	}
}
