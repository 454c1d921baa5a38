package server_test

// Serving safely on an open network: one test per defect found
// by hand, each named for the rule it pins.

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/board"
	"iterion.dev/iterion/pkg/delivery"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/lease/mongolease"
	"iterion.dev/iterion/pkg/server"
)

// pipeServer is a Server's HTTPServer on a pipeNet, inside a synctest
// bubble, in front of a forge simulator with pull acme/app#12 open at
// headSHA; stop ends it so the bubble can finish.
type pipeServer struct {
	srv  *server.Server
	sim  *forgesim.Sim
	pn   *forgetest.PipeNet
	stop func()
}

// newPipeServer must be called inside a synctest bubble.
func newPipeServer(t *testing.T, opts ...func(*server.Config)) *pipeServer {
	t.Helper()
	p, fc, stopSim := newPipeServerOf(t, opts...)
	hs := p.srv.HTTPServer()
	served := make(chan error, 1)
	go func() { served <- hs.Serve(p.pn) }()
	p.stop = func() {
		_ = hs.Close()
		<-served
		time.Sleep(time.Second) // a closing connection lingers 500ms for its client
		synctest.Wait()
		fc.Close()
		stopSim()
	}
	return p
}

// runPipeServer is newPipeServer served by Server.Run, whose context stop
// cancels: stop returns Run's error once Run has returned.
func runPipeServer(t *testing.T, opts ...func(*server.Config)) (p *pipeServer, stop func() error) {
	t.Helper()
	p, _, stopSim := newPipeServerOf(t, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- p.srv.Run(ctx, p.pn) }() // Run closes the forge client
	return p, func() error {
		cancel()
		err := <-ran
		time.Sleep(time.Second) // a closing connection lingers 500ms for its client
		synctest.Wait()
		stopSim()
		return err
	}
}

// newPipeServerOf builds a pipeServer's Server, not yet serving, and
// returns its forge client and the end of its simulator.
func newPipeServerOf(t *testing.T, opts ...func(*server.Config)) (*pipeServer, *forge.Client, func()) {
	t.Helper()
	sim := forgesim.New()
	if err := sim.SeedPull("acme", "app", 12, headSHA, "open"); err != nil {
		t.Fatal(err)
	}
	tr, stopSim := serveSimOnPipe(sim)
	fc := newForge(t, "http://forge.test/", tr, "tok", nil, nil)
	cfg := server.Config{Runs: gaterun.NewMemoryStore(), Leases: lease.NewMemoryStore(), Forge: fc,
		APIToken: apiToken, WebhookSecret: webhookSecret, Owner: "replica-a"}
	for _, opt := range opts {
		opt(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	return &pipeServer{srv: srv, sim: sim, pn: newPipeNet()}, fc, stopSim
}

// post sends a request to path with header and body on a new connection
// and returns the answer's status and body.
func (p *pipeServer) post(t *testing.T, path string, header map[string]string, body string) (int, string) {
	t.Helper()
	code, _, b := p.postHeader(t, path, header, body)
	return code, b
}

// postHeader is post, also returning the answer's headers.
func (p *pipeServer) postHeader(t *testing.T, path string, header map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: p.pn.Dial, DisableKeepAlives: true}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequest("POST", "http://iterion.test"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, strings.TrimSpace(string(b))
}

// send writes a raw request head (and any body bytes) on a new connection
// and returns it with a channel that receives the answer's status line (""
// when the server closed the connection without one).
func (p *pipeServer) send(t *testing.T, head string) (io.ReadWriteCloser, <-chan string) {
	t.Helper()
	conn, err := p.pn.Dial(context.Background(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	status := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(conn).ReadString('\n')
		status <- strings.TrimSpace(line)
	}()
	go func() { _, _ = io.WriteString(conn, head) }()
	return conn, status
}

func TestSlowBodyIsCutOffAtTheReadTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeServer(t)
		defer p.stop()
		conn, status := p.send(t, "POST /api/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+apiToken+
			"\r\nContent-Length: 100\r\n\r\n{")
		defer conn.Close()
		time.Sleep(server.DefaultLimits.ReadTimeout + time.Second)
		synctest.Wait()
		select {
		case line := <-status:
			t.Logf("answer after the read timeout: %q", line)
		default:
			t.Errorf("connection trickling its body: got still open after %v, want answered or closed: Limits.ReadTimeout bounds a request's body",
				server.DefaultLimits.ReadTimeout+time.Second)
		}
	})
}

func TestSlowHeadersAreCutOffAtTheReadHeaderTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeServer(t)
		defer p.stop()
		conn, status := p.send(t, "POST /api/runs HTTP/1.1\r\nHost: x\r\n")
		defer conn.Close()
		time.Sleep(server.DefaultLimits.ReadHeaderTimeout + time.Second)
		synctest.Wait()
		select {
		case <-status:
		default:
			t.Errorf("connection trickling its headers: got still open after %v, want closed: Limits.ReadHeaderTimeout",
				server.DefaultLimits.ReadHeaderTimeout+time.Second)
		}
	})
}

