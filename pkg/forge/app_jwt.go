package forge

import (
	"context"
	"net/http"
)

// jwtGate lets one request made with a GitHub App's JWT (a token mint, a
// listing of the installations, a repository's look-up) through at a
// time, per AppClient. GitHub allows "no more than 90 seconds of CPU time
// per 60 seconds of real time", estimated by "the total response time for
// your API requests" ("About secondary rate limits":
// https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits),
// and the JWT's requests are one principal's: one at a time, their
// response times sum to about 60 s a minute at most, so a replica starting
// with many installations mints their tokens in turn instead of all at
// once and being refused. Replicas do not share the gate: N of them may
// together spend up to N × 60 s a minute.
type jwtGate chan struct{}

func newJWTGate() jwtGate { return make(jwtGate, 1) }

// roundTrip sends req through next once it holds the gate. The gate is
// given back when GitHub answered (the response time it charges), not
// when req's context ends: a caller that gives up on a request in flight
// gets its context's error at once, but GitHub still spends the time, so
// the next request waits for the answer. A request whose context ends
// while it waits for the gate is not sent.
func (g jwtGate) roundTrip(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	if g == nil {
		return next.RoundTrip(req)
	}
	select {
	case g <- struct{}{}:
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	type answer struct {
		resp *http.Response
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := next.RoundTrip(req.WithContext(context.WithoutCancel(req.Context())))
		<-g
		done <- answer{resp, err}
	}()
	select {
	case a := <-done:
		return a.resp, a.err
	case <-req.Context().Done():
		go func() {
			if a := <-done; a.resp != nil {
				a.resp.Body.Close()
			}
		}()
		return nil, req.Context().Err()
	}
}
