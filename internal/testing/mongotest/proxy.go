package mongotest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"sync"
	"time"

	"iterion.dev/iterion/internal/clock"
)

// ErrBackendDown is returned by RestartBackend once the server is closed,
// and by Hold.Err for a held command the closing server never forwarded.
// Requests that meet a stopped backend get their connection closed.
var ErrBackendDown = errors.New("mongotest: backend down")

// Proxy is the MongoDB-wire proxy in front of the test server's FerretDB. It
// forwards one request/response exchange at a time per collection: a
// request is read whole, forwarded, and its whole answer read back before any
// other request on the same collection (database and name) reaches the
// backend. FerretDB v1 evaluates an update's filter and applies its write in
// two steps, so concurrent conditional upserts would elect several winners;
// serialised, they elect one, as MongoDB's per-document atomicity does.
// Exchanges on different collections run side by side, so a slow query of one
// collection does not hold up the lease's calls on another. A command that
// names no single collection (dropDatabase, listCollections, a
// database-level aggregate, bulkWrite) waits for every exchange and runs
// alone (exchanges arriving while it waits queue behind it); the connection handshake and monitoring commands (hello, ping,
// saslStart, endSessions and the like) touch no collection and wait for none.
// SetQueue(QueueGlobal) restores one exchange at a time across all
// connections, for measuring the difference.
//
// It lives as long as its Server. Each client connection gets its own backend
// connection. The fault controls
// (SetDelay, Hold, DropAnswer, Cut, Refuse, RestartBackend) act on the
// requests that arrive after they are set. All methods are safe for
// concurrent use.
type Proxy struct {
	ln      net.Listener
	logger  *slog.Logger
	backend *ferret

	// all and the per-collection locks in colls are held from forwarding a
	// request until its whole answer has been read back: the serialisation
	// the type doc describes. A collection's exchange holds all for reading
	// and its own lock; a command of no single collection, or any command
	// under QueueGlobal, holds all for writing. Never held while a command
	// waits for a delay or a Hold, or while an answer is written to a
	// client; held while a HoldExchange keeps its command.
	all sync.RWMutex

	// restart serialises RestartBackend calls.
	restart sync.Mutex

	mu      sync.Mutex // guards the fields below
	addr    string     // backend address; "" while the backend is down
	queue   Queue
	colls   map[string]*sync.Mutex // by "database.collection"
	delay   time.Duration
	holds   []*Hold
	drops   []*Drop
	refuse  bool
	closed  bool
	conns   map[*clientConn]struct{}
	counts  map[string]int
	closing chan struct{} // closed by close
	wg      sync.WaitGroup
}

// clientConn is one accepted client connection and the backend connection
// serving it.
type clientConn struct {
	c   net.Conn
	ctx context.Context // done once the connection or the proxy closed
	// cancel ends ctx; called by close.
	cancel context.CancelFunc

	mu      sync.Mutex // guards the fields below
	closed  bool
	backend net.Conn
}

// close closes the client connection and its backend connection; idempotent.
func (cc *clientConn) close() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.closed {
		return
	}
	cc.closed = true
	cc.cancel()
	_ = cc.c.Close()
	if cc.backend != nil {
		_ = cc.backend.Close()
	}
}

// backendConn returns the connection's backend connection, dialling it on
// first use. Once the client connection is closed (a held command released
// after a Cut), it dials a detached connection that the caller must close.
func (cc *clientConn) backendConn(addr string) (conn net.Conn, detached bool, err error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.backend != nil && !cc.closed {
		return cc.backend, false, nil
	}
	if addr == "" {
		return nil, false, ErrBackendDown
	}
	conn, err = net.Dial("tcp", addr)
	if err != nil {
		return nil, false, fmt.Errorf("mongotest: dial backend: %w", err)
	}
	if cc.closed {
		return conn, true, nil
	}
	cc.backend = conn
	return conn, false, nil
}

// Hold is a hold armed by Proxy.Hold and, once a command arrives, that held
// command. Its methods are safe for concurrent use.
type Hold struct {
	match    func(Command) bool
	exchange bool // held inside its queue (HoldExchange), not before it
	arrived  chan struct{}
	release  chan struct{}
	done     chan struct{}
	once     sync.Once
	mu       sync.Mutex
	cmd      Command
	answered error
}

