// App mode's merge-gate sweeper: the lease group merge-gate-sweeper, whose
// shard terms sweep the installations InstallationShard gives them, each
// with a sweeper of its own.

package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/internal/clock"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
)

// installationSweeps is the App-mode sweeper (docs/design.md, "One App,
// many installations"). Each installation has a sweeper of its own (the
// sweeper type, over its runs alone and offering through its client), so
// its cursors, batch size, time budget and back-offs are its own, as
// GitHub's limits are. Safe for concurrent use: RunGroup calls shardTerm
// concurrently for different shards.
type installationSweeps struct {
	s        *Server
	app      *forge.AppClient
	shards   int
	interval time.Duration
	conc     int
	// newSweeper builds installation id's sweeper.
	newSweeper func(id int64) *sweeper
	// lookups holds a pending look-up of the App's installations (lookUp).
	lookups chan struct{}
	// news wakes the shard terms when the App client's installations
	// changed here (a webhook, another replica's news, a look-up).
	news broadcast
	// reads lists the installations' unsettled runs, one store read for
	// all those swept here (sweep_reads.go).
	reads *sweepReads

	mu       sync.Mutex
	sweepers map[int64]*sweeper // made on first use, kept while the App knows it
	// newsTold is this replica's news leases, by name, with their
	// expiry (installationsChanged, releaseTold).
	newsTold map[string]time.Time
	// backingOff and behind are each installation's latest figures, summed
	// (and or-ed) into the replica's gauges: no series per installation.
	backingOff      map[int64]int
	behind          map[int64]bool
	backingOffGauge prometheus.Gauge
	behindGauge     prometheus.Gauge
	// uncovered is each installation's runs whose repository no
	// installation covers (note), summed into uncoveredGauge,
	// merge_gate_runs_uncovered{found_by="sweeper"}.
	uncovered      map[int64]int
	uncoveredGauge prometheus.Gauge
	// rehomed counts the runs rehome moved.
	rehomed prometheus.Counter
	// mintHolds is the installations whose mints are held back after
	// GitHub refused one while it has the installation (holdMint), and
	// mintsRefused counts those refusals.
	mintHolds    map[int64]mintHold
	mintsRefused prometheus.Counter
	// swept is, for each installation swept here, when its last complete
	// pass here ended, or when its sweep here began if none has (unswept).
	swept map[int64]time.Time
	// aheadSlots holds one token for each mint ahead running
	// (MintAheadConcurrency).
	aheadSlots chan struct{}
}

// run serves the group merge-gate-sweeper of g.shards shards until ctx is
// done; its TTL and retry are the single sweeper lease's.
func (g *installationSweeps) run(ctx context.Context) {
	l := MergeGateSweeper()
	err := lease.RunGroup(ctx, g.s.cfg.Leases, lease.GroupSpec{
		Name:    l.Name,
		Owner:   g.s.cfg.Owner,
		Shards:  g.shards,
		TTL:     l.TTL(g.interval),
		Retry:   l.Retry(g.interval),
		Logger:  g.s.cfg.Logger, // RunGroup adds the owner itself
		Health:  g.s.health,
		OnEvent: g.s.leaseEvent,
	}, g.shardTerm)
	if err != nil {
		g.s.log.Error("elected group not started", "lease", l.Name, "err", err)
	}
}

