package gateruntest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"iterion.dev/iterion/internal/conformance"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/gaterun"
)

// RunInstallations runs every conformance case of the per-installation
// side of a run store (gaterun.InstallationStore) against a fresh store
// from newStore. A store that implements it runs Run too.
func RunInstallations(t *testing.T, newStore func(t *testing.T) gaterun.InstallationStore) {
	t.Helper()
	conformance.Run(t, installationCases, newStore)
}

// sweep is installation id's sweep by owner at d past base, with a core
// budget of remaining.
func sweep(id int64, owner string, d time.Duration, remaining int) gaterun.InstallationSweep {
	return gaterun.InstallationSweep{Installation: id, At: at(d), Owner: owner, Budgets: []forge.RateLimit{
		{Resource: "graphql", Limit: 5000, Remaining: 4990, Reset: at(time.Hour)},
		{Resource: "core", Limit: 5000, Remaining: remaining, Reset: at(time.Hour)},
	}}
}

// sweeps reads every sweep as "id owner remaining-core".
func sweeps(t *testing.T, s gaterun.InstallationStore) []string {
	t.Helper()
	got, err := s.Sweeps(context.Background())
	if err != nil {
		t.Fatalf("Sweeps: %v", err)
	}
	out := []string{}
	for _, sw := range got {
		out = append(out, fmt.Sprintf("%d %s %d", sw.Installation, sw.Owner, sw.Budgets[0].Remaining))
	}
	return out
}

func record(t *testing.T, s gaterun.InstallationStore, sws ...gaterun.InstallationSweep) {
	t.Helper()
	if err := s.RecordSweeps(context.Background(), sws); err != nil {
		t.Fatalf("RecordSweeps: %v", err)
	}
}

