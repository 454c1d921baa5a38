package harness

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer answers every line with itself until the test ends.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends one line through addr's connection and reports whether
// it came back.
func roundTrip(c net.Conn) bool {
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "ping\n"
}

// TestForwarderPartition: the forwarder passes traffic through; cut closes
// the open connections and every new one (a partition of that replica),
// and heal lets new connections through again.
func TestForwarderPartition(t *testing.T) {
	f, err := newForwarder(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", f.addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	open := dial()
	if !roundTrip(open) {
		t.Fatalf("got no echo through the forwarder, want one: it forwards to its target")
	}
	f.cut()
	if roundTrip(open) {
		t.Errorf("got an echo on a connection opened before the cut, want none: cut closes open connections")
	}
	if roundTrip(dial()) {
		t.Errorf("got an echo on a connection opened during the cut, want none: a cut refuses new connections")
	}
	f.heal()
	if !roundTrip(dial()) {
		t.Errorf("got no echo after heal, want one: heal ends the partition")
	}
}
