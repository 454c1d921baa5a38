package forge

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrRateLimited is wrapped by every *RateLimitError.
var ErrRateLimited = errors.New("forge: rate limited")

// RateLimitCause says why a request met a rate limit.
type RateLimitCause string

const (
	// CausePrimary: the hourly budget is spent; GitHub answered 403 or 429 with
	// x-ratelimit-remaining 0, or a GraphQL RATE_LIMITED error whatever
	// remaining said, or the Client knew it was spent and did not send.
	CausePrimary RateLimitCause = "primary"
	// CauseReserve: the lane has a reserve (Config.Reserves) and the budget
	// left is below it; the Client did not send, keeping the rest for others.
	CauseReserve RateLimitCause = "reserve"
	// CauseSecondary: GitHub's secondary limit; GitHub answered 403 or 429
	// with retry-after (or a secondary-limit message), or the Client is still
	// backing off from one and did not send.
	CauseSecondary RateLimitCause = "secondary"
)

// RateLimitError reports a request refused by a rate limit, or held back by
// the Client to respect one. Retry no earlier than Reset; the Client never
// sleeps for it. It wraps ErrRateLimited.
type RateLimitError struct {
	// Reset is when to try again: the budget's reset for CausePrimary and
	// CauseReserve, the end of the back-off for CauseSecondary.
	Reset time.Time
	Cause RateLimitCause
	// Sent is true when the request reached the forge and was refused there,
	// false when the Client held it back.
	Sent bool
	// Lane is the lane the request was charged to.
	Lane string
	// Resource, Limit and Remaining are the latest budget figures known for
	// the request's resource (zero when none is known).
	Resource         string
	Limit, Remaining int
	// Reserve is the lane's reserve (CauseReserve only).
	Reserve int
}

// Error says the cause, whether the request was sent, the lane, the reset
// and the budget figures when they are known (a limit GitHub answered in a
// GraphQL 200 carries none: its message says no figures rather than "0 of
// 0 left").
func (e *RateLimitError) Error() string {
	verb := "held back"
	if e.Sent {
		verb = "refused"
	}
	msg := fmt.Sprintf("forge: rate limited (%s): lane %s request %s until %s", e.Cause, e.Lane, verb, e.Reset.UTC().Format(time.RFC3339))
	if e.Resource != "" && e.Limit > 0 {
		msg += fmt.Sprintf("; %s budget %d of %d left", e.Resource, e.Remaining, e.Limit)
	}
	if e.Cause == CauseReserve {
		msg += fmt.Sprintf(", lane reserve %d", e.Reserve)
	}
	return msg
}

// Unwrap returns ErrRateLimited.
func (e *RateLimitError) Unwrap() error { return ErrRateLimited }

// RateLimit is the latest budget figure the forge reported for one resource
// (x-ratelimit-resource: core, graphql, search, ...).
type RateLimit struct {
	Resource         string
	Limit, Remaining int
	Reset            time.Time
}

// Back-off from a rate limit that says neither when it resets nor
// retry-after: wait at least a minute, and from a secondary limit double
// that while the limit keeps being hit (GitHub's "best practices for using
// the REST API"), up to maxSecondaryBackoff.
const (
	minBackoff          = time.Minute
	maxSecondaryBackoff = 16 * time.Minute
)

// rateWindow is GitHub's primary rate-limit window: x-ratelimit-limit is
// the requests allowed per hour, and x-ratelimit-reset the end of the
// current window
// (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api).
// It is the longest the client holds requests back for one answer: a
// reset or retry-after further ahead is taken as rateWindow ahead, so
// that one malformed header cannot stop the client for ever.
const rateWindow = time.Hour

// rateGate holds requests back when a rate limit says they would be refused
// or a lane's reserve says they should wait, and learns the budget from the
// x-ratelimit-* headers of every answer. It sits above the auth and counting
// transports, so a request it holds back is never counted: it was not sent.
// Safe for concurrent use.
type rateGate struct {
	next     http.RoundTripper
	graphql  string // the GraphQL endpoint's path (apiOf)
	now      func() time.Time
	reserves map[string]int
	metrics  *rateMetrics // nil: no Prometheus

	mu     sync.Mutex
	limits map[string]RateLimit
	// spent holds a resource's requests back until its instant: GitHub
	// refused one for the primary limit, whatever remaining said.
	spent     map[string]time.Time
	secondary time.Time // no request before this instant
	strikes   int       // consecutive secondary limits without retry-after
}

func newRateGate(next http.RoundTripper, graphql string, now func() time.Time, reserves map[string]int, metrics *rateMetrics) *rateGate {
	return &rateGate{next: next, graphql: graphql, now: now, reserves: reserves, metrics: metrics,
		limits: make(map[string]RateLimit), spent: make(map[string]time.Time)}
}

// resourceOf is the budget a request draws on.
func (g *rateGate) resourceOf(req *http.Request) string {
	if apiOf(req, g.graphql) == APIGraphQL {
		return "graphql"
	}
	return "core"
}

