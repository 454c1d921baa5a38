package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/server"
)

// gateRun is a valid run of acme/app on github.com.
func gateRun(pull int, sha string, verdict gaterun.Verdict) gaterun.Run {
	return gaterun.Run{
		ID: gaterun.ID("github.com", "acme/app", pull, sha), Host: "github.com", Repo: "acme/app",
		Pull: pull, HeadSHA: sha, Context: gaterun.DefaultContext, Verdict: verdict,
		Description: "review " + string(verdict), TargetURL: "https://ci.example/r/1",
	}
}

// statusRoute is the simulator's route of a status write; GraphQL reads are
// POSTs too.
const statusRoute = "POST /repos/{owner}/{repo}/statuses/{sha}"

// testLane is where the tests' own reads are charged, apart from the server's.
const testLane = "test"

// gateState is the state of the gate context on sha as the simulator keeps
// it ("" when there is none); contexts compare without regard to case, as
// on GitHub.
func gateState(t *testing.T, fc *forge.Client, sha string) string {
	t.Helper()
	cs, err := fc.CombinedStatus(forge.WithLane(context.Background(), testLane), "acme", "app", sha)
	if err != nil {
		t.Fatalf("CombinedStatus: %v", err)
	}
	for _, st := range cs.Statuses {
		if strings.EqualFold(st.Context, gaterun.DefaultContext) {
			return st.State
		}
	}
	return ""
}

func TestReconcilerOffer(t *testing.T) {
	const sha = "1111111111111111111111111111111111111111"
	for _, c := range []struct {
		name string
		rule string
		// forge prepares the pull request (seeded open at sha).
		forge       func(t *testing.T, sim *forgesim.Sim)
		want        server.Outcome
		wantSettled bool
		wantState   string // the gate context afterwards
		wantPosts   int64  // statuses created
	}{
		{"status missing", "a head without the gate context gets the verdict",
			func(*testing.T, *forgesim.Sim) {}, server.OutcomePublished, false, "success", 1},
		{"status wrong", "a gate context whose state differs from the verdict is overwritten",
			func(t *testing.T, sim *forgesim.Sim) {
				if err := sim.SetStatus("acme", "app", sha, forgesim.Status{Context: gaterun.DefaultContext, State: "failure"}); err != nil {
					t.Fatal(err)
				}
			}, server.OutcomePublished, false, "success", 1},
		{"status right", "a gate context that already shows the verdict is left alone: no write",
			func(t *testing.T, sim *forgesim.Sim) {
				if err := sim.SetStatus("acme", "app", sha, forgesim.Status{Context: gaterun.DefaultContext, State: "success"}); err != nil {
					t.Fatal(err)
				}
			}, server.OutcomeCurrent, false, "success", 0},
		{"status right in another case", "status contexts are case-insensitive on GitHub: ITERION/Review showing the verdict is the gate's context, left alone",
			func(t *testing.T, sim *forgesim.Sim) {
				if err := sim.SetStatus("acme", "app", sha, forgesim.Status{Context: strings.ToUpper(gaterun.DefaultContext), State: "success"}); err != nil {
					t.Fatal(err)
				}
			}, server.OutcomeCurrent, false, "success", 0},
		{"other context only", "another context's status does not stand for the gate's",
			func(t *testing.T, sim *forgesim.Sim) {
				if err := sim.SetStatus("acme", "app", sha, forgesim.Status{Context: "ci/build", State: "success"}); err != nil {
					t.Fatal(err)
				}
			}, server.OutcomePublished, false, "success", 1},
		{"pull merged", "a merged pull request settles the run and writes nothing",
			func(t *testing.T, sim *forgesim.Sim) {
				if err := sim.Merge("acme", "app", 12); err != nil {
					t.Fatal(err)
				}
			}, server.OutcomeSettled, true, "", 0},
		{"pull closed", "a closed pull request settles the run and writes nothing",
			func(t *testing.T, sim *forgesim.Sim) {
				if err := sim.Close("acme", "app", 12); err != nil {
					t.Fatal(err)
				}
			}, server.OutcomeSettled, true, "", 0},
		{"head moved", "a pull request whose head moved settles the run of the old head and writes nothing",
			func(t *testing.T, sim *forgesim.Sim) {
				if err := sim.PushHead("acme", "app", 12, "2222222222222222222222222222222222222222"); err != nil {
					t.Fatal(err)
				}
			}, server.OutcomeSettled, true, "", 0},
	} {
		for _, path := range []string{"event path", "batch"} {
			t.Run(c.name+"/"+path, func(t *testing.T) {
				testReconcilerCase(t, path, sha, c.rule, c.forge, c.want, c.wantSettled, c.wantState, c.wantPosts)
			})
		}
	}
}

