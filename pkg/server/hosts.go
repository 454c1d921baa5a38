package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// hostList is Config.AllowedHosts, parsed: the Host header values a
// request may carry. Its zero value allows every host. Read-only after
// New, so safe for concurrent use.
type hostList struct {
	anyPort map[string]bool // "name": the name on any port, or none
	onPort  map[string]bool // "name:port": the name on that port only
}

// CheckAllowedHosts reports the first entry of hosts that is not a host
// name or address, with or without a port, naming it: what New refuses
// in Config.AllowedHosts, for a caller that validates its settings
// before it builds a Server (iterion serve's --allowed-hosts).
func CheckAllowedHosts(hosts []string) error {
	_, err := parseHosts(hosts)
	return err
}

// parseHosts parses hosts, each "name", "name:port", an IP address or
// "[IPv6]:port", compared without regard to case or a trailing dot, as
// DNS compares names.
func parseHosts(hosts []string) (hostList, error) {
	l := hostList{anyPort: map[string]bool{}, onPort: map[string]bool{}}
	for _, h := range hosts {
		name, port, err := splitHost(h)
		switch {
		case err != nil:
			return hostList{}, fmt.Errorf("%q: %w", h, err)
		case !validHostName(name):
			return hostList{}, fmt.Errorf("%q: want a host name or IP address, with or without a port, as a browser sends it in Host (no scheme, path or wildcard)", h)
		case port == "":
			l.anyPort[name] = true
		default:
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				return hostList{}, fmt.Errorf("%q: port %q: want 1 to 65535", h, port)
			}
			l.onPort[net.JoinHostPort(name, port)] = true
		}
	}
	return l, nil
}

// allows reports whether a request whose Host is host may be served: no
// list, or host names an entry, on its port when the entry has one.
func (l hostList) allows(host string) bool {
	if l.empty() {
		return true
	}
	name, port, err := splitHost(host)
	if err != nil {
		return false
	}
	return l.anyPort[name] || port != "" && l.onPort[net.JoinHostPort(name, port)]
}

// empty reports whether the list is empty: every host is allowed.
func (l hostList) empty() bool { return len(l.anyPort) == 0 && len(l.onPort) == 0 }

// splitHost splits a Host value into its lower-case name, without a
// trailing dot or an IPv6 address's brackets, and its port ("" for none).
func splitHost(h string) (name, port string, err error) {
	h = strings.ToLower(strings.TrimSpace(h))
	switch {
	case strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]"):
		name = h[1 : len(h)-1]
	case strings.Count(h, ":") == 1 || strings.HasPrefix(h, "["):
		if name, port, err = net.SplitHostPort(h); err != nil {
			return "", "", err
		}
		if port == "" {
			return "", "", errors.New("empty port")
		}
	default: // no port: a name, or an IPv6 address without brackets
		name = h
	}
	return strings.TrimSuffix(name, "."), port, nil
}

// validHostName reports whether name is an IP address or a DNS name of
// letters, digits, hyphens and dots.
func validHostName(name string) bool {
	if name == "" {
		return false
	}
	if net.ParseIP(name) != nil {
		return true
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return !strings.HasPrefix(name, ".") && !strings.Contains(name, "..")
}

// checkHost serves next only to requests whose Host is in AllowedHosts,
// and the probes, /healthz and /readyz, to any: a kubelet probes by the
// pod's address. Any other answers 421 Misdirected Request naming the
// host: the request reached a server that will not answer for that
// host, the status RFC 9110 gives to it
// (https://www.rfc-editor.org/rfc/rfc9110#section-15.5.20). A page on
// another domain whose name an attacker rebinds to a replica's address
// (DNS rebinding) reaches it with its own name in Host, so it reads
// nothing, whatever the pages' tokens.
func (s *Server) checkHost(next http.Handler) http.Handler {
	if s.hosts.empty() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || s.hosts.allows(r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		writeError(w, http.StatusMisdirectedRequest, fmt.Sprintf("host %q is not served here: it is not in the allowed hosts (--allowed-hosts)", clip(r.Host)))
	})
}
