package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"iterion.dev/iterion/internal/clock"
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
	if l.Requests == 0 {
		l.Requests = 2000
	}
	if l.Concurrency == 0 {
		l.Concurrency = 50
	}
	if l.Outage == 0 {
		l.Outage = 2 * time.Second
	}
	if l.SlowConns == 0 {
		l.SlowConns = 300
	}
	if l.Probes == 0 {
		l.Probes = 300
	}
	if l.Webhooks == 0 {
		l.Webhooks = 20
	}
	switch {
	case l.Requests < 2:
		return fmt.Errorf("%w: Load.Requests %d is under 2: Mongo is killed halfway", ErrInvalid, l.Requests)
	case l.Concurrency < 1 || l.Concurrency > l.Requests:
		return fmt.Errorf("%w: Load.Concurrency %d is not within 1..Load.Requests (%d)", ErrInvalid, l.Concurrency, l.Requests)
	case l.Outage < 0:
		return fmt.Errorf("%w: Load.Outage %v is negative", ErrInvalid, l.Outage)
	case l.SlowConns < 1:
		return fmt.Errorf("%w: Load.SlowConns %d is under 1", ErrInvalid, l.SlowConns)
	case l.Probes < 2:
		return fmt.Errorf("%w: Load.Probes %d is under 2", ErrInvalid, l.Probes)
	case l.ReadTimeout < 0:
		return fmt.Errorf("%w: Load.ReadTimeout %v is negative", ErrInvalid, l.ReadTimeout)
	case l.Webhooks < 1:
		return fmt.Errorf("%w: Load.Webhooks %d is under 1", ErrInvalid, l.Webhooks)
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
	// their waits included.
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
	// after Probes timed without them.
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
	if err := slowConns(ctx, rs[0], res); err != nil {
		return res, err
	}
	s.logf("slow connections: p99 %v unloaded, %v with %d slow connections (ratio %.2f); %d still open %v after the read timeout",
		res.UnloadedP99.Round(10*time.Microsecond), res.LoadedP99.Round(10*time.Microsecond), res.SlowConns, res.P99Ratio(), res.SlowOpen, slowGrace)
	if err := webhooks(ctx, rs[0], res); err != nil {
		return res, err
	}
	s.logf("webhooks: peak RSS %.1f MB before, %.1f MB after %d unsigned 24 MiB bodies; answers %v",
		mb(res.HWMBefore), mb(res.HWMAfter), res.Webhooks, res.Answers)
	if err := s.runsUnderLoad(ctx, c, rs, res); err != nil {
		return res, err
	}
	s.logf("load: %d runs at concurrency %d: %d created, %d repeated, %d failed; %d answers 503, %d connection errors; p50 %v p99 %v; stored %d, duplicates %d, lost %d",
		res.Requests, res.Concurrency, res.Created, res.Repeated, res.Failed, res.Unavailable, res.ConnErrors,
		res.P50.Round(10*time.Microsecond), res.P99.Round(10*time.Microsecond), res.Stored, res.Duplicates, res.Lost)
	return res, nil
}

// mb is n bytes in megabytes (10^6).
func mb(n int64) float64 { return float64(n) / 1e6 }

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

// loadClient is an HTTP client that keeps a connection per concurrent
// client alive, as a real client pool would.
func loadClient(conns int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = conns
	// Above the servers' write timeout: every answer, 503s included, arrives.
	return &http.Client{Transport: tr, Timeout: 45 * time.Second}
}

// probe times n sequential POST /api/runs of new runs on one connection,
// pulls from first on, and returns their latencies. Any answer but 201 is
// an error: nothing else is failing in this phase.
func probe(ctx context.Context, hc *http.Client, a api, first, n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for pull := first; pull < first+n; pull++ {
		b, _ := json.Marshal(runRequest{Repo: probeRepo, Pull: pull, HeadSHA: headSHA(pull), Verdict: "success"})
		status, _, answer, took, err := postStatus(ctx, hc, a.url+"/api/runs", a.token, b)
		if err != nil {
			return out, err
		}
		if status != http.StatusCreated {
			return out, fmt.Errorf("%w: probe pull %d: %d %s, want 201", ErrRequest, pull, status, bytes.TrimSpace(answer))
		}
		out = append(out, took)
	}
	return out, nil
}

