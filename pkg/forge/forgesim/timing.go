package forgesim

import (
	"context"
	"net/http"
	"time"
)

// The latency model's layer over the api pipeline: the CPU-time secondary
// limit before a request is answered, the answer's time and the GraphQL
// timeout after, and the wait before it is written.

// CPU-time windows, beside the secondary limits' windows (secondary.go);
// their used is in milliseconds of GitHub's time.
const (
	kindCPU        = "cpu_ms"
	kindGraphQLCPU = "graphql_cpu_ms"
)

// admitCPU refuses a request of principal for resource res ("core" or
// "graphql") while its minute's response time has reached the CPU-time
// limit, or, for GraphQL, the GraphQL share of it; s.mu is held.
//
// "No more than 90 seconds of CPU time per 60 seconds of real time is
// allowed. No more than 60 seconds of this CPU time may be for the GraphQL
// API. You can roughly estimate the CPU time by measuring the total
// response time for your API requests." ("Rate limits for the REST API",
// About secondary rate limits:
// https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits).
// So the simulator counts each principal's modelled response time per
// minute (its minute, WithMinute), and refuses once the minute has spent
// the limit: GitHub cannot know a request's time before it answers, so the
// request that crosses the limit is answered, and the next is refused.
// Only concurrent requests can spend more time than a minute holds.
func (s *Sim) admitCPU(principal, res string, now time.Time) (reply, bool) {
	if wait, full := s.cpuSpent(principal, kindCPU, s.limitsOn.CPUPerMinute, now); full {
		return secondaryReply(http.StatusForbidden, wait), false
	}
	if res != "graphql" {
		return reply{}, true
	}
	if wait, full := s.cpuSpent(principal, kindGraphQLCPU, s.limitsOn.GraphQLCPUPerMinute, now); full {
		return secondaryReply(http.StatusForbidden, wait), false
	}
	return reply{}, true
}

// cpuSpent tells whether principal's CPU-time window of kind has spent
// limit (limit <= 0: no limit), and how long until it resets; s.mu is held.
func (s *Sim) cpuSpent(principal, kind string, limit time.Duration, now time.Time) (time.Duration, bool) {
	w := s.secWindows[secKey{principal, kind, ""}]
	if limit <= 0 || w == nil || !now.Before(w.reset) || time.Duration(w.used)*time.Millisecond < limit {
		return 0, false
	}
	return w.reset.Sub(now), true
}

// chargeCPU adds took to principal's CPU-time windows for res, past their
// limits if it must (admitCPU refuses the next request); s.mu is held.
func (s *Sim) chargeCPU(principal, res string, took time.Duration, now time.Time) {
	kinds := []string{kindCPU}
	if res == "graphql" {
		kinds = append(kinds, kindGraphQLCPU)
	}
	for _, kind := range kinds {
		w := s.openWindow(secKey{principal, kind, ""}, s.minute, now)
		w.used += int(took.Milliseconds())
		s.noteCPUMinute(principal, cpuResource[kind], w, took)
	}
}

// answerTime is how long rep, an answer h gave, takes under the latency
// model (0 with the model off, or when rep is free); it charges that time
// to principal's CPU-time windows, and turns a request that would run past
// GraphQLTimeout or RESTTimeout into GitHub's timeout answer, which takes
// the timeout and is charged as the answer would have been; s.mu is held.
func (s *Sim) answerTime(r *http.Request, principal, res string, body []byte, rep reply, now time.Time) (reply, time.Duration) {
	m := s.latency
	if m == nil || rep.free {
		return rep, 0
	}
	var (
		took     time.Duration
		timedOut bool
		rng      = m.rng
	)
	if res == "graphql" {
		rng = m.source(principal, body)
		took, timedOut = m.GraphQLTime(rng, graphqlNodes(body))
	} else if took = m.draw(rng, m.restMedian(r.Pattern)); took > RESTTimeout {
		// GitHub terminates the request with a "Server Error"
		// (RESTTimeout). The docs name no status; clients meet a 502 with
		// that message after 10 s (google/go-github#1037, a page of 100
		// repositories). No draw picks it, so the model's stream, and
		// every other request's time, stays as it was. The request is
		// charged, as any answered one; a write the timeout cuts short has
		// been made, as GitHub does not say it is undone.
		took, rep = RESTTimeout, reply{status: http.StatusBadGateway, body: githubError{Message: "Server Error"}}
	}
	if timedOut {
		// GitHub stops the query at the timeout and answers 502 or 504
		// with "We couldn't respond to your request in time"; timeouts
		// count against the primary limit ("Rate limits and query limits
		// for the GraphQL API", Timeouts:
		// https://docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api#timeouts;
		// "Including timeouts in primary rate limits",
		// https://github.blog/changelog/2025-07-21-including-timeouts-in-primary-rate-limits).
		status := http.StatusGatewayTimeout
		if rng.Float64() < m.BadGatewayShare {
			status = http.StatusBadGateway
		}
		rep = reply{status: status, points: rep.points, body: githubError{
			Message:          "We couldn't respond to your request in time. Sorry about that. Please try resubmitting your request and contact us if the problem persists.",
			DocumentationURL: graphqlDoc + "#timeouts",
		}}
	}
	s.chargeCPU(principal, res, took, now)
	return rep, took
}

// cpuResource is the resource a CPU-time window kind counts, as CPUMinute
// names it.
var cpuResource = map[string]string{kindCPU: "all", kindGraphQLCPU: "graphql"}

// scaled is took of GitHub's time on the simulator's clock: scaled by its
// minute.
func (s *Sim) scaled(took time.Duration) time.Duration {
	return time.Duration(float64(took) * float64(s.minute) / float64(time.Minute))
}

// wait holds an answer for took of GitHub's time: took scaled by the
// simulator's minute, on the Go runtime's timers (a synctest bubble's
// virtual time in tests). It reports false when ctx ends first: the client
// gave up, or the server is shutting down.
func (s *Sim) wait(ctx context.Context, took time.Duration) bool {
	if took <= 0 {
		return true
	}
	t := time.NewTimer(s.scaled(took))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
