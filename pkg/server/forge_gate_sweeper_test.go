package server_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// fakeOfferer records the runs offered to it and answers with fail's error
// (nil fail: success). The sweeper's timing tests run in a synctest bubble,
// where the forge simulator on a real listener cannot be reached.
type fakeOfferer struct {
	mu         sync.Mutex
	offers     []string
	n          int               // offers so far
	fail       func(n int) error // n counts offers from 1
	unreadable map[string]bool   // by repo: the forge will not show its pull request
	batches    []int             // the size of each OfferBatch
}

func (f *fakeOfferer) Offer(_ context.Context, run gaterun.Run) (server.Outcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offers = append(f.offers, run.Repo+"#"+fmt.Sprint(run.Pull))
	f.n++
	if f.fail != nil {
		if err := f.fail(f.n); err != nil {
			return server.OutcomeFailed, err
		}
	}
	if f.unreadable[run.Repo] {
		return server.OutcomeUnreadable, fmt.Errorf("read pull: %w", forge.ErrNotFound)
	}
	return server.OutcomeCurrent, nil
}

// OfferBatch offers each run in turn, as one query would answer them, and
// stops at a rate limit, which would have failed the query: the runs not
// reached fail.
func (f *fakeOfferer) OfferBatch(ctx context.Context, runs []gaterun.Run) ([]server.Outcome, error) {
	f.mu.Lock()
	f.batches = append(f.batches, len(runs))
	f.mu.Unlock()
	outs := make([]server.Outcome, len(runs))
	var errs []error
	for i, run := range runs {
		out, err := f.Offer(ctx, run)
		outs[i], errs = out, append(errs, err)
		if errors.Is(err, forge.ErrRateLimited) {
			for j := i + 1; j < len(runs); j++ {
				outs[j] = server.OutcomeFailed
			}
			break
		}
	}
	return outs, errors.Join(errs...)
}

// take returns the offers since the last take.
func (f *fakeOfferer) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.offers
	f.offers = nil
	return out
}

// passLog records sweep passes and the runs each offered.
type passLog struct {
	mu     sync.Mutex
	offer  *fakeOfferer
	passes []server.SweepPass
	offers [][]string
}

func (l *passLog) onPass(p server.SweepPass) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.passes = append(l.passes, p)
	l.offers = append(l.offers, l.offer.take())
}

func (l *passLog) snapshot() ([]server.SweepPass, [][]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.passes), slices.Clone(l.offers)
}

// seeded is a run put in the store, updated age before the bubble's start.
type seeded struct {
	name    string
	age     time.Duration
	settled bool
}

// seedRuns puts one run per entry (pulls numbered from 1, in order).
func seedRuns(t *testing.T, runs gaterun.Store, start time.Time, entries []seeded) {
	t.Helper()
	for i, e := range entries {
		r := gateRun(i+1, fmt.Sprintf("sha%d", i+1), gaterun.VerdictSuccess)
		r.Repo = "acme/" + e.name
		r.ID = gaterun.ID(r.Host, r.Repo, r.Pull, r.HeadSHA)
		if _, err := runs.Put(context.Background(), r, start.Add(-e.age)); err != nil {
			t.Fatal(err)
		}
		if e.settled {
			settleRun(t, runs, r.ID)
		}
	}
}

// startSweeper runs one term of a sweeper in the bubble; stop ends it and
// waits for Work to return.
func startSweeper(sw *server.Sweeper) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sw.Work(ctx); close(done) }()
	return func() { cancel(); <-done }
}

