package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
)

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
	pid := r.p.pid()
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
