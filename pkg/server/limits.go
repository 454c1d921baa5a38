package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/net/netutil"

	"iterion.dev/iterion/pkg/gaterun"
)

// Limits bound what one client can hold of the server: time on a
// connection, connections open at once, header and body sizes, and large
// webhook bodies in flight. A zero field means its value in DefaultLimits.
type Limits struct {
	// MaxConnections caps the connections open at once on the listener
	// Run serves (or one Listener wraps), each a goroutine and its
	// buffers: without it a client opening connections and keeping them
	// busy grows the replica's memory until it is killed. At the cap the
	// listener stops accepting (golang.org/x/net/netutil.LimitListener):
	// a new connection is neither refused nor answered 503 but waits in
	// the operating system's listen backlog until an open one closes,
	// then is served; its client sees a slow server and may give up
	// first. An idle keep-alive connection holds its place until
	// IdleTimeout. http_connections_open counts the open ones. Probes
	// served there wait too: RunWithProbes serves them on a listener of
	// their own, outside this cap.
	MaxConnections int
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included: a client
	// trickling its body is cut off after it.
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the end
	// of its answer; it must exceed the store timeout and the offer timeout.
	WriteTimeout time.Duration
	// IdleTimeout bounds an idle keep-alive connection.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header block, in bytes.
	MaxHeaderBytes int
	// MaxRunBodyBytes bounds a POST /api/runs body, in bytes; a larger one
	// answers 413. Webhook bodies are bounded by GitHub's payload cap
	// (MaxWebhookBodyBytes) instead.
	MaxRunBodyBytes int64
	// LargeWebhookReads caps the webhook bodies over 1 MiB (or of unknown
	// length) read at once. One remote address reads at most
	// LargeWebhookReadsPerAddress of them at a time, so a client without
	// the secret cannot hold every slot; a body from an address holding
	// fewer waits up to SlowBodyGrace for a slot. Past that, or for one
	// more from an address holding its share, 503 with Retry-After.
	LargeWebhookReads int
	// LargeWebhookReadsPerAddress is how many large-read slots one remote
	// address may hold at once, at most LargeWebhookReads. Behind a load
	// balancer, an ingress or any proxy, every delivery comes from the
	// proxy's address, so at 1 a second large delivery arriving while one
	// is read answers 503, and GitHub does not send it again: raise it
	// there, up to LargeWebhookReads. The cost: a client without the
	// secret can then hold that many slots itself (each until its body
	// falls behind MinWebhookBodyRate).
	LargeWebhookReadsPerAddress int
	// MinWebhookBodyRate is the slowest a large webhook body may arrive,
	// in bytes per second on average after SlowBodyGrace: a client that
	// falls behind is cut off with 408, releasing its slot.
	MinWebhookBodyRate int64
	// SlowBodyGrace is the head start a large body gets before
	// MinWebhookBodyRate applies, and the longest a large body waits for
	// a slot.
	SlowBodyGrace time.Duration
}

// DefaultLimits are the limits a zero Limits field takes.
var DefaultLimits = Limits{
	// Ordinary use opens tens of connections at a busy moment: webhook
	// deliveries, each answered within WebhookAnswerWithin; the API's
	// clients; a scrape per Prometheus interval; probes every few
	// seconds; a browser's few per page viewer; a proxy's pooled
	// keep-alive ones. 1024 is far above that, and bounds the memory
	// connections can hold: about 10 KiB each idle, and each reading a
	// header block can hold up to MaxHeaderBytes (64 KiB), 64 MiB in
	// all, a quarter of deploy/kubernetes's 256 MiB limit.
	MaxConnections:    1024,
	ReadHeaderTimeout: 5 * time.Second,
	ReadTimeout:       20 * time.Second,
	WriteTimeout:      30 * time.Second,
	IdleTimeout:       60 * time.Second,
	MaxHeaderBytes:    64 << 10,
	MaxRunBodyBytes:   64 << 10,
	LargeWebhookReads: 2,
	// One per address, so that on a direct connection a client without
	// the secret leaves the other slot to GitHub.
	LargeWebhookReadsPerAddress: 1,
	// GitHub sends at network speed; 256 KiB/s reads the 25 MB cap within
	// 100 s and cuts a trickle within seconds.
	MinWebhookBodyRate: 256 << 10,
	SlowBodyGrace:      2 * time.Second,
}

