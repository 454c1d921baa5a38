package forgesim_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"iterion.dev/iterion/pkg/forge/forgesim"
)

// installationState is what GET /app/installations/{id} says of a
// suspension.
type installationState struct {
	ID          int64   `json:"id"`
	SuspendedAt *string `json:"suspended_at"`
	SuspendedBy *struct {
		Login string `json:"login"`
	} `json:"suspended_by"`
}

// TestASuspendedInstallationIsRefusedItsTokensAsOnGitHub pins suspension
// ("Suspend an app installation",
// https://docs.github.com/rest/apps/apps#suspend-an-app-installation), each
// step driven through the control API as forge-sim's users drive it: a
// mint for a suspended installation answers 403 "This installation has
// been suspended"; the installation answers with suspended_at and
// suspended_by set, stays listed and keeps covering its repositories; an
// installation "suspend" webhook is sent, once; unsuspending mints again,
// clears both fields and sends "unsuspend".
func TestASuspendedInstallationIsRefusedItsTokensAsOnGitHub(t *testing.T) {
	sink := &hookSink{}
	hooks := httptest.NewServer(sink)
	t.Cleanup(hooks.Close)
	sim, srv := start(t, forgesim.WithWebhook(forgesim.Webhook{URL: hooks.URL, Secret: "s", AppID: 42}))
	mustOK(t, sim.AddInstallation(7, "acme", "acme/app"))
	app := jwt("42")
	ctl := func(path string, want int) {
		t.Helper()
		if resp, b := do(t, srv, "POST", path, "", ""); resp.StatusCode != want {
			t.Fatalf("POST %s: %d %s, want %d", path, resp.StatusCode, b, want)
		}
	}
	state := func() installationState {
		t.Helper()
		resp, body := do(t, srv, "GET", "/app/installations/7", app, "")
		var got installationState
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &got) != nil {
			t.Fatalf("GET /app/installations/7: %d %s", resp.StatusCode, body)
		}
		return got
	}

	ctl("/_sim/installations/7/suspend", http.StatusNoContent)
	resp, body := do(t, srv, "POST", "/app/installations/7/access_tokens", app, "")
	var refusal struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(body, &refusal)
	if resp.StatusCode != http.StatusForbidden || refusal.Message != "This installation has been suspended" {
		t.Errorf("mint for a suspended installation: %d %q, want 403 \"This installation has been suspended\": GitHub refuses it", resp.StatusCode, refusal.Message)
	}
	if got := state(); got.SuspendedAt == nil || got.SuspendedBy == nil || got.SuspendedBy.Login == "" {
		t.Errorf("GET /app/installations/7 while suspended: suspended_at %v suspended_by %v, want both set", got.SuspendedAt, got.SuspendedBy)
	}
	if resp, body := do(t, srv, "GET", "/app/installations", app, ""); resp.StatusCode != http.StatusOK || !json.Valid(body) || len(sim.Installations()) != 1 {
		t.Errorf("GET /app/installations while suspended: %d %s, want the installation still listed", resp.StatusCode, body)
	}
	if resp, _ := do(t, srv, "GET", "/repos/acme/app/installation", app, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /repos/acme/app/installation while suspended: %d, want 200: the installation still covers it", resp.StatusCode)
	}
	ctl("/_sim/installations/7/suspend", http.StatusNoContent) // changes nothing

	ctl("/_sim/installations/7/unsuspend", http.StatusNoContent)
	if code, tok := mintFor(t, srv, "7"); code != http.StatusCreated || tok == "" {
		t.Errorf("mint after unsuspend: %d, want 201 with a token", code)
	}
	if got := state(); got.SuspendedAt != nil || got.SuspendedBy != nil {
		t.Errorf("GET /app/installations/7 after unsuspend: suspended_at %v suspended_by %v, want both null", got.SuspendedAt, got.SuspendedBy)
	}

	var actions []string
	var suspendedAt []bool
	for _, d := range sink.got {
		var p struct {
			Action       string            `json:"action"`
			Installation installationState `json:"installation"`
		}
		mustOK(t, json.Unmarshal(d.body, &p))
		if d.event == "installation" && p.Action != "created" {
			actions = append(actions, p.Action)
			suspendedAt = append(suspendedAt, p.Installation.SuspendedAt != nil)
		}
	}
	if len(actions) != 2 || actions[0] != "suspend" || !suspendedAt[0] || actions[1] != "unsuspend" || suspendedAt[1] {
		t.Errorf("installation webhooks after created: %v (suspended_at set: %v), want [suspend unsuspend] ([true false]): one per change, a second suspend sends none", actions, suspendedAt)
	}
}

// TestSuspensionControlNamesTheBadInstallation pins the control
// endpoints' conventions for suspension: a malformed id is 400 naming
// "id", an unknown one 404.
func TestSuspensionControlNamesTheBadInstallation(t *testing.T) {
	sim, srv := start(t)
	mustOK(t, sim.AddInstallation(1, "acme"))
	for _, c := range []struct {
		path  string
		code  int
		field string
		why   string
	}{
		{"/_sim/installations/x/suspend", http.StatusBadRequest, "id", "an id that is not a number is named"},
		{"/_sim/installations/0/unsuspend", http.StatusBadRequest, "id", "an id that is not positive is named"},
		{"/_sim/installations/9/suspend", http.StatusNotFound, "", "an installation the App does not have is 404"},
		{"/_sim/installations/9/unsuspend", http.StatusNotFound, "", "an installation the App does not have is 404"},
	} {
		resp, body := do(t, srv, "POST", c.path, "", "")
		var e struct {
			Field string `json:"field"`
		}
		_ = json.Unmarshal(body, &e)
		if resp.StatusCode != c.code || e.Field != c.field {
			t.Errorf("POST %s: %d field %q, want %d field %q: %s", c.path, resp.StatusCode, e.Field, c.code, c.field, c.why)
		}
	}
}

