package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/forge/forgesim"
)

// TestServeCapsOpenConnections pins --max-connections on serve's real
// listener (127.0.0.1): at 1, while one connection is open a second one,
// which the kernel has connected and whose request is sent, is not
// accepted: the first connection's own GET /metrics counts 1 open of a cap
// of 1. Once the first closes, the second is served. The cap forces that
// order, so the test waits for answers, never for time (the read deadline
// only ends a test that would otherwise hang).
func TestServeCapsOpenConnections(t *testing.T) {
	simSrv := httptest.NewServer(forgesim.New())
	defer simSrv.Close()
	url, _, stop := startServe(t, []string{"--listen", "127.0.0.1:0", "--forge-url", simSrv.URL + "/",
		"--forge-token", "tok", "--api-token", "api", "--sweep-interval", "1h", "--max-connections", "1"})
	addr := strings.TrimPrefix(url, "http://")
	first, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	firstAnswers := bufio.NewReader(first)
	if code, _ := rawGet(t, first, firstAnswers, "/healthz"); code != http.StatusOK {
		t.Fatalf("first connection: GET /healthz = %d, want 200", code)
	}

	second, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("second connection: %v, want the kernel to connect it (it waits in the backlog)", err)
	}
	defer second.Close()
	if _, err := io.WriteString(second, "GET /healthz HTTP/1.1\r\nHost: iterion.test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	code, metrics := rawGet(t, first, firstAnswers, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("first connection: GET /metrics = %d, want 200", code)
	}
	if open, limit := sample(metrics, "http_connections_open"), sample(metrics, "http_connections_max"); open != "1" || limit != "1" {
		t.Errorf("http_connections_open %s, http_connections_max %s; want 1 and 1: at the cap the second connection is not accepted while the first is open", open, limit)
	}

	first.Close()
	_ = second.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(second), nil)
	if err != nil {
		t.Fatalf("second connection after the first closed: %v, want an answer: a freed place takes the waiting connection", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("second connection: GET /healthz = %d, want 200", resp.StatusCode)
	}
	if err := stop(); err != nil {
		t.Errorf("serve after the stop signal = %v, want nil", err)
	}
}

// rawGet sends GET path on c, keeping it open, and returns the answer's
// status and body, read through r, c's reader.
func rawGet(t *testing.T, c net.Conn, r *bufio.Reader, path string) (int, string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: iterion.test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// sample is the value of the unlabelled metric name in a /metrics
// answer, "" when absent.
func sample(metrics, name string) string {
	for line := range strings.Lines(metrics) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == name {
			return f[1]
		}
	}
	return ""
}
