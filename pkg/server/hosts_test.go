package server_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"iterion.dev/iterion/pkg/server"
)

// TestAllowedHostsRefuseOtherHosts pins Config.AllowedHosts (iterion
// serve --allowed-hosts), the defence against DNS rebinding: a page on an
// attacker's domain whose name rebinds to a replica's address reaches it
// with that domain in Host, so every request naming a host not in the
// list answers 421 naming it, with the pages public or not; the probes
// answer whatever the Host, since the kubelet names the pod's address;
// and an empty list serves every host, as before.
func TestAllowedHostsRefuseOtherHosts(t *testing.T) {
	allowed := []string{"iterion.example.com", "localhost:8443"}
	for _, c := range []struct {
		why     string
		allowed []string
		method  string
		path    string
		host    string
		want    int
	}{
		{"a listed name is served", allowed, "GET", "/leases", "iterion.example.com", http.StatusOK},
		{"a name listed without a port is served on any port", allowed, "GET", "/leases", "iterion.example.com:8080", http.StatusOK},
		{"names compare without regard to case or a trailing dot", allowed, "GET", "/leases", "ITERION.Example.COM.", http.StatusOK},
		{"a name listed with a port is served on that port", allowed, "GET", "/leases", "localhost:8443", http.StatusOK},
		{"a name listed with a port is refused on another", allowed, "GET", "/leases", "localhost:8444", http.StatusMisdirectedRequest},
		{"a name listed with a port is refused without one", allowed, "GET", "/leases", "localhost", http.StatusMisdirectedRequest},
		{"a rebound name is refused on the public pages", allowed, "GET", "/leases", "attacker.example:8080", http.StatusMisdirectedRequest},
		{"a rebound name is refused on the index", allowed, "GET", "/", "attacker.example", http.StatusMisdirectedRequest},
		{"a rebound name is refused on the API", allowed, "POST", "/api/runs", "attacker.example", http.StatusMisdirectedRequest},
		{"a rebound name is refused on /metrics", allowed, "GET", "/metrics", "attacker.example", http.StatusMisdirectedRequest},
		{"a listed name's suffix is another name", allowed, "GET", "/leases", "evil-iterion.example.com", http.StatusMisdirectedRequest},
		{"a Host that is no host and port is refused, not waved through", allowed, "GET", "/leases", "iterion.example.com:", http.StatusMisdirectedRequest},
		{"the liveness probe answers any host: the kubelet names the pod's address", allowed, "GET", "/healthz", "10.0.0.7:8080", http.StatusOK},
		{"the readiness probe answers any host", allowed, "GET", "/readyz", "10.0.0.7:8080", http.StatusOK},
		{"no list: every host is served, as before the option", nil, "GET", "/leases", "attacker.example", http.StatusOK},
	} {
		t.Run(c.why, func(t *testing.T) {
			f := newHTTPFixture(t, func(cfg *server.Config) { cfg.PublicPages, cfg.AllowedHosts = true, c.allowed })
			rr := httptest.NewRecorder()
			req := httptest.NewRequest(c.method, c.path, strings.NewReader("{}"))
			req.Host = c.host
			f.srv.Handler().ServeHTTP(rr, req)
			if rr.Code != c.want {
				t.Fatalf("%s %s with Host %q = %d (%s), want %d: %s", c.method, c.path, c.host, rr.Code, rr.Body, c.want, c.why)
			}
			if c.want == http.StatusMisdirectedRequest && !strings.Contains(rr.Body.String(), c.host) {
				t.Errorf("421 body %q does not name the host %q, want it named", rr.Body, c.host)
			}
		})
	}
	t.Run("the probe handler answers any host", func(t *testing.T) {
		f := newHTTPFixture(t, func(cfg *server.Config) { cfg.AllowedHosts = allowed })
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			rr := httptest.NewRecorder()
			req := httptest.NewRequest("GET", path, nil)
			req.Host = "10.0.0.7:8081"
			f.srv.ProbeHandler().ServeHTTP(rr, req)
			if rr.Code != http.StatusOK {
				t.Errorf("ProbeHandler: GET %s with Host %q = %d, want 200: Prometheus scrapes by the pod's address", path, req.Host, rr.Code)
			}
		}
	})
}

// TestNewRefusesAnAllowedHostThatIsNoHost pins that New checks
// AllowedHosts, naming the field and the entry: an entry a Host header
// can never equal would lock every client out, or guard nothing.
func TestNewRefusesAnAllowedHostThatIsNoHost(t *testing.T) {
	for _, bad := range []string{"https://iterion.example.com", "iterion.example.com/pages", "*.example.com", "iterion.example.com:0", "iterion.example.com:65536", "iterion.example.com:", "iterion.example.com:http", "", "a b"} {
		t.Run(bad, func(t *testing.T) {
			f := newHTTPFixture(t)
			_, err := server.New(server.Config{Runs: f.runs, Leases: f.leases, Forge: f.forge,
				APIToken: apiToken, AllowedHosts: []string{"ok.example.com", bad}})
			if !errors.Is(err, server.ErrConfig) || !strings.Contains(err.Error(), "AllowedHosts") || !strings.Contains(err.Error(), `"`+bad+`"`) {
				t.Errorf("New(AllowedHosts %q) = %v, want ErrConfig naming AllowedHosts and the entry", bad, err)
			}
		})
	}
	for _, good := range []string{"iterion.example.com", "iterion.example.com:8443", "10.0.0.7", "[::1]:8080", "::1", "localhost"} {
		if err := server.CheckAllowedHosts([]string{good}); err != nil {
			t.Errorf("CheckAllowedHosts(%q) = %v, want nil: a host as a browser sends it", good, err)
		}
	}
}
