package forge

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

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
		return newRenewing(atr, cfg.App.InstallationID, strings.TrimSuffix(apiRoot, "/")), nil
	case cfg.Token != "":
		return &tokenAuth{next: counted, value: "token " + cfg.Token}, nil
	default:
		return counted, nil
	}
}

// renewing is single-installation mode's installation transport:
// ghinstallation's, which mints a token and keeps it until a minute before
// its expiry, made afresh when GitHub refuses the token. ghinstallation
// never drops a token GitHub answers 401 (revoked, or expired early by
// GitHub's clock), so every request would be refused until the token's
// expiry, up to an hour. On a 401 the transport that sent the request is
// replaced by a new one, which mints on its next request, and the request
// is sent once more through it when its body can be sent again; the
// second answer is returned whatever it is, so a refused token never
// loops, as in App mode (installationAuth). A failed mint's answer is
// closed. Safe for concurrent use;
// requests refused together replace the transport once.
type renewing struct {
	atr     *ghinstallation.AppsTransport
	id      int64
	baseURL string

	mu  sync.Mutex
	cur *ghinstallation.Transport
}

func newRenewing(atr *ghinstallation.AppsTransport, id int64, baseURL string) *renewing {
	r := &renewing{atr: atr, id: id, baseURL: baseURL}
	r.cur = r.fresh()
	return r
}

// fresh is a new ghinstallation transport, holding no token yet.
func (r *renewing) fresh() *ghinstallation.Transport {
	itr := ghinstallation.NewFromAppsTransport(r.atr, r.id)
	itr.BaseURL = r.baseURL
	return itr
}

// current is the transport to send with.
func (r *renewing) current() *ghinstallation.Transport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// renew replaces refused, whose token GitHub refused, unless another
// request has replaced it already.
func (r *renewing) renew(refused *ghinstallation.Transport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == refused {
		r.cur = r.fresh()
	}
}

// RoundTrip implements http.RoundTripper.
func (r *renewing) RoundTrip(req *http.Request) (*http.Response, error) {
	itr := r.current()
	resp, err := send(itr, req)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	r.renew(itr)
	if req.Body != nil && req.GetBody == nil {
		return resp, nil // the body is spent; the next request mints
	}
	retry := req.Clone(req.Context())
	if req.GetBody != nil {
		if retry.Body, err = req.GetBody(); err != nil {
			return resp, nil
		}
	}
	drain(resp)
	return send(r.current(), retry)
}

// send sends req through itr, closing the answer to a mint that failed:
// ghinstallation leaves it open (a 404 of an uninstalled installation, a
// 401 refusing the JWT, a 403), its connection and reading goroutine held
// for good.
func send(itr *ghinstallation.Transport, req *http.Request) (*http.Response, error) {
	resp, err := itr.RoundTrip(req)
	if herr, ok := errors.AsType[*ghinstallation.HTTPError](err); ok && herr.Response != nil {
		drain(herr.Response)
	}
	return resp, err
}