var installationCases = []conformance.Case[gaterun.InstallationStore]{
	{Name: "OpenRunsCountsUnsettledByInstallation", Rule: "OpenRuns counts each installation's unsettled runs, settled ones left out, runs of no installation under 0, and follows a run that moves to another installation", Check: func(t *testing.T, s gaterun.InstallationStore) {
		in := func(inst int64, n int, sha string) gaterun.Run {
			r := newRun("acme/app", n, sha)
			r.Installation = inst
			return r
		}
		put(t, s, in(1, 1, "a1"), at(0))
		put(t, s, in(1, 2, "a2"), at(0))
		put(t, s, in(2, 3, "a3"), at(0))
		put(t, s, in(0, 4, "a4"), at(0))
		done := in(2, 5, "a5")
		put(t, s, done, at(0))
		settle(t, s, done.ID)
		count := func() string {
			t.Helper()
			got, err := s.OpenRuns(context.Background())
			if err != nil {
				t.Fatalf("OpenRuns: %v", err)
			}
			return fmt.Sprintf("0:%d 1:%d 2:%d 3:%d", got[0], got[1], got[2], got[3])
		}
		if got := count(); got != "0:1 1:2 2:1 3:0" {
			t.Errorf("got %s, want 0:1 1:2 2:1 3:0: each installation's unsettled runs, settled ones left out", got)
		}
		put(t, s, in(2, 1, "a1"), at(time.Minute)) // the repository moved to installation 2
		if got := count(); got != "0:1 1:1 2:2 3:0" {
			t.Errorf("after a run moved: got %s, want 0:1 1:1 2:2 3:0: a run counts under its installation as last put", got)
		}
	}},
	{Name: "SweepRoundTrips", Rule: "a recorded sweep reads back whole: instants UTC to the millisecond, budgets sorted by resource, its uncovered runs", Check: func(t *testing.T, s gaterun.InstallationStore) {
		sw := sweep(7, "web-1", 0, 4200)
		sw.At = sw.At.In(time.FixedZone("x", 3600))
		sw.Uncovered = 3
		record(t, s, sw)
		got, err := s.Sweeps(context.Background())
		if err != nil {
			t.Fatalf("Sweeps: %v", err)
		}
		want := fmt.Sprintf("[{7 %v web-1 [{core 5000 4200 %v} {graphql 5000 4990 %v}] 3}]", ms(at(0)), ms(at(time.Hour)), ms(at(time.Hour)))
		if fmt.Sprint(got) != want {
			t.Errorf("got %v, want %s: a sweep reads back as recorded", got, want)
		}
		if len(got) == 1 && (got[0].At.Location() != time.UTC || got[0].Budgets[0].Reset.Location() != time.UTC) {
			t.Errorf("got locations %v and %v, want UTC: instants are UTC", got[0].At.Location(), got[0].Budgets[0].Reset.Location())
		}
	}},
	{Name: "NoBudgetsIsNone", Rule: "a sweep whose replica knew no budget reads back with none", Check: func(t *testing.T, s gaterun.InstallationStore) {
		record(t, s, gaterun.InstallationSweep{Installation: 3, At: at(0), Owner: "web-1"})
		got, err := s.Sweeps(context.Background())
		if err != nil {
			t.Fatalf("Sweeps: %v", err)
		}
		if len(got) != 1 || len(got[0].Budgets) != 0 {
			t.Errorf("got %+v, want installation 3 with no budget", got)
		}
	}},
	{Name: "LaterSweepReplacesEarlierNever", Rule: "a sweep replaces the installation's record only when it began later, or at the same instant by a greater owner; an older pass recorded late is ignored", Check: func(t *testing.T, s gaterun.InstallationStore) {
		record(t, s, sweep(1, "web-1", time.Minute, 4000))
		record(t, s, sweep(1, "web-2", 0, 3000)) // an old term's pass, late
		if got := fmt.Sprint(sweeps(t, s)); got != "[1 web-1 4000]" {
			t.Errorf("after an older sweep: got %s, want [1 web-1 4000]: an older pass never hides a newer one", got)
		}
		record(t, s, sweep(1, "web-0", time.Minute, 3000)) // as old as the stored one, by an owner sorting first
		if got := fmt.Sprint(sweeps(t, s)); got != "[1 web-1 4000]" {
			t.Errorf("after a sweep as old by web-0: got %s, want [1 web-1 4000]: a pass of the same instant replaces only by a greater owner", got)
		}
		record(t, s, sweep(1, "web-2", time.Minute, 3500)) // as old, by an owner sorting after
		if got := fmt.Sprint(sweeps(t, s)); got != "[1 web-2 3500]" {
			t.Errorf("after a sweep as old by web-2: got %s, want [1 web-2 3500]: of two passes of one instant the greater owner's stays, in either order", got)
		}
		record(t, s, sweep(1, "web-2", 2*time.Minute, 2000))
		if got := fmt.Sprint(sweeps(t, s)); got != "[1 web-2 2000]" {
			t.Errorf("after a later sweep: got %s, want [1 web-2 2000]: a later pass replaces the record", got)
		}
	}},
	{Name: "SweepsByInstallation", Rule: "Sweeps lists one record per installation, by installation ID, from one call's batch or many", Check: func(t *testing.T, s gaterun.InstallationStore) {
		if got := fmt.Sprint(sweeps(t, s)); got != "[]" {
			t.Errorf("empty store: got %s, want []", got)
		}
		record(t, s, sweep(30, "web-1", 0, 30), sweep(2, "web-1", 0, 2))
		record(t, s, sweep(10, "web-2", 0, 10), sweep(2, "web-2", time.Second, 1))
		if got := fmt.Sprint(sweeps(t, s)); got != "[2 web-2 1 10 web-2 10 30 web-1 30]" {
			t.Errorf("got %s, want [2 web-2 1 10 web-2 10 30 web-1 30]: one record per installation, by ID", got)
		}
	}},
	{Name: "ManySweepsInOneBatch", Rule: "a batch of a replica's many installations (120: more than the 100 statements that hung FerretDB in one command) is recorded, over records of them as well, within 30 s: a store may split it, never hang on it", Check: func(t *testing.T, s gaterun.InstallationStore) {
		const n = 120
		for pass := range 2 {
			batch := make([]gaterun.InstallationSweep, n)
			for i := range batch {
				batch[i] = sweep(int64(i+1), "web-1", time.Duration(pass)*time.Second, 100-pass)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := s.RecordSweeps(ctx, batch)
			cancel()
			if err != nil {
				t.Fatalf("RecordSweeps of %d installations, pass %d: %v, want nil", n, pass+1, err)
			}
		}
		got, err := s.Sweeps(context.Background())
		if err != nil || len(got) != n || got[n-1].Budgets[0].Remaining != 99 {
			t.Errorf("Sweeps after two batches of %d = %d records, %v; want %d, each the later pass's", n, len(got), err, n)
		}
	}},
	{Name: "RecordSweepsRefusesInvalid", Rule: "a batch with a sweep Validate refuses is ErrInvalid naming the field, and nothing of it is written", Check: func(t *testing.T, s gaterun.InstallationStore) {
		for _, c := range []struct {
			field string
			bad   func(*gaterun.InstallationSweep)
		}{
			{"installation", func(sw *gaterun.InstallationSweep) { sw.Installation = 0 }},
			{"at", func(sw *gaterun.InstallationSweep) { sw.At = time.Time{} }},
			{"owner", func(sw *gaterun.InstallationSweep) { sw.Owner = " " }},
			{"resource", func(sw *gaterun.InstallationSweep) { sw.Budgets[0].Resource = "" }},
			{"uncovered", func(sw *gaterun.InstallationSweep) { sw.Uncovered = -1 }},
		} {
			bad := sweep(5, "web-1", 0, 5)
			c.bad(&bad)
			err := s.RecordSweeps(context.Background(), []gaterun.InstallationSweep{sweep(4, "web-1", 0, 4), bad})
			if !errors.Is(err, gaterun.ErrInvalid) || !strings.Contains(err.Error(), c.field) {
				t.Errorf("RecordSweeps with a bad %s = %v, want ErrInvalid naming %s", c.field, err, c.field)
			}
		}
		if got := fmt.Sprint(sweeps(t, s)); got != "[]" {
			t.Errorf("after refused batches: got %s, want []: nothing of a refused batch is written", got)
		}
	}},
}
