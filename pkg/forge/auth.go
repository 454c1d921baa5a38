package forge

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/bradleyfalzon/ghinstallation/v2"
)

// tokenAuth adds a plain token's Authorization header to a copy of each
// request. Safe for concurrent use.
type tokenAuth struct {
	next  http.RoundTripper
	value string // "token <token>"
}

// RoundTrip implements http.RoundTripper.
func (t *tokenAuth) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", t.value)
	return t.next.RoundTrip(r)
}

// authLane charges installation-token refreshes to LaneAuth. ghinstallation
// sends a refresh with the context of the request that needed the token, so
// the refresh would otherwise be charged to that request's lane; this
// transport, between ghinstallation and the counting transport, recognises
// the refresh (POST …/app/installations/{id}/access_tokens) and sends it with
// a context carrying LaneAuth. Other requests pass through untouched. Safe
// for concurrent use.
type authLane struct {
	next http.RoundTripper
	jwt  jwtGate // nil: refreshes are not gated
}

// RoundTrip implements http.RoundTripper.
func (t *authLane) RoundTrip(req *http.Request) (*http.Response, error) {
	if isTokenRefresh(req) {
		return t.jwt.roundTrip(t.next, req.WithContext(WithLane(req.Context(), LaneAuth)))
	}
	return t.next.RoundTrip(req)
}

// isTokenRefresh tells a GitHub App installation-token request.
func isTokenRefresh(req *http.Request) bool {
	if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/access_tokens") {
		return false
	}
	i := strings.Index(req.URL.Path, "/app/installations/")
	return i >= 0 && strings.Count(req.URL.Path[i:], "/") == 4
}

// withAuth wraps counted (the ETag cache or the counting transport) in the
// configured authentication.
func withAuth(cfg *Config, counted http.RoundTripper, apiRoot string) (http.RoundTripper, error) {
	switch {
	case cfg.App != nil:
		atr, err := appsTransport(&authLane{next: counted}, cfg.App.AppID, cfg.App.PrivateKey)
		if err != nil {
			return nil, fmt.Errorf("%w: App.PrivateKey: %w", ErrInvalidConfig, err)
		}
		itr := ghinstallation.NewFromAppsTransport(atr, cfg.App.InstallationID)
		itr.BaseURL = strings.TrimSuffix(apiRoot, "/")
		return itr, nil
	case cfg.Token != "":
		return &tokenAuth{next: counted, value: "token " + cfg.Token}, nil
	default:
		return counted, nil
	}
}