// buildSweeper builds the merge-gate sweeper: one sweeper under the lease
// MergeGateSweeper(), or in App mode the group of installation sweepers,
// each instantiated on first use over its installation's runs and client.
// backingOff and behind are the replica's gauges, behindPasses its count
// of passes behind and malformed its count of run documents skipped, which
// every installation's sweeper adds to; rehomed (App mode) its count of
// runs moved by installationSweeps.rehome, mintsRefused (App mode) its
// count of mints GitHub refused while it has the installation
// (installationSweeps.refusedMint), and uncovered (App mode) its gauge of
// the runs rehome found no installation covers.
func (s *Server) buildSweeper(backingOff, behind prometheus.Gauge, behindPasses *prometheus.CounterVec, malformed, rehomed, mintsRefused prometheus.Counter, uncovered prometheus.Gauge) {
	timeShare := s.cfg.SweepTimeShare // 0: the default
	if s.cmp.NoSweepTimeBudget {
		timeShare = -1
	}
	sweepOffer := func(rec *reconciler) offerer {
		if s.cmp.SweepMode == SweepREST {
			return perRunOfferer{laneOfferer{s, rec, forge.LaneMergeGateSweeper}}
		}
		return laneOfferer{s, rec, forge.LaneMergeGateSweeper}
	}
	if s.cfg.App != nil {
		reads := newSweepReads(s.cfg.Runs, s.cfg.Now, s.cfg.SweepInterval)
		s.sweeps = &installationSweeps{
			s: s, app: s.cfg.App, shards: s.cfg.SweepShards, interval: s.cfg.SweepInterval, conc: s.cfg.InstallationConcurrency,
			sweepers: map[int64]*sweeper{}, newsTold: map[string]time.Time{}, backingOff: map[int64]int{}, behind: map[int64]bool{},
			backingOffGauge: backingOff, behindGauge: behind, rehomed: rehomed, lookups: make(chan struct{}, 1), reads: reads,
			uncovered: map[int64]int{}, uncoveredGauge: uncovered, mintHolds: map[int64]mintHold{}, mintsRefused: mintsRefused, swept: map[int64]time.Time{},
			aheadSlots: make(chan struct{}, MintAheadConcurrency),
			newSweeper: func(id int64) *sweeper {
				ilog := s.log.With("installation", id)
				onPass := s.passes.sweepPass(s.cfg.Now, s.sweepPassed)
				return newSweeper(sweeperConfig{
					Runs: installationRuns{s.cfg.Runs, reads, id}, Offer: sweepOffer(newReconcilerOf(s.cfg.Runs, installationForge(s.cfg.App, id), ilog)),
					Interval: s.cfg.SweepInterval, Minute: s.cfg.ForgeMinute, TimeShare: timeShare, Concurrency: s.cfg.SweepConcurrency, RequestTimeout: s.cfg.forgeTimeout(), Owner: s.cfg.Owner, Now: s.cfg.Now, Logger: ilog,
					BehindPasses: behindPasses, Malformed: malformed,
					OnPass: func(p SweepPass) { p.Installation = id; onPass(p) },
				})
			},
		}
	} else {
		s.sweeper = newSweeper(sweeperConfig{
			Runs: s.cfg.Runs, Offer: sweepOffer(s.rec), Interval: s.cfg.SweepInterval, Minute: s.cfg.ForgeMinute, TimeShare: timeShare, Concurrency: s.cfg.SweepConcurrency, RequestTimeout: s.cfg.forgeTimeout(),
			Owner: s.cfg.Owner, Now: s.cfg.Now, Logger: s.log, OnPass: s.passes.sweepPass(s.cfg.Now, s.sweepPassed),
			BackingOff: backingOff, Behind: behind, BehindPasses: behindPasses, Malformed: malformed, Watchdog: s.watchdog(MergeGateSweeper(), s.cfg.SweepInterval),
		})
	}
}

// checkSweepWait rejects a SweepInterval (cfg's, defaulted) that leaves a
// pass with its time budget on no room to begin a batch: a pass begins
// one only when it would end within the interval however long the forge
// client lets it wait (SweepBatchWait: GitHub's query timeout on ForgeMinute's
// clock, or the client's Timeout when shorter), so an interval no longer
// than that would never sweep. The error wraps ErrConfig and names the
// field.
func checkSweepWait(cfg Config, cmp Comparison) error {
	if cmp.NoSweepTimeBudget {
		return nil
	}
	if wait := SweepBatchWait(cfg.ForgeMinute, cfg.forgeTimeout()); wait >= cfg.SweepInterval {
		return fmt.Errorf("%w: SweepInterval %v: a sweep batch may keep its pass waiting %v (GitHub's %v query timeout on ForgeMinute's clock, or the forge client's Timeout when shorter), so no pass could begin one: give the forge client a Timeout under the interval (iterion serve: --forge-timeout)",
			ErrConfig, cfg.SweepInterval, wait, forge.ServerTimeout)
	}
	return nil
}

// forgeTimeout is the deadline each forge request of c's client gets (the
// App's in App mode), or 0 when it has none.
func (c Config) forgeTimeout() time.Duration {
	if c.App != nil {
		return c.App.Timeout()
	}
	return c.Forge.Timeout()
}

