package forgesim

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The secondary rate limits, as GitHub documents them in "Rate limits for
// the REST API", About secondary rate limits and Calculating points for the
// secondary rate limit
// (https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits):
//
//   - "No more than 100 concurrent requests are allowed. This limit is
//     shared across the REST API and GraphQL API."
//   - "Make too many requests to a single endpoint per minute. No more than
//     900 points per minute are allowed for REST API endpoints, and no more
//     than 2,000 points per minute are allowed for the GraphQL API
//     endpoint." The heading says a single endpoint, so REST points are
//     counted per endpoint (route pattern), GraphQL's on its one endpoint.
//   - Points: a REST GET, HEAD or OPTIONS is 1, a POST, PATCH, PUT or DELETE
//     5; a GraphQL request without a mutation 1, with one 5.
//   - "no more than 80 content-generating requests per minute and no more
//     than 500 content-generating requests per hour".
//   - "No more than 90 seconds of CPU time per 60 seconds of real time is
//     allowed. No more than 60 seconds of this CPU time may be for the
//     GraphQL API", CPU time estimated by total response time: counted from
//     the latency model's times (timing.go), so it binds only with the
//     model on.
//   - A request over a limit gets "a 403 or 429 response" and, here always,
//     a retry-after header: the seconds until the window that refused it
//     has room again.
//
// Like the primary budget, each limit is the principal's (see principalOf):
// the installation's or the user's, whichever token it sent. A minute is
// the simulator's minute (WithMinute), so a harness that compresses a
// minute into an interval meets the same limits per compressed minute; the
// content hour is 60 of those minutes. Refused requests cost nothing.

// SecondaryLimits are the secondary rate limits the simulator enforces. A
// field <= 0 switches that limit off: a scenario that measures something
// else may do so, and must say so.
type SecondaryLimits struct {
	Concurrent             int // requests in flight at once, REST and GraphQL together
	RESTPointsPerMinute    int // per REST endpoint (route)
	GraphQLPointsPerMinute int // on the GraphQL endpoint
	ContentPerMinute       int // content-creating requests
	ContentPerHour         int // content-creating requests, per 60 minutes
	// CPUPerMinute is the response time a principal may spend per minute,
	// REST and GraphQL together; GraphQLCPUPerMinute is GraphQL's share.
	// Both count the latency model's times (WithLatency).
	CPUPerMinute        time.Duration
	GraphQLCPUPerMinute time.Duration
}

// GitHubSecondaryLimits are GitHub's documented figures, the default.
var GitHubSecondaryLimits = SecondaryLimits{
	Concurrent:             100,
	RESTPointsPerMinute:    900,
	GraphQLPointsPerMinute: 2000,
	ContentPerMinute:       80,
	ContentPerHour:         500,
	CPUPerMinute:           90 * time.Second,
	GraphQLCPUPerMinute:    60 * time.Second,
}

// WithSecondaryLimits replaces GitHubSecondaryLimits; a field <= 0 is that
// limit off.
func WithSecondaryLimits(l SecondaryLimits) Option {
	return func(s *Sim) { s.limitsOn = l }
}

// WithMinute sets how long the simulator's minute lasts on its clock
// (default time.Minute): the window of the per-minute secondary limits, the
// CPU-time limit included, a sixtieth of the content-creation hour, and the
// scale of the latency model's waits (a minute of 6 s answers a 1.5 s query
// in 150 ms). d <= 0 keeps a minute. The primary budget's hour stays an
// hour: a client waits for the reset GitHub announced.
func WithMinute(d time.Duration) Option {
	return func(s *Sim) {
		if d > 0 {
			s.minute = d
		}
	}
}

// Secondary-limit kinds, the keys of the limiter's windows.
const (
	kindRESTPoints    = "rest_points"
	kindGraphQLPoints = "graphql_points"
	kindContentMinute = "content_minute"
	kindContentHour   = "content_hour"
)

// secKey is one principal's window of one kind, for one endpoint (REST
// points) or "".
type secKey struct {
	principal, kind, endpoint string
}

// secWindow is a fixed window that opens at its first charge and lasts its
// length, as the primary budget's hour does.
type secWindow struct {
	reset time.Time
	used  int
}

// openWindow returns key's window, opening one of length d when none is
// open; s.mu is held.
func (s *Sim) openWindow(key secKey, d time.Duration, now time.Time) *secWindow {
	w := s.secWindows[key]
	if w == nil || !now.Before(w.reset) {
		w = &secWindow{reset: now.Add(d)}
		s.secWindows[key] = w
	}
	return w
}

// chargeWindow adds n to key's window of length d if that stays within
// limit (limit <= 0: no limit), and otherwise returns how long until the
// window resets; s.mu is held.
func (s *Sim) chargeWindow(key secKey, d time.Duration, limit, n int, now time.Time) (time.Duration, bool) {
	if limit <= 0 {
		return 0, true
	}
	w := s.openWindow(key, d, now)
	if w.used+n > limit {
		return w.reset.Sub(now), false
	}
	w.used += n
	return 0, true
}

