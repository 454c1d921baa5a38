package mongotest

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// rawTimeout bounds a raw exchange, so that a proxy that neither answers
// nor closes fails the test instead of hanging it.
const rawTimeout = 20 * time.Second

// exchange sends msg on a new connection to addr and reads one message
// back: the answer, or the error that ended the connection.
func exchange(t *testing.T, addr string, msg []byte) ([]byte, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(rawTimeout))
	if _, err := c.Write(msg); err != nil {
		return nil, err
	}
	return readMessage(c)
}

// dial opens a raw connection to srv's proxy, closed when the test ends,
// whose reads and writes fail after rawTimeout.
func dial(t *testing.T, srv *Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", srv.Proxy().Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(rawTimeout))
	return c
}

func hello(t *testing.T) []byte {
	return buildMsg(t, 0, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}}, "")
}

// TestRefuseClosesNewConnectionsUntilLifted pins Refuse on a connection
// opened while it is on: the proxy closes it unanswered (a partition, not
// a slow server), and once lifted a new connection is answered.
func TestRefuseClosesNewConnectionsUntilLifted(t *testing.T) {
	srv := NewServer(t)
	addr := srv.Proxy().Addr()
	srv.Proxy().Refuse(true)
	if got, err := exchange(t, addr, hello(t)); err == nil || errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		t.Fatalf("got %d bytes, %v while refusing, want the connection closed unanswered: Refuse closes every new connection", len(got), err)
	}
	srv.Proxy().Refuse(false)
	if got, err := exchange(t, addr, hello(t)); err != nil || len(got) <= headerLen {
		t.Fatalf("got %d bytes, %v after Refuse(false), want an answer: lifting Refuse serves new connections", len(got), err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestDropStaysArmedWhenItsCommandNeverReachedTheBackend pins DropAnswer's
// rule for a command whose exchange failed (here a message FerretDB
// answers by closing the connection): nothing took effect, so no answer
// was lost, and the drop stays armed for the next matching command, whose
// answer it drops once that command has landed.
func TestDropStaysArmedWhenItsCommandNeverReachedTheBackend(t *testing.T) {
	srv := NewServer(t)
	coll := srv.DB(t).Collection("dropped")
	// An empty Name is the unknown opCode below; no driver command has one.
	d := srv.Proxy().DropAnswer(func(c Command) bool {
		return c.Name == "" || c.Name == "insert" && c.Collection == "dropped"
	})
	if got, err := exchange(t, srv.Proxy().Addr(), frame(1, []byte{1, 2, 3, 4})); err == nil || isTimeout(err) {
		t.Fatalf("got %d bytes, %v for an unknown opCode, want the connection closed by the backend", len(got), err)
	}
	select {
	case <-d.Done():
		t.Fatalf("Drop.Done closed for an exchange that failed, want it armed: only an answered command's answer is dropped")
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), rawTimeout)
	defer cancel()
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "x"}}); !mongo.IsNetworkError(err) {
		t.Fatalf("got %v for the next matching insert, want a network error: the drop stayed armed", err)
	}
	<-d.Done()
	if n, err := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: "x"}}); err != nil || n != 1 {
		t.Fatalf("got %d documents, %v, want 1: the insert whose answer was dropped landed", n, err)
	}
}

// TestDelayWaitsEachRequestSideBySide pins SetDelay in virtual time: each
// request waits exactly the delay, requests on two connections wait side
// by side (both are through after one delay, not two), 0 removes it, and
// a connection closed mid-wait ends its wait at once.
func TestDelayWaitsEachRequestSideBySide(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d = 3 * time.Second
		p := &Proxy{}
		p.SetDelay(d)
		conn := func() (*clientConn, context.CancelFunc) {
			ctx, cancel := context.WithCancel(t.Context())
			return &clientConn{ctx: ctx, cancel: cancel}, cancel
		}
		a, cancelA := conn()
		defer cancelA()
		b, cancelB := conn()
		defer cancelB()
		start := time.Now()
		through := make(chan time.Duration, 2)
		for _, cc := range []*clientConn{a, b} {
			go func() {
				if p.wait(cc) {
					through <- time.Since(start)
				}
			}()
		}
		for range 2 {
			if got := <-through; got != d {
				t.Errorf("got a request through after %v, want %v: each waits the delay, side by side", got, d)
			}
		}

		c, cancelC := conn()
		time.AfterFunc(time.Second, cancelC)
		start = time.Now()
		if p.wait(c) || time.Since(start) != time.Second {
			t.Errorf("got a wait of %v on a connection closed after 1s, want false at 1s: a closed connection ends its wait", time.Since(start))
		}

		p.SetDelay(0)
		start = time.Now()
		if !p.wait(a) || time.Since(start) != 0 {
			t.Errorf("got a wait of %v after SetDelay(0), want none: 0 removes the delay", time.Since(start))
		}
	})
}