// Arrived is closed once a matching command has arrived and is being held.
// A Hold's command is held before its queue and has met no drop yet (it
// meets them on Release). A HoldExchange's command has, by then, met the
// armed drops and taken its place in its queue: a drop armed from then on
// does not catch it, and an exchange of its queue arriving from then on
// waits behind it. A HoldExchange's command that waits behind another
// exchange of its queue arrives once that exchange is over.
func (h *Hold) Arrived() <-chan struct{} { return h.arrived }

// Command returns the held command; valid once Arrived is closed.
func (h *Hold) Command() Command {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cmd
}

// Release forwards the held command to the backend; its answer goes to the
// client if the client connection is still open (a Cut in between does not
// stop the command: it is delivered late, as a stalled request would be).
// Released before it caught a command, the hold is disarmed and catches
// none; a HoldExchange's command caught before its Arrived closed goes on
// once it holds its place in its queue. Idempotent.
func (h *Hold) Release() { h.once.Do(func() { close(h.release) }) }

// Done is closed once the released command has been answered by the backend
// (its write, if any, has landed) or could not be delivered; Err tells which.
// It is never closed for a hold released before it caught a command.
func (h *Hold) Done() <-chan struct{} { return h.done }

// Err returns nil when the released command was answered by the backend, or
// why it was not delivered; valid once Done is closed.
func (h *Hold) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.answered
}

// Drop is a drop armed by Proxy.DropAnswer and, once it happened, the
// command whose answer was dropped. Its methods are safe for concurrent use.
type Drop struct {
	match func(Command) bool
	done  chan struct{}
	mu    sync.Mutex
	cmd   Command
}

// Done is closed once a matching command has been answered by the backend,
// its answer discarded and its client connection closed.
func (d *Drop) Done() <-chan struct{} { return d.done }

// Command returns the command whose answer was dropped; valid once Done is
// closed.
func (d *Drop) Command() Command {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cmd
}

// newProxy listens on listen and forwards to backend.
func newProxy(listen string, backend *ferret, logger *slog.Logger) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("mongotest: proxy listen %q: %w", listen, err)
	}
	p := &Proxy{
		ln:      ln,
		logger:  logger,
		backend: backend,
		addr:    backend.addr,
		colls:   map[string]*sync.Mutex{},
		conns:   map[*clientConn]struct{}{},
		counts:  map[string]int{},
		closing: make(chan struct{}),
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Queue is how the proxy serialises exchanges (see Proxy).
type Queue int

const (
	// QueuePerCollection, the default, serialises the exchanges of each
	// collection, and runs a command of no single collection alone.
	QueuePerCollection Queue = iota
	// QueueGlobal forwards one exchange at a time across all connections,
	// handshakes included: the proxy's first design, kept to measure what
	// per-collection queues change.
	QueueGlobal
)

// SetQueue sets how exchanges arriving from now on are serialised. Safe at
// any time: an exchange keeps the locks it took, and either queue excludes a
// same-collection exchange of the other.
func (p *Proxy) SetQueue(q Queue) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue = q
}

// SetDelay adds d of latency before each request is forwarded, from the next
// request on; 0 removes it. The wait happens outside the exchange queues, so
// delayed requests on different connections wait side by side. It comes
// before the holds and drops: a request whose connection is closed during
// its wait (Cut, Refuse, RestartBackend, the server closing, or its client)
// is lost with it, never forwarded, and meets no hold or drop, so its write
// never lands; a command a Hold caught is, unlike it, still delivered on
// Release after a Cut.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Hold arms a hold: the next command for which match returns true is not
// forwarded until the returned Hold is released; other connections keep
// being served meanwhile. Each armed hold catches one command; holds armed
// earlier are matched first. match runs with the proxy's lock held and must
// not call the Proxy. When the server closes, a command still held is never
// forwarded.
func (p *Proxy) Hold(match func(Command) bool) *Hold { return p.arm(match, false) }

// HoldExchange arms a hold like Hold, but the matching command is held
// inside its exchange: it has taken its place in its collection's queue
// (every queue, for a command of no single collection or under QueueGlobal)
// and keeps it until released, as a slow query would. Exchanges of other
// collections go on meanwhile; those of its own wait behind it. Unlike a
// Hold's, its command is matched against drops before it is held: its
// Arrived closes only once it has met the drops and holds its place in its
// queue.
func (p *Proxy) HoldExchange(match func(Command) bool) *Hold { return p.arm(match, true) }