// slowConns times the API without and then with SlowConns connections
// trickling an unauthenticated body into r at a byte a second, and counts
// how many r still holds once its read timeout has passed.
func slowConns(ctx context.Context, r *replica, res *LoadResult) error {
	hc := loadClient(1)
	defer hc.CloseIdleConnections()
	unloaded, err := probe(ctx, hc, r.api, 1, res.Probes)
	if err != nil {
		return err
	}
	tctx, stopTrickle := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopTrickle(); wg.Wait() }()
	addr := strings.TrimPrefix(r.api.url, "http://")
	head := fmt.Sprintf("POST /api/runs HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", addr, slowBodyBytes)
	conns := make([]net.Conn, 0, res.SlowConns)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	opened := time.Now()
	for range res.SlowConns {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return fmt.Errorf("%w: slow connection %d: %w", ErrRequest, len(conns)+1, err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, head); err != nil {
			return fmt.Errorf("%w: slow connection %d: %w", ErrRequest, len(conns), err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// One byte a second, at most the declared body less its "{",
			// until the server hangs up or the phase ends.
			for range slowBodyBytes - 2 {
				if !clock.Sleep(tctx, time.Second) {
					return
				}
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}()
	}
	loaded, err := probe(ctx, hc, r.api, res.Probes+1, res.Probes)
	if err != nil {
		return err
	}
	res.ProbedWithin = time.Since(opened) < res.ReadTimeout
	res.UnloadedP50, res.UnloadedP99 = percentile(unloaded, 50), percentile(unloaded, 99)
	res.LoadedP50, res.LoadedP99 = percentile(loaded, 50), percentile(loaded, 99)
	clock.Sleep(ctx, time.Until(opened.Add(res.ReadTimeout+slowGrace)))
	stopTrickle()
	wg.Wait()
	for _, c := range conns {
		switch slowConnState(c) {
		case connOpen:
			res.SlowOpen++
		case connAnswered:
			res.SlowAnswered++
		default:
			res.SlowClosedNoReply++
		}
	}
	return ctx.Err()
}

// connState is what a slow connection's read shows.
type connState int

// The states slowConnState tells apart.
const (
	connOpen     connState = iota // a read waits: the server still holds it
	connAnswered                  // the server wrote an answer
	connClosed                    // EOF or reset with no answer
)

// slowConnState reads what c has, waiting at most 200ms.
func slowConnState(c net.Conn) connState {
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	n, err := c.Read(make([]byte, 64))
	var ne net.Error
	switch {
	case n > 0:
		return connAnswered
	case errors.As(err, &ne) && ne.Timeout():
		return connOpen
	default:
		return connClosed
	}
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// vmHWM reads a process's peak resident set size, in bytes, from
// /proc/PID/status.
func vmHWM(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("%w: peak RSS: %w", ErrMeasure, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%w: peak RSS: VmHWM %q: %w", ErrMeasure, v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("%w: peak RSS: no VmHWM in /proc/%d/status", ErrMeasure, pid)
}

// webhooks posts Webhooks unsigned 24 MiB bodies to r at once and records
// its peak RSS before and after.
func webhooks(ctx context.Context, r *replica, res *LoadResult) error {
	pid := r.p.cmd.Process.Pid
	var err error
	if res.HWMBefore, err = vmHWM(pid); err != nil {
		return err
	}
	hc := loadClient(res.Webhooks)
	defer hc.CloseIdleConnections()
	// A well-formed signature that matches no body: only the HMAC, over
	// the whole body, can refuse it.
	sig := "sha256=" + strings.Repeat("0", 64)
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	res.Answers = map[int]int{}
	for i := range res.Webhooks {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.api.url+"/webhooks/github", io.LimitReader(zeros{}, webhookBytes))
			status := 0
			if err == nil {
				req.ContentLength = webhookBytes
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-GitHub-Event", "pull_request")
				req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("harness-load-%d", i))
				req.Header.Set("X-Hub-Signature-256", sig)
				if resp, err := hc.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					status = resp.StatusCode
				}
			}
			mu.Lock()
			res.Answers[status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	res.HWMAfter, err = vmHWM(pid)
	return err
}

// outcome is one run's fate under load.
type outcome struct {
	id       string // from the 201 or 200 answer
	status   int    // the final answer's status, 0 for none
	took     time.Duration
	total    time.Duration
	retries  int
	s503     int
	connErrs int
}

// runsUnderLoad posts Requests distinct runs round-robin over rs from
// Concurrency clients, kills dev-mongo with SIGKILL when half have been
// sent and starts it again Outage later on the same address and files,
// then reads every run back.
func (s loadScenario) runsUnderLoad(ctx context.Context, c *cluster, rs []*replica, res *LoadResult) error {
	lo := s.LoadOptions
	hc := loadClient(lo.Concurrency)
	defer hc.CloseIdleConnections()
	outs := make([]outcome, lo.Requests)
	var next atomic.Int64
	half := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	for range lo.Concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= lo.Requests || ctx.Err() != nil {
					return
				}
				if i == lo.Requests/2 {
					close(half)
				}
				outs[i] = postRetrying(ctx, hc, rs, i)
			}
		})
	}
	var killErr error
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		select {
		case <-half:
		case <-ctx.Done():
			return
		}
		tKill := time.Now()
		c.mongo.signal(syscall.SIGKILL)
		c.mongo.wait(10 * time.Second)
		clock.Sleep(ctx, lo.Outage)
		killErr = c.startMongoRetry()
		res.MongoDown = time.Since(tKill)
	}()
	wg.Wait()
	<-restarted
	res.Elapsed = time.Since(start)
	if killErr != nil {
		return killErr
	}
	var ok, total []time.Duration
	for _, o := range outs {
		res.Unavailable += o.s503
		res.ConnErrors += o.connErrs
		res.Retries += o.retries
		switch o.status {
		case http.StatusCreated:
			res.Created++
		case http.StatusOK:
			res.Repeated++
		default:
			res.Failed++
			continue
		}
		ok = append(ok, o.took)
		total = append(total, o.total)
	}
	res.P50, res.P99, res.EndToEndP99 = percentile(ok, 50), percentile(ok, 99), percentile(total, 99)
	return readBack(ctx, rs[0], outs, res)
}