// RoundTrip implements http.RoundTripper.
func (g *rateGate) RoundTrip(req *http.Request) (*http.Response, error) {
	return g.roundTrip(g.next, req)
}

// roundTrip sends req through next unless admit holds it back, and learns
// from the answer.
func (g *rateGate) roundTrip(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	if err := g.admit(req); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	resp, err := next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	g.learn(req.URL.Host, apiOf(req, g.graphql) == APIGraphQL, resp)
	return resp, nil
}

// gateOver sends requests through next under gate, as gate's own: held
// back by what gate knows, and teaching it what their answers say. An
// AppClient's token mints, sent through a transport of their own, pass
// the gate of the App's other requests made with its JWT: GitHub limits
// them as one principal. Safe for concurrent use.
type gateOver struct {
	gate *rateGate
	next http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t gateOver) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.gate.roundTrip(t.next, req)
}

// admit returns the *RateLimitError that holds req back, or nil to send it.
func (g *rateGate) admit(req *http.Request) error {
	now := g.now()
	lane := laneOf(req.Context())
	res := g.resourceOf(req)
	g.mu.Lock()
	defer g.mu.Unlock()
	rl, known := g.limits[res]
	e := &RateLimitError{Lane: lane, Resource: rl.Resource, Limit: rl.Limit, Remaining: rl.Remaining}
	switch {
	case now.Before(g.secondary):
		e.Cause, e.Reset = CauseSecondary, g.secondary
	case now.Before(g.spent[res]):
		e.Cause, e.Reset = CausePrimary, g.spent[res]
	case known && rl.Remaining == 0 && now.Before(rl.Reset):
		e.Cause, e.Reset = CausePrimary, rl.Reset
	case known && rl.Remaining < g.reserves[lane] && now.Before(rl.Reset):
		e.Cause, e.Reset, e.Reserve = CauseReserve, rl.Reset, g.reserves[lane]
	default:
		return nil
	}
	return e
}

// learn records the budget figures of resp, an answer from host (to the
// GraphQL endpoint when graphql is set), and the back-off of a secondary
// limit. An answer that is no limit clears the strikes, but for a GraphQL
// 200 whose body names the secondary limit: GitHub may answer that limit
// so, and PullStates, which reads the errors array, backs off from it
// (noteSecondary) as from a strike in a row.
func (g *rateGate) learn(host string, graphql bool, resp *http.Response) {
	now := g.now()
	h := resp.Header
	rl, ok := parseRateLimit(h)
	if end := now.Add(rateWindow); rl.Reset.After(end) {
		rl.Reset = end
	}
	limited := resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests
	secondary := limited && h.Get("X-Ratelimit-Remaining") != "0" && isSecondary(resp)
	success := !limited && !(graphql && isSecondaryMessage(string(peekBody(resp))))
	g.mu.Lock()
	defer g.mu.Unlock()
	if ok {
		// Answers to concurrent requests arrive out of order: within one
		// window the budget only shrinks, so the smallest figure is the latest.
		if old, seen := g.limits[rl.Resource]; !seen || !old.Reset.Equal(rl.Reset) || rl.Remaining < old.Remaining {
			g.limits[rl.Resource] = rl
		}
		g.metrics.set(host, g.limits[rl.Resource])
	}
	switch {
	case secondary:
		g.backOffLocked(h, now)
	case success:
		g.strikes = 0
	}
}

// backOffLocked starts or extends the secondary-limit back-off from now:
// retry-after when h has it, else a minute doubling with each strike;
// g.mu is held.
func (g *rateGate) backOffLocked(h http.Header, now time.Time) {
	wait, ok := retryAfter(h, now)
	if !ok {
		wait = min(minBackoff<<g.strikes, maxSecondaryBackoff)
		g.strikes++
	}
	if until := now.Add(wait); until.After(g.secondary) {
		g.secondary = until
	}
}

// noteSecondary backs off from a secondary limit learn did not take for
// one (a GraphQL 200 with the limit in its errors array), as learn does
// from a 403 with h, the answer's headers, and returns the end of the
// back-off.
func (g *rateGate) noteSecondary(h http.Header) time.Time {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.backOffLocked(h, now)
	return g.secondary
}

// holdSpent holds every request on resource res back until the reset of
// its budget the gate knows, or minBackoff from now when it knows none
// ahead: GitHub refused a request on res for its primary limit, which it
// may do with x-ratelimit-remaining above 0 (a query that costs more than
// is left). It returns the end of the hold and res's latest figures.
func (g *rateGate) holdSpent(res string) (time.Time, RateLimit) {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	rl := g.limits[res]
	until := rl.Reset
	if !until.After(now) {
		until = now.Add(minBackoff)
	}
	g.spent[res] = until
	return until, rl
}

// secondaryUntil is the end of the current secondary-limit back-off.
func (g *rateGate) secondaryUntil() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.secondary
}

