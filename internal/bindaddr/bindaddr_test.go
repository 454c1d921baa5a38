package bindaddr_test

import (
	"strings"
	"testing"

	"iterion.dev/iterion/internal/bindaddr"
)

// TestParseReadsAsNetListen pins Parse to what net.Listen("tcp", addr)
// binds, without DNS: the host as written, the port as a number (a
// service name looked up as net.Listen looks it up), and a refusal, saying
// what is wrong, of what net.Listen refuses or takes as a forgotten port.
func TestParseReadsAsNetListen(t *testing.T) {
	for _, c := range []struct {
		addr, why string
		want      bindaddr.Addr
	}{
		{":8080", "every address", bindaddr.Addr{Port: 8080}},
		{"127.0.0.1:0", "port 0: any free port", bindaddr.Addr{Host: "127.0.0.1"}},
		{"[::1]:9090", "an IPv6 host, bracketed", bindaddr.Addr{Host: "::1", Port: 9090}},
		{"iterion.internal:8080", "a host name, not resolved", bindaddr.Addr{Host: "iterion.internal", Port: 8080}},
		{":http", "a service name is its port", bindaddr.Addr{Port: 80}},
		{"localhost:https", "a service name with a host", bindaddr.Addr{Host: "localhost", Port: 443}},
	} {
		if got, err := bindaddr.Parse(c.addr); err != nil || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v: %s", c.addr, got, err, c.want, c.why)
		}
	}
	for _, c := range []struct{ addr, want, why string }{
		{"8080", "want HOST:PORT or :PORT", "no colon"},
		{"host:8080:extra", "want HOST:PORT or :PORT", "a part too many"},
		{":", "no port", "a forgotten port, not port 0"},
		{"localhost:", "no port", "a forgotten port after a host"},
		{":99999", "want a port from 0 to 65535", "out of range"},
		{":-1", "want a port from 0 to 65535", "negative"},
		{":no-such-service", "or a service name", "an unknown service name"},
	} {
		if got, err := bindaddr.Parse(c.addr); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %+v, %v; want an error saying %q: %s", c.addr, got, err, c.want, c.why)
		}
	}
}