func TestWebhookSignatureIsCheckedBeforeTheBodyIsRead(t *testing.T) {
	for _, c := range []struct{ name, header string }{
		{"no signature", ""},
		{"sha1 signature", "X-Hub-Signature-256: sha1=" + strings.Repeat("0", 40) + "\r\n"},
		{"malformed signature", "X-Hub-Signature-256: sha256=zz\r\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := newPipeServer(t)
				defer p.stop()
				// 24 MB announced, none sent: a server that reads first never answers.
				conn, status := p.send(t, "POST /webhooks/github HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: pull_request\r\n"+
					c.header+"Content-Length: 25165824\r\n\r\n")
				defer conn.Close()
				synctest.Wait()
				select {
				case line := <-status:
					if !strings.Contains(line, " 401 ") {
						t.Errorf("answer: got %q, want 401: a request without a well-formed sha256 signature is refused", line)
					}
				default:
					t.Errorf("answer: got none while the body is unsent, want 401: the signature header is checked before the body is read")
				}
			})
		})
	}
}

func TestWebhookRefusesAValidSHA1Signature(t *testing.T) {
	body := `{"action": "closed", "number": 12, "pull_request": {"number": 12}, "repository": {"full_name": "acme/app"}}`
	m := hmac.New(sha1.New, []byte(webhookSecret))
	m.Write([]byte(body))
	f := newHTTPFixture(t)
	f.putRun(t, gaterun.VerdictSuccess)
	for _, sig := range []string{"sha1=" + hex.EncodeToString(m.Sum(nil)), "SHA256=" + sign(webhookSecret, body)[len("sha256="):]} {
		if code, _ := f.postHook(t, "pull_request", sig, body); code != http.StatusUnauthorized {
			t.Errorf("X-Hub-Signature-256 %.12s...: got %d, want 401: only sha256= is accepted (no downgrade)", sig, code)
		}
	}
	if n := f.sim.Requests(forgesim.Filter{}); n != 0 {
		t.Errorf("forge requests: got %d, want 0: a refused event offers nothing", n)
	}
}

func TestWebhookBodyOverGitHubsCapIs413(t *testing.T) {
	f := newHTTPFixture(t)
	big := strings.Repeat(" ", server.MaxWebhookBodyBytes+1)
	code, _ := f.postHook(t, "pull_request", sign(webhookSecret, big), big)
	if code != http.StatusRequestEntityTooLarge {
		t.Errorf("signed body of 25 MB + 1: got %d, want 413: GitHub never sends more than 25 MB", code)
	}
}

func TestWebhookLargeSignedBodyIsProcessed(t *testing.T) {
	f := newHTTPFixture(t)
	f.putRun(t, gaterun.VerdictSuccess)
	// Padding past 1 MiB takes the spooled path.
	body := `{"action": "closed", "number": 12, "pull_request": {"number": 12}, "repository": {"full_name": "acme/app"}}` +
		strings.Repeat(" ", 2<<20)
	code, answer := f.postHook(t, "pull_request", sign(webhookSecret, body), body)
	if code != http.StatusOK || !strings.Contains(answer, `"offered":1`) {
		t.Errorf("signed 2 MB pull_request: got %d %s, want 200 offered 1: a large signed body is read in full", code, answer)
	}
	unsigned := body + " "
	if code, _ := f.postHook(t, "pull_request", sign(webhookSecret, body), unsigned); code != http.StatusUnauthorized {
		t.Errorf("2 MB body under another body's signature: got %d, want 401", code)
	}
}

// largeBodyHead is a pull_request delivery of 20 MB, under a signature
// it will not match, up to its first byte of body: a large body trickling.
var largeBodyHead = "POST /webhooks/github HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: pull_request\r\nX-GitHub-Delivery: guid-large\r\nX-Hub-Signature-256: sha256=" +
	strings.Repeat("0", 64) + "\r\nContent-Length: 20000000\r\n\r\n{"

// wantRefusedAtOnce sends one more large body to p and reports unless it
// is answered 503 at once: what names the body, rule the rule refusing it.
func (p *pipeServer) wantRefusedAtOnce(t *testing.T, what, rule string) {
	t.Helper()
	p.wantAnsweredAtOnce(t, largeBodyHead, " 503 ", what, rule)
}

// wantAnsweredAtOnce sends head (a request's head and its first bytes of
// body, if any) to p and reports unless its status line, answered before
// any more of the body is sent, holds status (" 503 ").
func (p *pipeServer) wantAnsweredAtOnce(t *testing.T, head, status, what, rule string) {
	t.Helper()
	conn, line := p.send(t, head)
	defer conn.Close()
	synctest.Wait()
	select {
	case got := <-line:
		if !strings.Contains(got, status) {
			t.Errorf("%s: got %q, want %s: %s", what, got, strings.TrimSpace(status), rule)
		}
	default:
		t.Errorf("%s: got no answer, want %s at once: %s", what, strings.TrimSpace(status), rule)
	}
}