// TestSweeperCadence pins the sweeper's cadence (docs/design.md): the first pass
// of a term comes one interval after the term starts and is deep; with a
// time budget, a deep window begins every DeepSpacing (23) intervals after
// the one before began, 7 short of the deep-pass period (DeepEvery), so
// a window that lags the one before still checks each run within the
// period; the others are shallow; each pass offers exactly the
// unsettled runs updated within its window; passes are counted across the
// term, and a new term starts counting afresh with a deep pass.
func TestSweeperCadence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		entries := []seeded{
			{"fresh", 10 * time.Minute, false},
			{"hours", 3 * time.Hour, false},
			{"days", 100 * time.Hour, false},
			{"ancient", 200 * time.Hour, false},
			{"settled", 5 * time.Minute, true},
		}
		runs := gaterun.NewMemoryStore()
		seedRuns(t, runs, start, entries)
		offer := &fakeOfferer{}
		log := &passLog{offer: offer}
		sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: offer, Interval: time.Minute, Owner: "me", OnPass: log.onPass})

		stop := startSweeper(sw)
		time.Sleep(time.Minute - time.Nanosecond)
		synctest.Wait()
		if ps, _ := log.snapshot(); len(ps) != 0 {
			t.Fatalf("got %d passes before one interval, want 0: the first pass of a term comes one tick after it starts", len(ps))
		}
		time.Sleep(59*time.Minute + time.Nanosecond)
		synctest.Wait()
		stop()

		passes, offers := log.snapshot()
		if len(passes) != 60 {
			t.Fatalf("got %d passes in 60 intervals, want 60: one pass per interval", len(passes))
		}
		for i, p := range passes {
			wantDeep := i%server.DeepSpacing == 0 // docs/design.md: the first pass of a term, and every 23 intervals after
			window := server.ShallowWindow
			if wantDeep {
				window = server.DeepWindow
			}
			var want []string
			for j, e := range entries {
				if !e.settled && !start.Add(-e.age).Before(p.At.Add(-window)) {
					want = append(want, fmt.Sprintf("acme/%s#%d", e.name, j+1))
				}
			}
			slices.Sort(want)
			got := slices.Sorted(slices.Values(offers[i]))
			switch {
			case p.Term != 1 || p.Pass != i+1:
				t.Errorf("pass %d: term %d pass %d, want term 1 pass %d: passes are counted across the term", i+1, p.Term, p.Pass, i+1)
			case p.Deep != wantDeep:
				t.Errorf("pass %d: deep = %v, want %v: the first pass and every %d intervals after are deep", p.Pass, p.Deep, wantDeep, server.DeepSpacing)
			case !p.At.Equal(start.Add(time.Duration(i+1) * time.Minute)):
				t.Errorf("pass %d at %v, want %v: one pass per interval", p.Pass, p.At.Sub(start), time.Duration(i+1)*time.Minute)
			case !p.Since.Equal(p.At.Add(-window)):
				t.Errorf("pass %d since %v, want %v before the pass", p.Pass, p.At.Sub(p.Since), window)
			case !slices.Equal(got, want) || p.Offered != len(want) || !p.Complete:
				t.Errorf("pass %d (deep %v) offered %v (%d, complete %v), want %v: a pass offers the unsettled runs of its window", p.Pass, p.Deep, got, p.Offered, p.Complete, want)
			}
		}
		if passes[0].Offered != 3 || passes[1].Offered != 1 {
			t.Errorf("pass 1 offered %d and pass 2 %d, want 3 (deep: 192 h) and 1 (shallow: 1 h)", passes[0].Offered, passes[1].Offered)
		}

		stop = startSweeper(sw)
		time.Sleep(time.Minute)
		synctest.Wait()
		stop()
		passes, _ = log.snapshot()
		if p := passes[len(passes)-1]; len(passes) != 61 || p.Term != 2 || p.Pass != 1 || !p.Deep {
			t.Errorf("after a new term: %d passes, last term %d pass %d deep %v; want 61, term 2 pass 1 deep: each term starts afresh with a deep pass", len(passes), p.Term, p.Pass, p.Deep)
		}
	})
}