// MaxWebhookBodyBytes is the largest webhook body read: GitHub does not
// deliver a payload over 25 MB
// (https://docs.github.com/en/webhooks/webhook-events-and-payloads#payload-cap).
// A larger body answers 413.
const MaxWebhookBodyBytes = 25 << 20

// DefaultStoreTimeout bounds each store call a request makes when
// Config.StoreTimeout is zero.
const DefaultStoreTimeout = 3 * time.Second

// withDefaults fills l's zero fields from DefaultLimits and checks the
// rest, naming the field.
func (l Limits) withDefaults() (Limits, error) {
	d := DefaultLimits
	for _, f := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"ReadHeaderTimeout", &l.ReadHeaderTimeout, d.ReadHeaderTimeout},
		{"ReadTimeout", &l.ReadTimeout, d.ReadTimeout},
		{"WriteTimeout", &l.WriteTimeout, d.WriteTimeout},
		{"IdleTimeout", &l.IdleTimeout, d.IdleTimeout},
		{"SlowBodyGrace", &l.SlowBodyGrace, d.SlowBodyGrace},
	} {
		if *f.v < 0 {
			return l, fmt.Errorf("%w: Limits.%s %v is negative", ErrConfig, f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	switch {
	case l.MaxConnections < 0:
		return l, fmt.Errorf("%w: Limits.MaxConnections %d is negative", ErrConfig, l.MaxConnections)
	case l.MaxHeaderBytes < 0:
		return l, fmt.Errorf("%w: Limits.MaxHeaderBytes %d is negative", ErrConfig, l.MaxHeaderBytes)
	case l.MaxRunBodyBytes < 0:
		return l, fmt.Errorf("%w: Limits.MaxRunBodyBytes %d is negative", ErrConfig, l.MaxRunBodyBytes)
	case l.LargeWebhookReads < 0:
		return l, fmt.Errorf("%w: Limits.LargeWebhookReads %d is negative", ErrConfig, l.LargeWebhookReads)
	case l.LargeWebhookReadsPerAddress < 0:
		return l, fmt.Errorf("%w: Limits.LargeWebhookReadsPerAddress %d is negative", ErrConfig, l.LargeWebhookReadsPerAddress)
	case l.MinWebhookBodyRate < 0:
		return l, fmt.Errorf("%w: Limits.MinWebhookBodyRate %d is negative", ErrConfig, l.MinWebhookBodyRate)
	}
	if l.MinWebhookBodyRate == 0 {
		l.MinWebhookBodyRate = d.MinWebhookBodyRate
	}
	if l.MaxConnections == 0 {
		l.MaxConnections = d.MaxConnections
	}
	if l.MaxHeaderBytes == 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	if l.MaxRunBodyBytes == 0 {
		l.MaxRunBodyBytes = d.MaxRunBodyBytes
	}
	if l.LargeWebhookReads == 0 {
		l.LargeWebhookReads = d.LargeWebhookReads
	}
	if l.LargeWebhookReadsPerAddress == 0 {
		l.LargeWebhookReadsPerAddress = d.LargeWebhookReadsPerAddress
	}
	if l.LargeWebhookReadsPerAddress > l.LargeWebhookReads {
		return l, fmt.Errorf("%w: Limits.LargeWebhookReadsPerAddress %d is over LargeWebhookReads %d", ErrConfig, l.LargeWebhookReadsPerAddress, l.LargeWebhookReads)
	}
	return l, nil
}

// HTTPServer returns a new http.Server that serves Handler with the
// configured Limits, counting its open connections in
// http_connections_open; Run serves one. Use it to serve the API yourself
// (TLS, another listener) with the same limits: serve it on Listener(ln)
// for the connection cap, which is the listener's, not the http.Server's.
func (s *Server) HTTPServer() *http.Server {
	l := s.cfg.Limits
	return &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ConnState:         s.countConn,
	}
}

// Listener returns ln accepting at most Limits.MaxConnections connections
// open at once (netutil.LimitListener): past the cap its Accept waits
// until one of them closes. Run serves through it; each call caps its
// listener on its own.
func (s *Server) Listener(ln net.Listener) net.Listener {
	return netutil.LimitListener(ln, s.cfg.Limits.MaxConnections)
}

// ProbeConnections caps the connections open at once on a ProbeListener:
// the kubelet's probes (a connection each, every few seconds) and a few
// Prometheus scrapes need a handful; the cap bounds what a client that
// reaches the probe port can hold, apart from Limits.MaxConnections.
const ProbeConnections = 32

// ProbeHTTPServer returns a new http.Server that serves ProbeHandler with
// the configured timeouts and header bound. Its connections are not
// counted in http_connections_open, which watches the main listener's
// cap. RunWithProbes serves one on ProbeListener.
func (s *Server) ProbeHTTPServer() *http.Server {
	hs := s.HTTPServer()
	hs.Handler, hs.ConnState = s.probes, nil
	return hs
}

// ProbeListener returns ln accepting at most ProbeConnections connections
// open at once, a cap of its own: a Listener's connections, however many,
// leave its places free.
func (s *Server) ProbeListener(ln net.Listener) net.Listener {
	return netutil.LimitListener(ln, ProbeConnections)
}

// countConn counts a connection of an HTTPServer in http_connections_open
// from its accept to its close (or its hijack, past which the http.Server
// no longer reports it).
func (s *Server) countConn(_ net.Conn, state http.ConnState) {
	switch state {
	case http.StateNew:
		s.conns.Inc()
	case http.StateClosed, http.StateHijacked:
		s.conns.Dec()
	}
}

// storeCtx bounds the store calls of one request by StoreTimeout.
func (s *Server) storeCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.cfg.StoreTimeout)
}