// testReconcilerCase runs one case of TestReconcilerOffer through Offer
// (the event path) or OfferBatch: both decide alike.
func testReconcilerCase(t *testing.T, path, sha, rule string, prepare func(*testing.T, *forgesim.Sim), want server.Outcome, wantSettled bool, wantState string, wantPosts int64) {
	c := struct {
		rule        string
		forge       func(*testing.T, *forgesim.Sim)
		want        server.Outcome
		wantSettled bool
		wantState   string
		wantPosts   int64
	}{rule, prepare, want, wantSettled, wantState, wantPosts}
	sim, srv := startSim(t)
	if err := sim.SeedPull("acme", "app", 12, sha, "open"); err != nil {
		t.Fatal(err)
	}
	c.forge(t, sim)
	fc := newForge(t, srv.URL, nil, "tok", nil, nil)
	runs := gaterun.NewMemoryStore()
	run := gateRun(12, sha, gaterun.VerdictSuccess)
	if _, err := runs.Put(context.Background(), run, time.Now()); err != nil {
		t.Fatal(err)
	}
	rec := server.NewReconciler(runs, fc, nil)
	offer := rec.Offer
	if path == "batch" {
		offer = func(ctx context.Context, run gaterun.Run) (server.Outcome, error) {
			outs, err := rec.OfferBatch(ctx, []gaterun.Run{run})
			return outs[0], err
		}
	}
	got, err := offer(context.Background(), run)
	if err != nil || got != c.want {
		t.Fatalf("%s: got %q, %v, want %q, nil: %s", path, got, err, c.want, c.rule)
	}
	stored, _ := runs.Get(context.Background(), run.ID)
	if stored.Settled != c.wantSettled {
		t.Errorf("settled = %v, want %v: %s", stored.Settled, c.wantSettled, c.rule)
	}
	if posts := sim.Requests(forgesim.Filter{Route: statusRoute}); posts != c.wantPosts {
		t.Errorf("statuses created = %d, want %d: %s", posts, c.wantPosts, c.rule)
	}
	if !c.wantSettled {
		if st := gateState(t, fc, sha); st != c.wantState {
			t.Errorf("gate context = %q, want %q: %s", st, c.wantState, c.rule)
		}
		// Idempotence: a second offer finds the status right.
		if again, err := offer(context.Background(), run); err != nil || again != server.OutcomeCurrent {
			t.Errorf("second Offer = %q, %v, want current: offers are idempotent", again, err)
		}
		if posts := sim.Requests(forgesim.Filter{Route: statusRoute}); posts != c.wantPosts {
			t.Errorf("statuses created after a second offer = %d, want %d: offers are idempotent", posts, c.wantPosts)
		}
	}
}