// TestHeadersOverMaxHeaderBytesAre431 pins that HTTPServer bounds a
// request's header block by Limits.MaxHeaderBytes, not by net/http's
// default of 1 MB: a block of 16 KiB under a limit of 4 KiB is refused
// with 431 (net/http reads a few KiB past the limit before it refuses).
func TestHeadersOverMaxHeaderBytesAre431(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeServer(t, func(c *server.Config) { c.Limits.MaxHeaderBytes = 4 << 10 })
		defer p.stop()
		head := "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: " + strings.Repeat("x", 16<<10) + "\r\n\r\n"
		p.wantAnsweredAtOnce(t, head, " 431 ", "a 16 KiB header block", "Limits.MaxHeaderBytes bounds the header block")
	})
}

// TestWebhookBodyOfUnknownLengthTakesALargeReadSlot pins that a body sent
// without a Content-Length (chunked) is read as a large one: it may be up
// to GitHub's 25 MB cap, so it takes a large-read slot, and with every
// slot taken it is 503, never read into memory beside them.
func TestWebhookBodyOfUnknownLengthTakesALargeReadSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeServer(t, func(c *server.Config) { c.Limits.LargeWebhookReads = 1 })
		defer p.stop()
		conn, _ := p.send(t, largeBodyHead) // holds the one slot, trickling
		defer conn.Close()
		synctest.Wait()
		// Sent whole, so the server need not wait for more of it to answer.
		chunked := strings.Replace(largeBodyHead, "Content-Length: 20000000\r\n\r\n{", "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 1)
		p.wantAnsweredAtOnce(t, chunked, " 503 ", "chunked body while the one large-read slot is taken",
			"a body of unknown length takes a large-read slot (Limits.LargeWebhookReads)")
	})
}

// TestWebhookRefusedBeforeItsBodyEndsIsAnsweredAtOnce pins that a webhook
// refused before its body was read to its end is answered at once while
// its body is still arriving: net/http otherwise reads up to 256 KiB more
// of an unread body before it sends the answer, so a chunked body's 503
// and a trickling small body's 400 or 415 waited for the rest of it or
// for the read timeout, holding the connection.
func TestWebhookRefusedBeforeItsBodyEndsIsAnsweredAtOnce(t *testing.T) {
	// trickling is largeBodyHead with its body's framing, and any other
	// header, replaced: old, new pairs as strings.NewReplacer takes them.
	trickling := func(oldnew ...string) string { return strings.NewReplacer(oldnew...).Replace(largeBodyHead) }
	const cl = "Content-Length: 20000000\r\n\r\n{"
	const small = "Content-Length: 100\r\n\r\n{"
	for _, c := range []struct {
		name, head, status string
		slotTaken          bool
	}{
		{"chunked body while the one large-read slot is taken",
			trickling(cl, "Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n"), " 503 ", true},
		{"small body without X-GitHub-Delivery",
			trickling(cl, small, "X-GitHub-Delivery: guid-large\r\n", ""), " 400 ", false},
		{"small body of an unsupported Content-Type",
			trickling(cl, "Content-Type: text/plain\r\n"+small), " 415 ", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := newPipeServer(t, func(c *server.Config) { c.Limits.LargeWebhookReads = 1 })
				defer p.stop()
				if c.slotTaken {
					conn, _ := p.send(t, largeBodyHead) // holds the one slot, trickling
					defer conn.Close()
					synctest.Wait()
				}
				p.wantAnsweredAtOnce(t, c.head, c.status, c.name, "a refusal before the body's end does not wait for the rest of it")
			})
		})
	}
	t.Run("a delivery read to its end keeps its connection", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := newPipeServer(t)
			defer p.stop()
			tr := &http.Transport{DialContext: p.pn.Dial}
			defer tr.CloseIdleConnections()
			req, err := http.NewRequest("POST", "http://iterion.test/webhooks/github", strings.NewReader(pullClosed))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range deliveryHeaders("guid-kept") {
				req.Header.Set(k, v)
			}
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Close {
				t.Errorf("processed delivery: got %d, connection closed %v; want 200 on a connection kept open: only a refusal before the body's end closes it", resp.StatusCode, resp.Close)
			}
		})
	})
}

// TestWebhookContentLengthOverGitHubsCapIs413AtOnce pins that a
// Content-Length over GitHub's 25 MB payload cap is refused from the
// headers, 413 before any of the body is read: not spooled to disk under
// a large-read slot until the cap is reached.
func TestWebhookContentLengthOverGitHubsCapIs413AtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeServer(t)
		defer p.stop()
		over := strings.Replace(largeBodyHead, "Content-Length: 20000000", "Content-Length: "+strconv.Itoa(server.MaxWebhookBodyBytes+1), 1)
		p.wantAnsweredAtOnce(t, over, " 413 ", "Content-Length one byte over the cap, body not yet sent",
			"a body over MaxWebhookBodyBytes is refused from its Content-Length")
	})
}

func TestWebhookLargeReadsAreCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeServer(t, func(c *server.Config) { c.Limits.LargeWebhookReads = 2 })
		defer p.stop()
		for range 2 { // two large bodies, trickling
			conn, _ := p.send(t, largeBodyHead)
			defer conn.Close()
		}
		synctest.Wait()
		p.wantRefusedAtOnce(t, "third large body", "Limits.LargeWebhookReads caps large bodies in flight")
	})
}

// TestWebhookLargeReadsPerAddressLetsAProxyHoldMore pins
// Limits.LargeWebhookReadsPerAddress: behind a proxy every delivery comes
// from one address, and that address may read as many large bodies at once
// as the setting says, not one; one more from it is 503 at once, though a
// slot is free. (Every connection of a pipeNet has the same remote
// address.)
func TestWebhookLargeReadsPerAddressLetsAProxyHoldMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeServer(t, func(c *server.Config) { c.Limits.LargeWebhookReads, c.Limits.LargeWebhookReadsPerAddress = 3, 2 })
		defer p.stop()
		var reading []<-chan string
		for range 2 { // two large bodies from the proxy's address, trickling
			conn, status := p.send(t, largeBodyHead)
			defer conn.Close()
			reading = append(reading, status)
		}
		synctest.Wait()
		for i, status := range reading {
			select {
			case line := <-status:
				t.Errorf("large body %d of 2 from one address: got %q, want it still being read: Limits.LargeWebhookReadsPerAddress 2 lets an address hold 2 slots", i+1, line)
			default:
			}
		}
		p.wantRefusedAtOnce(t, "third large body from the address", "an address holds at most Limits.LargeWebhookReadsPerAddress slots")
	})
}

func TestRunBodyOverTheLimitIs413(t *testing.T) {
	f := newHTTPFixture(t, func(c *server.Config) { c.Limits.MaxRunBodyBytes = 1024 })
	body := `{"repo": "acme/app", "pull": 12, "head_sha": "` + headSHA + `", "verdict": "success", "description": "` +
		strings.Repeat("x", 1024) + `"}`
	if code, _ := f.postRun(t, body); code != http.StatusRequestEntityTooLarge {
		t.Errorf("run body of %d bytes over a 1024-byte limit: got %d, want 413", len(body), code)
	}
}

func TestAPIAcceptsGitHubsCommitShapes(t *testing.T) {
	f := newHTTPFixture(t)
	sha256Head := strings.Repeat("ab", 32)
	for _, sha := range []string{strings.ToUpper(headSHA), sha256Head} {
		code, body := f.postRun(t, `{"repo": "acme/app", "pull": 12, "head_sha": "`+sha+`", "verdict": "success"}`)
		if code != http.StatusCreated && code != http.StatusOK {
			t.Errorf("head_sha %s: got %d %s, want 201: 40 or 64 hex digits are a commit", sha, code, body)
		}
	}
	for _, r := range f.stored(t) {
		if r.HeadSHA != headSHA && r.HeadSHA != sha256Head {
			t.Errorf("stored head_sha: got %q, want lower case: a head is stored as GitHub writes it", r.HeadSHA)
		}
	}
}

// pullClosed is a pull_request event for acme/app#12.
const pullClosed = `{"action": "closed", "number": 12, "pull_request": {"number": 12}, "repository": {"full_name": "acme/app"}}`

func (f *httpFixture) postDelivery(t *testing.T, id string) (int, string) {
	return f.postDeliveryOf(t, id, pullClosed)
}

// postDeliveryOf posts the pull_request event body, signed, as delivery
// id.
func (f *httpFixture) postDeliveryOf(t *testing.T, id, body string) (int, string) {
	return f.do(t, "POST", "/webhooks/github", deliveryHeadersOf(id, body), body)
}

// deliveryHeaders are the headers GitHub sends with pullClosed as
// delivery id.
func deliveryHeaders(id string) map[string]string { return deliveryHeadersOf(id, pullClosed) }

// deliveryHeadersOf are the headers GitHub sends with the pull_request
// event body as delivery id.
func deliveryHeadersOf(id, body string) map[string]string {
	return map[string]string{"X-GitHub-Event": "pull_request",
		"X-Hub-Signature-256": sign(webhookSecret, body), "X-GitHub-Delivery": id}
}

// processedOnce is two replicas sharing a delivery store, each with an
// unsettled run of pull 12 of acme/app, and pullClosed processed once on a, as
// delivery guid-1; spent is the forge requests both have made.
func processedOnce(t *testing.T) (a, b *httpFixture, spent int64) {
	t.Helper()
	shared := delivery.NewMemoryStore()
	share := func(c *server.Config) { c.Deliveries = shared }
	a, b = newHTTPFixture(t, share), newHTTPFixture(t, share)
	a.putRun(t, gaterun.VerdictSuccess)
	b.putRun(t, gaterun.VerdictSuccess)
	if code, body := a.postDelivery(t, "guid-1"); code != http.StatusOK || !strings.Contains(body, `"offered":1`) {
		t.Fatalf("first delivery: got %d %s, want 200 offered 1", code, body)
	}
	return a, b, a.sim.Requests(forgesim.Filter{}) + b.sim.Requests(forgesim.Filter{})
}

