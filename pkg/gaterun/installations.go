// What a run store keeps per installation of a GitHub App, for the
// operator's view of the installations: the runs each has open, and its
// last complete sweep.

package gaterun

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"iterion.dev/iterion/internal/mongostore"
	"iterion.dev/iterion/pkg/forge"
)

// InstallationSweep is the last complete sweep pass of one installation
// of a GitHub App: when it began, the replica that made it, and the
// installation's budgets as that replica knew them at its end. The
// sweeping replica records it in the shared run store, so that every
// replica, not only the one sweeping, can show it.
type InstallationSweep struct {
	// Installation is the installation's ID, at least 1.
	Installation int64
	// At is when the pass began: every run of the installation that was
	// unsettled then has been checked since. UTC to the millisecond.
	At time.Time
	// Owner is the replica that made the pass (its lease owner).
	Owner string
	// Budgets are the installation's budget figures (one per resource,
	// sorted by resource) as the sweeping replica's forge client knew them
	// at the pass's end; empty when it knew none. Reset is UTC to the
	// millisecond.
	Budgets []forge.RateLimit
	// Uncovered is how many of the installation's unsettled runs the
	// sweeping replica counted, by the pass, as runs whose pull request
	// the installation's token could not read and whose repository GitHub
	// said no installation of the App covers. At least 0.
	Uncovered int
}

// InstallationStore is a run Store that also keeps, per installation, what
// an operator's view of a GitHub App's installations needs. Both twins,
// MemoryStore and MongoStore, implement it and pass
// gateruntest.RunInstallations. Implementations are safe for concurrent
// use.
type InstallationStore interface {
	Store
	// RecordSweeps makes each sweep its installation's last, unless the
	// one stored began later, or at the same instant by an Owner that
	// sorts after or equal to the sweep's: a replica that records late (an
	// old term's pass) never hides a newer pass, and two passes of one
	// instant leave the same record whatever order they land in. (Of one
	// At and Owner, the same pass recorded twice, either's budgets may
	// stay.) A sweep that fails
	// Validate is refused with an error wrapping ErrInvalid, and then
	// nothing of the call is written. An error otherwise means some
	// sweeps may have been recorded.
	RecordSweeps(ctx context.Context, sweeps []InstallationSweep) error
	// Sweeps returns every installation's last recorded sweep, by
	// installation.
	Sweeps(ctx context.Context) ([]InstallationSweep, error)
	// OpenRuns counts the unsettled runs of every installation
	// (Run.Installation) that has one; the runs stored without an
	// installation count under 0. Its size is the installations', not the
	// runs'.
	OpenRuns(ctx context.Context) (map[int64]int, error)
}

// Validate reports the first field of s a store would refuse, as an error
// wrapping ErrInvalid that names the field and value; nil when s is whole.
func (s InstallationSweep) Validate() error {
	switch {
	case s.Installation < 1:
		return fmt.Errorf("%w: installation %d is not an installation ID", ErrInvalid, s.Installation)
	case s.At.IsZero():
		return fmt.Errorf("%w: installation %d: at is zero", ErrInvalid, s.Installation)
	case strings.TrimSpace(s.Owner) == "":
		return fmt.Errorf("%w: installation %d: owner %q is empty", ErrInvalid, s.Installation, s.Owner)
	case s.Uncovered < 0:
		return fmt.Errorf("%w: installation %d: uncovered %d is negative", ErrInvalid, s.Installation, s.Uncovered)
	}
	for _, b := range s.Budgets {
		if strings.TrimSpace(b.Resource) == "" {
			return fmt.Errorf("%w: installation %d: a budget's resource %q is empty", ErrInvalid, s.Installation, b.Resource)
		}
	}
	return nil
}

// validateSweeps validates every sweep and returns them as stores keep
// them: instants UTC to the millisecond, budgets sorted by resource.
func validateSweeps(sweeps []InstallationSweep) ([]InstallationSweep, error) {
	out := make([]InstallationSweep, len(sweeps))
	for i, s := range sweeps {
		if err := s.Validate(); err != nil {
			return nil, err
		}
		s.At = mongostore.Stamp(s.At)
		s.Budgets = slices.Clone(s.Budgets)
		for j := range s.Budgets {
			s.Budgets[j].Reset = mongostore.Stamp(s.Budgets[j].Reset)
		}
		slices.SortFunc(s.Budgets, func(x, y forge.RateLimit) int { return cmp.Compare(x.Resource, y.Resource) })
		out[i] = s
	}
	return out, nil
}

var _ InstallationStore = (*MemoryStore)(nil)

// RecordSweeps implements InstallationStore.
func (s *MemoryStore) RecordSweeps(ctx context.Context, sweeps []InstallationSweep) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("gaterun: record sweeps: %w", err)
	}
	sweeps, err := validateSweeps(sweeps)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sweeps == nil {
		s.sweeps = make(map[int64]InstallationSweep)
	}
	for _, sw := range sweeps {
		if old, ok := s.sweeps[sw.Installation]; !ok || sw.At.After(old.At) || sw.At.Equal(old.At) && sw.Owner > old.Owner {
			s.sweeps[sw.Installation] = sw
		}
	}
	return nil
}

// Sweeps implements InstallationStore.
func (s *MemoryStore) Sweeps(ctx context.Context) ([]InstallationSweep, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("gaterun: list sweeps: %w", err)
	}
	s.mu.Lock()
	out := make([]InstallationSweep, 0, len(s.sweeps))
	for _, sw := range s.sweeps {
		sw.Budgets = slices.Clone(sw.Budgets)
		out = append(out, sw)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(x, y InstallationSweep) int { return cmp.Compare(x.Installation, y.Installation) })
	return out, nil
}

// OpenRuns implements InstallationStore.
func (s *MemoryStore) OpenRuns(ctx context.Context) (map[int64]int, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("gaterun: count open runs: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int64]int{}
	for _, r := range s.runs {
		if !r.Settled {
			out[r.Installation]++
		}
	}
	return out, nil
}