// installationsOf is the installations the App client knows that shard
// sweeps, each with the key "" (followInstallations).
func (g *installationSweeps) installationsOf(shard int) map[int64]string {
	mine := map[int64]string{}
	for _, in := range g.app.Installations() {
		if InstallationShard(in.ID, g.shards) == shard {
			mine[in.ID] = ""
		}
	}
	return mine
}

// shardTerm serves one term of shard: at its start, at every interval
// after, and when the installations changed (news), it looks at the
// installations the shard has and starts sweeping those new to it and
// stops those gone (followInstallations). An installation's first pass is
// deep and comes at the later of now and the term's start plus one
// interval less the installation's offset (passOffset): the term's own
// installations spread over the half interval before the first tick
// (decision 3), one the term learns of later at once. The tokens of the
// installations whose first pass is to come are minted ahead of it, from
// the moment the term has them (mintAhead). Every installation sweeps on its own
// cadence, one pass at a time; the term's installations share conc pass
// slots. The term ends with ctx, never for one installation's failures
// (sweepInstallation).
func (g *installationSweeps) shardTerm(ctx context.Context, shard int) {
	ctx = forge.WithLane(ctx, forge.LaneMergeGateSweeper)
	start := time.Now()
	slots := make(chan struct{}, g.conc)
	followInstallations(ctx, g.interval, g.news.wait, func() map[int64]string { return g.installationsOf(shard) },
		func(ctx context.Context, id int64, _ string) {
			g.sweepInstallation(ctx, id, slots, start.Add(g.interval-passOffset(id, g.interval)))
		})
}

// sweeperOf is installation id's sweeper, made on first use.
func (g *installationSweeps) sweeperOf(id int64) *sweeper {
	g.mu.Lock()
	defer g.mu.Unlock()
	sw := g.sweepers[id]
	if sw == nil {
		sw = g.newSweeper(id)
		g.sweepers[id] = sw
	}
	return sw
}

// sweepInstallation sweeps installation id until ctx is done: a pass every
// interval, the first one at at (at once when at has come) and deep,
// through lease.EveryAfter, its token minted ahead of it (mintAhead). The
// watchdog is the installation's own: each pass is bounded by the
// interval (pass), and stallPasses passes in a row that did not complete
// park the installation for stallPasses intervals, after which it starts
// again afresh (a deep first pass one interval later). The shard's other
// installations are not held back by it. It returns once the mint ahead
// has ended too, and only then forgets the installation (forget), so no
// mint hold outlives the sweep.
func (g *installationSweeps) sweepInstallation(ctx context.Context, id int64, slots chan struct{}, at time.Time) {
	sw := g.sweeperOf(id)
	g.markSwept(id)
	defer g.forget(id)
	g.reads.join(id)
	defer g.reads.leave(id)
	first := time.Until(at)
	ahead := g.mintAhead(ctx, sw, id, at)
	defer func() { <-ahead }()
	for {
		st := sw.newTerm()
		st.keepUnreadable = true
		err := lease.EveryAfter(ctx, first, g.interval, g.s.cfg.Now,
			func(ctx context.Context) (time.Time, bool) { return g.pass(ctx, sw, st, id, slots, ahead) },
			func(until time.Time) {
				sw.cfg.Logger.Debug("sweep skipped: rate limited or backing off", "until", until)
			},
			lease.Watchdog{Name: MergeGateSweeper().Name, StallAfter: stallPasses,
				Stalled: g.s.passes.stalls.WithLabelValues(MergeGateSweeper().Name).Inc})
		if err == nil || ctx.Err() != nil {
			return
		}
		sitOut := stallPasses * g.interval
		sw.cfg.Logger.Warn("sweep: installation parked: its passes keep failing; the shard's other installations go on", "for", sitOut.String(), "err", err)
		g.note(id, nil, false)
		if !clock.Sleep(ctx, sitOut) {
			return
		}
		first = g.interval
	}
}

