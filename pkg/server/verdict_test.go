package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// spellings are the names pull 30's run gives its repository where pull
// 31's gives acme/app: one spelling, or one that differs in case.
var spellings = map[string]string{"same case": "acme/app", "case differs": "Acme/App"}

// TestOneVerdictPerCommit pins the rule that runs which disagree about one
// commit and context do not fight over its status: GitHub keeps one state
// per commit and context, so the unsettled run updated last decides it and
// the others are superseded. Pull requests 30 and 31 share a head; 30
// reports success, then 31 failure. Twenty passes of the sweeper's batch
// offers and of the event path's single offers (a status webhook offers
// both) write the status at most once, and it is 31's. It holds as well
// when the runs spell the repository differently in case (GitHub's names
// compare without case, and so does the store), or the status context:
// GitHub keeps one state for ITERION/REVIEW and iterion/review ("The
// context field is case-insensitive", Create a commit status:
// https://docs.github.com/rest/commits/statuses#create-a-commit-status).
func TestOneVerdictPerCommit(t *testing.T) {
	for name, repo30 := range spellings {
		t.Run(name, func(t *testing.T) { oneVerdictPerCommit(t, func(r *gaterun.Run) { r.Repo = repo30 }) })
	}
	t.Run("context case differs", func(t *testing.T) {
		oneVerdictPerCommit(t, func(r *gaterun.Run) { r.Context = strings.ToUpper(r.Context) })
	})
}

// oneVerdictPerCommit is TestOneVerdictPerCommit with pull 30's run
// changed by spell (its repository or context spelled in another case)
// and pull 31's as gateRun makes it.
func oneVerdictPerCommit(t *testing.T, spell func(*gaterun.Run)) {
	const sha = "3030303030303030303030303030303030303030"
	sim, srv := startSim(t)
	fc := newForge(t, srv.URL, nil, "tok", nil, nil)
	runs := gaterun.NewMemoryStore()
	ctx := forge.WithLane(context.Background(), testLane)
	t0 := time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC)
	r30 := gateRun(30, sha, gaterun.VerdictSuccess)
	spell(&r30)
	reportInTurn(t, ctx, sim, runs, t0, time.Second, r30, gateRun(31, sha, gaterun.VerdictFailure))
	rec := server.NewReconciler(runs, fc, nil)
	superseded := 0
	for pass := range 20 {
		for _, out := range offerBoth(t, ctx, runs, rec, fmt.Sprintf("pass %d", pass)) {
			if out == server.OutcomeSuperseded {
				superseded++
			}
		}
	}
	posts := sim.Requests(forgesim.Filter{Route: statusRoute})
	t.Logf("two runs of one commit disagree: %d status writes over 20 batch passes and 40 single offers", posts)
	if posts > 1 {
		t.Errorf("status writes: got %d, want at most 1: two runs of one commit must not flip its status", posts)
	}
	if got := gateState(t, fc, sha); got != "failure" {
		t.Errorf("gate state: got %q, want %q: the run updated last (pull 31) decides", got, "failure")
	}
	if superseded != 40 {
		t.Errorf("superseded offers: got %d, want 40 (pull 30's, two per pass): the other run writes nothing", superseded)
	}

	// Once pull 31's run settles, pull 30's decides again.
	settleRun(t, runs, gaterun.ID("github.com", "acme/app", 31, sha))
	if out, err := rec.Offer(ctx, r30); out != server.OutcomePublished || err != nil {
		t.Errorf("offer after the decider settled: got %q, %v, want published: the remaining run decides", out, err)
	}
}

// TestOneVerdictPerCommitReportedAtOnce pins the tie-break of the run that
// decides a commit's status: pulls 30 and 31 share a head and report
// disagreeing verdicts at the same instant (two replicas, one
// millisecond), so neither was reported last, and the larger ID decides,
// on every replica alike. Twenty passes of batch and single offers write
// the status once, with the larger ID's verdict; were each run to decide
// for itself on a tie, they would flip it on every offer.
func TestOneVerdictPerCommitReportedAtOnce(t *testing.T) {
	const sha = "3333333333333333333333333333333333333333"
	sim, srv := startSim(t)
	fc := newForge(t, srv.URL, nil, "tok", nil, nil)
	runs := gaterun.NewMemoryStore()
	ctx := forge.WithLane(context.Background(), testLane)
	t0 := time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC)
	r30, r31 := gateRun(30, sha, gaterun.VerdictSuccess), gateRun(31, sha, gaterun.VerdictFailure)
	reportInTurn(t, ctx, sim, runs, t0, 0, r30, r31)
	decider := r30
	if r31.ID > r30.ID {
		decider = r31
	}
	rec := server.NewReconciler(runs, fc, nil)
	for pass := range 20 {
		offerBoth(t, ctx, runs, rec, fmt.Sprintf("pass %d", pass))
	}
	if posts := sim.Requests(forgesim.Filter{Route: statusRoute}); posts != 1 {
		t.Errorf("status writes: got %d, want 1: two runs reported at once must not flip their commit's status", posts)
	}
	if got, want := gateState(t, fc, sha), string(decider.Verdict); got != want {
		t.Errorf("gate state: got %q, want %q (pull %d's): the larger ID breaks a tie of reports", got, want, decider.Pull)
	}
}