// TestSweeperRateLimit pins that a rate-limit error stops the pass at once,
// that the shallow window goes first in every pass,
// that ticks before the limit's reset are skipped (not counted as passes),
// and that a deep pass cut short resumes from its cursor (the start of the
// page it was cut in: a page is offered as one batch) on the next pass.
func TestSweeperRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		runs := gaterun.NewMemoryStore()
		seedRuns(t, runs, start, []seeded{{"a", 100 * time.Hour, false}, {"b", 50 * time.Hour, false}, {"c", time.Minute, false}})
		reset := start.Add(6 * time.Minute)
		offer := &fakeOfferer{fail: func(n int) error {
			if n == 2 {
				return fmt.Errorf("offer: %w", &forge.RateLimitError{Reset: reset, Cause: forge.CausePrimary, Sent: true})
			}
			return nil
		}}
		log := &passLog{offer: offer}
		sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: offer, Interval: time.Minute, OnPass: log.onPass})
		stop := startSweeper(sw)
		time.Sleep(7*time.Minute + time.Nanosecond)
		synctest.Wait()
		stop()

		passes, offers := log.snapshot()
		type row struct {
			pass     int
			at       time.Duration
			deep     bool
			complete bool
			offers   []string
		}
		want := []row{
			{1, time.Minute, true, false, []string{"acme/c#3", "acme/a#1"}},                // the shallow window first, then stopped at a's rate limit
			{2, 6 * time.Minute, true, true, []string{"acme/c#3", "acme/a#1", "acme/b#2"}}, // at the reset: the shallow window, then the deep pass resumed at its page
			{3, 7 * time.Minute, false, true, []string{"acme/c#3"}},
		}
		if len(passes) != len(want) {
			t.Fatalf("got %d passes, want %d: ticks before the reset are skipped", len(passes), len(want))
		}
		for i, w := range want {
			p := passes[i]
			got := row{p.Pass, p.At.Sub(start), p.Deep, p.Complete, offers[i]}
			if got.pass != w.pass || got.at != w.at || got.deep != w.deep || got.complete != w.complete || !slices.Equal(got.offers, w.offers) {
				t.Errorf("pass %d = %+v, want %+v: a rate limit stops the pass until the reset, and a cut deep pass resumes at its cursor", i+1, got, w)
			}
		}
	})
}

// TestSweepWithoutATimeBudgetResumesADeepPassOfferingEachRunOnce pins a
// deep pass without a time budget (NoSweepTimeBudget), which reads the
// deep window alone: cut by a rate limit, it resumes at its cursor and
// offers each run after it once, without going round to the runs the
// pass before read.
func TestSweepWithoutATimeBudgetResumesADeepPassOfferingEachRunOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		runs := gaterun.NewMemoryStore()
		entries := make([]seeded, 300)
		for i := range entries {
			entries[i] = seeded{name: fmt.Sprintf("r%03d", i), age: 2 * time.Hour}
		}
		seedRuns(t, runs, start, entries)
		offer := &fakeOfferer{fail: func(n int) error {
			if n == 101 { // the second batch's first run
				return fmt.Errorf("offer: %w", &forge.RateLimitError{Reset: start.Add(90 * time.Second), Cause: forge.CausePrimary, Sent: true})
			}
			return nil
		}}
		log := &passLog{offer: offer}
		sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: offer, Interval: time.Minute, OnPass: log.onPass, TimeShare: -1})
		stop := startSweeper(sw)
		time.Sleep(2*time.Minute + time.Nanosecond)
		synctest.Wait()
		stop()

		passes, offers := log.snapshot()
		if len(passes) != 2 || !passes[1].Deep {
			t.Fatalf("got %d passes, want 2, the second deep: a rate limit cut the first", len(passes))
		}
		seen := map[string]int{}
		for _, o := range offers[1] {
			seen[o]++
		}
		for o, n := range seen {
			if n > 1 {
				t.Errorf("pass 2 offered %s %d times, want once: a resumed deep pass offers each run after its cursor once", o, n)
			}
		}
		if len(seen) != 200 || passes[1].Offered != 200 {
			t.Errorf("pass 2 offered %d runs (%d distinct), want the 200 after the cursor", passes[1].Offered, len(seen))
		}
	})
}

// TestSweeperPagesThroughManyRuns pins how a pass reads the store and
// offers: it lists the open runs 5,000 to a store read (the shallow
// window, then 10,250 runs of the deep one: three reads), offers each
// exactly once, in batches of at most
// forge.MaxPullBatch, one forge query's worth.
func TestSweeperPagesThroughManyRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 10250
		start := time.Now()
		mem := gaterun.NewMemoryStore()
		var entries []seeded
		for i := range n {
			entries = append(entries, seeded{fmt.Sprintf("r%05d", i), time.Duration(i%7) * time.Hour, false})
		}
		seedRuns(t, mem, start, entries)
		runs := &countingRuns{Store: mem}
		offer := &fakeOfferer{}
		log := &passLog{offer: offer}
		sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: offer, Interval: time.Minute, OnPass: log.onPass})
		stop := startSweeper(sw)
		time.Sleep(time.Minute)
		synctest.Wait()
		stop()
		passes, offers := log.snapshot()
		if len(passes) != 1 || passes[0].Offered != n || len(offers[0]) != n {
			t.Fatalf("got %d passes, offered %v, want 1 pass offering %d", len(passes), len(offers), n)
		}
		if len(slices.Compact(slices.Sorted(slices.Values(offers[0])))) != n {
			t.Errorf("some run was offered twice in one pass, want each once")
		}
		if gets, lists := runs.take(); lists != 4 || gets != 0 {
			t.Errorf("store reads: %d pages listed, %d runs got; want 4 (the shallow window's, then the deep window's three) and 0: a pass lists 5,000 runs a read and re-reads none itself", lists, gets)
		}
		if len(offer.batches) != 103 || slices.Max(offer.batches) != forge.MaxPullBatch {
			t.Errorf("%d batches of at most %d runs, want 103 of at most %d: one forge query's worth each", len(offer.batches), slices.Max(offer.batches), forge.MaxPullBatch)
		}
	})
}

