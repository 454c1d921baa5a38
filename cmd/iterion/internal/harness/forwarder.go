package harness

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// forwarder is a TCP forwarder between one replica and the Mongo server. The
// harness gives every replica its own, so cutting one partitions exactly that
// replica from Mongo while the others keep their connections: cut closes every
// open connection and refuses new ones until heal. It is safe for concurrent
// use.
type forwarder struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cutOn bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// newForwarder listens on a free loopback port and forwards every
// connection to target.
func newForwarder(target string) (*forwarder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("%w: forwarder: %w", ErrProcess, err)
	}
	f := &forwarder{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

// addr is the address replicas dial instead of the Mongo server's.
func (f *forwarder) addr() string { return f.ln.Addr().String() }

func (f *forwarder) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		if !f.track(c) {
			c.Close()
			continue
		}
		f.wg.Add(1)
		go f.pipe(c)
	}
}

// track registers c unless the forwarder is cut.
func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cutOn {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) pipe(c net.Conn) {
	defer f.wg.Done()
	u, err := net.Dial("tcp", f.target)
	if err != nil || !f.track(u) {
		if u != nil {
			u.Close()
		}
		f.drop(c)
		return
	}
	done := make(chan struct{}, 2)
	go func() { io.Copy(u, c); done <- struct{}{} }()
	go func() { io.Copy(c, u); done <- struct{}{} }()
	<-done
	f.drop(c)
	f.drop(u)
	<-done
}

func (f *forwarder) drop(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	c.Close()
}

// cut partitions the replica: every open connection is closed, and new ones
// are closed as soon as they are accepted, until heal.
func (f *forwarder) cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cutOn = true
	for c := range f.conns {
		c.Close()
		delete(f.conns, c)
	}
}

// heal ends a partition.
func (f *forwarder) heal() {
	f.mu.Lock()
	f.cutOn = false
	f.mu.Unlock()
}

// close stops the forwarder and waits for its goroutines.
func (f *forwarder) close() {
	f.ln.Close()
	f.cut()
	f.wg.Wait()
}
