package githubcontract_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"iterion.dev/iterion/internal/testing/githubcontract"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

// missingFields lists, sorted, the fields of GitHub's recorded payload
// absent from got, each by its path (".installation.account.login"; an
// array's items as [*], so every field of any recorded item is looked for
// among got's items). The fields of installation.permissions are the
// App's own grant, not the payload's shape: GitHub's description
// (rest-subset.json, app-permissions, "The permissions granted") makes
// every one optional, so only the object is looked for.
func missingFields(recorded, got []byte) ([]string, error) {
	var want, have any
	if err := json.Unmarshal(recorded, &want); err != nil {
		return nil, fmt.Errorf("recorded payload: %w", err)
	}
	if err := json.Unmarshal(got, &have); err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	wantPaths, havePaths := map[string]bool{}, map[string]bool{}
	fieldPaths("", want, wantPaths)
	fieldPaths("", have, havePaths)
	var missing []string
	for p := range wantPaths {
		if !havePaths[p] {
			missing = append(missing, p)
		}
	}
	slices.Sort(missing)
	return missing, nil
}

// fieldPaths adds to out the path of every field under v, prefixed with
// prefix, but not those under .installation.permissions.
func fieldPaths(prefix string, v any, out map[string]bool) {
	switch t := v.(type) {
	case map[string]any:
		if prefix == ".installation.permissions" {
			return
		}
		for k, e := range t {
			out[prefix+"."+k] = true
			fieldPaths(prefix+"."+k, e, out)
		}
	case []any:
		for _, e := range t {
			fieldPaths(prefix+"[*]", e, out)
		}
	}
}

// TestMissingFieldsSeesEveryAbsentField pins that the comparison below can
// fail: a field missing at the top, in a nested object, or from an array's
// items, and the installation's permissions object, are each reported; a
// permission the recorded App was granted and the simulated one was not is
// not.
func TestMissingFieldsSeesEveryAbsentField(t *testing.T) {
	recorded := `{"action": "created", "sender": {"login": "octocat", "id": 1},
		"repositories": [{"id": 1, "full_name": "a/b"}, {"id": 2, "full_name": "a/c", "private": false}],
		"installation": {"id": 7, "permissions": {"issues": "read", "checks": "write"}}}`
	for _, c := range []struct {
		name, got string
		want      []string
	}{
		{"every field there", `{"action": "created", "sender": {"login": "x", "id": 2}, "repositories": [{"id": 3, "full_name": "x/y", "private": true}],
			"installation": {"id": 8, "permissions": {"issues": "read"}}}`, nil},
		{"fields missing at every depth", `{"sender": {"id": 2}, "repositories": [{"id": 3, "full_name": "x/y"}], "installation": {"id": 8}}`,
			[]string{".action", ".installation.permissions", ".repositories[*].private", ".sender.login"}},
		{"an array empty", `{"action": "created", "sender": {"login": "x", "id": 2}, "repositories": [], "installation": {"id": 8, "permissions": {}}}`,
			[]string{".repositories[*].full_name", ".repositories[*].id", ".repositories[*].private"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := missingFields([]byte(recorded), []byte(c.got))
			mustOK(t, err)
			if !slices.Equal(got, c.want) {
				t.Errorf("missing = %q, want %q", got, c.want)
			}
		})
	}
}

// TestSimulatorInstallationWebhooksCarryGitHubsFields pins the simulator's
// installation and installation_repositories webhooks to GitHub's recorded
// ones: every field of the recorded payload, at any depth
// (missingFields), is in the simulator's payload of the same event and
// action.
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
		missing, err := missingFields(recorded, d.body)
		mustOK(t, err)
		for _, f := range missing {
			t.Errorf("%s %s: field %s of GitHub's recorded payload missing", d.event, actions[i], f)
		}
	}
}

// TestPayloadOfAnExampleNotVendoredIsAnError pins Payload's doc: an event
// and action not vendored is an error naming them, not an empty payload.
func TestPayloadOfAnExampleNotVendoredIsAnError(t *testing.T) {
	if b, err := githubcontract.Payload("issues", "opened"); err == nil || !strings.Contains(err.Error(), "issues.opened") {
		t.Errorf("Payload(issues, opened) = %q, %v; want an error naming issues.opened", b, err)
	}
	if b, err := githubcontract.Payload("status", ""); err != nil || !json.Valid(b) {
		t.Errorf("Payload(status) = %q, %v; want GitHub's recorded payload", b, err)
	}
}
