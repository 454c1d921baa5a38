package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"iterion.dev/iterion/internal/clock"
	"iterion.dev/iterion/pkg/server"
)

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
