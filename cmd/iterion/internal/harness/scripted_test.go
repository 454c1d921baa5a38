package harness

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The scenarios' own code run in virtual time (testing/synctest) against
// stand-ins scripted by the test: the simulator's control endpoints and
// the replicas' pages served in memory through the clients' transport,
// and each replica's process a recorder of the signals sent to it. No
// process is started and no connection opened.

// inMemory is a transport that serves every request with h in the
// caller's goroutine, so that a synctest bubble sees no network.
type inMemory struct{ h http.Handler }

func (m inMemory) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	m.h.ServeHTTP(rec, req)
	return rec.Result(), nil
}

// scriptedSim is a sim whose control endpoints h answers.
func scriptedSim(h http.Handler) sim {
	return sim{url: "http://sim.invalid", hc: &http.Client{Transport: inMemory{h}}}
}

// writeJSON answers v as JSON.
func writeJSON(t *testing.T, w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		t.Errorf("encode %T: %v", v, err)
	}
}

// signalled is a replica's process that records the first signal sent to
// it and exits on it, exits after it (0: at once).
type signalled struct {
	process // the rest of a process: calling it fails the test with a nil dereference
	exits   time.Duration
	mu      sync.Mutex
	sig     syscall.Signal
	at      time.Time
}

func (p *signalled) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.at.IsZero() {
		p.sig, p.at = sig, time.Now()
	}
	return nil
}

// wait returns once the process has exited, exits after the first
// signal.
func (p *signalled) wait(time.Duration) bool {
	_, at := p.first()
	time.Sleep(time.Until(at.Add(p.exits)))
	return true
}

// stop is proc's: SIGTERM, and it returns once the process has exited.
func (p *signalled) stop(grace time.Duration) {
	p.signal(syscall.SIGTERM)
	p.wait(grace)
}

func (p *signalled) exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.at.IsZero()
}

// first is the first signal sent and when; a zero time when none was.
func (p *signalled) first() (syscall.Signal, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sig, p.at
}

// scriptedReplica is a replica named name whose pages h answers and
// whose process records its signals. Its forwarder listens (on
// 127.0.0.1) but accepts nothing, so that stopping the replica can close
// it.
func scriptedReplica(t *testing.T, name, owner string, h http.Handler) (*replica, *signalled) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &signalled{}
	return &replica{name: name, token: name, owner: owner, p: p, fwd: &forwarder{ln: ln},
		api: api{url: "http://" + name + ".invalid", token: "api", hc: &http.Client{Transport: inMemory{h}}}}, p
}