func TestReplayedDeliveryIsAcknowledgedNotProcessed(t *testing.T) {
	a, b, spent := processedOnce(t)
	for _, f := range []*httpFixture{a, b} {
		code, body := f.postDelivery(t, "guid-1")
		if code != http.StatusOK || !strings.Contains(body, `"duplicate":"guid-1"`) {
			t.Errorf("replay: got %d %s, want 200 duplicate: a delivery seen before is acknowledged", code, body)
		}
	}
	if n := a.sim.Requests(forgesim.Filter{}) + b.sim.Requests(forgesim.Filter{}); n != spent {
		t.Errorf("forge requests after two replays: got %d, want %d: a replay is not processed again, on any replica", n, spent)
	}
	if code, body := b.postDeliveryOf(t, "guid-2", pullReopened); code != http.StatusOK || !strings.Contains(body, `"offered"`) {
		t.Errorf("another delivery: got %d %s, want 200 offered: a delivery not seen before is processed", code, body)
	}
}

// pullReopened is another pull_request event for pull 12 of acme/app.
const pullReopened = `{"action": "reopened", "number": 12, "pull_request": {"number": 12}, "repository": {"full_name": "acme/app"}}`

// TestReplayUnderAFreshIDIsNotProcessed pins that the replay guard is
// keyed on what GitHub signs. X-GitHub-Delivery is not signed: a signed
// body captured once (a proxy's log, the webhook's Recent Deliveries)
// and sent again under a fresh id must be acknowledged, not processed
// again, on any replica, or each copy costs the forge reads of its offers.
// Before, every fresh id was processed.
func TestReplayUnderAFreshIDIsNotProcessed(t *testing.T) {
	a, b, spent := processedOnce(t)
	for i, f := range []*httpFixture{a, b, a} {
		id := fmt.Sprintf("forged-%d", i)
		if code, body := f.postDelivery(t, id); code != http.StatusOK || !strings.Contains(body, `"duplicate":"`+id+`"`) {
			t.Errorf("the signed body again under id %s: got %d %s, want 200 duplicate: a body processed before is a replay, whatever its id", id, code, body)
		}
	}
	if n := a.sim.Requests(forgesim.Filter{}) + b.sim.Requests(forgesim.Filter{}); n != spent {
		t.Errorf("forge requests after three replays under fresh ids: got %d, want %d: a replay costs the forge nothing", n, spent)
	}
}