// limitsSnapshot returns the latest figures, one per resource.
func (g *rateGate) limitsSnapshot() []RateLimit {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]RateLimit, 0, len(g.limits))
	for _, rl := range g.limits {
		out = append(out, rl)
	}
	return out
}

// parseRateLimit reads the x-ratelimit-* headers; false when they are absent
// or malformed, a negative figure included.
func parseRateLimit(h http.Header) (RateLimit, bool) {
	limit, err1 := strconv.Atoi(h.Get("X-Ratelimit-Limit"))
	remaining, err2 := strconv.Atoi(h.Get("X-Ratelimit-Remaining"))
	reset, err3 := strconv.ParseInt(h.Get("X-Ratelimit-Reset"), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || limit < 0 || remaining < 0 {
		return RateLimit{}, false
	}
	res := h.Get("X-Ratelimit-Resource")
	if res == "" {
		res = "core"
	}
	return RateLimit{Resource: res, Limit: limit, Remaining: remaining, Reset: time.Unix(reset, 0).UTC()}, true
}

// retryAfter reads retry-after as the wait from now: seconds, as GitHub
// sends it, or an HTTP-date, which HTTP allows too (RFC 9110, section
// 10.2.3), 0 once it has passed, and at most rateWindow. (Seconds past
// about 292 years overflowed a Duration to a negative wait: no back-off.)
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := h.Get("Retry-After")
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		if s >= int(rateWindow/time.Second) {
			return rateWindow, true
		}
		return time.Duration(s) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return min(max(at.Sub(now), 0), rateWindow), true
	}
	return 0, false
}

// isSecondary tells a secondary rate limit from another 403/429 (missing
// permission, say): a retry-after header, or GitHub's message. The body is
// read and put back for the caller.
func isSecondary(resp *http.Response) bool {
	if resp.Header.Get("Retry-After") != "" {
		return true
	}
	return isSecondaryMessage(string(peekBody(resp)))
}

// peekBody reads up to 64 KiB of resp's body and puts it back for the
// caller; what it read, or nil when the read failed.
func peekBody(resp *http.Response) []byte {
	orig := resp.Body
	body, err := io.ReadAll(io.LimitReader(orig, 64<<10))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), orig), orig}
	if err != nil {
		return nil
	}
	return body
}

// isSecondaryMessage tells GitHub's secondary-limit message, in a REST
// body or a GraphQL error: by its words, or by the documentation URL it
// names, old or new (as go-github tells an AbuseRateLimitError).
func isSecondaryMessage(msg string) bool {
	return strings.Contains(strings.ToLower(msg), "secondary rate limit") ||
		strings.Contains(msg, "abuse-rate-limits") || strings.Contains(msg, "secondary-rate-limits")
}

// rateMetrics exports the budget figures a rate gate learns. Clients sharing
// a Registerer share them: each gauge holds the latest figure any of them
// learned for a host and resource. Safe for concurrent use; a nil
// *rateMetrics exports nothing.
type rateMetrics struct {
	remaining, limit, reset *prometheus.GaugeVec
}

// newRateMetrics registers the rate-limit gauges on reg (or finds the ones
// already there) and sets forge_rate_limit_reserve for each lane of
// reserves. A nil reg: nil, no Prometheus.
func newRateMetrics(reg prometheus.Registerer, reserves map[string]int) (*rateMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	gauge := func(name, help string, labels ...string) (*prometheus.GaugeVec, error) {
		return registerShared(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
	}
	var (
		m       rateMetrics
		reserve *prometheus.GaugeVec
		errs    [4]error
	)
	m.remaining, errs[0] = gauge("forge_rate_limit_remaining",
		"Requests left in the forge's rate-limit window, as the latest answer's x-ratelimit-remaining said, by host and x-ratelimit-resource.", "host", "resource")
	m.limit, errs[1] = gauge("forge_rate_limit_limit",
		"Requests allowed in the forge's rate-limit window (x-ratelimit-limit), by host and resource.", "host", "resource")
	m.reset, errs[2] = gauge("forge_rate_limit_reset_timestamp_seconds",
		"When the forge's rate-limit window resets (x-ratelimit-reset, Unix seconds), by host and resource.", "host", "resource")
	reserve, errs[3] = gauge("forge_rate_limit_reserve",
		"Budget a lane leaves to the others (Config.Reserves): the lane yields while the remaining budget is below it.", "lane")
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	for lane, n := range reserves {
		reserve.WithLabelValues(lane).Set(float64(n))
	}
	return &m, nil
}

// set exports rl as the latest figure for host.
func (m *rateMetrics) set(host string, rl RateLimit) {
	if m == nil {
		return
	}
	m.remaining.WithLabelValues(host, rl.Resource).Set(float64(rl.Remaining))
	m.limit.WithLabelValues(host, rl.Resource).Set(float64(rl.Limit))
	m.reset.WithLabelValues(host, rl.Resource).Set(float64(rl.Reset.Unix()))
}