// arm arms a hold, held before (Hold) or inside (HoldExchange) its queue.
func (p *Proxy) arm(match func(Command) bool, exchange bool) *Hold {
	h := &Hold{
		match:    match,
		exchange: exchange,
		arrived:  make(chan struct{}),
		release:  make(chan struct{}),
		done:     make(chan struct{}),
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holds = append(p.holds, h)
	return h
}

// DropAnswer arms a drop: the next command for which match returns true is
// forwarded and answered by the backend (its write lands), then its answer is
// discarded and its client connection closed, so the client sees a network
// error for a command that took effect. A matching command that cannot reach
// the backend leaves the drop armed. match runs with the proxy's lock held
// and must not call the Proxy. A command caught by a Hold is matched against
// drops when released; one caught by a HoldExchange, before its Arrived
// closes.
func (p *Proxy) DropAnswer(match func(Command) bool) *Drop {
	d := &Drop{match: match, done: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drops = append(p.drops, d)
	return d
}

// Cut closes every client connection open now (a partition that heals at
// once: new connections are served). A command waiting in a Hold stays held
// and is still delivered on Release.
func (p *Proxy) Cut() {
	p.mu.Lock()
	conns := make([]*clientConn, 0, len(p.conns))
	for cc := range p.conns {
		conns = append(conns, cc)
	}
	p.mu.Unlock()
	for _, cc := range conns {
		cc.close()
	}
}

// Refuse, while on, closes every new client connection as soon as it is
// accepted, and on turning on cuts the open ones (a partition that lasts).
// Refuse(false) lifts it.
func (p *Proxy) Refuse(on bool) {
	p.mu.Lock()
	p.refuse = on
	p.mu.Unlock()
	if on {
		p.Cut()
	}
}

// Commands returns how many commands of each name (Command.Name) have been
// forwarded to the backend so far, handshakes and monitoring included.
func (p *Proxy) Commands() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.counts)
}

// RestartBackend stops FerretDB and starts it again on the same data
// directory, so data persists. Every client connection open now is cut;
// requests arriving while FerretDB is down get their connection closed. ctx
// bounds the wait for the old FerretDB to stop. It returns once FerretDB
// accepts connections again, or with the error that kept it down.
func (p *Proxy) RestartBackend(ctx context.Context) error {
	p.restart.Lock()
	defer p.restart.Unlock()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrBackendDown
	}
	p.addr = ""
	p.mu.Unlock()
	p.Cut()
	if err := p.backend.restart(ctx); err != nil {
		return err
	}
	p.mu.Lock()
	p.addr = p.backend.addr
	p.mu.Unlock()
	p.logger.Info("mongotest: backend restarted", "backend", p.backend.addr)
	return nil
}

// close stops accepting, closes every connection and waits for the proxy's
// goroutines. Commands still held are dropped.
func (p *Proxy) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.addr = ""
	close(p.closing)
	p.mu.Unlock()
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		ctx, cancel := context.WithCancel(context.Background())
		cc := &clientConn{c: c, ctx: ctx, cancel: cancel}
		p.mu.Lock()
		if p.closed || p.refuse {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[cc] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(cc)
	}
}

// serve relays cc's requests until either side closes.
func (p *Proxy) serve(cc *clientConn) {
	defer p.wg.Done()
	defer func() {
		cc.close()
		p.mu.Lock()
		delete(p.conns, cc)
		p.mu.Unlock()
	}()
	r := bufio.NewReader(cc.c)
	for {
		msg, err := readMessage(r)
		if err != nil {
			return
		}
		cmd := parseCommand(msg)
		if !p.wait(cc) {
			return
		}
		h := p.takeHold(cmd)
		if h != nil && !h.exchange {
			select {
			case <-h.release:
			case <-p.closing:
				h.finish(ErrBackendDown)
				return
			}
		}
		d := p.takeDrop(cmd)
		answer, err := p.forward(cc, msg, cmd, h)
		if h != nil {
			h.finish(err)
		}
		if err != nil {
			if d != nil {
				p.rearm(d)
			}
			return
		}
		if d != nil {
			cc.close()
			d.mu.Lock()
			d.cmd = cmd
			d.mu.Unlock()
			close(d.done)
			return
		}
		if !p.reply(cc, answer) {
			return
		}
	}
}

