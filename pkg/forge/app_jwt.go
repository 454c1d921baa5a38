package forge

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/golang-jwt/jwt/v4"
)

// jwtBackdate is how far before now an App JWT says it was issued (iat).
// GitHub refuses a JWT issued in its future, and "To protect against clock
// drift, we recommend that you set this 60 seconds in the past"
// ("Generating a JSON Web Token (JWT) for a GitHub App":
// https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-json-web-token-jwt-for-a-github-app).
// ghinstallation sets it 30 seconds back, so a replica whose clock ran
// more than 30 seconds ahead of GitHub's had every mint and list refused.
const jwtBackdate = time.Minute

// jwtLifetime is how long after now an App JWT expires (exp). The page
// above takes one "no more than 10 minutes into the future"; five
// minutes keep a JWT inside that for a replica whose clock runs up to
// five minutes ahead of GitHub's, and unexpired for one up to five
// minutes behind (ghinstallation's expire 90 seconds from now: a replica
// more than 90 seconds behind had every JWT refused).
const jwtLifetime = 5 * time.Minute

// driftSigner signs an App JWT with jwtBackdate and jwtLifetime around
// the machine's clock instead of the times ghinstallation chose.
type driftSigner struct{ ghinstallation.Signer }

// Sign implements ghinstallation.Signer.
func (s driftSigner) Sign(claims jwt.Claims) (string, error) {
	rc, ok := claims.(*jwt.RegisteredClaims)
	if !ok {
		return s.Signer.Sign(claims)
	}
	c := *rc
	now := time.Now()
	c.IssuedAt = jwt.NewNumericDate(now.Add(-jwtBackdate))
	c.ExpiresAt = jwt.NewNumericDate(now.Add(jwtLifetime))
	return s.Signer.Sign(&c)
}

// appsTransport is ghinstallation's App transport over next, for App
// appID with the PEM-encoded RSA privateKey, its JWTs signed by
// driftSigner.
func appsTransport(next http.RoundTripper, appID int64, privateKey []byte) (*ghinstallation.AppsTransport, error) {
	key, err := jwt.ParseRSAPrivateKeyFromPEM(privateKey)
	if err != nil {
		return nil, fmt.Errorf("could not parse private key: %w", err)
	}
	signer := driftSigner{ghinstallation.NewRSASigner(jwt.SigningMethodRS256, key)}
	return ghinstallation.NewAppsTransportWithOptions(next, appID, ghinstallation.WithSigner(signer))
}

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

// jwtAnswerWait bounds how long a request sent through the gate is waited
// for once its caller gave up: GitHub ends a REST request that takes over
// 10 seconds ("Troubleshooting the REST API", Timeouts:
// https://docs.github.com/rest/using-the-rest-api/troubleshooting-the-rest-api#timeouts).
const jwtAnswerWait = 10 * time.Second

// roundTrip sends req through next once it holds the gate, and holds it
// until GitHub answered. A request whose context ends while it waits for
// the gate, or has ended when it gets the gate, is not sent: it leaves the
// gate free, its body closed, and fails with the context's error. One sent
// is waited for even if its context ends, however it ends, but
// jwtAnswerWait more at most: GitHub spends the response time either way,
// and a mint's token, kept by the installation's transport, serves its next
// request instead of being minted again. The answer's body can be read as
// long.
func (g jwtGate) roundTrip(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	if g == nil {
		return next.RoundTrip(req)
	}
	select {
	case g <- struct{}{}:
		defer func() { <-g }()
	case <-req.Context().Done():
	}
	// Checked after the select too, which picks at random when the gate
	// is free and the context done. A RoundTripper closes the request's
	// body, errors included (net/http's RoundTripper doc).
	if err := req.Context().Err(); err != nil {
		closeBody(req)
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(req.Context()))
	stop := context.AfterFunc(req.Context(), func() { time.AfterFunc(jwtAnswerWait, cancel) })
	release := func() { stop(); cancel() }
	resp, err := next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		release()
		return nil, err
	}
	resp.Body = releasingBody{ReadCloser: resp.Body, release: release}
	return resp, nil
}

// releasingBody is an answer's body that calls release once closed.
type releasingBody struct {
	io.ReadCloser
	release func()
}

// Close closes the body, then calls release.
func (b releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}

// MintOverrun is the most a Mint may take to return after its context
// ended: a mint GitHub was sent is waited for up to jwtAnswerWait more,
// and the token it brings is stored within tokenPutTimeout. A Mint later
// than that has a request that ignores its cancellation.
const MintOverrun = jwtAnswerWait + tokenPutTimeout

// Mint makes sure installation id has a token its Client can use: this
// replica's, else the TokenStore's, else one it mints (through the JWT's
// gate, within ctx) and stores, as the Client's own requests would; the
// token is the one they then send. A caller that has more time than one request's deadline (a sweep
// pass has an interval) waits for its turn here rather than inside a
// request. An id not in the known set wraps ErrNotInstalled. It returns
// by MintOverrun after ctx ends, unless a request ignores its
// cancellation.
func (a *AppClient) Mint(ctx context.Context, id int64) error {
	if _, err := a.Installation(id); err != nil {
		return err
	}
	a.mu.Lock()
	in := a.known[id]
	a.mu.Unlock()
	if in == nil || in.tokens == nil {
		return fmt.Errorf("%w: installation %d is not one of App %d's known installations", ErrNotInstalled, id, a.cfg.AppID)
	}
	_, err := in.tokens.token(ctx, "") // its error names the installation
	return err
}
