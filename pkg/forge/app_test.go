package forge_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

func TestAppAuthRefreshesAreChargedToLaneAuth(t *testing.T) {
	const refreshRoute = "POST /app/installations/{id}/access_tokens"
	key := forgetest.AppKey(t)
	cases := []struct {
		name      string
		ttl       time.Duration
		reads     int
		refreshes int64
		why       string
	}{
		{"long-lived token", time.Hour, 5, 1, "a token is minted once and reused until near its expiry"},
		{"short-lived token", 30 * time.Second, 5, 5, "ghinstallation refreshes a token within a minute of expiry, so before every request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sim, srv := startSim(t, forgesim.WithTokenTTL(tc.ttl))
			if err := sim.SeedPull("acme", "app", 1, "sha", "open"); err != nil {
				t.Fatal(err)
			}
			c := newClient(t, srv, forge.Config{App: &forge.AppAuth{AppID: 42, InstallationID: 7, PrivateKey: key}, ETagCacheBytes: -1})
			for range tc.reads {
				if _, err := c.GetPull(laneCtx(forge.LaneMergeGateSweeper), "acme", "app", 1); err != nil {
					t.Fatal(err)
				}
			}
			if got := countOf(c, forge.LaneAuth, http.StatusCreated); got != tc.refreshes {
				t.Fatalf("refreshes charged to lane auth: got %d, want %d: %s", got, tc.refreshes, tc.why)
			}
			if got := sim.Requests(forgesim.Filter{Token: "app:42", Route: refreshRoute}); got != tc.refreshes {
				t.Fatalf("refreshes the simulator received from App 42: got %d, want %d", got, tc.refreshes)
			}
			if got := countOf(c, forge.LaneMergeGateSweeper, -1); got != int64(tc.reads) {
				t.Fatalf("sweeper requests: got %d, want %d: the refresh is not charged to the lane that triggered it", got, tc.reads)
			}
			var installTokens int64
			for _, rc := range sim.Stats().Requests {
				if rc.Route == "GET /repos/{owner}/{repo}/pulls/{number}" && len(rc.Token) > 8 && rc.Token[:8] == "ghs_sim_" {
					installTokens += rc.Count
				}
			}
			if installTokens != int64(tc.reads) {
				t.Fatalf("reads made with installation tokens: got %d, want %d", installTokens, tc.reads)
			}
		})
	}
}

// TestAppJWTAllowsForTheReplicasClockDrift pins the App JWT's times
// against a simulator that checks them as GitHub does
// (forgesim.WithJWTTimes): a replica whose clock runs a minute ahead of
// GitHub's (iat backdated 60 seconds, as GitHub advises) or five minutes
// behind (exp five minutes ahead) still lists the installations and mints
// their tokens, in App mode and in single-installation mode.
func TestAppJWTAllowsForTheReplicasClockDrift(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drift time.Duration // the replica's clock minus GitHub's
	}{
		{"in step with", 0},
		{"a minute ahead of", time.Minute},
		{"five minutes behind", -5*time.Minute + time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				github := func() time.Time { return time.Now().Add(-tc.drift) }
				sim, tr := pipeSim(t, 1, forgesim.WithJWTTimes(), forgesim.WithClock(github))
				a := pipeApp(t, tr, forge.AppConfig{})
				if err := a.Relist(context.Background()); err != nil {
					t.Fatalf("listing the installations from a replica %s GitHub: %v, want the JWT taken", tc.name, err)
				}
				if err := readIssues(a, 1); err != nil {
					t.Fatalf("a read by a replica %s GitHub: %v, want its token minted", tc.name, err)
				}
				c, err := forge.New(forge.Config{BaseURL: "http://sim/", Next: tr, ETagCacheBytes: -1,
					App: &forge.AppAuth{AppID: 42, InstallationID: 1, PrivateKey: forgetest.AppKey(t)}})
				mustSim(t, err)
				if _, err := c.ListIssues(laneCtx(forge.LaneMergeGateSweeper), "org-1", "repo-1", time.Time{}); err != nil {
					t.Fatalf("a single-installation read by a replica %s GitHub: %v, want its token minted", tc.name, err)
				}
				if n := sim.Requests(forgesim.Filter{Route: mintRoute, Status: http.StatusCreated}); n != 2 {
					t.Errorf("tokens minted: %d, want 2 (one a mode)", n)
				}
			})
		})
	}
}

// TestSingleInstallationModeMintsAfreshOnceWhenGitHubRefusesItsToken pins
// the 401 rule in single-installation mode (Config.App), as App mode keeps
// it: a token GitHub refuses is dropped, one fresh token is minted and the
// request sent once more with it; when the installation is gone (its
// tokens refused, its mints 404), the request fails after that one mint,
// never looping, and the next request mints again rather than sending the
// refused token.
func TestSingleInstallationModeMintsAfreshOnceWhenGitHubRefusesItsToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim, tr := pipeSim(t, 1)
		refuse := &refuseToken{next: tr, refused: map[string]bool{}}
		c, err := forge.New(forge.Config{BaseURL: "http://sim/", Next: refuse, ETagCacheBytes: -1,
			App: &forge.AppAuth{AppID: 42, InstallationID: 1, PrivateKey: forgetest.AppKey(t)}})
		mustSim(t, err)
		read := func() error {
			_, err := c.ListIssues(laneCtx(forge.LaneMergeGateSweeper), "org-1", "repo-1", time.Time{})
			return err
		}
		mints := func() int64 { return sim.Requests(forgesim.Filter{Route: mintRoute}) }
		mustSim(t, read())
		for tok := range tokensUsed(sim, issuesRoute) {
			refuse.mu.Lock()
			refuse.refused[tok] = true
			refuse.mu.Unlock()
		}
		if err := read(); err != nil {
			t.Fatalf("a read whose token GitHub refuses: %v, want it sent again with a fresh token", err)
		}
		if n := mints(); n != 2 {
			t.Fatalf("mints: %d, want 2: the refused token is replaced once", n)
		}
		mustSim(t, sim.RemoveInstallation(1))
		for range 2 {
			before := mints()
			if err := read(); err == nil {
				t.Fatalf("a read of an uninstalled installation succeeded, want its 401")
			}
			if n := mints() - before; n != 1 {
				t.Fatalf("mints for a read of an uninstalled installation: %d, want 1: a refused token is minted afresh once, not in a loop, nor sent again", n)
			}
		}
	})
}

// TestSingleInstallationModeClosesARefusedMintsAnswer pins that in
// single-installation mode the answer to a mint GitHub refuses (here 404:
// the installation is gone) is read and closed, so its connection is not
// held for good: synctest fails a test whose bubble ends with a
// connection's goroutines still waiting on an answer nobody reads.
func TestSingleInstallationModeClosesARefusedMintsAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim, tr := pipeSim(t, 1)
		mustSim(t, sim.RemoveInstallation(1))
		c, err := forge.New(forge.Config{BaseURL: "http://sim/", Next: tr, ETagCacheBytes: -1,
			App: &forge.AppAuth{AppID: 42, InstallationID: 1, PrivateKey: forgetest.AppKey(t)}})
		mustSim(t, err)
		for range 3 {
			if _, err := c.ListIssues(laneCtx(forge.LaneMergeGateSweeper), "org-1", "repo-1", time.Time{}); err == nil {
				t.Fatal("a read of an uninstalled installation succeeded, want the mint's refusal")
			}
		}
	})
}
