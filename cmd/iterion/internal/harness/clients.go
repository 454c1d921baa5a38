package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/server"
)

// newHTTPClient is the harness's HTTP client: short timeouts, since every
// server it talks to is on loopback.
func newHTTPClient() *http.Client { return &http.Client{Timeout: 5 * time.Second} }

// newSimHTTPClient is the harness's HTTP client for the simulator, which
// with its latency model on answers in GitHub's time on its minute: at a
// real minute (--clock-interval 1m) a REST answer's tail runs past 5 s now
// and then, so it waits 30 s.
func newSimHTTPClient() *http.Client { return &http.Client{Timeout: 30 * time.Second} }

// doJSON sends a request with an optional JSON body and decodes a JSON answer
// into out (when out is not nil). Any status outside 2xx is an error that
// quotes the answer.
func doJSON(ctx context.Context, hc *http.Client, method, url, bearer string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%w: %s %s: %w", ErrRequest, method, url, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return fmt.Errorf("%w: %s %s: %w", ErrRequest, method, url, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s %s: %w", ErrRequest, method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%w: %s %s: %w", ErrRequest, method, url, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%w: %s %s: %w: %s", ErrRequest, method, url, httpStatus(resp.StatusCode), strings.TrimSpace(string(b)))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%w: %s %s: decode %q: %w", ErrRequest, method, url, b, err)
		}
	}
	return nil
}

// httpStatus is a status doJSON refused, as an error reading like the
// status line.
type httpStatus int

func (s httpStatus) Error() string { return strconv.Itoa(int(s)) + " " + http.StatusText(int(s)) }

// simRequests is one row of the simulator's GET /_sim/stats.
type simRequests struct {
	Token  string `json:"token"`
	Method string `json:"method"`
	Route  string `json:"route"`
	Status int    `json:"status"`
	Count  int64  `json:"count"`
	// Points is the budget units the rows' requests were charged: one per
	// charged REST request, a GraphQL query's points.
	Points int64 `json:"points"`
}

// simStats is the simulator's GET /_sim/stats (docs/testing.md, the forge simulator's control endpoints):
// every request it received, by token, method, route and status.
type simStats struct {
	Requests []simRequests `json:"requests"`
	Budget   struct {
		Windows []struct {
			Token     string `json:"token"`
			Resource  string `json:"resource"`
			Remaining int    `json:"remaining"`
		} `json:"windows"`
	} `json:"budget"`
}

// graphqlRoute is the simulator's route of GraphQL queries: the batched
// sweep's reads, charged to the graphql point budget.
const graphqlRoute = "POST /graphql"

// isGraphQL keeps the GraphQL queries.
func isGraphQL(r simRequests) bool { return r.Route == graphqlRoute }

// spent reports whether one of token's open budget windows, core (REST) or
// graphql, cannot pay for another request: a REST request costs 1, a query
// as much as the token's charged queries cost on average (the simulator
// refuses a query it cannot pay for in full, with 200 and RATE_LIMITED,
// so a graphql window can stop short of 0).
func (s simStats) spent(token string) bool {
	var n, pts int64
	for _, r := range s.Requests {
		if r.Token == token && isGraphQL(r) && r.Points > 0 {
			n, pts = n+r.Count, pts+r.Points
		}
	}
	query := int64(1)
	if n > 0 {
		query = max(1, (pts+n-1)/n)
	}
	for _, w := range s.Budget.Windows {
		if w.Token != token {
			continue
		}
		if (w.Resource == "core" && w.Remaining == 0) || (w.Resource == "graphql" && int64(w.Remaining) < query) {
			return true
		}
	}
	return false
}

// pointsByToken sums the points of the rows that keep, per token.
func (s simStats) pointsByToken(keep func(simRequests) bool) map[string]int64 {
	out := map[string]int64{}
	for _, r := range s.Requests {
		if keep == nil || keep(r) {
			out[r.Token] += r.Points
		}
	}
	return out
}

