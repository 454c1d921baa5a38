package forge_test

import (
	"net/http"
	"testing"
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
