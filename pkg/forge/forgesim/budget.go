package forgesim

import (
	"net/http"
	"strconv"
	"time"
)

// bucket is one token's budget for one resource (core or graphql).
type bucket struct {
	token, resource string
}

// window is a budget's current hour: like GitHub's, it opens with the first
// request after the previous one reset, and resets an hour later.
type window struct {
	reset time.Time
	used  int
}

// window returns tok's current window for res, opening a new one when the
// last has reset; s.mu is held.
func (s *Sim) window(tok, res string, now time.Time) *window {
	b := bucket{tok, res}
	w := s.windows[b]
	if w == nil || !now.Before(w.reset) {
		w = &window{reset: now.Add(time.Hour).Truncate(time.Second)}
		s.windows[b] = w
	}
	return w
}

// limitOf is tok's hourly budget; s.mu is held.
func (s *Sim) limitOf(tok string) int {
	if n, ok := s.limits[tok]; ok {
		return n
	}
	return s.defaultLimit
}

// SetBudget sets token's hourly budget to limit, or the default budget of
// every token without one of its own when token is "". It takes effect at
// once, in the current window.
func (s *Sim) SetBudget(token string, limit int) error {
	if limit < 0 {
		return badField("limit", strconv.Itoa(limit), "must be >= 0")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if token == "" {
		s.defaultLimit = limit
	} else {
		s.limits[token] = limit
	}
	return nil
}

// Advance moves the simulator's time forward by d (its budget windows,
// token expiries and timestamps follow); d must not be negative.
func (s *Sim) Advance(d time.Duration) error {
	if d < 0 {
		return badField("duration", d.String(), "must be >= 0")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offset += d
	return nil
}

// ResetHour closes every budget window: each token's next request opens a
// fresh hour with its whole budget.
func (s *Sim) ResetHour() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.windows)
}

// secondaryRule makes a token's next count API requests hit a secondary
// rate limit.
type secondaryRule struct {
	retryAfter time.Duration
	count      int
}

// SecondaryLimit makes the next count API requests of token (any token when
// "") answer 403 with a secondary-rate-limit message and retry-after (whole
// seconds; 0: no retry-after header, as GitHub sometimes does). They cost no
// budget.
func (s *Sim) SecondaryLimit(token string, retryAfter time.Duration, count int) error {
	if retryAfter < 0 {
		return badField("retry_after_seconds", retryAfter.String(), "must be >= 0")
	}
	if count < 1 {
		return badField("count", strconv.Itoa(count), "must be >= 1")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secondary[token] = &secondaryRule{retryAfter: retryAfter, count: count}
	return nil
}

// takeSecondary uses up one secondary-limited request of tok, if any; s.mu
// is held.
func (s *Sim) takeSecondary(tok string) (time.Duration, bool) {
	for _, k := range []string{tok, ""} {
		if r := s.secondary[k]; r != nil {
			if r.count--; r.count == 0 {
				delete(s.secondary, k)
			}
			return r.retryAfter, true
		}
	}
	return 0, false
}

func secondaryReply(retryAfter time.Duration) reply {
	rep := jsonReply(http.StatusForbidden, githubError{
		Message:          "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
		DocumentationURL: "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits",
	})
	if retryAfter > 0 {
		rep.header = http.Header{"Retry-After": {strconv.Itoa(int(retryAfter / time.Second))}}
	}
	return rep
}
