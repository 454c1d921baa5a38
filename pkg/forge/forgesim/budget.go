package forgesim

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// bucket is one principal's budget for one resource (core or graphql).
type bucket struct {
	principal, resource string
}

// principalOf is whose budget and secondary limits a token's requests
// spend; s.mu is held. GitHub keeps one primary budget per App
// installation, shared by every installation token, and one per user for a
// user's tokens ("Rate limits for the REST API", Primary rate limit for
// GitHub App installations and for authenticated users:
// https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-primary-rate-limits).
// So: a token this simulator minted for installation N is
// "installation:N"; an App's JWT is "app:<id>" (tokenOf); a plain token is
// its user, the token itself unless MapToken named another user. A request
// without a token has none: it spends its client's (clientPrincipal).
func (s *Sim) principalOf(tok string) string {
	if m, ok := s.installations[tok]; ok {
		return "installation:" + strconv.FormatInt(m.installation, 10)
	}
	if u, ok := s.users[tok]; ok {
		return u
	}
	return tok
}

// clientPrincipal is whose budget and secondary limits a request without a
// token spends: its client's IP address, "ip:<address>" (RemoteAddr's host).
// "Unauthenticated requests are associated with the originating IP address,
// not with the user or application that made the request" ("Rate limits for
// the REST API", Primary rate limit for unauthenticated users:
// https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#primary-rate-limit-for-unauthenticated-users).
func clientPrincipal(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return clientPrefix + host
}

// clientPrefix starts the principal of a request without a token.
const clientPrefix = "ip:"

// MapToken makes token a token of user: its requests spend user's budget,
// shared with the user's other tokens, from its next request on. A blank
// token or user is refused, naming the field.
func (s *Sim) MapToken(token, user string) error {
	if token == "" {
		return badField("token", token, "required")
	}
	if err := checkToken(token); err != nil {
		return err
	}
	if user == "" {
		return badField("user", user, "required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[token] = user
	return nil
}

// window is a budget's current hour: like GitHub's, it opens with the first
// request after the previous one reset, and resets an hour later.
type window struct {
	reset time.Time
	used  int
}

// window returns principal's current window for res, opening a new one
// when the last has reset; s.mu is held.
func (s *Sim) window(principal, res string, now time.Time) *window {
	b := bucket{principal, res}
	w := s.windows[b]
	if w == nil || !now.Before(w.reset) {
		w = &window{reset: now.Add(time.Hour).Truncate(time.Second)}
		s.windows[b] = w
	}
	return w
}

// limitOf is principal's hourly budget for resource: its own (SetBudget),
// else AnonymousBudget for a client's requests without a token
// (clientPrincipal; the default when that is lower), else its
// installation's scaled one (installations.go), else the default; s.mu is
// held.
func (s *Sim) limitOf(principal, resource string) int {
	if n, ok := s.limits[principal]; ok {
		return n
	}
	if strings.HasPrefix(principal, clientPrefix) {
		return min(AnonymousBudget, s.defaultLimit)
	}
	if n, ok := s.scaledLimit(principal, resource); ok {
		return n
	}
	return s.defaultLimit
}

// checkToken refuses a token no request can send: a request's token is
// read without the white space around it (tokenOf), so a limit or a
// mapping set for " t" or " " would bind nobody while the call succeeded.
func checkToken(tok string) error {
	if tok != strings.TrimSpace(tok) {
		return badField("token", tok, "has white space around it: no request sends that token")
	}
	return nil
}

// SetBudget sets the hourly budget of token's principal (principalOf: its
// user or installation, as mapped now; "installation:N" names installation
// N) to limit, or the default budget of every principal without one of its
// own when token is "". It takes effect at once, in the current window.
func (s *Sim) SetBudget(token string, limit int) error {
	if limit < 0 {
		return badField("limit", strconv.Itoa(limit), "must be >= 0")
	}
	if err := checkToken(token); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if token == "" {
		s.defaultLimit = limit
	} else {
		s.limits[s.principalOf(token)] = limit
	}
	return nil
}

// Advance moves the simulator's time forward by d (its budget windows,
// token expiries and timestamps follow); d must not be negative, and the
// advances together must stay within a time.Duration (about 292 years):
// one that would not is refused, naming duration, and moves nothing.
func (s *Sim) Advance(d time.Duration) error {
	if d < 0 {
		return badField("duration", d.String(), "must be >= 0")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if d > math.MaxInt64-s.offset {
		return badField("duration", d.String(), "would move the clock past "+time.Duration(math.MaxInt64).String()+" of advances in all")
	}
	s.offset += d
	return nil
}

// ResetHour closes every budget window and secondary-limit window: each
// principal's next request opens a fresh hour with its whole budget.
func (s *Sim) ResetHour() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.windows)
	clear(s.secWindows)
}

// secondaryRule makes a token's next count API requests hit a secondary
// rate limit.
type secondaryRule struct {
	retryAfter time.Duration
	count      int
}

// SecondaryLimit makes the next count API requests of token (any token when
// "") answer 403 with a secondary-rate-limit message and retry-after (whole
// seconds; 0: no retry-after header, as GitHub sometimes does), whatever the
// enforced limits say. They cost no budget. A request refused before the
// limits (a revoked token's, one over the concurrency limit) is not one of
// them.
func (s *Sim) SecondaryLimit(token string, retryAfter time.Duration, count int) error {
	if retryAfter < 0 {
		return badField("retry_after_seconds", retryAfter.String(), "must be >= 0")
	}
	if count < 1 {
		return badField("count", strconv.Itoa(count), "must be >= 1")
	}
	if err := checkToken(token); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secondary[token] = &secondaryRule{retryAfter: retryAfter, count: count}
	return nil
}

// injected tells whether an injected secondary limit (SecondaryLimit)
// awaits tok's next request; s.mu is held.
func (s *Sim) injected(tok string) bool {
	return s.secondary[tok] != nil || s.secondary[""] != nil
}

// takeSecondary uses up one secondary-limited request of tok, its own
// limit before the one for any token, and returns its retry-after; only
// a request injected refuses takes one. s.mu is held.
func (s *Sim) takeSecondary(tok string) time.Duration {
	k := tok
	if s.secondary[k] == nil {
		k = ""
	}
	r := s.secondary[k]
	if r.count--; r.count == 0 {
		delete(s.secondary, k)
	}
	return r.retryAfter
}
