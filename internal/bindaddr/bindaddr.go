// Package bindaddr reads the address of a TCP listener as net.Listen
// reads it, without asking DNS, so that a command can refuse a bad
// --listen among its other settings rather than when it binds.
package bindaddr

import (
	"errors"
	"fmt"
	"net"
)

// Addr is a listen address: its host as written ("" for every address of
// the machine) and its port as a number, 0 for any free port.
type Addr struct {
	Host string
	Port int
}

// Parse reads addr as net.Listen("tcp", addr) would, without asking DNS:
// HOST:PORT or :PORT, the port a number from 0 (any free port) to 65535
// or a service name, which net.LookupPort, the lookup net.Listen makes,
// finds in /etc/services or Go's own table
// (https://pkg.go.dev/net#LookupPort), so that :http is port 80. A
// missing port is refused, though net.Listen would take it as 0: ":" or
// "host:" is a port forgotten, not a wish for any free one. The error
// says what is wrong, not which flag: the caller names it.
func Parse(addr string) (Addr, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return Addr{}, fmt.Errorf("want HOST:PORT or :PORT: %w", err)
	}
	if port == "" {
		return Addr{}, errors.New("want HOST:PORT or :PORT: no port (0 for any free one)")
	}
	n, err := net.LookupPort("tcp", port)
	if err != nil {
		return Addr{}, fmt.Errorf("want a port from 0 to 65535 or a service name: %w", err)
	}
	return Addr{Host: host, Port: n}, nil
}