// TestDelayedRequestCutDuringItsWaitIsNeverForwarded pins SetDelay's rule
// for a request whose connection is cut during its wait, in virtual time:
// it is lost with its connection, not forwarded late: the serving of its
// connection ends at the cut, and an armed Hold, which would catch it
// once the delay passed, never does.
func TestDelayedRequestCutDuringItsWaitIsNeverForwarded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d = time.Hour
		p := &Proxy{colls: map[string]*sync.Mutex{}, conns: map[*clientConn]struct{}{}, counts: map[string]int{}, closing: make(chan struct{})}
		p.SetDelay(d)
		h := p.Hold(func(Command) bool { return true })
		client, server := net.Pipe()
		defer client.Close()
		ctx, cancel := context.WithCancel(t.Context())
		cc := &clientConn{c: server, ctx: ctx, cancel: cancel}
		p.conns[cc] = struct{}{}
		p.wg.Add(1)
		served := make(chan struct{})
		go func() {
			defer close(served)
			p.serve(cc)
		}()
		if _, err := client.Write(hello(t)); err != nil { // returns once the proxy read it whole
			t.Fatal(err)
		}
		time.Sleep(d / 2)
		p.Cut()
		synctest.Wait()
		select {
		case <-h.Arrived():
			t.Errorf("a Hold caught the request cut during its delay, want it never forwarded: it is lost with its connection")
		default:
		}
		select {
		case <-served:
		default:
			t.Errorf("the connection is still served after the cut, want its serving ended: a request cut during its delay is not forwarded late")
		}
		h.Release() // a request it caught ends on the backend being down
		<-served
	})
}

// withRequestID sets a framed message's requestID.
func withRequestID(msg []byte, id int32) []byte {
	binary.LittleEndian.PutUint32(msg[4:8], uint32(id))
	return msg
}

// TestUnacknowledgedWriteGetsNoAnswerAndKeepsItsConnection pins
// moreToCome on the wire: an OP_MSG so flagged gets no answer (FerretDB's
// is read and discarded), its connection stays open, and the next request
// on it gets its own answer, after the write landed.
func TestUnacknowledgedWriteGetsNoAnswerAndKeepsItsConnection(t *testing.T) {
	srv := NewServer(t)
	c := dial(t, srv)
	insert := withRequestID(buildMsg(t, flagMoreToCome, bson.D{{Key: "insert", Value: "docs"}, {Key: "$db", Value: "w0"},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 0}}}}, "documents", bson.D{{Key: "_id", Value: "x"}}), 1)
	count := withRequestID(buildMsg(t, 0, bson.D{{Key: "count", Value: "docs"}, {Key: "$db", Value: "w0"}}, ""), 2)
	if _, err := c.Write(append(insert, count...)); err != nil {
		t.Fatal(err)
	}
	answer, err := readMessage(c)
	if err != nil {
		t.Fatalf("got %v, want the count's answer: an unacknowledged write keeps its connection", err)
	}
	if to := int32(binary.LittleEndian.Uint32(answer[8:12])); to != 2 {
		t.Fatalf("got an answer to request %d, want one to 2 (the count): an unacknowledged write gets no answer", to)
	}
	var body struct {
		N int `bson:"n"`
	}
	if err := bson.Unmarshal(answer[headerLen+5:], &body); err != nil || body.N != 1 {
		t.Fatalf("got count %d, %v; want 1: the unacknowledged write landed before the next exchange", body.N, err)
	}
}

// TestRestartBackendCutsOpenConnections pins that RestartBackend closes
// every client connection open when it is called, not only when one next
// sends a request.
func TestRestartBackendCutsOpenConnections(t *testing.T) {
	srv := NewServer(t)
	c := dial(t, srv)
	if _, err := c.Write(hello(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := readMessage(c); err != nil {
		t.Fatalf("hello before the restart: %v", err)
	}
	if err := srv.Proxy().RestartBackend(t.Context()); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if got, err := readMessage(c); err == nil || isTimeout(err) {
		t.Fatalf("got %d bytes, %v on a connection open across the restart, want it closed", len(got), err)
	}
}

// TestHoldExchangeHoldsTheCommandNotItsAnswer pins that HoldExchange keeps
// its command from the backend, as Hold does, only inside its queue: read
// straight from FerretDB, past the proxy's queues, the held update has not
// landed until it is released.
func TestHoldExchangeHoldsTheCommandNotItsAnswer(t *testing.T) {
	srv := NewServer(t)
	db := srv.DB(t)
	direct := connect(t, "mongodb://"+srv.Proxy().backend.addr+"/?serverMonitoringMode=poll").Database(db.Name()).Collection("held")
	ctx, cancel := context.WithTimeout(context.Background(), rawTimeout)
	defer cancel()
	h := srv.Proxy().HoldExchange(func(c Command) bool { return c.Name == "insert" && c.Collection == "held" })
	done := make(chan error, 1)
	go func() {
		_, err := db.Collection("held").InsertOne(ctx, bson.D{{Key: "_id", Value: "x"}})
		done <- err
	}()
	<-h.Arrived()
	// Arrived closes before the command would be forwarded: keep reading
	// for a while. (A slow machine can only make this miss a write that
	// lands while held, never fail a correct proxy.)
	for watch := time.Now(); time.Since(watch) < 300*time.Millisecond; {
		if n, err := direct.CountDocuments(ctx, bson.D{}); err != nil || n != 0 {
			t.Fatalf("got %d documents, %v in FerretDB while the insert is held, want 0: HoldExchange holds the command, not its answer", n, err)
		}
	}
	h.Release()
	if err := <-done; err != nil {
		t.Fatalf("released insert: %v", err)
	}
	if n, err := direct.CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("got %d documents, %v in FerretDB after the release, want 1", n, err)
	}
}