// wait sleeps the configured delay; false when the connection or the proxy
// closed meanwhile (closing the proxy cuts every connection).
func (p *Proxy) wait(cc *clientConn) bool {
	p.mu.Lock()
	d := p.delay
	p.mu.Unlock()
	return clock.Sleep(cc.ctx, d)
}

// takeHold returns (and disarms) the first armed hold matching cmd, or nil;
// a Hold is marked arrived here, a HoldExchange by forward once it holds its
// place. A released (disarmed) hold is discarded.
func (p *Proxy) takeHold(cmd Command) *Hold {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := 0; i < len(p.holds); i++ {
		h := p.holds[i]
		select {
		case <-h.release:
			p.holds = append(p.holds[:i], p.holds[i+1:]...)
			i--
			continue
		default:
		}
		if h.match(cmd) {
			p.holds = append(p.holds[:i], p.holds[i+1:]...)
			h.mu.Lock()
			h.cmd = cmd
			h.mu.Unlock()
			if !h.exchange {
				close(h.arrived)
			}
			return h
		}
	}
	return nil
}

// finish records the outcome of a released command and closes Done.
func (h *Hold) finish(err error) {
	h.mu.Lock()
	h.answered = err
	h.mu.Unlock()
	close(h.done)
}

// takeDrop returns (and disarms) the first armed drop matching cmd, or nil.
func (p *Proxy) takeDrop(cmd Command) *Drop {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, d := range p.drops {
		if d.match(cmd) {
			p.drops = append(p.drops[:i], p.drops[i+1:]...)
			return d
		}
	}
	return nil
}

// rearm puts back a drop whose command never reached the backend, first in
// line.
func (p *Proxy) rearm(d *Drop) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drops = append([]*Drop{d}, p.drops...)
}

// forward performs one exchange: it takes cmd's place in its queue (when h
// was armed by HoldExchange, marks h arrived and waits there for its
// release), sends msg to cc's backend connection and reads the answer back
// before leaving the queue. FerretDB v1
// answers every request, even one flagged moreToCome (an unacknowledged
// write, whose client expects no answer): that answer is read and discarded,
// so the write has landed before the next exchange of its queue, and nil is
// returned.
func (p *Proxy) forward(cc *clientConn, msg []byte, cmd Command, h *Hold) ([]byte, error) {
	unlock := p.enqueue(cmd)
	defer unlock()
	if h != nil && h.exchange {
		close(h.arrived)
		select {
		case <-h.release:
		case <-p.closing:
			return nil, ErrBackendDown
		}
	}
	p.mu.Lock()
	addr := p.addr
	p.mu.Unlock()
	be, detached, err := cc.backendConn(addr)
	if err != nil {
		return nil, err
	}
	if detached {
		defer be.Close()
	}
	if _, err := be.Write(msg); err != nil {
		return nil, fmt.Errorf("mongotest: write to backend: %w", err)
	}
	p.mu.Lock()
	p.counts[cmd.Name]++
	p.mu.Unlock()
	answer, err := readMessage(be)
	if err != nil {
		return nil, fmt.Errorf("mongotest: read from backend: %w", err)
	}
	if moreToCome(msg) {
		return nil, nil
	}
	return answer, nil
}

// enqueue waits for cmd's turn in its queue (see Proxy) and returns what
// ends it.
func (p *Proxy) enqueue(cmd Command) (unlock func()) {
	p.mu.Lock()
	global := p.queue == QueueGlobal
	var coll *sync.Mutex
	key, scoped := cmd.queueKey()
	if !global && scoped && key != "" {
		if coll = p.colls[key]; coll == nil {
			coll = new(sync.Mutex)
			p.colls[key] = coll
		}
	}
	p.mu.Unlock()
	switch {
	case global || (scoped && coll == nil):
		// QueueGlobal, or a command of no single collection: alone.
		p.all.Lock()
		return p.all.Unlock
	case coll == nil:
		// A handshake or monitoring command: no queue.
		return func() {}
	}
	p.all.RLock()
	coll.Lock()
	return func() {
		coll.Unlock()
		p.all.RUnlock()
	}
}

// reply writes answer to the client; false when the client is gone.
func (p *Proxy) reply(cc *clientConn, answer []byte) bool {
	if len(answer) == 0 {
		return true
	}
	_, err := cc.c.Write(answer)
	return err == nil
}
