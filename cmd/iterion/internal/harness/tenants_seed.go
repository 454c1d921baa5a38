package harness

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The tenants scenario's wire steps: its installations and their runs,
// seeded through the simulator's control API and POST /api/runs, and a
// signed webhook of its own.

// tenantsAppID is the GitHub App the tenants replicas serve.
const tenantsAppID = 1

// tenantsSecret is the webhook secret the simulator signs installation
// webhooks with and the replicas check.
const tenantsSecret = "harness-webhook-secret"

// tenantRepo is installation id's repository, as forge-sim
// --installations seeds it (one repository each).
func tenantRepo(id int64) string { return fmt.Sprintf("org-%d/repo-1", id) }

// tenantRuns are installation id's runs: pull requests 1..n of its
// repository, each head unique across installations.
func tenantRuns(id int64, n int) []runRequest {
	out := make([]runRequest, n)
	for j := range out {
		out[j] = runRequest{Repo: tenantRepo(id), Pull: j + 1, HeadSHA: headSHA(int(id)*1000 + j + 1), Verdict: "success"}
	}
	return out
}

// addInstallation installs the App on account org-<id> over its one
// repository; the simulator sends the "created" webhook and answers once
// it was handled.
func addInstallation(ctx context.Context, s sim, id int64) error {
	body := map[string]any{"id": id, "account": "org-" + strconv.FormatInt(id, 10), "repositories": []string{tenantRepo(id)}}
	return doJSON(ctx, s.hc, http.MethodPost, s.url+"/_sim/installations", "", body, nil)
}

// removeInstallation uninstalls the App from installation id; the
// simulator revokes its tokens and sends the "deleted" webhook.
func removeInstallation(ctx context.Context, s sim, id int64) error {
	return doJSON(ctx, s.hc, http.MethodDelete, s.url+"/_sim/installations/"+strconv.FormatInt(id, 10), "", nil, nil)
}

// pointWebhooks makes the simulator send its installation webhooks to
// url ("" stops them), signed with tenantsSecret.
func pointWebhooks(ctx context.Context, s sim, url string) error {
	body := map[string]any{"url": url, "secret": tenantsSecret, "app_id": tenantsAppID}
	return doJSON(ctx, s.hc, http.MethodPost, s.url+"/_sim/webhook", "", body, nil)
}

// webhookURL is a replica's webhook endpoint.
func webhookURL(a api) string { return a.url + "/webhooks/github" }

// sendPullWebhook posts a pull_request "opened" webhook for pull 1 of
// installation id's repository to a, signed with tenantsSecret as GitHub
// signs ("Validating webhook deliveries":
// https://docs.github.com/webhooks/using-webhooks/validating-webhook-deliveries),
// and returns the answer's status.
func sendPullWebhook(ctx context.Context, a api, id int64, sha string) (int, error) {
	owner, name, _ := strings.Cut(tenantRepo(id), "/")
	payload := map[string]any{
		"action": "opened", "number": 1,
		"pull_request": map[string]any{"number": 1, "state": "open", "head": map[string]any{"sha": sha, "ref": "feature"}},
		"repository":   map[string]any{"name": name, "full_name": tenantRepo(id), "owner": map[string]any{"login": owner}},
		"installation": map[string]any{"id": id},
		"sender":       map[string]any{"login": "harness"},
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return 0, fmt.Errorf("%w: webhook: %w", ErrRequest, err)
	}
	mac := hmac.New(sha256.New, []byte(tenantsSecret))
	mac.Write(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, webhookURL(a), bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("%w: webhook: %w", ErrRequest, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("harness-unknown-installation-%d", id))
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%w: webhook to %s: %w", ErrRequest, a.url, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// appRequests is how many requests the simulator has received with the
// App's JWT: listing installations, finding a repository's, minting
// tokens.
func appRequests(ctx context.Context, s sim) (int64, error) {
	st, err := s.stats(ctx)
	if err != nil {
		return 0, err
	}
	return total(st.byToken(func(r simRequests) bool { return strings.HasPrefix(r.Token, "app:") })), nil
}

// appRefusals is how many requests made with the App's JWT the simulator
// answered 403 or 429: a limit's refusals (an unknown installation's mint
// is 404).
func appRefusals(ctx context.Context, s sim) (int64, error) {
	st, err := s.stats(ctx)
	if err != nil {
		return 0, err
	}
	return total(st.byToken(func(r simRequests) bool {
		return strings.HasPrefix(r.Token, "app:") && (r.Status == http.StatusForbidden || r.Status == http.StatusTooManyRequests)
	})), nil
}

// sweepBehind sums merge_gate_sweep_behind over rs: the replicas whose
// last pass was behind.
func sweepBehind(ctx context.Context, rs []*replica) (float64, error) {
	var n float64
	for _, r := range rs {
		fams, err := r.api.metrics(ctx)
		if err != nil {
			return 0, err
		}
		for _, m := range fams["merge_gate_sweep_behind"].GetMetric() {
			n += m.GetGauge().GetValue()
		}
	}
	return n, nil
}

// alignUp is the first instant at or after t that starts a bucket of width w
// (buckets start at multiples of w since the Unix epoch, as the request
// log's do).
func alignUp(t time.Time, w time.Duration) time.Time {
	n := t.UnixNano()
	return time.Unix(0, (n+int64(w)-1)/int64(w)*int64(w)).UTC()
}