// pass makes one pass of installation id's term st, once it has one of
// the shard term's slots. It returns what lease.Every expects: the
// instant the next pass must wait for, and whether it completed. A pass
// whose installation the App no longer knows, whose token did not come
// or whose mints are held back (minted, once the mint ahead has ended:
// ahead closed), or that got no slot within an
// interval, is skipped: it returns a resume of now, which counts neither
// as a failure nor as a success. The pass itself is bounded by the
// interval (cause lease.ErrPassTimeout, counted as a timeout), from the
// moment it has its slot, so the wait for one is not charged to it, and
// fails /healthz while it ignores that cancellation (watched). A
// pass whose read GitHub refused for the installation's suspension has
// the installation checked at its end (refusedRead).
func (g *installationSweeps) pass(ctx context.Context, sw *sweeper, st *sweepTerm, id int64, slots chan struct{}, ahead <-chan struct{}) (time.Time, bool) {
	if _, err := g.app.Installation(id); err != nil {
		return g.s.cfg.Now(), false // removed: the shard term stops it at its next interval
	}
	if !g.minted(ctx, sw, id, ahead) {
		return g.s.cfg.Now(), false
	}
	wait := time.NewTimer(g.interval)
	defer wait.Stop()
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return time.Time{}, false
	case <-wait.C:
		sw.cfg.Logger.Warn("sweep skipped: every slot of the shard was taken for an interval; raise --installation-concurrency")
		return g.s.cfg.Now(), false
	}
	defer func() { <-slots }()
	var p SweepPass
	var resume time.Time
	name := MergeGateSweeper().Name
	if g.watched(ctx, fmt.Sprintf("%s installation %d", name, id), time.Now().Add(g.interval),
		func(ctx context.Context) { p, resume = sw.pass(ctx, st) }) {
		g.s.passes.timeouts.WithLabelValues(name).Inc()
	}
	if st.takeSuspended() {
		g.refusedRead(ctx, sw, id)
	}
	g.rehome(ctx, sw.cfg.Logger, id, st)
	g.keepListed(id, st)
	g.note(id, st, p.Behind)
	if p.Complete {
		g.markSwept(id)
	}
	return resume, p.Complete
}

// watched runs f under a context that ends at deadline (cause
// lease.ErrPassTimeout), tracked by the replica's Health under name until
// forge.MintOverrun after it, and reports whether the deadline cut f: an
// installation's pass proper (pass: cut one interval from the moment it
// has its slot, counted in iterion_net_pass_timeouts_total, as the
// token-mode sweeper's watchdog does each of its passes, Server.watchdog)
// or its token mint (mint). /healthz checks that Health, so an f that
// ignores its cancellation fails the liveness check once past its
// deadline by forge.MintOverrun and TTL/6 (healthBound), naming the
// installation, in the one Health of every shard term of the replica.
// The overrun is a mint's: any request of a pass may mint the
// installation's token (one GitHub refused 401 is dropped and the request
// sent again), and the App JWT's gate waits for a mint GitHub was sent
// past the request's cancellation; an f that late heeds its cancellation
// (TestAppModeAPassAnsweredWithinTheMintOverrunIsNotStuck,
// TestAppModeAMintAnsweredLateIsNotStuck).
//
// A pass's bound is the token-mode sweeper's because what it bounds is the
// same sweeper.pass, whose time budget begins a batch only when it would
// end within the interval however long GitHub lets a query run (10 s): a
// healthy pass, however slow, returns by its deadline, or at it when
// cancelled. What comes before it is not charged, or a busy shard's
// healthy passes would be cut, and their installations parked
// (TestAppModeSlowPassesWaitingForASlotAreNeitherCutNorStuck): the wait
// for the installation's token (up to an interval, minted, watched on its
// own) and for one of the shard's --installation-concurrency slots (up to
// an interval behind the shard's other installations' passes). Nor is
// what comes after it, on the term's context rather than the pass's (the
// checks and moves of refusedRead and rehome, each request under its own
// deadline): it is not cancelled at the deadline, so however long it
// takes it would read as a pass ignoring its cancellation.
func (g *installationSweeps) watched(ctx context.Context, name string, deadline time.Time, f func(context.Context)) (cut bool) {
	wd := lease.Watchdog{Name: name, PassTimeout: time.Until(deadline) + forge.MintOverrun, Health: g.s.health}
	wd.Bound(ctx, func(ctx context.Context) {
		fctx, cancel := context.WithDeadlineCause(ctx, deadline, lease.ErrPassTimeout)
		defer cancel()
		f(fctx)
		cut = errors.Is(context.Cause(fctx), lease.ErrPassTimeout)
	})
	return cut
}