// TestReconcilerRereadsTheRun pins that Offer acts on the stored run, not
// on the copy it is handed: a settled run is gone without a forge request,
// and a newer verdict in the store wins over the stale copy.
func TestReconcilerRereadsTheRun(t *testing.T) {
	const sha = "3333333333333333333333333333333333333333"
	sim, srv := startSim(t)
	if err := sim.SeedPull("acme", "app", 7, sha, "open"); err != nil {
		t.Fatal(err)
	}
	fc := newForge(t, srv.URL, nil, "tok", nil, nil)
	runs := gaterun.NewMemoryStore()
	stale := gateRun(7, sha, gaterun.VerdictPending)
	if _, err := runs.Put(context.Background(), stale, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := runs.Put(context.Background(), gateRun(7, sha, gaterun.VerdictFailure), time.Now()); err != nil {
		t.Fatal(err)
	}
	rec := server.NewReconciler(runs, fc, nil)
	if out, err := rec.Offer(context.Background(), stale); err != nil || out != server.OutcomePublished {
		t.Fatalf("Offer = %q, %v, want published", out, err)
	}
	if st := gateState(t, fc, sha); st != "failure" {
		t.Errorf("gate context = %q, want failure: the stored verdict wins over a stale copy", st)
	}
	settleRun(t, runs, stale.ID)
	sim.ResetStats()
	if out, err := rec.Offer(context.Background(), stale); err != nil || out != server.OutcomeGone {
		t.Errorf("Offer of a settled run = %q, %v, want gone", out, err)
	}
	if n := sim.Requests(forgesim.Filter{}); n != 0 {
		t.Errorf("forge requests for a settled run = %d, want 0: a settled run is never read from the forge", n)
	}
	if out, err := rec.Offer(context.Background(), gateRun(99, sha, gaterun.VerdictSuccess)); err != nil || out != server.OutcomeGone {
		t.Errorf("Offer of an unknown run = %q, %v, want gone", out, err)
	}
}

// TestReconcilerSettleKeepsAVerdictReportedMeanwhile pins that an offer
// settles the report it read and no later one: a verdict put by another
// replica between the offer's read of the run and its settle (the pull
// request was closed when read, and has been reopened and reviewed again
// since) is left unsettled, for its own offer or the sweep to decide, and
// the offer says so (outcome reported). The settle is held at the MongoDB
// wire (mongotest's Proxy) while the other replica's Put lands.
func TestReconcilerSettleKeepsAVerdictReportedMeanwhile(t *testing.T) {
	const sha = "4444444444444444444444444444444444444444"
	ctx := context.Background()
	sim, srv := startSim(t)
	if err := sim.SeedPull("acme", "app", 8, sha, "open"); err != nil {
		t.Fatal(err)
	}
	if err := sim.Close("acme", "app", 8); err != nil {
		t.Fatal(err)
	}
	ms := mongotest.NewServer(t)
	db := ms.DB(t)
	runs, err := gaterun.NewMongoStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	other, err := gaterun.NewMongoStore(ctx, ms.Client(t).Database(db.Name())) // another replica's
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	read := gateRun(8, sha, gaterun.VerdictPending)
	if _, err := runs.Put(ctx, read, now); err != nil {
		t.Fatal(err)
	}
	hold := ms.Proxy().Hold(func(c mongotest.Command) bool {
		settles, _ := c.Body.Lookup("updates", "0", "u", "$set", "settled").BooleanOK()
		return c.Name == "update" && c.Collection == gaterun.Collection && settles
	})
	t.Cleanup(hold.Release)
	type result struct {
		out server.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := server.NewReconciler(runs, newForge(t, srv.URL, nil, "tok", nil, nil), nil).Offer(ctx, read)
		done <- result{out, err}
	}()
	select {
	case <-hold.Arrived():
	case res := <-done:
		t.Fatalf("Offer = %q, %v without a settle, want it to settle the run of a closed pull request", res.out, res.err)
	}
	if _, err := other.Put(ctx, gateRun(8, sha, gaterun.VerdictFailure), now.Add(time.Minute)); err != nil {
		t.Fatalf("the other replica's Put: %v", err)
	}
	hold.Release()
	res := <-done
	if res.err != nil || res.out != server.OutcomeReported {
		t.Errorf("Offer = %q, %v, want reported: the run was reported again after the offer read it", res.out, res.err)
	}
	got, err := runs.Get(ctx, read.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Settled || got.Verdict != gaterun.VerdictFailure {
		t.Errorf("run after the offer: Settled %v, verdict %q; want unsettled, failure: a settle decided from an earlier read never hides a verdict reported since", got.Settled, got.Verdict)
	}
}

// beforeStatusWrite is a forge transport that runs do once, before the
// first status write it forwards.
type beforeStatusWrite struct {
	once sync.Once
	do   func()
}

func (b *beforeStatusWrite) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && strings.Contains(req.URL.Path, "/statuses/") {
		b.once.Do(b.do)
	}
	return http.DefaultTransport.RoundTrip(req)
}

// TestReconcilerPublishLeavesTheLastReportedVerdict pins that the status
// an offer writes never outlives a verdict reported since the offer read
// the runs of its commit: GitHub keeps the last status written and takes
// no condition, so when another replica reports a newer verdict for the
// commit and publishes it while this offer's older one is on its way, the
// offer reads the commit's runs again after its write and publishes the
// verdict that decides now, last.
func TestReconcilerPublishLeavesTheLastReportedVerdict(t *testing.T) {
	const sha = "5555555555555555555555555555555555555555"
	for _, c := range []struct {
		name string
		// newer is the run the other replica reports: run 9's again, or
		// a run of pull 10, which shares the head.
		newer gaterun.Run
	}{
		{"the same run reported again", gateRun(9, sha, gaterun.VerdictFailure)},
		{"another pull request's run of the commit reported", gateRun(10, sha, gaterun.VerdictFailure)},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			sim, srv := startSim(t)
			for _, pull := range []int{9, 10} {
				if err := sim.SeedPull("acme", "app", pull, sha, "open"); err != nil {
					t.Fatal(err)
				}
			}
			runs := gaterun.NewMemoryStore()
			now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
			read := gateRun(9, sha, gaterun.VerdictSuccess)
			if _, err := runs.Put(ctx, read, now); err != nil {
				t.Fatal(err)
			}
			plain := newForge(t, srv.URL, nil, "tok", nil, nil)
			// Just before this offer's write of success goes out, another
			// replica records failure and its offer publishes it.
			hook := &beforeStatusWrite{do: func() {
				if _, err := runs.Put(ctx, c.newer, now.Add(time.Minute)); err != nil {
					t.Errorf("the other replica's Put: %v", err)
				}
				if out, err := server.NewReconciler(runs, plain, nil).Offer(ctx, c.newer); err != nil || out != server.OutcomePublished {
					t.Errorf("the other replica's offer = %q, %v, want published", out, err)
				}
			}}
			if _, err := server.NewReconciler(runs, newForge(t, srv.URL, hook, "tok", nil, nil), nil).Offer(ctx, read); err != nil {
				t.Fatalf("Offer: %v", err)
			}
			if st := gateState(t, plain, sha); st != "failure" {
				t.Errorf("gate context = %q, want failure: the verdict reported last is the status left, whatever order the writes landed in", st)
			}
		})
	}
}

