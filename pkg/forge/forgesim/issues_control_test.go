package forgesim_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"iterion.dev/iterion/pkg/forge/forgesim"
)

// TestIssuesAreDeletedAndTransferredThroughTheControlAPI pins the control
// endpoints of DeleteIssue and TransferIssue: a harness driving forge-sim
// deletes an issue (then Get an issue answers 410) or transfers it (then
// 301 to the number the transfer answered, in the repository it named).
func TestIssuesAreDeletedAndTransferredThroughTheControlAPI(t *testing.T) {
	sim, srv := start(t)
	for n := 1; n <= 2; n++ {
		mustOK(t, sim.SeedIssue("acme", "app", forgesim.Issue{Number: n, Title: "t", State: "open"}))
	}
	mustOK(t, sim.SeedIssue("acme", "lib", forgesim.Issue{Number: 8, Title: "lib's own", State: "open"}))
	if resp, b := do(t, srv, "DELETE", "/_sim/repos/acme/app/issues/1", "", ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE of the first issue: %d %s, want 204", resp.StatusCode, b)
	}
	resp, body := do(t, srv, "POST", "/_sim/repos/acme/app/issues/2/transfer", "", `{"repository":"acme/lib"}`)
	var moved struct {
		Repository string `json:"repository"`
		Number     int    `json:"number"`
	}
	_ = json.Unmarshal(body, &moved)
	if resp.StatusCode != http.StatusOK || moved.Repository != "acme/lib" || moved.Number != 9 {
		t.Fatalf("transfer of the second issue: %d %s, want 200 {repository acme/lib, number 9}: where it went", resp.StatusCode, body)
	}
	for _, c := range []struct {
		path     string
		code     int
		location string
		why      string
	}{
		{"/repos/acme/app/issues/1", http.StatusGone, "", "the deleted issue answers 410 Gone"},
		{"/repos/acme/app/issues/2", http.StatusMovedPermanently, srv.URL + "/repos/acme/lib/issues/9", "the transferred issue answers 301 to its new address"},
	} {
		resp, body := do(t, srv, "GET", c.path, "t", "")
		if resp.StatusCode != c.code || resp.Header.Get("Location") != c.location {
			t.Errorf("GET %s: %d Location %q %s, want %d Location %q: %s", c.path, resp.StatusCode, resp.Header.Get("Location"), body, c.code, c.location, c.why)
		}
	}
}

// TestIssueControlBodiesNameTheBadField pins the issue control endpoints'
// refusals: 400 naming the field for a malformed number, repository or
// body, 404 for a repository or issue the simulator does not have.
func TestIssueControlBodiesNameTheBadField(t *testing.T) {
	sim, srv := start(t)
	mustOK(t, sim.SeedIssue("acme", "app", forgesim.Issue{Number: 1, Title: "t", State: "open"}))
	mustOK(t, sim.SeedPull("acme", "app", 2, "abc", "open"))
	for _, c := range []struct {
		method, path, body string
		code               int
		field              string
		why                string
	}{
		{"DELETE", "/_sim/repos/acme/app/issues/x", "", http.StatusBadRequest, "number", "a number that is not one is named"},
		{"POST", "/_sim/repos/acme/app/issues/0/transfer", `{"repository":"acme/lib"}`, http.StatusBadRequest, "number", "a number that is not positive is named"},
		{"POST", "/_sim/repos/acme/app/issues/1/transfer", `{}`, http.StatusBadRequest, "repository", "the destination is required"},
		{"POST", "/_sim/repos/acme/app/issues/1/transfer", `{"repository":"lib"}`, http.StatusBadRequest, "repository", "the destination is owner/name"},
		{"POST", "/_sim/repos/acme/app/issues/1/transfer", `{"repository":"ACME/app"}`, http.StatusBadRequest, "repository", "an issue is not transferred to its own repository"},
		{"POST", "/_sim/repos/acme/app/issues/1/transfer", `{"repo":"acme/lib"}`, http.StatusBadRequest, "repo", "an unknown field is named"},
		{"DELETE", "/_sim/repos/acme/nosuch/issues/1", "", http.StatusNotFound, "", "a repository the simulator does not have is 404"},
		{"DELETE", "/_sim/repos/acme/app/issues/7", "", http.StatusNotFound, "", "an issue the repository does not have is 404"},
		{"DELETE", "/_sim/repos/acme/app/issues/2", "", http.StatusNotFound, "", "a pull request is not an issue to delete, as on GitHub"},
		{"POST", "/_sim/repos/acme/app/issues/7/transfer", `{"repository":"acme/lib"}`, http.StatusNotFound, "", "an issue the repository does not have is 404"},
	} {
		resp, body := do(t, srv, c.method, c.path, "", c.body)
		var e struct {
			Field string `json:"field"`
		}
		_ = json.Unmarshal(body, &e)
		if resp.StatusCode != c.code || e.Field != c.field {
			t.Errorf("%s %s %s: %d field %q, want %d field %q: %s", c.method, c.path, c.body, resp.StatusCode, e.Field, c.code, c.field, c.why)
		}
	}
	if resp, _ := do(t, srv, "GET", "/repos/acme/app/issues/1", "t", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("GET of the first issue after refused calls: %d, want 200: a refused call changes nothing", resp.StatusCode)
	}
}