// gaugedSweep is a sweeper at a minute's interval offering through a
// fakeOfferer, with its passes logged and its BackingOff gauge read after
// each pass (at, in pass order).
type gaugedSweep struct {
	sw    *server.Sweeper
	log   *passLog
	gauge prometheus.Gauge
	at    []float64
}

func newGaugedSweep(runs gaterun.Store, offer *fakeOfferer) *gaugedSweep {
	g := &gaugedSweep{log: &passLog{offer: offer}, gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"})}
	g.sw = server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: offer, Interval: time.Minute, BackingOff: g.gauge,
		OnPass: func(p server.SweepPass) { g.log.onPass(p); g.at = append(g.at, testutil.ToFloat64(g.gauge)) }})
	return g
}

// TestSweeperBacksOffUnreadableRuns pins the back-off of a run whose pull
// request cannot be read: skipped for 2, 4, 8, 16 intervals, then every
// DeepEvery intervals at most, while readable runs are offered every pass;
// the BackingOff gauge counts it, and shows none once the term ends.
func TestSweeperBacksOffUnreadableRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		runs := gaterun.NewMemoryStore()
		seedRuns(t, runs, start, []seeded{{"gone", -2 * time.Hour, false}, {"ok", -2 * time.Hour, false}}) // updated ahead: in every window
		g := newGaugedSweep(runs, &fakeOfferer{unreadable: map[string]bool{"acme/gone": true}})
		stop := startSweeper(g.sw)
		time.Sleep(100*time.Minute + time.Nanosecond)
		synctest.Wait()

		passes, offers := g.log.snapshot()
		gauge, gaugeAt := g.gauge, g.at
		var gone []int
		for i, o := range offers {
			if slices.Contains(o, "acme/gone#1") {
				gone = append(gone, passes[i].Pass)
			}
			if !slices.Contains(o, "acme/ok#2") {
				t.Errorf("pass %d offered %v, want acme/ok#2 in it: a readable run is offered every pass", passes[i].Pass, o)
			}
		}
		want := []int{1, 3, 7, 15, 31, 61, 91} // waits of 2, 4, 8, 16, then 30 (DeepEvery) intervals
		if !slices.Equal(gone, want) {
			t.Errorf("unreadable run offered in passes %v, want %v: it backs off exponentially, capped at the deep-pass period", gone, want)
		}
		if gaugeAt[0] != 1 || gaugeAt[len(gaugeAt)-1] != 1 {
			t.Errorf("gauge after pass 1 and pass %d: %v and %v, want 1: one run backing off", len(gaugeAt), gaugeAt[0], gaugeAt[len(gaugeAt)-1])
		}
		stop()
		if g := testutil.ToFloat64(gauge); g != 0 {
			t.Errorf("gauge after the term: %v, want 0: back-offs live in the term", g)
		}
	})
}

// deletedRuns is a run store whose listings leave out the runs deleted
// (by ID), as a store would once they were deleted from it.
type deletedRuns struct {
	gaterun.Store
	mu      sync.Mutex
	deleted map[string]bool
}

func (d *deletedRuns) delete(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deleted[id] = true
}

// depart settles acme/settles#1 and deletes acme/deleted#2: the two ways
// a seeded run leaves the sweep in token mode.
func (d *deletedRuns) depart(t *testing.T) {
	t.Helper()
	settleRun(t, d, gaterun.ID("github.com", "acme/settles", 1, "sha1"))
	d.delete(gaterun.ID("github.com", "acme/deleted", 2, "sha2"))
}