// TestReconcilerBatchRereadsBeforeWriting pins OfferBatch's store reads:
// it decides from the runs as listed, so a run the forge already agrees
// with costs no store read, and it re-reads a run only before writing for
// it; a run settled since the listing is gone and nothing is written, one
// whose verdict changed is decided on the stored verdict, and an unchanged
// drifted one is published.
func TestReconcilerBatchRereadsBeforeWriting(t *testing.T) {
	sim, srv := startSim(t)
	fc := newForge(t, srv.URL, nil, "tok", nil, nil)
	mem := gaterun.NewMemoryStore()
	ctx := context.Background()
	sha := func(pull int) string { return fmt.Sprintf("%040d", pull) }
	// Pulls 1-3 show failure on the forge against a success verdict
	// (drifted); pull 4 shows success (current).
	for pull := 1; pull <= 4; pull++ {
		state := "failure"
		if pull == 4 {
			state = "success"
		}
		if err := sim.SeedPull("acme", "app", pull, sha(pull), "open"); err != nil {
			t.Fatal(err)
		}
		if err := sim.SetStatus("acme", "app", sha(pull), forgesim.Status{Context: gaterun.DefaultContext, State: state}); err != nil {
			t.Fatal(err)
		}
		if _, err := mem.Put(ctx, gateRun(pull, sha(pull), gaterun.VerdictSuccess), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	listed, err := mem.Unsettled(ctx, time.Time{}, gaterun.Cursor{}, 10)
	if err != nil || len(listed) != 4 {
		t.Fatalf("listing: %d runs, %v; want 4", len(listed), err)
	}
	slices.SortFunc(listed, func(a, b gaterun.Run) int { return a.Pull - b.Pull })
	// Behind the listing's back: run 1's verdict becomes failure (a
	// second, later report), run 2 is settled.
	if _, err := mem.Put(ctx, gateRun(1, sha(1), gaterun.VerdictFailure), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	settleRun(t, mem, listed[1].ID)
	runs := &countingRuns{Store: mem}
	sim.ResetStats()
	outs, err := server.NewReconciler(runs, fc, nil).OfferBatch(ctx, listed)
	if err != nil {
		t.Fatal(err)
	}
	want := []server.Outcome{server.OutcomeCurrent, server.OutcomeGone, server.OutcomePublished, server.OutcomeCurrent}
	if !slices.Equal(outs, want) {
		t.Errorf("outcomes %v, want %v: changed verdict decided on the store's (failure, which the forge shows), settled gone, drift published, agreement current", outs, want)
	}
	if gets, _ := runs.take(); gets != 3 {
		t.Errorf("store reads = %d, want 3: only the runs a write was due for are re-read", gets)
	}
	if posts := sim.Requests(forgesim.Filter{Route: statusRoute}); posts != 1 {
		t.Errorf("statuses created = %d, want 1 (run 3): nothing is written from a stale copy", posts)
	}
	if st := gateState(t, fc, sha(1)); st != "failure" {
		t.Errorf("run 1's gate context = %q, want failure: the stored verdict wins over the listed copy", st)
	}
	if st := gateState(t, fc, sha(2)); st != "failure" {
		t.Errorf("run 2's gate context = %q, want failure (untouched): a run settled since the listing is not written for", st)
	}
}

// TestReconcilerRateLimited pins that a rate-limited forge comes back as a
// typed error (errors.As finds *forge.RateLimitError, with the reset), the
// offer is failed, and nothing is settled or written.
func TestReconcilerRateLimited(t *testing.T) {
	const sha = "4444444444444444444444444444444444444444"
	sim, srv := startSim(t, forgesim.WithBudget(1))
	if err := sim.SeedPull("acme", "app", 5, sha, "open"); err != nil {
		t.Fatal(err)
	}
	fc := newForge(t, srv.URL, nil, "tok", nil, nil)
	runs := gaterun.NewMemoryStore()
	run := gateRun(5, sha, gaterun.VerdictSuccess)
	if _, err := runs.Put(context.Background(), run, time.Now()); err != nil {
		t.Fatal(err)
	}
	logger, logs := textLogger()
	out, err := server.NewReconciler(runs, fc, logger).Offer(context.Background(), run)
	rl, ok := rateLimited(err)
	if !ok || !errors.Is(err, forge.ErrRateLimited) {
		t.Fatalf("Offer error = %v, want a *forge.RateLimitError: a rate limit is typed", err)
	}
	if out != server.OutcomeFailed {
		t.Errorf("outcome = %q, want failed", out)
	}
	if !rl.Reset.After(time.Now()) {
		t.Errorf("reset = %v, want in the future: the caller waits until the reset", rl.Reset)
	}
	if sim.Requests(forgesim.Filter{Route: statusRoute}) != 0 {
		t.Errorf("a status was created, want none: a refused read writes nothing")
	}
	if stored, _ := runs.Get(context.Background(), run.ID); stored.Settled {
		t.Errorf("run settled, want unsettled: a failed offer leaves the run for the next")
	}
	if !strings.Contains(logs.String(), "offer failed") {
		t.Errorf("log %q lacks the failed offer: forge errors are logged", logs.String())
	}
}
