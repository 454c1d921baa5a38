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

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// appID is the App the App-mode tests' clients authenticate as.
const appID = 42

// appRepo is installation i's repository in the App-mode tests, as
// forgesim.SeedInstallations names it.
func appRepo(i int64) string { return fmt.Sprintf("org-%d/repo-1", i) }

// appRun is the success run of pull #1 of installation i's repository,
// at head sha-<i>.
func appRun(i int64) gaterun.Run {
	repo, sha := appRepo(i), fmt.Sprintf("sha-%d", i)
	return gaterun.Run{ID: gaterun.ID("github.com", repo, 1, sha), Host: "github.com", Repo: repo, Pull: 1, HeadSHA: sha,
		Context: gaterun.DefaultContext, Verdict: gaterun.VerdictSuccess, Installation: i}
}

// newAppCluster is newCluster for App mode: the simulator has
// installations 1..n of the App, installation i covering org-<i>/repo-1,
// whose pull #1 is open at head sha-<i>; with runs, each has its run
// (appRun) in the store, its status not yet published.
func newAppCluster(t *testing.T, n int, runs bool) (c *cluster, next http.RoundTripper) {
	t.Helper()
	c, next = newCluster(t, 0)
	if err := c.sim.SeedInstallations(n, 1); err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= int64(n); i++ {
		seedAppPull(t, c, i, runs)
	}
	return c, next
}

// seedAppPull opens pull #1 of installation i's repository and, with run,
// stores its run.
func seedAppPull(t *testing.T, c *cluster, i int64, run bool) {
	t.Helper()
	r := appRun(i)
	owner, name, _ := strings.Cut(r.Repo, "/")
	if err := c.sim.SeedPull(owner, name, 1, r.HeadSHA, "open"); err != nil {
		t.Fatal(err)
	}
	if run {
		if _, err := c.runs.Put(context.Background(), r, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
}

// startAppReplicas is startReplicas in App mode: n Servers (owners
// replica-1..n) serving every installation of App appID, each with its
// own AppClient (one key: the App's), sweeping every interval in a group
// of shards shards. next may be wrapped by wrap (nil: as is).
func startAppReplicas(t *testing.T, c *cluster, next http.RoundTripper, n int, interval time.Duration, shards int, mod func(*server.Config)) {
	t.Helper()
	key := forgetest.AppKey(t)
	for i := 1; i <= n; i++ {
		r := &replica{owner: fmt.Sprintf("replica-%d", i)}
		reg := prometheus.NewRegistry()
		app, err := forge.NewApp(forge.AppConfig{BaseURL: "http://sim/", Next: next, AppID: appID, PrivateKey: key, Registerer: reg})
		if err != nil {
			t.Fatalf("forge.NewApp: %v", err)
		}
		r.app = app
		cfg := server.Config{Runs: c.runs, Leases: c.leases, App: app, SweepShards: shards, APIToken: apiToken, WebhookSecret: webhookSecret,
			Owner: r.owner, SweepInterval: interval, Registry: reg, OnLeaseEvent: c.tl.onEvent, OnSweep: c.tl.onSweep}
		if mod != nil {
			mod(&cfg)
		}
		srv, err := server.NewForComparison(cfg, c.cmp)
		if err != nil {
			t.Fatalf("server.NewForComparison: %v", err)
		}
		r.handler = srv.Handler()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Run(ctx, nil) }()
		r.stop = sync.OnceFunc(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s: Run = %v, want nil after its context is done", r.owner, err)
			}
		})
		c.replicas = append(c.replicas, r)
	}
}

// installationTokenOf is the installation a simulator token was minted for
// ("ghs_sim_<id>_<n>"), or 0 for another token.
func installationTokenOf(tok string) int64 {
	var id, n int64
	if _, err := fmt.Sscanf(tok, "ghs_sim_%d_%d", &id, &n); err != nil {
		return 0
	}
	return id
}

// requestsBy sums the simulator's counts of installation id's tokens on
// route ("" any) with status (0 any).
func requestsBy(sim *forgesim.Sim, id int64, route string, status int) int64 {
	var n int64
	for _, rc := range sim.Stats().Requests {
		if installationTokenOf(rc.Token) == id && (route == "" || rc.Route == route) && (status == 0 || rc.Status == status) {
			n += rc.Count
		}
	}
	return n
}

// sweptBy is the passes c's timeline holds for installation id.
func sweptBy(c *cluster, id int64) []server.SweepPass {
	_, passes := c.tl.snapshot()
	var out []server.SweepPass
	for _, p := range passes {
		if p.Installation == id {
			out = append(out, p)
		}
	}
	return out
}

// shardTerms is the Elected events c's timeline holds for shards of the
// group merge-gate-sweeper.
func shardTerms(c *cluster) []lease.Event {
	events, _ := c.tl.snapshot()
	var out []lease.Event
	for _, e := range events {
		if e.Group == server.MergeGateSweeper().Name && e.Shard >= 0 && e.Kind == lease.Elected {
			out = append(out, e)
		}
	}
	return out
}

// windowUsed is what the simulator's budget window of installation id for
// resource has used; 0 when it has none open.
func windowUsed(sim *forgesim.Sim, id int64, resource string) int {
	for _, w := range sim.Stats().Budget.Windows {
		if w.Token == fmt.Sprintf("installation:%d", id) && w.Resource == resource {
			return w.Used
		}
	}
	return 0
}

// TestAppModeSweepsEachInstallationWithItsOwnToken pins that in App mode
// each installation's runs are swept through its own installation's
// client: the simulator, which answers a token 404 for a repository its
// installation does not cover, sees each installation's status written
// once, with its own token, no token refused, and each installation's own
// GraphQL budget spent by its pass; each installation's first pass is
// deep, and each pass names its installation.
func TestAppModeSweepsEachInstallationWithItsOwnToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 3
		c, next := newAppCluster(t, n, true)
		startAppReplicas(t, c, next, 1, time.Minute, 4, nil)
		time.Sleep(3*time.Minute + time.Second)
		synctest.Wait()
		c.replicas[0].stop()

		for i := int64(1); i <= n; i++ {
			if got := requestsBy(c.sim, i, statusRoute, http.StatusCreated); got != 1 {
				t.Errorf("installation %d: %d statuses written with its tokens, want 1: its run is published through its own client", i, got)
			}
			if got := windowUsed(c.sim, i, "graphql"); got == 0 {
				t.Errorf("installation %d: its GraphQL budget unspent, want its passes' queries on it: each installation's pass reads with its token", i)
			}
			passes := sweptBy(c, i)
			if len(passes) == 0 || !passes[0].Deep {
				t.Errorf("installation %d: passes %+v, want some, the first deep: an installation's first pass of a term is deep", i, passes)
			}
		}
		for _, rc := range c.sim.Stats().Requests {
			if rc.Status == http.StatusNotFound || rc.Status == http.StatusUnauthorized {
				t.Errorf("simulator answered %d %s to token %s %d times, want no refusal: no installation reads another's repository", rc.Status, rc.Route, rc.Token, rc.Count)
			}
		}
	})
}
