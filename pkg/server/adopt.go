// App mode's run adopter: the runs no shard of the sweeper group lists,
// because they are stored under an installation the App does not know,
// are given the installation that covers their repository now.

package server

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
)

// adoptIntervals is the adopter's interval in sweep intervals. A run is
// orphaned only by a change of mode (runs stored before App mode carry
// installation 0) or of installation (the App uninstalled from an
// account and installed again, which GitHub numbers anew), so a few
// intervals' delay costs little, and it keeps the adopter's count of every
// installation's open runs (InstallationStore.OpenRuns) off the store's
// every interval.
const adoptIntervals = 5

// adopter is App mode's run adopter (docs/design.md, "One App, many
// installations"). A shard of the group merge-gate-sweeper sweeps the
// installations the App knows, so an unsettled run stored under any other
// installation is swept by none. Each pass of the adopter's holder finds
// the installations with unsettled runs that the App does not know, looks
// each run's repository up (AppClient.ForRepo, cached) and moves the run
// to the installation that covers it (gaterun.Store.Move, conditional on
// the run being still unsettled where it was listed), which a shard then
// sweeps. A
// repository no installation covers is looked up again only after the
// App's installations changed (AppClient.Changed: a re-list, a webhook
// here, another replica's news); its runs are counted in
// merge_gate_runs_uncovered and left as they are, never settled or
// dropped. So are those of a repository whose installation is suspended
// (forge.ErrSuspended), except that they are not counted there: the
// repository is covered, and they wait for the unsuspension.
type adopter struct {
	runs     gaterun.InstallationStore
	app      *forge.AppClient
	interval time.Duration
	timeout  time.Duration // each store call's bound
	now      func() time.Time
	log      *slog.Logger
	// uncovered is the gauge merge_gate_runs_uncovered{found_by="adopter"};
	// passes the nets' pass metrics, under the lease's name.
	uncovered prometheus.Gauge
	passes    *netMetrics
	// misses holds, by forge.RepoKey, the App's Changed when no
	// installation served the repository; only the term's goroutine
	// uses it.
	misses map[string]miss
	// last and lastSuspended are the previous pass's counts of uncovered
	// runs and of runs of a suspended installation's repositories, so a
	// change is logged once rather than every pass.
	last, lastSuspended int
}

// The found_by values of merge_gate_runs_uncovered: the runs the adopter
// counts, and those the installations' sweepers found no installation
// covers (installationSweeps.rehome).
const (
	foundByAdopter = "adopter"
	foundBySweeper = "sweeper"
)

// uncoveredFinders are merge_gate_runs_uncovered's found_by values, each
// series from the start.
var uncoveredFinders = []string{foundByAdopter, foundBySweeper}

// newAdopter builds the adopter of s's App mode, counting its uncovered
// runs in uncovered's found_by="adopter" series (s.passes must be built);
// nil without an App or a run store that counts open runs by
// installation.
func newAdopter(s *Server, uncovered *prometheus.GaugeVec) *adopter {
	runs, ok := s.cfg.Runs.(gaterun.InstallationStore)
	if s.cfg.App == nil || !ok {
		return nil
	}
	return &adopter{
		runs: runs, app: s.cfg.App, interval: adoptIntervals * s.cfg.SweepInterval, timeout: s.cfg.StoreTimeout,
		now: s.cfg.Now, log: s.log, uncovered: uncovered.WithLabelValues(foundByAdopter), passes: s.passes, misses: map[string]miss{},
	}
}

// work serves one term of the adopter's lease: a pass every interval
// through lease.Every, bounded by wd.
func (a *adopter) work(ctx context.Context, wd lease.Watchdog) {
	defer a.uncovered.Set(0)
	err := lease.Every(forge.WithLane(ctx, forge.LaneApp), a.interval, a.now, a.pass,
		func(until time.Time) { a.log.Debug("run adoption skipped: rate limited", "until", until) }, wd)
	if err != nil {
		a.log.Warn("run adopter: stepping down", "err", err)
	}
}

// adoptPass is what one pass did: runs moved, left uncovered, and left
// waiting for their repository's suspended installation, and its
// repository look-ups, failed ones (other than "no installation covers
// it") among them.
type adoptPass struct {
	adopted, uncovered, suspended int
	reads, failed                 int
}

// pass adopts what it can, and records it in the nets' pass metrics. It
// completes when every orphaned run was looked at; a rate limit on the
// App's JWT ends it early, complete, with the limit's reset as the instant
// the next pass waits for (the runs are still there then); a store or
// forge failure ends it incomplete.
func (a *adopter) pass(ctx context.Context) (time.Time, bool) {
	began := a.now()
	var p adoptPass
	resume, complete := a.adopt(ctx, &p)
	a.passes.pass(RunAdopter().Name, began, a.now(), complete, p.reads, p.failed)
	return resume, complete
}