// boardRoute is the simulator's route of the board sync's requests (lane
// forge-board-sync): the issues list. Every other route a replica sends to
// is its sweeper's.
const boardRoute = "GET /repos/{owner}/{repo}/issues"

// isBoard keeps the board sync's requests, isSweep every other.
func isBoard(r simRequests) bool { return r.Route == boardRoute }
func isSweep(r simRequests) bool { return r.Route != boardRoute }

// byToken sums the rows that keep, per token.
func (s simStats) byToken(keep func(simRequests) bool) map[string]int64 {
	out := map[string]int64{}
	for _, r := range s.Requests {
		if keep == nil || keep(r) {
			out[r.Token] += r.Count
		}
	}
	return out
}

// sim talks to an `iterion forge-sim` process over its wire contract.
type sim struct {
	url string // base URL, no trailing slash
	hc  *http.Client
}

func (s sim) stats(ctx context.Context) (simStats, error) {
	var st simStats
	err := doJSON(ctx, s.hc, http.MethodGet, s.url+"/_sim/stats", "", nil, &st)
	return st, err
}

// seedPull creates (or replaces) an open pull request.
func (s sim) seedPull(ctx context.Context, repo string, number int, sha string) error {
	body := map[string]any{"number": number, "head_sha": sha, "state": "open"}
	return doJSON(ctx, s.hc, http.MethodPost, s.url+"/_sim/repos/"+repo+"/pulls", "", body, nil)
}

// seedIssue creates (or replaces) an open issue for the board sync.
func (s sim) seedIssue(ctx context.Context, repo string, number int, title string) error {
	body := map[string]any{"number": number, "title": title, "state": "open", "labels": []string{"harness"}}
	return doJSON(ctx, s.hc, http.MethodPost, s.url+"/_sim/repos/"+repo+"/issues", "", body, nil)
}

// harnessToken is the forge token of the harness's own reads and writes, so
// that they are never charged to a replica.
const harnessToken = "harness"

// forgeTries is how many times the harness sends one of its own requests
// to the simulator's GitHub endpoints while they answer 5xx.
const forgeTries = 3

// forgeJSON is doJSON for the harness's own requests to the simulator's
// GitHub endpoints, with harnessToken. With the latency model on, GitHub's
// 10 s timeout answers a slow one 502 (forgesim.RESTTimeout), as GitHub
// does: the harness, a client like any other, tries it again ("try your
// request later", "Troubleshooting the REST API", Timeouts), up to
// forgeTries times, rather than end a measurement on it.
func (s sim) forgeJSON(ctx context.Context, method, url string, body, out any) error {
	var err error
	for range forgeTries {
		var st httpStatus
		if err = doJSON(ctx, s.hc, method, url, harnessToken, body, out); !errors.As(err, &st) || st < 500 {
			return err
		}
	}
	return err
}

// setStatus writes a commit status through the forge's own REST endpoint, as
// a human or another bot would behind the replicas' backs.
func (s sim) setStatus(ctx context.Context, repo, sha, gateContext, state string) error {
	body := map[string]string{"state": state, "context": gateContext, "description": "drifted by the harness"}
	return s.forgeJSON(ctx, http.MethodPost, s.url+"/repos/"+repo+"/statuses/"+sha, body, nil)
}

// statusOf reads the state of gateContext on sha ("" when it has none).
func (s sim) statusOf(ctx context.Context, repo, sha, gateContext string) (string, error) {
	var cs struct {
		Statuses []struct {
			Context string `json:"context"`
			State   string `json:"state"`
		} `json:"statuses"`
	}
	if err := s.forgeJSON(ctx, http.MethodGet, s.url+"/repos/"+repo+"/commits/"+sha+"/status", nil, &cs); err != nil {
		return "", err
	}
	for _, st := range cs.Statuses {
		if st.Context == gateContext {
			return st.State, nil
		}
	}
	return "", nil
}

// holder is one row of a replica's GET /leases?format=json.
type holder struct {
	Name    string    `json:"name"`
	Owner   string    `json:"owner"`
	Expires time.Time `json:"expires"`
}