func (d *deletedRuns) Unsettled(ctx context.Context, since time.Time, after gaterun.Cursor, limit int) ([]gaterun.Run, error) {
	page, err := d.Store.Unsettled(ctx, since, after, limit)
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.DeleteFunc(page, func(r gaterun.Run) bool { return d.deleted[r.ID] }), err
}

// TestSweeperForgetsTheBackOffsOfRunsItNoLongerSweeps pins that a back-off
// lasts only while its run is still listed unsettled: once a run that
// backed off is settled, or deleted from the store, the end of the first
// deep window begun after drops its back-off, so the BackingOff gauge
// (the term's back-offs, counted) stops counting it and the term no
// longer holds it, while a run still unreadable keeps its back-off and
// its schedule: no offer more than without the pruning.
func TestSweeperForgetsTheBackOffsOfRunsItNoLongerSweeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		mem := gaterun.NewMemoryStore()
		seedRuns(t, mem, start, []seeded{{"settles", -2 * time.Hour, false}, {"deleted", -2 * time.Hour, false}, {"stays", -2 * time.Hour, false}})
		runs := &deletedRuns{Store: mem, deleted: map[string]bool{}}
		g := newGaugedSweep(runs, &fakeOfferer{unreadable: map[string]bool{"acme/settles": true, "acme/deleted": true, "acme/stays": true}})
		stop := startSweeper(g.sw)
		defer stop()
		time.Sleep(time.Minute + time.Nanosecond)
		synctest.Wait()
		if got := testutil.ToFloat64(g.gauge); got != 3 {
			t.Fatalf("gauge after pass 1: %v, want 3: three runs backing off", got)
		}
		runs.depart(t)

		// The second deep window begins and ends in pass 24 (DeepSpacing
		// intervals after the first); the test goes on to a third.
		time.Sleep(59 * time.Minute)
		synctest.Wait()
		passes, offers := g.log.snapshot()
		gaugeAt := g.at
		if len(passes) != 60 {
			t.Fatalf("%d passes, want 60", len(passes))
		}
		next := server.DeepSpacing + 1
		if got := gaugeAt[next-2]; got != 3 {
			t.Errorf("gauge after pass %d, before the second deep window: %v, want 3: a back-off is dropped only when a whole window did not list its run", next-1, got)
		}
		for i, g := range gaugeAt[next-1:] {
			if g != 1 {
				t.Errorf("gauge after pass %d: %v, want 1: the runs settled or deleted are no longer the sweeper's, and no longer back off", next+i, g)
				break
			}
		}
		var stays []int
		for i, o := range offers {
			if slices.Contains(o, "acme/stays#3") {
				stays = append(stays, passes[i].Pass)
			}
		}
		if want := []int{1, 3, 7, 15, 31}; !slices.Equal(stays, want) {
			t.Errorf("the run still unreadable offered in passes %v, want %v: its back-off outlives the pruning", stays, want)
		}
	})
}

// TestSweeperForgetsTheFailedDeepRunsItNoLongerSweeps pins that a
// deep-window run whose offer keeps failing is offered again only while
// it is listed unsettled: once it is settled, or deleted from the store,
// the end of the first deep window begun after (which does not list it)
// forgets it, as it forgets a back-off, so no later pass offers it again,
// and it does not hold every pass Behind once it would be DeepEvery
// intervals unchecked.
func TestSweeperForgetsTheFailedDeepRunsItNoLongerSweeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		mem := gaterun.NewMemoryStore()
		seedRuns(t, mem, start, []seeded{{"settles", 2 * time.Hour, false}, {"deleted", 2 * time.Hour, false}, {"ok", 2 * time.Hour, false}}) // in the deep window alone
		runs := &deletedRuns{Store: mem, deleted: map[string]bool{}}
		var off *fakeOfferer
		off = &fakeOfferer{fail: func(int) error {
			if o := off.offers[len(off.offers)-1]; o != "acme/ok#3" { // off.mu is held
				return fmt.Errorf("forge: pull request %s: %w", o, forge.ErrStaleHead)
			}
			return nil
		}}
		g := newGaugedSweep(runs, off)
		stop := startSweeper(g.sw)
		defer stop()
		time.Sleep(time.Minute + time.Nanosecond)
		synctest.Wait()
		runs.depart(t)
		time.Sleep(59 * time.Minute)
		synctest.Wait()
		passes, offers := g.log.snapshot()
		if len(passes) != 60 {
			t.Fatalf("%d passes, want 60", len(passes))
		}
		next := server.DeepSpacing + 1 // the second deep window begins and ends in this pass
		for i, o := range offers {
			pass := passes[i].Pass
			for _, run := range []string{"acme/settles#1", "acme/deleted#2"} {
				if got, want := slices.Contains(o, run), pass <= next; got != want {
					t.Errorf("pass %d offered %s: %v, want %v: a failed deep-window run is offered again until the end of a deep window that did not list it", pass, run, got, want)
				}
			}
			if passes[i].Behind {
				t.Errorf("pass %d: behind, want not: the runs whose offers failed left the sweep before DeepEvery intervals unchecked", pass)
			}
		}
	})
}