// adopt is pass's work, counted in p.
func (a *adopter) adopt(ctx context.Context, p *adoptPass) (time.Time, bool) {
	sctx, cancel := context.WithTimeout(ctx, a.timeout)
	sctx = gaterun.WithSkipped(sctx, func(id string, err error) {
		a.log.Warn("run adoption: a run whose installation it cannot read is left out", "run", id, "err", err)
	})
	open, err := a.runs.OpenRuns(sctx)
	cancel()
	if err != nil {
		a.log.Warn("run adoption: open runs not counted", "err", err)
		return time.Time{}, false
	}
	listed := a.app.Changed()
	seen := map[string]bool{}
	for id, n := range open {
		if n == 0 || a.known(id) {
			continue
		}
		err := a.adoptFrom(ctx, id, listed, seen, p)
		if rl := (*forge.RateLimitError)(nil); errors.As(err, &rl) {
			a.log.Warn("run adoption stopped: rate limited", "until", rl.Reset, "adopted", p.adopted)
			return rl.Reset, true
		}
		if err != nil {
			a.log.Warn("run adoption failed", "installation", id, "adopted", p.adopted, "err", err)
			return time.Time{}, false
		}
	}
	for key := range a.misses {
		if !seen[key] {
			delete(a.misses, key) // its runs settled, or were adopted another way
		}
	}
	a.uncovered.Set(float64(p.uncovered))
	if p.adopted > 0 {
		a.log.Info("runs adopted by the installations covering their repositories", "adopted", p.adopted)
	}
	if p.uncovered != a.last {
		a.log.Warn("runs no installation covers: no shard sweeps them until the App is installed on their repositories", "runs", p.uncovered)
		a.last = p.uncovered
	}
	if p.suspended != a.lastSuspended {
		a.log.Info("runs of repositories whose installation is suspended: no shard sweeps them until it is unsuspended", "runs", p.suspended)
		a.lastSuspended = p.suspended
	}
	return time.Time{}, true
}

// miss is a look-up of a repository that found no installation to serve
// it: at is the App's Changed then; suspended, that the installation
// covering it is suspended (forge.ErrSuspended), so the repository is
// covered and its runs wait for the unsuspension, rather than none
// covering it.
type miss struct {
	at        time.Time
	suspended bool
}

// count counts a run of a repository m says no installation serves:
// uncovered unless its installation is suspended, for
// merge_gate_runs_uncovered and IterionRunsUncovered say to install the
// App there.
func (p *adoptPass) count(m miss) {
	if m.suspended {
		p.suspended++
		return
	}
	p.uncovered++
}

// known reports whether the App knows installation id (0 never is).
func (a *adopter) known(id int64) bool {
	if id == 0 {
		return false
	}
	_, err := a.app.Installation(id)
	return err == nil
}

// adoptFrom moves each unsettled run of installation from to the
// installation covering its repository (gaterun.Store.Move: a run settled
// or moved since the listing is left as it is, and a verdict reported
// since stands), counting in p. listed is the App's Changed at the pass's
// start; seen collects the repositories of the runs it looked at.
func (a *adopter) adoptFrom(ctx context.Context, from int64, listed time.Time, seen map[string]bool, p *adoptPass) error {
	var after gaterun.Cursor
	for {
		sctx, cancel := context.WithTimeout(ctx, a.timeout)
		page, err := a.runs.UnsettledIn(sctx, from, time.Time{}, after, DefaultRunsLimit)
		cancel()
		if err != nil {
			return err
		}
		for _, run := range page {
			key := forge.RepoKey(run.Repo)
			seen[key] = true
			if m, ok := a.misses[key]; ok && !listed.After(m.at) {
				p.count(m) // looked up since the last change: no news
				continue
			}
			owner, name := ownerRepo(run)
			_, to, err := a.app.ForRepo(ctx, owner, name)
			p.reads++
			switch {
			case errors.Is(err, forge.ErrNotInstalled):
				m := miss{at: listed, suspended: errors.Is(err, forge.ErrSuspended)}
				a.misses[key] = m
				p.count(m)
				continue
			case err != nil:
				p.failed++
				return err
			}
			delete(a.misses, key)
			if to == from {
				// The look-up made the installation known here;
				// runApp tells the other replicas at its next tick
				// (AppClient.TakeFound), and the shard's holder
				// sweeps it from its own next tick.
				continue
			}
			sctx, cancel := context.WithTimeout(ctx, a.timeout)
			moved, err := a.runs.Move(sctx, run.ID, from, to, a.now())
			cancel()
			if err != nil {
				return err
			}
			if moved {
				p.adopted++
			}
		}
		if len(page) < DefaultRunsLimit {
			return nil
		}
		after = gaterun.CursorAt(page[len(page)-1])
	}
}
