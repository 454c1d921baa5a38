package server_test

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/forge/forgesim"
)

// mintRoute is the simulator's route of an installation token mint.
const mintRoute = "POST /app/installations/{id}/access_tokens"

// TestAppModeASuspendedInstallationIsNeitherSweptNorMinted pins App mode
// against a suspension on the simulator: GitHub refuses to mint a
// suspended installation's tokens (403) but still lists it, with its
// suspended_at set ("Suspend an app installation":
// https://docs.github.com/rest/apps/apps#suspend-an-app-installation).
// After the suspend webhook (checked with GitHub, then applied) the
// installation gets no pass and its sweeper asks for no token, also
// across the hourly re-list of the App's installations and past the
// expiry of the token it held, and a run reported for its repository is
// refused 422; after the unsuspend webhook it is swept again, with a token
// minted for it. The other installation is swept throughout.
func TestAppModeASuspendedInstallationIsNeitherSweptNorMinted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, shards = time.Minute, 2
		c, next := newAppCluster(t, 2, true)
		startAppReplicas(t, c, next, 1, interval, shards, nil)
		r := c.replicas[0]
		defer r.stop()
		time.Sleep(3*interval + interval/2)
		synctest.Wait()
		if len(sweptBy(c, 1)) == 0 {
			t.Fatal("installation 1 not swept before its suspension")
		}

		if err := c.sim.SuspendInstallation(1); err != nil {
			t.Fatal(err)
		}
		if code, body := r.call(t, "POST", "/webhooks/github", "installation", installationEvent("suspend", 1)); code != http.StatusOK {
			t.Fatalf("installation suspend webhook: %d %s, want 200: GitHub says it is suspended", code, body)
		}
		time.Sleep(interval)
		synctest.Wait()
		swept, others := len(sweptBy(c, 1)), len(sweptBy(c, 2))
		// Past the hourly re-list and the expiry of every token minted
		// before the suspension (an hour after its mint).
		time.Sleep(2*time.Hour + interval)
		synctest.Wait()
		if n := c.sim.Requests(forgesim.Filter{Route: mintRoute, Status: http.StatusForbidden}); n != 0 {
			t.Errorf("mints GitHub refused for the suspended installation: %d in two hours, want none: its sweeper must not ask for a token GitHub refuses", n)
		}
		if n := len(sweptBy(c, 1)) - swept; n != 0 {
			t.Errorf("installation 1 suspended: %d passes in the two hours after its webhook, want none", n)
		}
		if _, err := r.app.Installation(1); err == nil {
			t.Error("installation 1 known after a re-list while suspended, want it left out: GitHub lists it with suspended_at set")
		}
		if n := len(sweptBy(c, 2)) - others; n < 120 {
			t.Errorf("installation 2: %d passes in two hours, want one an interval: the others go on", n)
		}
		if code, body := r.call(t, "POST", "/api/runs", "", `{"repo":"org-1/repo-1","pull":2,"head_sha":"0123456789abcdef0123456789abcdef01234567","verdict":"success"}`); code != http.StatusUnprocessableEntity || !strings.Contains(body, "suspended") {
			t.Errorf("POST /api/runs for the suspended installation's repository: %d %s, want 422 saying its installation is suspended", code, body)
		}

		if err := c.sim.UnsuspendInstallation(1); err != nil {
			t.Fatal(err)
		}
		minted := c.sim.Requests(forgesim.Filter{Route: mintRoute, Status: http.StatusCreated})
		if code, body := r.call(t, "POST", "/webhooks/github", "installation", installationEvent("unsuspend", 1)); code != http.StatusOK {
			t.Fatalf("installation unsuspend webhook: %d %s, want 200", code, body)
		}
		swept = len(sweptBy(c, 1))
		time.Sleep(2 * interval)
		synctest.Wait()
		if n := len(sweptBy(c, 1)) - swept; n == 0 {
			t.Error("installation 1 unsuspended: no pass within 2 intervals, want it swept again")
		}
		if n := c.sim.Requests(forgesim.Filter{Route: mintRoute, Status: http.StatusCreated}) - minted; n == 0 {
			t.Error("installation 1 unsuspended: no token minted, want one: its old tokens expired meanwhile")
		}
	})
}

// TestAppModeASuspensionWhoseWebhookIsLostCostsOneRefusedMint pins App
// mode against a suspension whose webhook never came (GitHub does not
// redeliver a failed delivery on its own: "Handling failed webhook
// deliveries",
// https://docs.github.com/webhooks/using-webhooks/handling-failed-webhook-deliveries):
// the installation's sweeper learns of it from the first mint GitHub
// refuses, checks with GitHub that the installation is suspended
// (InstallationGone), and drops it, instead of asking for a refused token
// every pass until the hourly re-list. Tokens live 10 minutes here, so the
// one held at the suspension expires long before that re-list.
func TestAppModeASuspensionWhoseWebhookIsLostCostsOneRefusedMint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, shards = time.Minute, 2
		c, next := newAppCluster(t, 2, true, forgesim.WithTokenTTL(10*time.Minute))
		startAppReplicas(t, c, next, 1, interval, shards, nil)
		r := c.replicas[0]
		defer r.stop()
		time.Sleep(3*interval + interval/2)
		synctest.Wait()
		if err := c.sim.SuspendInstallation(1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Minute) // short of the hourly re-list
		synctest.Wait()
		if n := c.sim.Requests(forgesim.Filter{Route: mintRoute, Status: http.StatusForbidden}); n != 1 {
			t.Errorf("mints GitHub refused for the suspended installation: %d in 50 minutes, want 1: the first refusal has its sweeper check and drop it", n)
		}
		if _, err := r.app.Installation(1); err == nil {
			t.Error("installation 1 known after a refused mint while suspended, want it dropped")
		}
		swept := len(sweptBy(c, 2))
		time.Sleep(5 * interval)
		synctest.Wait()
		if n := len(sweptBy(c, 2)) - swept; n < 5 {
			t.Errorf("installation 2: %d passes in 5 intervals, want one an interval: the others go on", n)
		}
	})
}
