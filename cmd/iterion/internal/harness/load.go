package harness

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"iterion.dev/iterion/pkg/server"
)

// LoadOptions sizes the load scenario. The zero value of a field means the
// default given beside it (the figures of docs/benchmarks.md).
type LoadOptions struct {
	// Requests is how many distinct runs are posted. Default 2000.
	Requests int
	// Concurrency is how many clients post at once. Default 50.
	Concurrency int
	// Outage is how long dev-mongo stays down after its SIGKILL, halfway
	// through the requests, before it is started again. Default 2s.
	Outage time.Duration
	// SlowConns is how many connections trickle a body at one byte a
	// second. Default 300.
	SlowConns int
	// Probes is how many sequential POST /api/runs time the API, without
	// and then with the slow connections. Default 300.
	Probes int
	// ReadTimeout is the replicas' --read-timeout; 0 leaves the server's
	// default (20s). The slow connections are counted that plus 5s after
	// they opened.
	ReadTimeout time.Duration
	// Webhooks is how many unsigned 24 MiB webhooks are posted at once.
	// Default 20.
	Webhooks int
}

func (l *LoadOptions) defaults() error {
	l.Requests = cmp.Or(l.Requests, 2000)
	l.Concurrency = cmp.Or(l.Concurrency, 50)
	l.Outage = cmp.Or(l.Outage, 2*time.Second)
	l.SlowConns = cmp.Or(l.SlowConns, 300)
	l.Probes = cmp.Or(l.Probes, 300)
	l.Webhooks = cmp.Or(l.Webhooks, 20)
	switch {
	case l.Requests < 2:
		return refuse("Load.Requests", l.Requests, "is under 2: Mongo is killed halfway")
	case l.Concurrency < 1 || l.Concurrency > l.Requests:
		return refuse("Load.Concurrency", l.Concurrency, "is not within 1 to the requests (%d)", l.Requests)
	case l.Outage < 0:
		return refuse("Load.Outage", l.Outage, "is negative")
	case l.SlowConns < 1:
		return refuse("Load.SlowConns", l.SlowConns, "is under 1")
	case l.Probes < 2:
		return refuse("Load.Probes", l.Probes, "is under 2")
	case l.ReadTimeout < 0:
		return refuse("Load.ReadTimeout", l.ReadTimeout, "is negative")
	case l.Webhooks < 1:
		return refuse("Load.Webhooks", l.Webhooks, "is under 1")
	}
	return nil
}

// readTimeout is the replicas' read timeout: the flag's, or the server's
// default when the scenario leaves it.
func (l LoadOptions) readTimeout() time.Duration {
	if l.ReadTimeout > 0 {
		return l.ReadTimeout
	}
	return server.DefaultLimits.ReadTimeout
}

// The load scenario's fixed shapes.
const (
	loadRepo     = "acme/load"  // the runs posted under load
	probeRepo    = "acme/probe" // the runs that time the API
	loadReplicas = 2
	// slowBodyBytes is the body length each slow connection declares; it
	// sends "{" and then a byte a second, so it never finishes in time.
	slowBodyBytes = 1000
	// webhookBytes is each unsigned webhook's body, 24 MiB, under GitHub's
	// 25 MB cap so that only the signature can refuse it.
	webhookBytes = 24 << 20
	// maxAttempts and maxRetryWait bound a client's retries of one run.
	maxAttempts  = 60
	maxRetryWait = 5 * time.Second
	// slowGrace is how long after the read timeout the slow connections
	// are counted.
	slowGrace = 5 * time.Second
)

// LoadResult is what the load scenario measured. Latencies are from the
// request's send to its answer's body read, on loopback.
type LoadResult struct {
	Requests, Concurrency int
	// Created and Repeated count the runs whose final answer was 201 and
	// 200; Failed the runs that got neither within maxAttempts.
	Created, Repeated, Failed int
	// Unavailable counts 503 answers and ConnErrors connection errors
	// (no answer), each retried with the same body; Retries is their sum.
	Unavailable, ConnErrors, Retries int
	// P50 and P99 are the latencies of the attempts answered 201 or 200;
	// EndToEndP99 spans each run's first send to its success, retries and
	// their waits included. Each is percentile's nearest rank: of fewer
	// than 100 runs a p99 is the largest, and the report names it max.
	P50, P99, EndToEndP99 time.Duration
	// Outage is how long dev-mongo was left down; MongoDown is from its
	// SIGKILL to its restart answering; Elapsed the whole load.
	Outage, MongoDown, Elapsed time.Duration
	// Stored counts the runs of the load's repository GET /api/runs
	// lists; Duplicates the listed entries of a pull or id listed before;
	// Lost the runs answered 201 or 200 that the list lacks and GET
	// /api/runs/{id} does not return (404, or any error); Unlisted those
	// GET returns but the list lacks.
	Stored, Duplicates, Lost, Unlisted int

	// Slow connections: SlowConns trickle a body at a byte a second into
	// the first replica while Probes sequential POST /api/runs are timed,
	// after Probes timed without them. Of fewer than 100 probes the p99s
	// are the largest, and the report names them max.
	SlowConns, Probes               int
	UnloadedP50, UnloadedP99        time.Duration
	LoadedP50, LoadedP99            time.Duration
	ProbedWithin                    bool // the loaded probes ended before the read timeout cut any slow connection
	ReadTimeout                     time.Duration
	SlowOpen                        int // slow connections still open ReadTimeout + 5s after they opened
	SlowAnswered, SlowClosedNoReply int // of the rest: answered (e.g. 400, 401) or closed without an answer

	// Webhooks unsigned 24 MiB bodies were posted at once to the first
	// replica; HWMBefore and HWMAfter are its peak RSS (VmHWM) in bytes
	// before and after; Answers counts them by status (0: no answer).
	Webhooks            int
	HWMBefore, HWMAfter int64
	Answers             map[int]int
}

