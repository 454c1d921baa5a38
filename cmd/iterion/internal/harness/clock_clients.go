package harness

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"iterion.dev/iterion/pkg/forge/forgesim"
)

// The wire contracts the clock scenario needs beyond the others': the
// simulator's full stats (refusals by kind, CPU-time minutes), its pull
// reads and injected faults, a head push, and the shape of a replica's
// logged sweep pass (cluster_clock.go reads them, and ages runs).

// fullStats reads GET /_sim/stats whole, as forgesim.Stats.
func (s sim) fullStats(ctx context.Context) (forgesim.Stats, error) {
	var st forgesim.Stats
	err := doJSON(ctx, s.hc, http.MethodGet, s.url+"/_sim/stats", "", nil, &st)
	return st, err
}

// reads reads GET /_sim/reads for principal: when it read each pull
// request. Its answer can be megabytes, so it has a client of its own
// without the harness's 5 s timeout (ctx bounds it).
func (s sim) reads(ctx context.Context, principal string) ([]forgesim.PullReads, error) {
	var out []forgesim.PullReads
	err := doJSON(ctx, &http.Client{}, http.MethodGet, s.url+"/_sim/reads?principal="+url.QueryEscape(principal), "", nil, &out)
	return out, err
}

// setFaults sets the simulator's injected GraphQL faults.
func (s sim) setFaults(ctx context.Context, f forgesim.GraphQLFaults) error {
	return doJSON(ctx, s.hc, http.MethodPost, s.url+"/_sim/faults", "", f, nil)
}

// pushHead moves pull request number of repo to a new head sha.
func (s sim) pushHead(ctx context.Context, repo string, number int, sha string) error {
	return doJSON(ctx, s.hc, http.MethodPost, fmt.Sprintf("%s/_sim/repos/%s/pulls/%d/head", s.url, repo, number), "",
		map[string]string{"head_sha": sha}, nil)
}

// installationPrincipal is how the simulator names the principal of
// installation id's tokens.
func installationPrincipal(id int) string { return fmt.Sprintf("installation:%d", id) }

// passLog is one "sweep pass" line of a replica's JSON log (log level
// debug): the pass's own report (pkg/server's sweep_pass.go).
type passLog struct {
	Time        time.Time     `json:"time"`
	Msg         string        `json:"msg"`
	Pass        int           `json:"pass"`
	Deep        bool          `json:"deep"`
	Offered     int           `json:"offered"`
	ForgeReads  int           `json:"forge_reads"`
	ForgeErrors int           `json:"forge_errors"`
	ForgeTime   time.Duration `json:"forge_time"`
	Waited      time.Duration `json:"waited"`
	Took        time.Duration `json:"took"`
	Batch       int           `json:"batch"`
	Complete    bool          `json:"complete"`
	Behind      bool          `json:"behind"`
}