// TestSweepPassCostAgainstTheSimulator pins the batched sweep's goal on the
// simulator's own counts: one pass over 250 open runs costs one GraphQL
// query per 100 runs plus one status write per drifted run, at most
// ceil(N/50)+5 requests; drift is repaired, merged runs settle, and the
// next pass costs the queries alone.
func TestSweepPassCostAgainstTheSimulator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, drifted = 250, 3
		sim := forgesim.New()
		fc, mem, stopSim := seedSweepRuns(t, sim, n, drifted)
		defer stopSim()
		if err := sim.Merge("acme", "app", n); err != nil {
			t.Fatal(err)
		}
		runs := &countingRuns{Store: mem}
		sim.ResetStats()
		var passes []server.SweepPass
		sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: server.NewReconciler(runs, fc, nil), Interval: time.Minute,
			OnPass: func(p server.SweepPass) { passes = append(passes, p) }})
		stop := startSweeper(sw)
		time.Sleep(time.Minute)
		synctest.Wait()

		queries := sim.Requests(forgesim.Filter{Route: "POST /graphql"})
		posts := sim.Requests(forgesim.Filter{Route: statusRoute})
		total := sim.Requests(forgesim.Filter{})
		if queries != 3 || posts != drifted || total > (n+49)/50+5 {
			t.Fatalf("pass 1: got %d queries, %d status writes, %d requests in all; want 3 (250 runs / 100), %d (the drifted runs) and at most %d: a pass costs open runs / batch, writes only for drift",
				queries, posts, total, drifted, (n+49)/50+5)
		}
		for i := 1; i <= drifted; i++ {
			if st := gateState(t, fc, fmt.Sprintf("%040d", i)); st != "success" {
				t.Errorf("pull %d: gate context %q, want success: drift is repaired", i, st)
			}
		}
		if gets, lists := runs.take(); lists != 2 || gets != drifted+1 {
			t.Errorf("pass 1 store reads: %d pages, %d runs got; want 2 (the shallow window, the deep one) and %d (the drifted and the merged, re-read before their write): store reads grow with pages and writes, not open runs", lists, gets, drifted+1)
		}
		if r, _ := mem.Get(context.Background(), gateRun(n, fmt.Sprintf("%040d", n), gaterun.VerdictSuccess).ID); !r.Settled {
			t.Errorf("run of the merged pull request unsettled, want settled: the batch settles as Offer does")
		}
		sim.ResetStats()
		time.Sleep(time.Minute)
		synctest.Wait()
		stop()
		if q, all := sim.Requests(forgesim.Filter{Route: "POST /graphql"}), sim.Requests(forgesim.Filter{}); q != 3 || all != 3 || len(passes) != 2 || passes[1].Offered != n-1 {
			t.Fatalf("pass 2: got %d queries of %d requests, %d passes; want 3 of 3 and %d runs offered: nothing drifted, nothing is written", q, all, len(passes), n-1)
		}
		if gets, lists := runs.take(); lists != 1 || gets != 0 {
			t.Errorf("pass 2 store reads: %d pages, %d runs got; want 1 and 0: nothing to write, nothing re-read", lists, gets)
		}
	})
}