// P99Ratio is the API's p99 with the slow connections over its p99 without
// them; 0 when not measured.
func (l LoadResult) P99Ratio() float64 {
	if l.UnloadedP99 == 0 {
		return 0
	}
	return float64(l.LoadedP99) / float64(l.UnloadedP99)
}

// HWMGrowth is the first replica's peak RSS growth over the webhooks, in
// bytes.
func (l LoadResult) HWMGrowth() int64 { return l.HWMAfter - l.HWMBefore }

// loadScenario puts the API on an open network, on loadReplicas fresh
// replicas: the slow connections and the API's p99 ratio, the webhooks'
// peak RSS, then the runs under load through a Mongo SIGKILL and restart,
// and reads back what was stored.
type loadScenario struct {
	LoadOptions
	logf func(format string, args ...any)
}

// run runs the load on c and returns what it measured; on an error, what
// it measured before it (nil when the replicas did not start).
func (s loadScenario) run(ctx context.Context, c *cluster) (*LoadResult, error) {
	secret := filepath.Join(c.dir, "webhook-secret")
	if err := os.WriteFile(secret, []byte("harness-webhook-secret\n"), 0o600); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProcess, err)
	}
	// The real minute: the sweeper's first pass falls after the scenario,
	// so it measures the API alone.
	extra := []string{"--sweep-interval", "1m", "--webhook-secret-file", secret}
	if s.ReadTimeout > 0 {
		extra = append(extra, "--read-timeout", s.ReadTimeout.String())
	}
	rs, err := c.startReplicas(ctx, loadReplicas, replicaSpec{extra: extra})
	if err != nil {
		return nil, err
	}
	res := &LoadResult{Requests: s.Requests, Concurrency: s.Concurrency, Outage: s.Outage, SlowConns: s.SlowConns,
		Probes: s.Probes, ReadTimeout: s.readTimeout(), Webhooks: s.Webhooks}
	if err := slowConns(ctx, rs[0], res, loadClient(1), dialSlow); err != nil {
		return res, err
	}
	s.logf("slow connections: %s %v unloaded, %v with %d slow connections (ratio %.2f); %d still open %v after the read timeout",
		percentileName(99, res.Probes), res.UnloadedP99.Round(10*time.Microsecond), res.LoadedP99.Round(10*time.Microsecond), res.SlowConns, res.P99Ratio(), res.SlowOpen, slowGrace)
	if err := webhooks(ctx, rs[0], res); err != nil {
		return res, err
	}
	s.logf("webhooks: peak RSS %.1f MB before, %.1f MB after %d unsigned 24 MiB bodies; answers %v",
		mb(res.HWMBefore), mb(res.HWMAfter), res.Webhooks, res.Answers)
	if err := s.runsUnderLoad(ctx, c, rs, res); err != nil {
		return res, err
	}
	s.logf("load: %d runs at concurrency %d: %d created, %d repeated, %d failed; %d answers 503, %d connection errors; p50 %v %s %v; stored %d, duplicates %d, lost %d",
		res.Requests, res.Concurrency, res.Created, res.Repeated, res.Failed, res.Unavailable, res.ConnErrors,
		res.P50.Round(10*time.Microsecond), percentileName(99, res.Created+res.Repeated), res.P99.Round(10*time.Microsecond), res.Stored, res.Duplicates, res.Lost)
	return res, nil
}

// mb is n bytes in megabytes (10^6).
func mb(n int64) float64 { return float64(n) / 1e6 }

// loadClient is an HTTP client that keeps a connection per concurrent
// client alive, as a real client pool would.
func loadClient(conns int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = conns
	// Above the servers' write timeout: every answer, 503s included, arrives.
	return &http.Client{Transport: tr, Timeout: 45 * time.Second}
}
