package forge

import "net/http"

// jwtGate lets one request made with a GitHub App's JWT (a token mint, a
// listing of the installations, a repository's look-up) through at a
// time, per AppClient. GitHub allows "no more than 90 seconds of CPU time
// per 60 seconds of real time", estimated by "the total response time for
// your API requests" ("About secondary rate limits":
// https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits),
// and the JWT's requests are one principal's: one at a time, their
// response times sum to at most 60 s a minute, so a replica starting
// with many installations mints their tokens in turn instead of all at
// once and being refused. Replicas do not share the gate: N of them may
// together spend up to N × 60 s a minute.
type jwtGate chan struct{}

func newJWTGate() jwtGate { return make(jwtGate, 1) }

// roundTrip sends req through next once it holds the gate, and gives the
// gate back when the response's headers came (the response time GitHub
// charges); a request whose context ends while it waits is not sent.
func (g jwtGate) roundTrip(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	if g == nil {
		return next.RoundTrip(req)
	}
	select {
	case g <- struct{}{}:
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	defer func() { <-g }()
	return next.RoundTrip(req)
}