// postRetrying posts run i to rs[i mod len] and retries a 503 or a
// connection error with the same body on the next replica, after the
// answer's Retry-After (a connection error: 200ms), as a client of the
// idempotent API would, at most maxAttempts times.
func postRetrying(ctx context.Context, hc *http.Client, rs []*replica, i int) outcome {
	b, _ := json.Marshal(runRequest{Repo: loadRepo, Pull: i + 1, HeadSHA: headSHA(i + 1), Verdict: "success"})
	var o outcome
	first := time.Now()
	for attempt := range maxAttempts {
		r := rs[(i+attempt)%len(rs)]
		status, retryAfter, answer, took, err := postStatus(ctx, hc, r.api.url+"/api/runs", r.api.token, b)
		wait := 200 * time.Millisecond
		switch {
		case err != nil:
			o.connErrs++
		case status == http.StatusServiceUnavailable:
			o.s503++
			wait = min(max(retryAfter, wait), maxRetryWait)
		case status == http.StatusCreated || status == http.StatusOK:
			var v struct {
				ID string `json:"id"`
			}
			json.Unmarshal(answer, &v)
			o.id, o.status, o.took, o.total = v.ID, status, took, time.Since(first)
			return o
		default:
			o.status = status // a refusal retrying cannot change
			return o
		}
		if attempt == maxAttempts-1 || !clock.Sleep(ctx, wait) {
			break
		}
		o.retries++
	}
	return o
}

// readBack lists the load's runs through r's GET /api/runs, page by page,
// and counts duplicates and the successful runs it lacks; each of those is
// read once more with GET /api/runs/{id}.
func readBack(ctx context.Context, r *replica, outs []outcome, res *LoadResult) error {
	listed := map[string]bool{}
	pulls := map[int]bool{}
	cursor := ""
	for page := 0; ; page++ {
		if page > res.Requests/server.MaxRunsLimit+10 {
			return fmt.Errorf("%w: GET /api/runs gave over %d pages for %d runs", ErrMeasure, page, res.Requests)
		}
		q := url.Values{"repo": {loadRepo}, "limit": {strconv.Itoa(server.MaxRunsLimit)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var p struct { // GET /api/runs's wire contract (docs/operating.md)
			Runs []struct {
				ID   string `json:"id"`
				Pull int    `json:"pull"`
			} `json:"runs"`
			Next string `json:"next"`
		}
		if err := doJSON(ctx, r.api.hc, http.MethodGet, r.api.url+"/api/runs?"+q.Encode(), r.api.token, nil, &p); err != nil {
			return err
		}
		for _, v := range p.Runs {
			res.Stored++
			if pulls[v.Pull] || listed[v.ID] {
				res.Duplicates++
			}
			pulls[v.Pull], listed[v.ID] = true, true
		}
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	for _, o := range outs {
		if o.id == "" || listed[o.id] {
			continue
		}
		var v struct {
			ID string `json:"id"`
		}
		if err := doJSON(ctx, r.api.hc, http.MethodGet, r.api.url+"/api/runs/"+url.PathEscape(o.id), r.api.token, nil, &v); err != nil {
			res.Lost++
			continue
		}
		res.Unlisted++
	}
	return nil
}