// storeDeadline serves h with the request's context bounded by
// StoreTimeout, for a handler of another package whose store calls take the
// request's context (GET /board): past it the handler's store call fails
// and it answers 503, to which storeDeadline adds Retry-After, as
// unavailable does.
func (s *Server) storeDeadline(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := s.storeCtx(r)
		defer cancel()
		h.ServeHTTP(&retryAfterWriter{ResponseWriter: w, after: s.cfg.StoreTimeout}, r.WithContext(ctx))
	})
}

// retryAfterWriter adds a Retry-After of after to a 503 answer.
type retryAfterWriter struct {
	http.ResponseWriter
	after time.Duration
}

func (w *retryAfterWriter) WriteHeader(code int) {
	if code == http.StatusServiceUnavailable {
		setRetryAfter(w.ResponseWriter, w.after)
	}
	w.ResponseWriter.WriteHeader(code)
}

// unavailable answers 503 with msg and a Retry-After of the store timeout
// (whole seconds, at least 1): the store did not answer in time.
func (s *Server) unavailable(w http.ResponseWriter, msg string) {
	s.retryAfter(w, s.cfg.StoreTimeout, msg)
}

// storeFailed answers 503 with Retry-After, saying what was not done
// ("runs not read"), and logs err, which the answer does not quote: a
// store driver's error describes the network behind the replica (a
// MongoDB server selection error lists every server's address and last
// error: https://github.com/mongodb/mongo-go-driver/pull/444), and the
// pages may be open to anyone (PublicPages).
//
// A run document the store cannot read (gaterun.ErrMalformed) is answered
// 500 instead, without Retry-After, and logged as an error: no retry mends
// it, and an operator is sent to the document (the log names its _id and
// field) rather than the network.
func (s *Server) storeFailed(w http.ResponseWriter, what string, err error) {
	if errors.Is(err, gaterun.ErrMalformed) {
		s.log.Error("stored document malformed; repair or delete it", "what", what, "err", err)
		writeError(w, http.StatusInternalServerError, what+": a stored document is malformed (the replica's log names it)")
		return
	}
	s.log.Warn("store did not answer", "what", what, "err", err)
	s.unavailable(w, what+"; retry")
}

// retryAfter answers 503 with msg and a Retry-After of after (whole
// seconds, at least 1).
func (s *Server) retryAfter(w http.ResponseWriter, after time.Duration, msg string) {
	setRetryAfter(w, after)
	writeError(w, http.StatusServiceUnavailable, msg)
}

// setRetryAfter sets Retry-After to after, in whole seconds, at least 1.
func setRetryAfter(w http.ResponseWriter, after time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(max(after.Seconds(), 1)))))
}