// mongoFixture is an httpFixture whose runs, deliveries and leases are on
// a dedicated Mongo test server, whose proxy injects faults; it returns
// the server and the run store. opts apply after the stores are set.
func mongoFixture(t *testing.T, opts ...func(*server.Config)) (*httpFixture, *mongotest.Server, gaterun.Store) {
	t.Helper()
	ms := mongotest.NewServer(t)
	db := ms.DB(t)
	runs, err := gaterun.NewMongoStore(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	deliveries, err := delivery.NewMongoStore(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	cards, err := board.NewMongoStore(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	f := newHTTPFixture(t, append([]func(*server.Config){func(c *server.Config) {
		c.Runs, c.Deliveries, c.Leases, c.Board = runs, deliveries, mongolease.NewStore(db), cards // the board serves only with BoardRepos
	}}, opts...)...)
	return f, ms, runs
}

// frozenMongo is a Mongo-backed fixture whose proxy holds every command on
// the named collection until the test ends.
func frozenMongo(t *testing.T, collection string) *httpFixture {
	t.Helper()
	f, ms, _ := mongoFixture(t, func(c *server.Config) {
		c.StoreTimeout, c.BoardRepos = 200*time.Millisecond, []string{"acme/app"}
	})
	hold := ms.Proxy().Hold(func(c mongotest.Command) bool { return c.Collection == collection })
	t.Cleanup(hold.Release)
	return f
}

func TestFrozenStoreAnswers503WithRetryAfter(t *testing.T) {
	for _, c := range []struct {
		name, collection, method, path string
		header                         map[string]string
		body                           string
	}{
		{"POST /api/runs", gaterun.Collection, "POST", "/api/runs", map[string]string{"Authorization": "Bearer " + apiToken},
			`{"repo": "acme/app", "pull": 12, "head_sha": "` + headSHA + `", "verdict": "success"}`},
		{"GET /leases", "leases", "GET", "/leases?format=json", pageAuth, ""},
		{"GET /api/runs", gaterun.Collection, "GET", "/api/runs", map[string]string{"Authorization": "Bearer " + apiToken}, ""},
		{"GET /api/runs/{id}", gaterun.Collection, "GET", "/api/runs/some-id", map[string]string{"Authorization": "Bearer " + apiToken}, ""},
		{"GET /runs", gaterun.Collection, "GET", "/runs", pageAuth, ""},
		{"GET /board", board.Collection, "GET", "/board", pageAuth, ""},
		{"GET /board?format=json", board.Collection, "GET", "/board?format=json", pageAuth, ""},
		{"webhook, runs frozen", gaterun.Collection, "POST", "/webhooks/github", map[string]string{"X-GitHub-Event": "pull_request",
			"X-Hub-Signature-256": sign(webhookSecret, pullClosed), "X-GitHub-Delivery": "guid-frozen"}, pullClosed},
		{"webhook, deliveries frozen", delivery.Collection, "POST", "/webhooks/github", map[string]string{"X-GitHub-Event": "pull_request",
			"X-Hub-Signature-256": sign(webhookSecret, pullClosed), "X-GitHub-Delivery": "guid-frozen"}, pullClosed},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := frozenMongo(t, c.collection)
			req, err := http.NewRequest(c.method, f.url+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			// The hold is released only at cleanup: a handler that waits for
			// the store would never answer, so the client gives up after 50
			// store timeouts (10 s) and names the rule.
			resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
			if err != nil {
				t.Fatalf("store frozen: %v, want 503 with Retry-After within the store timeout (200ms): every store call of a request has a deadline", err)
			}
			defer resp.Body.Close()
			var e struct{ Error string }
			_ = json.NewDecoder(resp.Body).Decode(&e)
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
				t.Errorf("store frozen: got %d Retry-After %q (%s), want 503 with Retry-After: every store call of a request has a deadline",
					resp.StatusCode, resp.Header.Get("Retry-After"), e.Error)
			}
		})
	}
}

// TestReadyzFailsWhileTheStoresDoNotAnswer pins readiness apart from
// liveness: with the run, the lease or (the board on) the board's
// collection frozen, /readyz answers
// 503 with Retry-After (take the replica out of the load balancer) while
// /healthz stays 200 (do not restart it: a restart does not thaw Mongo);
// with the stores answering, /readyz is 200.
func TestReadyzFailsWhileTheStoresDoNotAnswer(t *testing.T) {
	for _, collection := range []string{gaterun.Collection, "leases", board.Collection} {
		t.Run(collection+" frozen", func(t *testing.T) {
			f := frozenMongo(t, collection) // the board runs, on acme/app
			resp, err := http.Get(f.url + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
				t.Errorf("/readyz with %s frozen: got %d Retry-After %q, want 503 with Retry-After: a replica whose store does not answer is not ready",
					collection, resp.StatusCode, resp.Header.Get("Retry-After"))
			}
			if code, body := f.do(t, "GET", "/healthz", nil, ""); code != http.StatusOK {
				t.Errorf("/healthz with %s frozen: got %d %s, want 200: liveness does not read the stores", collection, code, body)
			}
		})
	}
	f := newHTTPFixture(t)
	if code, body := f.do(t, "GET", "/readyz", nil, ""); code != http.StatusOK || !strings.Contains(body, `"ready"`) {
		t.Errorf("/readyz with the stores answering: got %d %s, want 200 ready", code, body)
	}
}

// TestPagesCarryAPolicyThatRunsNoScript pins the headers of every page:
// the pages show text from GitHub (titles, logins, repository names) and
// from API callers (status descriptions, target URLs), so should any of it
// ever get past the templates' escaping, the browser must run no script,
// load nothing and let no other site frame the page; and no answer, JSON
// included, may be sniffed into a page. Before, pages sent only their
// Content-Type.
func TestPagesCarryAPolicyThatRunsNoScript(t *testing.T) {
	f := newHTTPFixture(t, func(c *server.Config) { c.BoardRepos = []string{"acme/app"} })
	for _, path := range []string{"/", "/leases", "/runs", "/board"} {
		code, h, _ := f.doHeader(t, "GET", path, pageAuth, "")
		if code != http.StatusOK {
			t.Fatalf("GET %s = %d, want 200", path, code)
		}
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: Content-Security-Policy %q lacks %q, want it: a page runs, loads, posts and is framed by nothing", path, csp, want)
			}
		}
		if strings.Contains(csp, "script-src") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("GET %s: Content-Security-Policy %q allows script or inline content, want neither", path, csp)
		}
		for k, want := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"} {
			if got := h.Get(k); got != want {
				t.Errorf("GET %s: %s %q, want %q", path, k, got, want)
			}
		}
	}
	for _, c := range []struct {
		method, path string
		header       map[string]string
		why          string
	}{
		{"GET", "/leases", nil, "a page's 401"},
		{"GET", "/leases?format=json", pageAuth, "a page's JSON view"},
		{"GET", "/board?format=<script>", pageAuth, "a 400 quoting the caller's parameter"},
		{"GET", "/api/runs?repo=<b>x</b>/y", pageAuth, "the API's 400"},
	} {
		code, h, _ := f.doHeader(t, c.method, c.path, c.header, "")
		if got := h.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s (%s, %d): X-Content-Type-Options %q, want nosniff: a JSON answer is never read as a page", c.method, c.path, c.why, code, got)
		}
	}
}

// unreachableRuns is a run store whose reads fail as the MongoDB driver's
// do when no server answers: the error lists the servers behind the
// replica, their addresses and their last errors.
type unreachableRuns struct{ gaterun.Store }