// TestAMintRefusedForAnotherReasonLeavesTheInstallationAsItIs pins
// RefuseMints, driven through its control endpoint: a mint GitHub refuses
// 403 for a reason other than suspension (an organization's IP allow list
// leaving the App's address out, say) while the installation is there:
// the mint answers 403, the installation answers without suspended_at,
// and no webhook is sent; {"refuse":false} mints again. The endpoint
// names a missing "refuse", and an unknown installation is 404.
func TestAMintRefusedForAnotherReasonLeavesTheInstallationAsItIs(t *testing.T) {
	sink := &hookSink{}
	hooks := httptest.NewServer(sink)
	t.Cleanup(hooks.Close)
	sim, srv := start(t, forgesim.WithWebhook(forgesim.Webhook{URL: hooks.URL, Secret: "s", AppID: 42}))
	mustOK(t, sim.AddInstallation(7, "acme", "acme/app"))
	sent := len(sink.got)
	ctl := func(body string, want int, why string) {
		t.Helper()
		if resp, b := do(t, srv, "POST", "/_sim/installations/7/refuse-mints", "", body); resp.StatusCode != want {
			t.Errorf("POST /_sim/installations/7/refuse-mints %s: %d %s, want %d: %s", body, resp.StatusCode, b, want, why)
		}
	}
	ctl(`{"refuse":true}`, http.StatusNoContent, "refusing mints is a control")
	if code, _ := mintFor(t, srv, "7"); code != http.StatusForbidden {
		t.Errorf("mint while refused: %d, want 403", code)
	}
	resp, body := do(t, srv, "GET", "/app/installations/7", jwt("42"), "")
	var got installationState
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &got) != nil || got.SuspendedAt != nil || got.SuspendedBy != nil {
		t.Errorf("GET /app/installations/7 while its mints are refused: %d %s, want 200 without suspended_at: it is not suspended", resp.StatusCode, body)
	}
	if len(sink.got) != sent {
		t.Errorf("webhooks sent by refusing mints: %d, want none: GitHub sends none for it", len(sink.got)-sent)
	}
	ctl(`{"refuse":false}`, http.StatusNoContent, "minting again is a control")
	if code, tok := mintFor(t, srv, "7"); code != http.StatusCreated || tok == "" {
		t.Errorf("mint after refuse false: %d, want 201 with a token", code)
	}
	ctl(`{}`, http.StatusBadRequest, `"refuse" is required`)
	if resp, _ := do(t, srv, "POST", "/_sim/installations/9/refuse-mints", "", `{"refuse":true}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("refuse-mints of an installation the App does not have: %d, want 404", resp.StatusCode)
	}
}

// TestATokenMintedBeforeASuspensionIsRefusedWhileItLasts pins what a
// request made with a token minted before its installation's suspension
// gets: GitHub blocks a suspended installation's access to its account's
// resources ("Suspending a GitHub App installation":
// https://docs.github.com/apps/maintaining-github-apps/suspending-a-github-app-installation),
// which the simulator answers, REST and GraphQL alike, 403 "This
// installation has been suspended", charged to no budget; once the
// installation is unsuspended the same token, unexpired, is taken again
// (a suspension revokes no token).
func TestATokenMintedBeforeASuspensionIsRefusedWhileItLasts(t *testing.T) {
	sim, srv := start(t)
	mustOK(t, sim.AddInstallation(7, "acme", "acme/app"))
	mustOK(t, sim.SeedPull("acme", "app", 1, "sha", "open"))
	code, tok := mintFor(t, srv, "7")
	if code != http.StatusCreated {
		t.Fatalf("mint: %d, want 201 (setup)", code)
	}
	const query = `{"query":"{ p0: repository(owner: \"acme\", name: \"app\") { pullRequest(number: 1) { number } } }"}`
	requests := []struct{ method, path, body, why string }{
		{"GET", "/repos/acme/app/pulls/1", "", "a REST read"},
		{"POST", "/graphql", query, "a GraphQL query"},
	}
	answer := func(method, path, body string) (int, string) {
		resp, b := do(t, srv, method, path, tok, body)
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(b, &e)
		return resp.StatusCode, e.Message
	}
	mustOK(t, sim.SuspendInstallation(7))
	used := windowUsed(sim, "installation:7")
	for _, c := range requests {
		if code, msg := answer(c.method, c.path, c.body); code != http.StatusForbidden || msg != "This installation has been suspended" {
			t.Errorf("%s with a token minted before the suspension: %d %q, want 403 \"This installation has been suspended\"", c.why, code, msg)
		}
	}
	if got := windowUsed(sim, "installation:7"); got != used {
		t.Errorf("budget used by the refused requests: %d, want %d: a refusal is charged nothing", got-used, 0)
	}
	mustOK(t, sim.UnsuspendInstallation(7))
	for _, c := range requests {
		if code, msg := answer(c.method, c.path, c.body); code != http.StatusOK {
			t.Errorf("%s with the same token after the unsuspension: %d %q, want 200: it has not expired, and a suspension revokes no token", c.why, code, msg)
		}
	}
}

// windowUsed is what principal's budget windows have used, every
// resource summed.
func windowUsed(sim *forgesim.Sim, principal string) int {
	n := 0
	for _, w := range sim.Stats().Budget.Windows {
		if w.Token == principal {
			n += w.Used
		}
	}
	return n
}