// chargeGraphQL charges points to principal's GraphQL endpoint for the
// minute, and answers the refusal when the 2,000-point minute cannot take
// them; s.mu is held. It is the limiter's hook for a GraphQL handler: the
// api pipeline calls it once per /graphql request with graphqlPoints of the
// body, so a handler need not; a handler that computes another cost may
// charge the difference here.
func (s *Sim) chargeGraphQL(principal string, points int, now time.Time) (reply, bool) {
	if wait, ok := s.chargeWindow(secKey{principal, kindGraphQLPoints, ""}, s.minute, s.limitsOn.GraphQLPointsPerMinute, points, now); !ok {
		return secondaryReply(http.StatusForbidden, wait), false
	}
	return reply{}, true
}

// refundGraphQL gives back the points chargeGraphQL took for a query the
// primary budget then refused, as refused requests cost nothing; s.mu is
// held, as it was for the charge, so the window is the one charged.
func (s *Sim) refundGraphQL(principal string, points int) {
	if w := s.secWindows[secKey{principal, kindGraphQLPoints, ""}]; w != nil {
		w.used -= points
	}
}

// chargeREST charges a REST request's points to its endpoint's minute, and
// a content-creating request to the content minute and hour; it answers
// the refusal when a window cannot take it, with the kind of limit that
// refused it (clock_stats.go), charging nothing then; s.mu is held.
func (s *Sim) chargeREST(principal, method, route string, now time.Time) (reply, string, bool) {
	points := 5
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		points = 1
	}
	if s.limitsOn.RESTPointsPerMinute > 0 {
		w := s.secWindows[secKey{principal, kindRESTPoints, route}]
		if w != nil && now.Before(w.reset) && w.used+points > s.limitsOn.RESTPointsPerMinute {
			return secondaryReply(http.StatusForbidden, w.reset.Sub(now)), RefusedPoints, false
		}
	}
	if points == 5 && isContentCreating(route) {
		if rep, ok := s.chargeContent(principal, now); !ok {
			return rep, RefusedContent, false
		}
	}
	s.chargeWindow(secKey{principal, kindRESTPoints, route}, s.minute, s.limitsOn.RESTPointsPerMinute, points, now)
	return reply{}, "", true
}

// chargeContent charges one content-creating request to the minute and the
// hour, or neither; s.mu is held.
func (s *Sim) chargeContent(principal string, now time.Time) (reply, bool) {
	minute, hour := secKey{principal, kindContentMinute, ""}, secKey{principal, kindContentHour, ""}
	if s.limitsOn.ContentPerHour > 0 {
		if w := s.secWindows[hour]; w != nil && now.Before(w.reset) && w.used >= s.limitsOn.ContentPerHour {
			return secondaryReply(http.StatusForbidden, w.reset.Sub(now)), false
		}
	}
	if wait, ok := s.chargeWindow(minute, s.minute, s.limitsOn.ContentPerMinute, 1, now); !ok {
		return secondaryReply(http.StatusForbidden, wait), false
	}
	s.chargeWindow(hour, 60*s.minute, s.limitsOn.ContentPerHour, 1, now)
	return reply{}, true
}

// isContentCreating tells the routes whose writes create content: every
// write but minting an installation token, which GitHub limits apart.
func isContentCreating(route string) bool {
	return route != "POST /app/installations/{id}/access_tokens"
}

// graphqlPoints is a GraphQL request's secondary-limit points: 5 when its
// operation is a mutation, 1 otherwise (an unreadable body too).
func graphqlPoints(body []byte) int {
	var req struct {
		Query string `json:"query"`
	}
	if json.Unmarshal(body, &req) != nil {
		return 1
	}
	q := req.Query
	for {
		q = strings.TrimSpace(q)
		if !strings.HasPrefix(q, "#") {
			break
		}
		_, q, _ = strings.Cut(q, "\n")
	}
	if strings.HasPrefix(q, "mutation") {
		return 5
	}
	return 1
}

// enter counts a request of principal in flight, unless the concurrency
// limit is reached; leave must follow an admitted enter; s.mu is held.
func (s *Sim) enter(principal string) bool {
	if n := s.limitsOn.Concurrent; n > 0 && s.inFlight[principal] >= n {
		return false
	}
	s.inFlight[principal]++
	return true
}

// leave ends a request enter admitted; s.mu is held.
func (s *Sim) leave(principal string) {
	if s.inFlight[principal]--; s.inFlight[principal] <= 0 {
		delete(s.inFlight, principal)
	}
}

// secondaryReply is GitHub's secondary-limit refusal: status 403 or 429,
// with retry-after in whole seconds, rounded up (0: no header, as GitHub
// sometimes does).
func secondaryReply(status int, retryAfter time.Duration) reply {
	rep := jsonReply(status, githubError{
		Message:          "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
		DocumentationURL: "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits",
	})
	if retryAfter > 0 {
		secs := int(math.Ceil(retryAfter.Seconds()))
		rep.header = http.Header{"Retry-After": {strconv.Itoa(secs)}}
	}
	return rep
}

// isGraphQL tells the GraphQL endpoint's requests.
func isGraphQL(r *http.Request) bool { return r.URL.Path == "/graphql" }