// TestRESTSweepModeReadsEachRun pins SweepREST, kept for comparison
// measurements: a pass offers every run on its own, two REST reads each
// (its pull request, its head's combined status) and a write per drifted
// run, and no GraphQL query; drift is repaired as in the batched sweep.
func TestRESTSweepModeReadsEachRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, drifted = 20, 2
		sim := forgesim.New()
		fc, runs, stopSim := seedSweepRuns(t, sim, n, drifted)
		defer stopSim()
		sim.ResetStats()
		sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: server.PerRunOfferer(server.NewReconciler(runs, fc, nil)), Interval: time.Minute})
		stop := startSweeper(sw)
		time.Sleep(time.Minute)
		synctest.Wait()
		stop()
		queries := sim.Requests(forgesim.Filter{Route: "POST /graphql"})
		gets := sim.Requests(forgesim.Filter{Method: "GET"})
		posts := sim.Requests(forgesim.Filter{Route: statusRoute})
		if queries != 0 || gets != 2*n || posts != drifted {
			t.Fatalf("got %d queries, %d GETs, %d status writes; want 0, %d and %d: the REST sweep reads each run's pull and status, writes only for drift",
				queries, gets, posts, 2*n, drifted)
		}
		for i := 1; i <= drifted; i++ {
			if st := gateState(t, fc, fmt.Sprintf("%040d", i)); st != "success" {
				t.Errorf("pull %d: got gate context %q, want success: the REST sweep repairs drift", i, st)
			}
		}
	})
}

// TestRESTSweepStopsAtItsTermsEnd pins SweepREST's batch at the end of
// its context (the term's): the runs after it are failed without an
// offer, so a REST pass cut by a step-down sends no further read and
// counts no offer it did not make.
func TestRESTSweepStopsAtItsTermsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 5
		sim := forgesim.New()
		fc, runs, stopSim := seedSweepRuns(t, sim, n, 0)
		defer stopSim()
		page, err := runs.Unsettled(context.Background(), time.Time{}, gaterun.Cursor{}, n)
		if err != nil || len(page) != n {
			t.Fatalf("listing the seeded runs: %d runs, %v; want %d", len(page), err, n)
		}
		sim.ResetStats()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		off := &cancellingOfferer{Offerer: server.NewReconciler(runs, fc, nil), cancel: cancel}
		outs, err := server.PerRunOfferer(off).OfferBatch(ctx, page)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got error %v, want one that is context.Canceled: the batch says why it stopped", err)
		}
		if off.offered != 1 {
			t.Errorf("got %d runs offered, want 1: no run is offered after the term's end", off.offered)
		}
		if gets := sim.Requests(forgesim.Filter{Method: "GET"}); gets != 2 {
			t.Errorf("got %d GETs, want 2: the first run's pull and status, nothing after the term's end", gets)
		}
		for i, o := range outs[1:] {
			if o != server.OutcomeFailed {
				t.Errorf("run %d: got outcome %q, want %q: a run the batch did not reach is failed, left for a later pass", i+2, o, server.OutcomeFailed)
			}
		}
	})
}

// cancellingOfferer offers through Offerer and cancels its term's context
// after the first offer, as a step-down would.
type cancellingOfferer struct {
	server.Offerer
	cancel  context.CancelFunc
	offered int
}

func (o *cancellingOfferer) Offer(ctx context.Context, run gaterun.Run) (server.Outcome, error) {
	o.offered++
	defer o.cancel()
	return o.Offerer.Offer(ctx, run)
}