// runRequest is the body of POST /api/runs (docs/operating.md, endpoints).
type runRequest struct {
	Repo    string `json:"repo"`
	Pull    int    `json:"pull"`
	HeadSHA string `json:"head_sha"`
	Verdict string `json:"verdict"`
	Context string `json:"context,omitempty"`
}

// api talks to one `iterion serve` process over its wire contract.
type api struct {
	url   string // base URL, no trailing slash
	token string // the API bearer token
	hc    *http.Client
}

func (a api) postRun(ctx context.Context, r runRequest) error {
	return doJSON(ctx, a.hc, http.MethodPost, a.url+"/api/runs", a.token, r, nil)
}

func (a api) leases(ctx context.Context) ([]holder, error) {
	var hs []holder
	err := doJSON(ctx, a.hc, http.MethodGet, a.url+"/leases?format=json", a.token, nil, &hs) // the pages need a token
	return hs, err
}

// ready reports whether the replica answers GET /metrics.
func (a api) ready(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url+"/metrics", nil)
	if err != nil {
		return false
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// metrics reads and parses the replica's /metrics.
func (a api) metrics(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("%w: metrics: %w", ErrRequest, err)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: metrics: %w", ErrRequest, err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%w: metrics of %s: %w", ErrRequest, a.url, err)
	}
	return fams, nil
}

// label returns the value of m's label name, or "".
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// transportCounts reads forge_http_requests_total from the replica's
// /metrics, summed by lane over hosts, APIs and codes.
func (a api) transportCounts(ctx context.Context) (map[string]int64, error) {
	fams, err := a.metrics(ctx)
	if err != nil {
		return nil, err
	}
	return laneTotals(fams), nil
}

// laneTotals is forge_http_requests_total in fams, summed by lane.
func laneTotals(fams map[string]*dto.MetricFamily) map[string]int64 {
	out := map[string]int64{}
	for _, m := range fams["forge_http_requests_total"].GetMetric() {
		out[label(m, "lane")] += int64(m.GetCounter().GetValue())
	}
	return out
}

// sweeperFigures is what one replica's /metrics says of its sweeper.
type sweeperFigures struct {
	// offers is gate_offers_total{lane="merge-gate-sweeper"}, summed over
	// outcomes: the runs its sweeper offered.
	offers int64
	// passSeconds and passes are iterion_net_pass_duration_seconds'
	// sum and count for the sweeper's net: the passes it finished.
	passSeconds float64
	passes      uint64
	// requests is its transport's count of lane merge-gate-sweeper.
	requests int64
}

// sweeper reads the replica's sweeper figures from one /metrics scrape.
func (a api) sweeper(ctx context.Context) (sweeperFigures, error) {
	fams, err := a.metrics(ctx)
	if err != nil {
		return sweeperFigures{}, err
	}
	f := sweeperFigures{requests: laneTotals(fams)[forge.LaneMergeGateSweeper]}
	for _, m := range fams["gate_offers_total"].GetMetric() {
		if label(m, "lane") == forge.LaneMergeGateSweeper {
			f.offers += int64(m.GetCounter().GetValue())
		}
	}
	for _, m := range fams["iterion_net_pass_duration_seconds"].GetMetric() {
		if label(m, "lease") == server.MergeGateSweeper().Name {
			f.passSeconds, f.passes = m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount()
		}
	}
	return f, nil
}

// leaseTurns reads, from one /metrics scrape, the terms of each of leases
// the replica won (lease_terms_started_total) and the terms it stepped
// down, by reason (lease_step_downs_total), in the order of leases.
func (a api) leaseTurns(ctx context.Context, leases ...string) (terms []int64, stepDowns []map[string]int64, err error) {
	fams, err := a.metrics(ctx)
	if err != nil {
		return nil, nil, err
	}
	terms, stepDowns = make([]int64, len(leases)), make([]map[string]int64, len(leases))
	for i, lease := range leases {
		for _, m := range fams["lease_terms_started_total"].GetMetric() {
			if label(m, "lease") == lease {
				terms[i] += int64(m.GetCounter().GetValue())
			}
		}
		stepDowns[i] = map[string]int64{}
		for _, m := range fams["lease_step_downs_total"].GetMetric() {
			if label(m, "lease") == lease {
				stepDowns[i][label(m, "reason")] += int64(m.GetCounter().GetValue())
			}
		}
	}
	return terms, stepDowns, nil
}

