package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"iterion.dev/iterion/internal/clock"
)

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
// how many r still holds once its read timeout has passed. The probes go
// through hc (loadClient(1): one connection, kept alive), whose idle
// connections it closes on return; dial opens each slow connection
// (dialSlow).
func slowConns(ctx context.Context, r *replica, res *LoadResult, hc *http.Client, dial func(addr string) (net.Conn, error)) error {
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
		c, err := dial(addr)
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

// dialSlow opens a slow connection to addr, on the open network.
func dialSlow(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, 5*time.Second) }

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
