package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// addrNet is a listener of in-memory connections (net.Pipe, so it works in
// a synctest bubble) whose server side reports the remote address the
// client dialled as: the server tells clients apart by it.
type addrNet struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newAddrNet() *addrNet { return &addrNet{conns: make(chan net.Conn), done: make(chan struct{})} }

func (a *addrNet) Accept() (net.Conn, error) {
	select {
	case c := <-a.conns:
		return c, nil
	case <-a.done:
		return nil, net.ErrClosed
	}
}

func (a *addrNet) Close() error { a.once.Do(func() { close(a.done) }); return nil }

func (a *addrNet) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080} }

// dial connects as remote ("203.0.113.7:40000").
func (a *addrNet) dial(t *testing.T, remote string) net.Conn {
	t.Helper()
	ap, err := net.ResolveTCPAddr("tcp", remote)
	if err != nil {
		t.Fatal(err)
	}
	client, srv := net.Pipe()
	select {
	case a.conns <- remoteConn{srv, ap}:
	case <-a.done:
		t.Fatal("listener closed")
	}
	return client
}

type remoteConn struct {
	net.Conn
	remote net.Addr
}

func (c remoteConn) RemoteAddr() net.Addr { return c.remote }

// TestLargeWebhookReadsCannotBeSquatted pins that a client without the
// secret cannot block large deliveries: one remote address opens 20
// connections announcing 20 MB bodies under a well-formed signature and
// trickles them a byte a second; meanwhile GitHub's address sends 10
// genuine, correctly signed 2 MiB deliveries, one after another. All 10
// are processed (200), the slow client holds at most one slot, and its
// body is cut off (408) once it falls behind the minimum rate.
func TestLargeWebhookReadsCannotBeSquatted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim := forgesim.New()
		if err := sim.SeedPull("acme", "app", 12, headSHA, "open"); err != nil {
			t.Fatal(err)
		}
		tr, stopSim := forgetest.ServeSimOnPipe(sim)
		fc := newForge(t, "http://forge.test/", tr, "tok", nil, nil)
		runs := gaterun.NewMemoryStore()
		if _, err := runs.Put(t.Context(), gateRun(12, headSHA, gaterun.VerdictSuccess), time.Now()); err != nil {
			t.Fatal(err)
		}
		srv, err := server.New(server.Config{Runs: runs, Leases: lease.NewMemoryStore(), Forge: fc,
			APIToken: apiToken, WebhookSecret: webhookSecret, Owner: "replica-a"})
		if err != nil {
			t.Fatal(err)
		}
		an := newAddrNet()
		hs := srv.HTTPServer()
		served := make(chan error, 1)
		go func() { served <- hs.Serve(an) }()
		defer func() {
			_ = hs.Close()
			<-served
			time.Sleep(time.Second)
			synctest.Wait()
			fc.Close()
			stopSim()
		}()

		const slow = 20
		statuses := make(chan string, slow)
		var attackers []net.Conn
		for i := range slow {
			conn := an.dial(t, fmt.Sprintf("203.0.113.7:%d", 40000+i))
			attackers = append(attackers, conn)
			go func() {
				line, _ := bufio.NewReader(conn).ReadString('\n')
				statuses <- strings.TrimSpace(line)
			}()
			go func() {
				head := fmt.Sprintf("POST /webhooks/github HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: pull_request\r\nX-GitHub-Delivery: squat-%d\r\n"+
					"X-Hub-Signature-256: sha256=%s\r\nContent-Length: 20000000\r\n\r\n", i, strings.Repeat("0", 64))
				if _, err := io.WriteString(conn, head); err != nil {
					return
				}
				for {
					if _, err := conn.Write([]byte{' '}); err != nil {
						return // cut off
					}
					time.Sleep(time.Second)
				}
			}()
		}
		synctest.Wait()

		ok := 0
		for i := range 10 {
			body := pullClosed + strings.Repeat(" ", 2<<20+i) // ten deliveries, ten bodies: one body is processed once
			conn := an.dial(t, fmt.Sprintf("140.82.115.%d:443", 1+i%3))
			got := make(chan string, 1)
			go func() {
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					got <- err.Error()
					return
				}
				b, _ := io.ReadAll(resp.Body)
				got <- fmt.Sprintf("%d %s", resp.StatusCode, b)
			}()
			go func() {
				_, _ = fmt.Fprintf(conn, "POST /webhooks/github HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: pull_request\r\nX-GitHub-Delivery: genuine-%d\r\n"+
					"X-Hub-Signature-256: %s\r\nContent-Length: %d\r\n\r\n%s", i, sign(webhookSecret, body), len(body), body)
			}()
			answer := <-got
			conn.Close()
			if strings.HasPrefix(answer, "200 ") && strings.Contains(answer, `"offered":1`) {
				ok++
			} else {
				t.Errorf("genuine delivery %d: got %s, want 200 offered 1 while a slow client holds connections", i, answer)
			}
			time.Sleep(500 * time.Millisecond) // GitHub's next delivery comes a moment later
		}
		t.Logf("genuine 2 MiB deliveries processed while %d slow connections were open: %d of 10", slow, ok)

		time.Sleep(10 * time.Second)
		synctest.Wait()
		cut, busy := 0, 0
		for range slow {
			select {
			case line := <-statuses:
				switch {
				case strings.Contains(line, " 408 "):
					cut++
				case strings.Contains(line, " 503 "):
					busy++
				}
			default:
			}
		}
		if cut != 1 || busy != slow-1 {
			t.Errorf("slow connections: got %d cut off (408) and %d refused (503), want 1 and %d: one address reads one large body at a time, and a trickle is cut off", cut, busy, slow-1)
		}
		for _, c := range attackers {
			c.Close()
		}
	})
}