// holdsLease reads lease_held{lease} from the replica's /metrics: whether
// one of its Runs is in a term of that lease (pkg/lease's metrics).
func (a api) holdsLease(ctx context.Context, lease string) (bool, error) {
	fams, err := a.metrics(ctx)
	if err != nil {
		return false, err
	}
	for _, m := range fams["lease_held"].GetMetric() {
		if label(m, "lease") == lease {
			return m.GetGauge().GetValue() > 0, nil
		}
	}
	return false, nil
}

// owner reads the replica's lease owner identity from GET /healthz.
func (a api) owner(ctx context.Context) (string, error) {
	var h struct {
		Owner string `json:"owner"`
	}
	err := doJSON(ctx, a.hc, http.MethodGet, a.url+"/healthz", "", nil, &h)
	return h.Owner, err
}

// leaseOwner reads, through the replica's GET /leases?format=json, the
// owner the lease store names for lease ("" when it has no document).
func (a api) leaseOwner(ctx context.Context, lease string) (string, error) {
	h, err := a.leaseHolder(ctx, lease)
	return h.Owner, err
}

// leaseHolder reads, through the replica's GET /leases?format=json, the
// lease store's document of lease, expired or not; the zero holder when
// it has none (never won, or released).
func (a api) leaseHolder(ctx context.Context, lease string) (holder, error) {
	hs, err := a.leases(ctx)
	if err != nil {
		return holder{}, err
	}
	for _, x := range hs {
		if x.Name == lease {
			return x, nil
		}
	}
	return holder{}, nil
}

// seedStatus sets a commit status through the simulator's control
// endpoint, which no budget or secondary limit charges.
func (s sim) seedStatus(ctx context.Context, repo, sha, gateContext, state string) error {
	body := map[string]string{"state": state, "context": gateContext}
	return doJSON(ctx, s.hc, http.MethodPost, s.url+"/_sim/repos/"+repo+"/statuses/"+sha, "", body, nil)
}

// setBudget sets token's hourly budget on the simulator.
func (s sim) setBudget(ctx context.Context, token string, limit int) error {
	body := map[string]any{"limit": limit, "token": token}
	return doJSON(ctx, s.hc, http.MethodPost, s.url+"/_sim/budget", "", body, nil)
}

// secondary makes token's next count requests hit a secondary rate limit
// with retryAfter (whole seconds).
func (s sim) secondary(ctx context.Context, token string, retryAfter time.Duration, count int) error {
	body := map[string]any{"token": token, "retry_after_seconds": int(retryAfter / time.Second), "count": count}
	return doJSON(ctx, s.hc, http.MethodPost, s.url+"/_sim/secondary", "", body, nil)
}

// postStatus posts body as JSON to url with the API token and returns the
// answer's status, its Retry-After, its body and how long it took. err is a
// connection error: no answer.
func postStatus(ctx context.Context, hc *http.Client, url, token string, body []byte) (status int, retryAfter time.Duration, answer []byte, took time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, nil, 0, fmt.Errorf("%w: POST %s: %w", ErrRequest, url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, nil, time.Since(start), fmt.Errorf("%w: POST %s: %w", ErrRequest, url, err)
	}
	defer resp.Body.Close()
	answer, err = io.ReadAll(resp.Body)
	took = time.Since(start)
	if err != nil {
		return 0, 0, nil, took, fmt.Errorf("%w: POST %s: %w", ErrRequest, url, err)
	}
	if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil {
		retryAfter = time.Duration(s) * time.Second
	}
	return resp.StatusCode, retryAfter, answer, took, nil
}