// topology is such an error's text, in the driver's format.
const topology = "server selection error: context deadline exceeded, current topology: { Type: ReplicaSetNoPrimary, " +
	"Servers: [{ Addr: mongo-0.mongo.iterion.svc.cluster.local:27017, Type: Unknown, Last error: dial tcp 10.42.7.19:27017: i/o timeout }, ] }"

func (unreachableRuns) List(context.Context, gaterun.Query) ([]gaterun.Run, error) {
	return nil, errors.New(topology)
}

func (unreachableRuns) Get(context.Context, string) (gaterun.Run, error) {
	return gaterun.Run{}, errors.New(topology)
}

// TestReadyzNamesTheStoreNotItsNetwork pins that /readyz, which answers
// anyone, says which store did not answer but not the store's error: a
// driver's error names the database's hosts and addresses. The error goes
// to the replica's log. Before, the answer quoted the error whole.
func TestReadyzNamesTheStoreNotItsNetwork(t *testing.T) {
	logger, logs := textLogger()
	f := newHTTPFixture(t, func(c *server.Config) {
		c.Runs, c.Logger = unreachableRuns{gaterun.NewMemoryStore()}, logger
	})
	code, body := f.do(t, "GET", "/readyz", nil, "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "run store") {
		t.Errorf("/readyz with the run store unreachable: got %d %s, want 503 naming the run store", code, body)
	}
	for _, secret := range []string{"mongo-0.mongo", "10.42.7.19", "topology"} {
		if strings.Contains(body, secret) {
			t.Errorf("/readyz answers %s, want no %q: the database's network is not told to whoever asks", body, secret)
		}
	}
	if !strings.Contains(logs.String(), "10.42.7.19") {
		t.Errorf("log %q lacks the store's error, want it: the operator still learns why", logs.String())
	}
}

// unreachableLeases and unreachableCards fail as unreachableRuns does.
type (
	unreachableLeases struct{ *lease.MemoryStore }
	unreachableCards  struct{ board.Store }
)

func (unreachableLeases) Holders(context.Context) ([]lease.Holder, error) {
	return nil, errors.New(topology)
}

func (unreachableCards) Cards(context.Context, board.Query) ([]board.Card, error) {
	return nil, errors.New(topology)
}

// TestNoAnswerQuotesAStoresError pins that a 503 of a page or of the API
// says what was not read, not the store's error: with PublicPages the
// pages answer anyone, and a driver's error names the database's hosts
// and addresses. The error goes to the log. Before, every 503 quoted it.
func TestNoAnswerQuotesAStoresError(t *testing.T) {
	logger, logs := textLogger()
	f := newHTTPFixture(t, func(c *server.Config) {
		c.PublicPages, c.BoardRepos, c.Logger = true, []string{"acme/app"}, logger
		c.Runs, c.Leases, c.Board = unreachableRuns{gaterun.NewMemoryStore()}, unreachableLeases{lease.NewMemoryStore()}, unreachableCards{board.NewMemoryStore()}
	})
	for _, path := range []string{"/", "/leases", "/leases?format=json", "/runs", "/board", "/board?format=json", "/api/runs", "/api/runs/some-id"} {
		code, body := f.do(t, "GET", path, pageAuth, "")
		if code != http.StatusServiceUnavailable {
			t.Errorf("GET %s with the stores unreachable: got %d %s, want 503", path, code, clipBody(body))
		}
		for _, secret := range []string{"mongo-0.mongo", "10.42.7.19", "topology"} {
			if strings.Contains(body, secret) {
				t.Errorf("GET %s answers %s, want no %q: the database's network is not told to whoever asks", path, body, secret)
			}
		}
	}
	if n := strings.Count(logs.String(), "10.42.7.19"); n < 8 {
		t.Errorf("log holds the store's error %d times, want once per refused request (8): the operator still learns why\n%s", n, logs.String())
	}
}

// countedHolders is a lease store that counts its Holders calls, each a
// read of the whole lease collection.
type countedHolders struct {
	*lease.MemoryStore
	n atomic.Int64
}

func (c *countedHolders) Holders(ctx context.Context) ([]lease.Holder, error) {
	c.n.Add(1)
	return c.MemoryStore.Holders(ctx)
}

