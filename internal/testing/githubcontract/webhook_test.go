package githubcontract_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"iterion.dev/iterion/internal/testing/githubcontract"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

// keysOf is the set of keys of a JSON object, and of the object under each
// of nested (one level: "installation", "installation.account").
func keysOf(t *testing.T, body []byte, nested ...string) map[string]bool {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatalf("payload is not a JSON object: %v", err)
	}
	out := map[string]bool{}
	for k := range top {
		out[k] = true
	}
	for _, n := range nested {
		var sub map[string]json.RawMessage
		if json.Unmarshal(top[n], &sub) != nil {
			continue
		}
		for k := range sub {
			out[n+"."+k] = true
		}
	}
	return out
}

// TestSimulatorInstallationWebhooksCarryGitHubsFields pins the simulator's
// installation and installation_repositories webhooks to GitHub's recorded
// ones: every top-level field of the recorded payload, and every field of
// its installation object, is in the simulator's payload of the same event
// and action.
func TestSimulatorInstallationWebhooksCarryGitHubsFields(t *testing.T) {
	type got struct {
		event string
		body  []byte
	}
	var mu sync.Mutex
	var deliveries []got
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		deliveries = append(deliveries, got{r.Header.Get("X-GitHub-Event"), b})
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(hooks.Close)
	sim := forgesim.New(forgesim.WithWebhook(forgesim.Webhook{URL: hooks.URL, Secret: "s"}))
	mustOK(t, sim.AddInstallation(7, "acme", "acme/app"))
	mustOK(t, sim.AddInstallationRepos(7, "acme/web"))
	mustOK(t, sim.RemoveInstallationRepos(7, "acme/web"))
	mustOK(t, sim.SuspendInstallation(7))
	mustOK(t, sim.UnsuspendInstallation(7))
	mustOK(t, sim.RemoveInstallation(7))
	actions := []string{"created", "added", "removed", "suspend", "unsuspend", "deleted"}
	if len(deliveries) != len(actions) {
		t.Fatalf("got %d webhooks, want %d", len(deliveries), len(actions))
	}
	for i, d := range deliveries {
		recorded, err := githubcontract.Payload(d.event, actions[i])
		if err != nil {
			t.Fatal(err)
		}
		want := keysOf(t, recorded, "installation")
		have := keysOf(t, d.body, "installation")
		for k := range want {
			if !have[k] {
				t.Errorf("%s %s: field %s of GitHub's recorded payload missing", d.event, actions[i], k)
			}
		}
	}
}