// TestSweepModeIsValidated pins Comparison.SweepMode's validation: only
// "", batch and rest are modes, and the error names the field and the
// value.
func TestSweepModeIsValidated(t *testing.T) {
	fc, err := forge.New(forge.Config{BaseURL: "http://sim/", Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode server.SweepMode
		ok   bool
	}{{"", true}, {server.SweepBatch, true}, {server.SweepREST, true}, {"graphql", false}} {
		cfg := server.Config{Runs: gaterun.NewMemoryStore(), Leases: lease.NewMemoryStore(), Forge: fc, APIToken: "t"}
		_, err := server.NewForComparison(cfg, server.Comparison{SweepMode: c.mode})
		if c.ok && err != nil {
			t.Errorf("SweepMode %q: got %v, want nil: a known mode", c.mode, err)
		}
		if !c.ok && (!errors.Is(err, server.ErrConfig) || !strings.Contains(err.Error(), `Comparison.SweepMode "graphql"`)) {
			t.Errorf("SweepMode %q: got %v, want server.ErrConfig naming Comparison.SweepMode and its value", c.mode, err)
		}
	}
}

// seedSweepRuns opens n pull requests on sim, each with a success verdict
// stored in a new run store and, on the forge, a gate status that agrees
// with it but for the first drifted ones (failure, changed behind the
// gate's back). It returns a forge client to sim over an in-memory pipe,
// the run store, and a stop for the pipe's server.
func seedSweepRuns(tb testing.TB, sim *forgesim.Sim, n, drifted int) (*forge.Client, *gaterun.MemoryStore, func()) {
	tb.Helper()
	return seedSweepRunsWithin(tb, sim, n, drifted, 0)
}

// seedSweepRunsWithin is seedSweepRuns with a forge client whose requests
// give up after timeout (0: never).
func seedSweepRunsWithin(tb testing.TB, sim *forgesim.Sim, n, drifted int, timeout time.Duration) (*forge.Client, *gaterun.MemoryStore, func()) {
	tb.Helper()
	tr, stop := serveSimOnPipe(sim)
	fc, err := forge.New(forge.Config{BaseURL: "http://sim/", Token: "tok", Next: tr, Timeout: timeout})
	if err != nil {
		stop()
		tb.Fatal(err)
	}
	runs := gaterun.NewMemoryStore()
	for i := 1; i <= n; i++ {
		sha := fmt.Sprintf("%040d", i)
		state := "success"
		if i <= drifted {
			state = "failure"
		}
		err := sim.SeedPull("acme", "app", i, sha, "open")
		if err == nil {
			err = sim.SetStatus("acme", "app", sha, forgesim.Status{Context: gaterun.DefaultContext, State: state})
		}
		if err == nil {
			_, err = runs.Put(context.Background(), gateRun(i, sha, gaterun.VerdictSuccess), time.Now())
		}
		if err != nil {
			stop()
			tb.Fatal(err)
		}
	}
	return fc, runs, stop
}

// TestSweeperReportsAPassBeforeItLogsIt pins the order of a pass's two
// reports: SweeperConfig.OnPass (which the installations view, /readyz's
// freshness and the metrics read) is called before the "sweep pass" line
// is logged, so whoever reads that line finds the pass already recorded
// rather than racing its record.
func TestSweeperReportsAPassBeforeItLogsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runs := gaterun.NewMemoryStore()
		seedRuns(t, runs, time.Now(), []seeded{{"a", time.Minute, false}})
		logger, logs := forgetest.TextLogger()
		var logged []bool // per OnPass: whether its pass line was logged already
		offer := &fakeOfferer{}
		sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: offer, Interval: time.Minute, Logger: logger,
			OnPass: func(server.SweepPass) {
				logged = append(logged, strings.Count(logs.String(), "msg=\"sweep pass\"") >= len(logged)+1)
			}})
		stop := startSweeper(sw)
		time.Sleep(2*time.Minute + time.Nanosecond)
		synctest.Wait()
		stop()
		if len(logged) < 2 || slices.Contains(logged, true) {
			t.Errorf("pass line already logged when OnPass was called, per pass: %v, want two or more, every one false: a pass is recorded before its line says it ended", logged)
		}
	})
}

// TestSweepARefusalForASuspensionStopsThePass pins that a batch GitHub
// refused for the installation's suspension (forge.ErrSuspended) is the
// pass's last: 300 shallow-window runs, three batches' worth, the first
// batch refused. The pass sends no other batch (every one would be
// refused alike, each a request GitHub counts) and is not complete; the
// installation is checked after it (installationSweeps.pass).
func TestSweepARefusalForASuspensionStopsThePass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runs := gaterun.NewMemoryStore()
		entries := make([]seeded, 300)
		for i := range entries {
			entries[i] = seeded{name: fmt.Sprintf("r%03d", i), age: time.Minute}
		}
		seedRuns(t, runs, time.Now(), entries)
		offer := &fakeOfferer{fail: func(n int) error {
			if n == 1 {
				return fmt.Errorf("forge: GraphQL: %w", forge.ErrSuspended)
			}
			return nil
		}}
		log := &passLog{offer: offer}
		sw := server.NewSweeper(server.SweeperConfig{Runs: runs, Offer: offer, Interval: time.Minute, OnPass: log.onPass})
		stop := startSweeper(sw)
		time.Sleep(time.Minute + 30*time.Second)
		synctest.Wait()
		stop()
		passes, _ := log.snapshot()
		if len(passes) != 1 {
			t.Fatalf("got %d passes, want 1", len(passes))
		}
		if n := len(offer.batches); n != 1 || passes[0].Complete {
			t.Errorf("batches sent: %d, pass complete %v; want 1, not complete: a read refused for the installation's suspension ends the pass", n, passes[0].Complete)
		}
	})
}
