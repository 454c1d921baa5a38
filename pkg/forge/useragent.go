package forge

import (
	"net/http"
	"strings"
)

// userAgent names the sender of every request it passes: its User-Agent
// header becomes agent followed by the request's lane, so that GitHub's
// side (its logs, a support ticket, the simulator's request log) can tell
// which replica and which lane spent an installation's budget. GitHub
// requires a User-Agent ("Getting started with the REST API", User-Agent:
// https://docs.github.com/rest/using-the-rest-api/getting-started-with-the-rest-api#user-agent).
// It never modifies the request it is given. Safe for concurrent use.
type userAgent struct {
	next  http.RoundTripper
	agent string
}

// RoundTrip implements http.RoundTripper.
func (t *userAgent) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set("User-Agent", t.agent+" lane/"+laneOf(req.Context()))
	return t.next.RoundTrip(r)
}

// validUserAgent tells whether s can be sent as a header value: printable
// ASCII, no line breaks.
func validUserAgent(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r > 0x7e })
}
