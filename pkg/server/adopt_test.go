package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/server"
)

// uncoveredGauge sums merge_gate_runs_uncovered, every series of it,
// over c's replicas, read from each one's /metrics.
func uncoveredGauge(t *testing.T, c *cluster) float64 {
	t.Helper()
	var sum float64
	for _, r := range c.replicas {
		sum += metricValue(t, r.handler, "merge_gate_runs_uncovered")
	}
	return sum
}

// pathCounter counts the requests that pass through it to next by URL
// path.
type pathCounter struct {
	next http.RoundTripper
	mu   sync.Mutex
	n    map[string]int
}

func (p *pathCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	p.mu.Lock()
	if p.n == nil {
		p.n = map[string]int{}
	}
	p.n[req.URL.Path]++
	p.mu.Unlock()
	return p.next.RoundTrip(req)
}

// count is how many requests for path passed.
func (p *pathCounter) count(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[path]
}

// TestAppModeAdoptsRunsNoShardSweeps pins the run adopter: in App mode a
// run stored under an installation the App does not know (0, as before
// App mode; or one uninstalled since) is put under the installation that
// covers its repository within adopter interval + a sweep interval of
// the adopter's election, and then swept through that installation's
// client; one replica does it, so each repository is looked up once for
// the deployment; a run whose repository no installation covers is left
// unsettled under its installation, counted in merge_gate_runs_uncovered,
// and looked up again only after the App's installations are re-listed;
// its passes are reported as every net's are.
func TestAppModeAdoptsRunsNoShardSweeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, next := newAppCluster(t, 2, false)
		lookUps := &pathCounter{next: next}
		beforeApp, uninstalled := appRun(1), appRun(2)
		beforeApp.Installation, uninstalled.Installation = 0, 99
		orphan := appRun(9) // org-9: no installation covers it
		orphan.Installation = 0
		for _, run := range []gaterun.Run{beforeApp, uninstalled, orphan} {
			if _, err := c.runs.Put(ctx, run, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		startAppReplicas(t, c, lookUps, 2, time.Minute, 4, nil)
		defer c.stopAll()

		// Elected at once, the adopter's first pass comes one of its
		// intervals (5 sweep intervals) later; the shard sweeps the
		// adopted runs at its next pass, a sweep interval after.
		time.Sleep(5*time.Minute + time.Minute + time.Second)
		synctest.Wait()
		for _, want := range []struct {
			run gaterun.Run
			to  int64
		}{{beforeApp, 1}, {uninstalled, 2}, {orphan, 0}} {
			got, err := c.runs.Get(ctx, want.run.ID)
			if err != nil || got.Installation != want.to || got.Settled {
				t.Errorf("run %s after the adopter's pass: installation %d settled %v (%v); want installation %d, unsettled",
					want.run.Repo, got.Installation, got.Settled, err, want.to)
			}
		}
		for _, id := range []int64{1, 2} {
			if got := requestsBy(c.sim, id, statusRoute, http.StatusCreated); got != 1 {
				t.Errorf("statuses written with installation %d's tokens: %d, want 1: an adopted run is swept through the installation covering it", id, got)
			}
		}
		for _, repo := range []string{"org-1", "org-2", "org-9"} {
			if n := lookUps.count("/repos/" + repo + "/repo-1/installation"); n != 1 {
				t.Errorf("look-ups of %s/repo-1's installation: %d, want 1: one replica adopts, once", repo, n)
			}
		}
		if got := uncoveredGauge(t, c); got != 1 {
			t.Errorf("merge_gate_runs_uncovered summed over the replicas: %v, want 1 (org-9's run)", got)
		}
		passed := 0
		for _, r := range c.replicas {
			if _, body := r.call(t, "GET", "/metrics", "", ""); strings.Contains(body, `iterion_net_last_success_timestamp_seconds{lease="merge-gate-adopter"}`) {
				passed++
			}
		}
		if passed != 1 {
			t.Errorf("replicas reporting a complete merge-gate-adopter pass: %d, want 1: its passes are the nets' passes (IterionNetNeverPassed)", passed)
		}

		// Two more passes with no re-list: no new look-up of org-9.
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if n := lookUps.count("/repos/org-9/repo-1/installation"); n != 1 {
			t.Errorf("look-ups of org-9/repo-1 after two more passes without a re-list: %d, want 1: a miss waits for news", n)
		}
		// Another replica's news is news: the next pass looks org-9 up
		// again; and so is a re-list.
		for _, r := range c.replicas {
			r.app.Apply(forge.InstallationChange{ID: 1, Account: "org-1", Repositories: true})
		}
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if n := lookUps.count("/repos/org-9/repo-1/installation"); n != 2 {
			t.Errorf("look-ups of org-9/repo-1 after another replica's news and a pass: %d, want 2", n)
		}
		for _, r := range c.replicas {
			if err := r.app.Relist(ctx); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if n := lookUps.count("/repos/org-9/repo-1/installation"); n != 3 {
			t.Errorf("look-ups of org-9/repo-1 after a re-list and a pass: %d, want 3", n)
		}
	})
}

