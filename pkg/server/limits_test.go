package server_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"testing/synctest"

	"iterion.dev/iterion/pkg/server"
)

// TestConnectionsPastTheCapWaitForOneToClose pins Limits.MaxConnections
// on the listener Run serves: with a cap of 2 and two connections open, a
// third is not accepted and nothing serves it (on the in-memory network
// its dial waits, as a TCP connection waits in the listen backlog), and
// http_connections_open says 2; once one of the two closes, the third is
// accepted and served. A shutdown does not wait for a connection waiting
// at the cap.
func TestConnectionsPastTheCapWaitForOneToClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const capped = 2
		p, stop := runPipeServer(t, func(c *server.Config) { c.Limits.MaxConnections = capped })
		open := make([]net.Conn, capped)
		for i := range open {
			c, err := p.pn.Dial(context.Background(), "", "")
			if err != nil {
				t.Fatal(err)
			}
			if code := getHealthz(t, c); code != http.StatusOK {
				t.Fatalf("connection %d: GET /healthz = %d, want 200: under the cap a connection is served", i, code)
			}
			open[i] = c
		}
		third := make(chan net.Conn, 1)
		go func() {
			c, err := p.pn.Dial(context.Background(), "", "")
			if err != nil {
				close(third)
				return
			}
			third <- c
		}()
		synctest.Wait()
		select {
		case <-third:
			t.Fatalf("a third connection was accepted while %d were open, want it to wait: the cap is %d", capped, capped)
		default:
		}
		if n := metricValue(t, p.srv.Handler(), "http_connections_open"); n != capped {
			t.Errorf("http_connections_open = %v, want %d: the open connections, the waiting one not among them", n, capped)
		}

		open[0].Close()
		synctest.Wait()
		var c net.Conn
		select {
		case c = <-third:
		default:
			t.Fatal("the third connection is still not accepted after one of the two closed, want it accepted then")
		}
		if c == nil {
			t.Fatal("the third connection's dial failed")
		}
		if code := getHealthz(t, c); code != http.StatusOK {
			t.Errorf("third connection: GET /healthz = %d, want 200: once a place is free it is served", code)
		}
		if n := metricValue(t, p.srv.Handler(), "http_connections_open"); n != capped {
			t.Errorf("http_connections_open = %v, want %d: one closed, one accepted", n, capped)
		}
		if n := metricValue(t, p.srv.Handler(), "http_connections_max"); n != capped {
			t.Errorf("http_connections_max = %v, want %d: the cap", n, capped)
		}

		// A connection waiting at the cap does not hold up the shutdown.
		fourth := make(chan error, 1)
		go func() {
			c, err := p.pn.Dial(context.Background(), "", "")
			if err == nil {
				c.Close()
			}
			fourth <- err
		}()
		synctest.Wait()
		if err := stop(); err != nil {
			t.Errorf("Run = %v, want nil: a shutdown with a connection waiting at the cap is clean", err)
		}
		if err := <-fourth; err == nil {
			t.Error("the connection waiting at the shutdown was accepted, want it left unaccepted")
		}
		c.Close()
		open[1].Close()
	})
}

// getHealthz sends GET /healthz on c, keeping it open, and returns the
// answer's status.
func getHealthz(t *testing.T, c net.Conn) int {
	t.Helper()
	go func() { _, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: iterion.test\r\n\r\n") }()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}
