package server_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/server"
)

// TestProbesAnswerWithTheMainListenerAtItsCap pins the probe listener
// (RunWithProbes, iterion serve --probe-addr) on real TCP listeners: with
// --max-connections 1 and that one connection held by a client, a request
// on the main listener waits unanswered, as the cap says; /healthz,
// /readyz and /metrics on the probe listener still answer, so the
// kubelet does not restart a replica that is only busy; and the probe
// listener's connections are not counted in http_connections_open.
func TestProbesAnswerWithTheMainListenerAtItsCap(t *testing.T) {
	f := newHTTPFixture(t, func(c *server.Config) { c.Limits.MaxConnections = 1 })
	mainLn := listenLocal(t)
	probeLn := listenLocal(t)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- f.srv.RunWithProbes(ctx, mainLn, probeLn) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("RunWithProbes = %v, want nil after a shutdown by its context", err)
		}
	}()

	// The one place on the main listener: a keep-alive connection that
	// was answered once holds it until --idle-timeout (60 s).
	held := dialLocal(t, mainLn)
	if code, err := getOn(held, "/healthz", time.Time{}); err != nil || code != http.StatusOK {
		t.Fatalf("GET /healthz on the main listener, under its cap: %d, %v; want 200", code, err)
	}
	waiting := dialLocal(t, mainLn)
	if code, err := getOn(waiting, "/healthz", time.Now().Add(300*time.Millisecond)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("GET /healthz on the main listener at its cap: %d, %v; want no answer: the cap is full (the defect the probe listener avoids)", code, err)
	}

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := client.Get("http://" + probeLn.Addr().String() + path)
		if err != nil {
			t.Errorf("GET %s on the probe listener: %v; want an answer while the main listener is at its cap: probes sit outside --max-connections", path, err)
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s on the probe listener = %d, want 200", path, resp.StatusCode)
		}
	}
	if n := metricValue(t, f.srv.ProbeHandler(), "http_connections_open"); n != 1 {
		t.Errorf("http_connections_open = %v, want 1: the main listener's held connection, not the probes'", n)
	}
	resp, err := client.Get("http://" + probeLn.Addr().String() + "/leases")
	if err != nil {
		t.Fatalf("GET /leases on the probe listener: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /leases on the probe listener = %d, want 404: it serves the probes and /metrics only", resp.StatusCode)
	}
	held.Close()
	waiting.Close()
}

// listenLocal is a TCP listener on a free port of 127.0.0.1, closed at
// the test's end.
func listenLocal(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// dialLocal opens a TCP connection to ln, closed at the test's end.
func dialLocal(t *testing.T, ln net.Listener) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// getOn sends GET path on c, keeping it open, and returns the answer's
// status, or the error of reading it by deadline (none when zero).
func getOn(c net.Conn, path string, deadline time.Time) (int, error) {
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: iterion.test\r\n\r\n"); err != nil {
		return 0, err
	}
	if err := c.SetReadDeadline(deadline); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}