// TestAppModeAdopterKeepsAVerdictReportedMeanwhile pins that the adopter
// writes nothing from the copy it listed: it lists an orphaned
// installation's runs, looks each repository up on GitHub, then moves the
// run; a verdict reported meanwhile (POST /api/runs for the same head)
// stands, under the adopting installation.
func TestAppModeAdopterKeepsAVerdictReportedMeanwhile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, next := newAppCluster(t, 1, false)
		run := appRun(1)
		run.Installation = 0 // stored before App mode
		store := &racedStore{MemoryStore: c.runs, id: run.ID, land: func() { newerVerdict(t, c.runs, run) }}
		if _, err := c.runs.Put(ctx, run, time.Now()); err != nil {
			t.Fatal(err)
		}
		startAppReplicas(t, c, next, 1, time.Minute, 4, func(cfg *server.Config) { cfg.Runs = store })
		defer c.stopAll()
		time.Sleep(5*time.Minute + 30*time.Second) // the adopter's first pass
		synctest.Wait()
		got, err := c.runs.Get(ctx, run.ID)
		if err != nil || got.Installation != 1 || got.Verdict != gaterun.VerdictFailure {
			t.Errorf("run after adoption: installation %d verdict %q (%v); want installation 1 and failure, the verdict reported during the adoption: the adopter writes nothing from its listed copy", got.Installation, got.Verdict, err)
		}
	})
}

// TestRunAdopterHasALeaseOfItsOwn pins that the adopter is elected under
// a lease no other net shares.
func TestRunAdopterHasALeaseOfItsOwn(t *testing.T) {
	seen := map[string]bool{}
	for _, l := range server.Leases() {
		if seen[l.Name] {
			t.Errorf("lease %q listed twice", l.Name)
		}
		seen[l.Name] = true
	}
	if !seen[server.RunAdopter().Name] {
		t.Errorf("Leases() = %v, want it to list the run adopter's %q", server.Leases(), server.RunAdopter().Name)
	}
}

// TestAppModeAdopterAdoptsPastOnePage pins that one adopter pass adopts
// every open run of an installation the App does not know, page after
// page of server.DefaultRunsLimit: a run past the first page is not left
// for a later pass, five sweep intervals on.
func TestAppModeAdopterAdoptsPastOnePage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, next := newAppCluster(t, 2, false)
		n := server.DefaultRunsLimit + 1
		ids := make([]string, 0, n)
		for pull := 1; pull <= n; pull++ { // org-2/repo-1's runs, under an installation since removed
			run := appRun(2)
			run.Installation, run.Pull, run.HeadSHA = 99, pull, fmt.Sprintf("sha-2-%d", pull)
			run.ID = gaterun.ID(run.Host, run.Repo, run.Pull, run.HeadSHA)
			if _, err := c.runs.Put(ctx, run, time.Now()); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, run.ID)
		}
		startAppReplicas(t, c, next, 1, time.Minute, 4, nil)
		defer c.stopAll()
		time.Sleep(5*time.Minute + time.Second) // the adopter's first pass
		synctest.Wait()
		for _, id := range ids {
			if got, err := c.runs.Get(ctx, id); err != nil || got.Installation != 2 {
				t.Errorf("run %s after the adopter's first pass: installation %d (%v), want 2: one pass adopts every page", id, got.Installation, err)
			}
		}
	})
}