// rehome moves each run that installation from's pass found unreadable
// (its token refused: REST 404 or 403, GraphQL NOT_FOUND or FORBIDDEN) to
// the installation GitHub says covers the run's repository now
// (AppClient.Recheck, one request with the App's JWT a repository), when
// that is another installation. A repository moved between installations
// while the installation_repositories webhook saying so did not reach the
// deployment (GitHub does not send a failed delivery again), or a run
// stored with an installation taken from a run moved just after, leaves
// runs under an installation whose token can never read them: no sweep
// would publish their verdicts. The move is gaterun.Store.Move,
// conditional on the run being still unsettled under from, so a verdict
// reported or a settle made since stands; the moved run leaves from's
// back-off, and installation to's sweeper offers it as news. A run whose
// repository still resolves to from (a pull request deleted, or hidden
// from the App) or to none backs off as before, and is looked up again
// only when an offer finds it unreadable again, as its back-off allows.
// A run whose repository no installation covers (GitHub answers the
// look-up 404, forge.ErrNotInstalled:
// https://docs.github.com/rest/apps/apps#get-a-repository-installation-for-the-authenticated-app)
// is marked uncovered in its back-off, counted in
// merge_gate_runs_uncovered{found_by="sweeper"} (note) and logged at Warn
// the first time its term finds it so.
// One whose repository's installation is suspended (forge.ErrSuspended)
// is not: the repository is covered, and the run waits for the
// unsuspension, backing off as before.
// A look-up or move that fails is logged and tried again then; a rate
// limit ends the call.
func (g *installationSweeps) rehome(ctx context.Context, log *slog.Logger, from int64, st *sweepTerm) {
	type found struct {
		id   int64 // 0: not to be moved
		none bool  // no installation covers the repository
	}
	to := map[string]found{} // by forge.RepoKey
	for _, run := range st.takeUnreadable() {
		key := forge.RepoKey(run.Repo)
		f, looked := to[key]
		if !looked {
			owner, name := ownerRepo(run)
			lctx, cancel := context.WithTimeout(ctx, g.s.cfg.OfferTimeout)
			_, id, err := g.app.Recheck(lctx, owner, name, from)
			cancel()
			switch {
			case errors.Is(err, forge.ErrRateLimited):
				log.Warn("sweep: installation of unreadable runs not looked up: rate limited", "repo", run.Repo, "err", err)
				return
			case errors.Is(err, forge.ErrSuspended):
				// Covered, by a suspended installation: the run waits
				// for its unsuspension, not counted uncovered.
				log.Info("sweep: the installation covering an unreadable run's repository is suspended", "run", run.ID, "repo", run.Repo)
			case errors.Is(err, forge.ErrNotInstalled):
				// An answer, not a failure: marked, and logged once, below.
			case err != nil:
				log.Info("sweep: installation of an unreadable run's repository not found", "run", run.ID, "repo", run.Repo, "err", err)
			}
			f = found{id: id, none: errors.Is(err, forge.ErrNotInstalled) && !errors.Is(err, forge.ErrSuspended)}
			to[key] = f
		}
		if b, ok := st.backoff[run.ID]; ok && (f.none || f.id == from) && b.uncovered != f.none {
			if f.none {
				log.Warn("sweep: no installation of the App covers the repository of an unsettled run: no verdict of it is published until the App is installed there",
					"run", run.ID, "repo", run.Repo)
			}
			b.uncovered = f.none
			st.backoff[run.ID] = b
		}
		if f.id == 0 || f.id == from {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, g.s.cfg.StoreTimeout)
		moved, err := g.s.cfg.Runs.Move(sctx, run.ID, from, f.id, g.s.cfg.Now())
		cancel()
		switch {
		case err != nil:
			log.Warn("sweep: unreadable run not moved to the installation covering its repository", "run", run.ID, "repo", run.Repo, "to", f.id, "err", err)
		case moved:
			delete(st.backoff, run.ID)
			g.rehomed.Inc()
			log.Info("sweep: run moved to the installation covering its repository now; this installation's token could not read it", "run", run.ID, "repo", run.Repo, "to", f.id)
		}
	}
}