// offerBoth offers the two unsettled runs of runs as the sweeper does (one
// batch) and as the event path does (each alone), and returns the
// outcomes, the batch's first; when names the moment in a failure.
func offerBoth(t *testing.T, ctx context.Context, runs gaterun.Store, rec *server.Reconciler, when string) []server.Outcome {
	t.Helper()
	listed, err := runs.Unsettled(ctx, time.Time{}, gaterun.Cursor{}, 10)
	if err != nil || len(listed) != 2 {
		t.Fatalf("%s: listing: %d runs, %v; want 2", when, len(listed), err)
	}
	outs, err := rec.OfferBatch(ctx, listed)
	if err != nil {
		t.Fatalf("%s: OfferBatch: %v", when, err)
	}
	for _, run := range listed {
		out, err := rec.Offer(ctx, run)
		if err != nil {
			t.Fatalf("%s: Offer(%d): %v", when, run.Pull, err)
		}
		outs = append(outs, out)
	}
	return outs
}

// reportInTurn opens each run's pull request on sim, at its head, and puts
// the runs in runs gap apart from t0, in order (0: all at t0).
func reportInTurn(t *testing.T, ctx context.Context, sim *forgesim.Sim, runs gaterun.Store, t0 time.Time, gap time.Duration, rs ...gaterun.Run) {
	t.Helper()
	for i, r := range rs {
		if err := sim.SeedPull("acme", "app", r.Pull, r.HeadSHA, "open"); err != nil {
			t.Fatal(err)
		}
		if _, err := runs.Put(ctx, r, t0.Add(time.Duration(i)*gap)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRunsPageShowsSuperseded pins that /runs names the pull request whose
// later run of the same commit supersedes a run, whichever case each run
// spells the repository in.
func TestRunsPageShowsSuperseded(t *testing.T) {
	for name, repo30 := range spellings {
		t.Run(name, func(t *testing.T) {
			const sha = "3131313131313131313131313131313131313131"
			_, fsrv := startSim(t)
			runs := gaterun.NewMemoryStore()
			t0 := time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC)
			r30 := gateRun(30, sha, gaterun.VerdictSuccess)
			r30.Repo = repo30
			for i, r := range []gaterun.Run{r30, gateRun(31, sha, gaterun.VerdictFailure)} {
				if _, err := runs.Put(context.Background(), r, t0.Add(time.Duration(i)*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			s, err := server.New(server.Config{Runs: runs, Leases: lease.NewMemoryStore(), Forge: newForge(t, fsrv.URL, nil, "tok", nil, nil),
				APIToken: "api-token", PublicPages: true})
			if err != nil {
				t.Fatal(err)
			}
			rr := httptest.NewRecorder()
			s.Handler().ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/runs", nil))
			body, _ := io.ReadAll(rr.Body)
			if rr.Code != http.StatusOK || strings.Count(string(body), "superseded by #31") != 1 {
				t.Errorf("GET /runs: %d, %d mentions of \"superseded by #31\", want 200 and 1: the page shows which run decides", rr.Code, strings.Count(string(body), "superseded by #31"))
			}
		})
	}
}

// TestAMoveDoesNotChangeWhichRunDecides pins that moving runs to another
// installation (gaterun.Store.Move, as the adopter and the
// installation_repositories webhook do) leaves the commit's status to the
// run whose verdict was reported last: a move bumps Updated so the new
// installation's sweeper sees the run, but it reports no verdict. Pulls 30
// and 31 share a head, stored without an installation; 30 reports success,
// then 31 failure, which is published. Then 30 moves, alone (31 is on a
// later page, or the adopter has not reached it), and then 31 at the same
// instant, as one pass moves them: the status stays failure and is not
// written again.
func TestAMoveDoesNotChangeWhichRunDecides(t *testing.T) {
	const sha = "3232323232323232323232323232323232323232"
	sim, srv := startSim(t)
	fc := newForge(t, srv.URL, nil, "tok", nil, nil)
	runs := gaterun.NewMemoryStore()
	ctx := forge.WithLane(context.Background(), testLane)
	t0 := time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC)
	r30, r31 := gateRun(30, sha, gaterun.VerdictSuccess), gateRun(31, sha, gaterun.VerdictFailure)
	reportInTurn(t, ctx, sim, runs, t0, time.Second, r30, r31)
	rec := server.NewReconciler(runs, fc, nil)
	offerBoth(t, ctx, runs, rec, "before the moves")
	moveAt := t0.Add(time.Minute)
	for _, r := range []gaterun.Run{r30, r31} {
		if moved, err := runs.Move(ctx, r.ID, 0, 5, moveAt); err != nil || !moved {
			t.Fatalf("Move(pull %d, 0 to 5) = %v, %v; want true", r.Pull, moved, err)
		}
		offerBoth(t, ctx, runs, rec, fmt.Sprintf("after pull %d moved", r.Pull))
		if got := gateState(t, fc, sha); got != "failure" {
			t.Errorf("gate state after pull %d moved: got %q, want %q: the run reported last (pull 31) decides, and a move reports nothing", r.Pull, got, "failure")
		}
	}
	if posts := sim.Requests(forgesim.Filter{Route: statusRoute}); posts != 1 {
		t.Errorf("status writes: got %d, want 1: a move publishes no verdict", posts)
	}
}