// TestReadyzRequestsAreNotDatabaseReadsOneForOne pins that /readyz, which
// needs no token, checks the stores at most once per ReadyFor, however
// many requests come, at once or one after the other: anyone can send it,
// and each check reads the whole lease collection. Before, every request
// read every store.
func TestReadyzRequestsAreNotDatabaseReadsOneForOne(t *testing.T) {
	clock := &manualClock{now: pageNow}
	leases := &countedHolders{MemoryStore: lease.NewMemoryStore()}
	f := newHTTPFixture(t, func(c *server.Config) { c.Leases, c.Now = leases, clock.Now })
	var wg sync.WaitGroup
	codes := make(chan int, 40)
	for range 20 {
		wg.Go(func() { // no t.Fatal off the test's goroutine: a failed request counts as code 0
			resp, err := http.Get(f.url + "/readyz")
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	wg.Wait()
	for range 20 {
		code, _ := f.do(t, "GET", "/readyz", nil, "")
		codes <- code
	}
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Errorf("/readyz: got %d, want 200: the stores answer", code)
		}
	}
	if n := leases.n.Load(); n != 1 {
		t.Errorf("lease store read %d times for 40 /readyz within one instant, want 1: one check answers for %v", n, server.ReadyFor)
	}
	clock.Add(server.ReadyFor)
	if code, _ := f.do(t, "GET", "/readyz", nil, ""); code != http.StatusOK || leases.n.Load() != 2 {
		t.Errorf("/readyz %v later: got %d after %d reads, want 200 after 2: a check answers no longer than %v", server.ReadyFor, code, leases.n.Load(), server.ReadyFor)
	}
	clock.Add(-time.Hour) // the replica's clock is stepped back
	if code, _ := f.do(t, "GET", "/readyz", nil, ""); code != http.StatusOK || leases.n.Load() != 3 {
		t.Errorf("/readyz after the clock stepped back an hour: got %d after %d reads, want 200 after 3: a check from the future answers nothing, or one result would stand for an hour", code, leases.n.Load())
	}
}

// slowListings is a run store whose listings, /readyz's read of it, take
// d, slept in virtual time before the call is passed on (which fails when
// its context ended meanwhile); n counts them.
type slowListings struct {
	gaterun.Store
	d time.Duration
	n atomic.Int64
}

func (s *slowListings) List(ctx context.Context, q gaterun.Query) ([]gaterun.Run, error) {
	s.n.Add(1)
	time.Sleep(s.d)
	return s.Store.List(ctx, q)
}

// TestAProbeThatHangsUpDoesNotFailTheReadinessCheck pins why /readyz
// checks the stores on a context the request's end does not cancel: one
// check answers every probe for ReadyFor, so a client that hangs up
// part-way (a probe's own timeout, or anyone: /readyz needs no token) must
// not turn the check into a failure every probe is answered with for
// ReadyFor after. (The probes that wait for a check wait on a mutex,
// which synctest does not count as durably blocked: the probe here comes
// after the check, to its kept result.)
func TestAProbeThatHangsUpDoesNotFailTheReadinessCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runs := &slowListings{Store: gaterun.NewMemoryStore(), d: time.Second}
		p := newPipeServer(t, func(c *server.Config) { c.Runs = runs })
		defer p.stop()
		probe := func(ctx context.Context) (int, error) {
			c := &http.Client{Transport: &http.Transport{DialContext: p.pn.Dial, DisableKeepAlives: true}}
			defer c.CloseIdleConnections()
			req, err := http.NewRequestWithContext(ctx, "GET", "http://iterion.test/readyz", nil)
			if err != nil {
				return 0, err
			}
			resp, err := c.Do(req)
			if err != nil {
				return 0, err
			}
			resp.Body.Close()
			return resp.StatusCode, nil
		}
		hangUp, cancel := context.WithTimeout(context.Background(), runs.d/2)
		defer cancel()
		if _, err := probe(hangUp); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the probe that hangs up: got %v, want its context's deadline: the test needs a client gone part-way through the check", err)
		}
		time.Sleep(runs.d/2 + server.ReadyFor/2) // the check ended half a ReadyFor ago
		if code, err := probe(context.Background()); code != http.StatusOK || runs.n.Load() != 1 {
			t.Errorf("a probe within %v of the check the hung-up one started: got %d %v after %d store reads, want 200 after 1: the check's result, kept for the next probes, is the stores' answer, not the hang-up's",
				server.ReadyFor, code, err, runs.n.Load())
		}
	})
}

// TestAMalformedStoredRunIsA500NotARetry pins that a request meeting a
// stored run document the store cannot read (gaterun.ErrMalformed) is
// answered 500 without Retry-After, saying a stored document is
// malformed: retrying cannot mend it, and "the store did not answer" would
// send an operator after the network instead of the document.
func TestAMalformedStoredRunIsA500NotARetry(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	runs, err := gaterun.NewMongoStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	bad := bson.D{{Key: "_id", Value: "bad-run"}, {Key: "host", Value: "github.com"}, {Key: "repo", Value: "acme/app"},
		{Key: "pull", Value: "twelve"}, {Key: "head_sha", Value: headSHA}, {Key: "verdict", Value: "success"}}
	if _, err := db.Collection(gaterun.Collection).InsertOne(ctx, bad); err != nil {
		t.Fatal(err)
	}
	f := newHTTPFixture(t, func(c *server.Config) { c.Runs = runs })
	req, err := http.NewRequest("GET", f.url+"/api/runs/bad-run", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct{ Error string }
	_ = json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != http.StatusInternalServerError || resp.Header.Get("Retry-After") != "" || !strings.Contains(e.Error, "malformed") {
		t.Errorf("GET /api/runs/{id} of a malformed document: got %d Retry-After %q %q, want 500 without Retry-After saying the stored document is malformed: a retry cannot mend it",
			resp.StatusCode, resp.Header.Get("Retry-After"), e.Error)
	}
}