// keepListed drops from st's back-off, and from its failed deep-window
// runs (sweepTerm.deepAgain), the runs installation id's snapshot of
// unsettled runs (sweepReads) no longer lists: a run settled, moved to
// another installation by a webhook, deleted, or past the deep window is
// no longer this sweeper's, so it leaves the back-off and the counts, and
// is offered again no more, by the next snapshot (at most half an
// interval old) without a store read of its own, rather than at the end
// of the next deep window (sweepTerm.forgetUnlisted). Nothing is dropped
// when no snapshot covers id.
func (g *installationSweeps) keepListed(id int64, st *sweepTerm) {
	if len(st.backoff) == 0 && len(st.deepAgain) == 0 {
		return
	}
	kept := slices.Concat(slices.Collect(maps.Keys(st.backoff)), slices.Collect(maps.Keys(st.deepAgain)))
	for _, runID := range g.reads.unlisted(id, kept) {
		delete(st.backoff, runID)
		delete(st.deepAgain, runID)
	}
}

// note records installation id's backing-off runs (none when st is nil),
// those of them whose repository no installation covers (rehome), and
// whether its last pass was behind, and sets the replica's gauges to the
// sums and the or over its installations. keepListed has left in st's
// back-off only the runs the installation's snapshot lists unsettled.
func (g *installationSweeps) note(id int64, st *sweepTerm, behind bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.backingOff[id], g.behind[id], g.uncovered[id] = 0, behind, 0
	if st != nil {
		g.backingOff[id] = len(st.backoff)
		for _, b := range st.backoff {
			if b.uncovered {
				g.uncovered[id]++
			}
		}
	}
	g.showLocked()
}

// uncoveredOf is installation id's count of uncovered runs at its last
// pass here (note); 0 when it has none, and for a nil g.
func (g *installationSweeps) uncoveredOf(id int64) int {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.uncovered[id]
}

// forget drops installation id's figures and its mint hold once this
// replica stops sweeping it (a re-list or a webhook dropped it, or its
// shard went to another replica), and its sweeper once the App no longer
// knows it.
func (g *installationSweeps) forget(id int64) {
	_, err := g.app.Installation(id)
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.backingOff, id)
	delete(g.behind, id)
	delete(g.uncovered, id)
	delete(g.mintHolds, id)
	delete(g.swept, id)
	if err != nil {
		delete(g.sweepers, id)
	}
	g.showLocked()
}

// markSwept records now in swept for installation id: its sweep here
// begins, or one of its passes completed.
func (g *installationSweeps) markSwept(id int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.swept[id] = g.s.cfg.Now()
}

// unswept is how many installations swept here have had no complete pass
// here for the sweeper lease's TTL (3 intervals, IterionNetNoPass's bound
// for the net), counted from their sweep's start here when none has: those
// parked (sweepInstallation), backing off from 5xx answers, waiting for a
// token or a slot, rate limited. It is the per-installation stall that
// iterion_net_last_success_timestamp_seconds, moved by any installation's
// complete pass, cannot show; merge_gate_installations_unswept, which
// IterionInstallationUnswept watches.
func (g *installationSweeps) unswept() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	now, n := g.s.cfg.Now(), 0
	for _, at := range g.swept {
		if now.Sub(at) >= MergeGateSweeper().TTL(g.interval) {
			n++
		}
	}
	return n
}

// showLocked sets the gauges from the figures; g.mu is held.
func (g *installationSweeps) showLocked() {
	n, uncovered, behind := 0, 0, false
	for id, b := range g.backingOff {
		n += b
		uncovered += g.uncovered[id]
		behind = behind || g.behind[id]
	}
	g.backingOffGauge.Set(float64(n))
	g.uncoveredGauge.Set(float64(uncovered))
	g.behindGauge.Set(b2f(behind))
}

// installationRuns is a run store as one installation's sweeper sees it:
// its Unsettled lists that installation's runs alone.
type installationRuns struct {
	gaterun.Store
	reads *sweepReads
	id    int64
}

// Unsettled lists installation r.id's unsettled runs (Store.UnsettledIn),
// through the replica's shared reads.
func (r installationRuns) Unsettled(ctx context.Context, since time.Time, after gaterun.Cursor, limit int) ([]gaterun.Run, error) {
	return r.reads.unsettledIn(ctx, r.id, since, after, limit)
}

// installationForge is the forgeOf of installation id's sweeper: that
// installation's client, and never another's, whatever the run says; an
// installation the App no longer knows fails the offer without a request.
func installationForge(app *forge.AppClient, id int64) forgeOf {
	return func(context.Context, gaterun.Run) (*forge.Client, error) {
		return app.Installation(id)
	}
}
