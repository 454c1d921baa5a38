// The installation transport of an AppClient: each installation's token
// comes from the TokenStore, and is minted with the App's JWT only when
// none there has TokenMargin left.

package forge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// installationAuth authenticates installation id's requests with its
// token: this replica's copy while it has TokenMargin left, else the
// TokenStore's, else one it mints and stores. A request GitHub answers
// 401 had its token refused (revoked, say): the token is dropped here and
// from the store, and the request is sent once more with a fresh one; the
// second answer is returned whatever it is, so a refused token never
// loops. A request GitHub answers as a suspended installation's
// (suspendedAnswer) had its token blocked: the token is dropped here and
// from the store, and the request fails with an error wrapping
// ErrSuspended instead of the answer, so no rate gate learns from it and
// no caller reads it as a missing permission; the next request mints.
// Safe for concurrent use; concurrent requests of one installation mint
// at most once between them, and one waiting for another's mint gives up
// when its context ends.
type installationAuth struct {
	id     int64
	store  TokenStore
	mint   func(ctx context.Context, id int64) (InstallationToken, error)
	next   http.RoundTripper
	logger *slog.Logger

	// turn is held by the one request at a time that looks past cur
	// (the store, a mint): a channel, not a mutex, so a request waiting
	// for its turn gives up at its deadline instead of at the end of
	// another's mint and store write.
	turn chan struct{}
	mu   sync.Mutex
	cur  InstallationToken // this replica's copy; zero: none
}

// servable tells whether tok may be served at now: it has TokenMargin left,
// and its expiry is no further ahead than tokenMaxAhead. now is the
// machine's clock (time.Now), as ghinstallation judges expiry: expires_at
// is GitHub's time, not the AppClient's (AppConfig.Now may stand still for
// the hourly line).
func servable(tok InstallationToken, now time.Time) bool {
	return tok.Token != "" && !now.Add(TokenMargin).After(tok.ExpiresAt) && !tok.ExpiresAt.After(now.Add(tokenMaxAhead))
}

// RoundTrip implements http.RoundTripper.
func (t *installationAuth) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	tok, err := t.token(ctx, "")
	if err != nil {
		closeBody(req)
		return nil, err
	}
	resp, err := t.send(req, tok)
	if err == nil && suspendedAnswer(resp) {
		return nil, t.dropSuspended(ctx, resp, tok)
	}
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	t.forget(ctx, tok)
	if req.Body != nil && req.GetBody == nil {
		return resp, nil // the body is spent; the next request mints
	}
	again, err := t.token(ctx, tok)
	if err != nil {
		t.logger.Warn("forge: GitHub refused an installation token and minting a fresh one failed", "installation", t.id, "err", err)
		return resp, nil
	}
	retry := req.Clone(ctx)
	if req.GetBody != nil {
		if retry.Body, err = req.GetBody(); err != nil {
			return resp, nil
		}
	}
	drain(resp)
	resp, err = t.send(retry, again)
	if err == nil && suspendedAnswer(resp) {
		return nil, t.dropSuspended(ctx, resp, again)
	}
	return resp, err
}

// dropSuspended drops tok, which GitHub refused for its installation's
// suspension in resp, and returns the request's error.
func (t *installationAuth) dropSuspended(ctx context.Context, resp *http.Response, tok string) error {
	drain(resp)
	t.forget(ctx, tok)
	return &SuspendedTokenError{Installation: t.id}
}

// SuspendedTokenError is the error of a request an App installation's
// Client made with a token GitHub refused for the installation's
// suspension: it wraps ErrSuspended and names the installation, whose
// token was dropped, so a caller that does not know which installation's
// Client it used can have the installation checked
// (AppClient.InstallationGone) before the next request mints in vain.
type SuspendedTokenError struct {
	Installation int64
}

func (e *SuspendedTokenError) Error() string {
	return fmt.Sprintf("forge: installation %d's token refused: %v", e.Installation, ErrSuspended)
}

// Unwrap returns ErrSuspended.
func (e *SuspendedTokenError) Unwrap() error { return ErrSuspended }

// suspensionMessage is the message of GitHub's 403 to a token mint for a
// suspended installation, as clients have recorded it
// (https://github.com/octokit/octokit.rb/pull/1307, beside the 403 that
// "Create an installation access token for an app" documents:
// https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app).
const suspensionMessage = "This installation has been suspended"

// suspendedAnswer tells whether resp is GitHub's refusal of a request for
// its installation's suspension: 403 with suspensionMessage. GitHub
// documents that a suspension blocks the App's access to the account's
// resources ("Suspending a GitHub App installation":
// https://docs.github.com/apps/maintaining-github-apps/suspending-a-github-app-installation),
// but not the answer a token minted before it gets; the message is the
// one observed on the mint, which the simulator answers such a request
// with too. The body is read and put back for the caller.
func suspendedAnswer(resp *http.Response) bool {
	if resp.StatusCode != http.StatusForbidden {
		return false
	}
	var e struct {
		Message string `json:"message"`
	}
	return json.Unmarshal(peekBody(resp), &e) == nil && e.Message == suspensionMessage
}

// send sends a copy of req with tok's Authorization header, and GitHub's
// v3 media type when it names none, as ghinstallation's installation
// transport did.
func (t *installationAuth) send(req *http.Request, tok string) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "token "+tok)
	if r.Header.Get("Accept") == "" {
		r.Header.Set("Accept", "application/vnd.github.v3+json")
	}
	return t.next.RoundTrip(r)
}

// tokenPutTimeout bounds the store write of a fresh token. The write has
// a deadline of its own, not the request's: a mint that waited its turn on
// the App's JWT often leaves the request too little time to store it (141
// of a replica's first 1,000 mints at 1,000 installations, in one
// full-size run), and then every other replica mints the installation's
// token again.
const tokenPutTimeout = 5 * time.Second

// tokenStoreWait bounds a read of the TokenStore, and a drop, on a
// request's path. A read by _id answers in milliseconds; one that has not
// answered in two seconds is a store that stalls, and waiting for it until
// the request's deadline would leave no time to mint: every request of the
// installation would fail for as long as the stall lasts, where a replica
// that cannot reach the store at all mints its own and serves.
const tokenStoreWait = 2 * time.Second

// token is the token to send a request with: this replica's copy while it
// is servable, else the store's while it is and is not refused (a token
// GitHub just refused, which a store that failed to drop it may still
// hold), else a fresh one, minted and stored (within tokenPutTimeout,
// even when ctx ends first). A store that cannot be read within
// tokenStoreWait, or written, is logged and minted around: a store that
// stalls costs a request tokenStoreWait, never its deadline. The token a
// mint returns is used even with less than TokenMargin left, so a short
// lifetime mints once per request, never in a loop. Without a servable
// copy here, a ctx that has ended, while waiting for the turn or by the
// time it gets it, fails without reading the store or minting.
func (t *installationAuth) token(ctx context.Context, refused string) (string, error) {
	if tok, ok := t.current(refused); ok {
		return tok, nil
	}
	select {
	case t.turn <- struct{}{}:
		defer func() { <-t.turn }()
	case <-ctx.Done():
	}
	// Checked after the select too, which picks at random when the turn
	// is free and ctx done.
	if ctx.Err() != nil {
		return "", fmt.Errorf("forge: waiting for installation %d's token: %w", t.id, context.Cause(ctx))
	}
	if tok, ok := t.current(refused); ok {
		return tok, nil // minted or read by the request that had the turn
	}
	now := time.Now()
	gctx, cancel := context.WithTimeout(ctx, tokenStoreWait)
	stored, ok, err := t.store.Get(gctx, t.id)
	cancel()
	switch {
	case err != nil:
		t.logger.Warn("forge: reading the installation's stored token failed; minting one", "installation", t.id, "err", err)
	case !ok:
	case stored.Installation != t.id:
		// Sent for this installation, another's token would read as
		// 404s, which drop no token.
		t.logger.Warn("forge: the token store answered another installation's token; minting one", "installation", t.id, "stored_installation", stored.Installation)
	case stored.ExpiresAt.After(now.Add(tokenMaxAhead)):
		t.logger.Warn("forge: the installation's stored token expires further ahead than GitHub's tokens live; minting one", "installation", t.id, "expires_at", stored.ExpiresAt.Format(time.RFC3339))
	case servable(stored, now) && stored.Token != refused:
		t.keep(stored)
		return stored.Token, nil
	}
	fresh, err := t.mint(ctx, t.id)
	if err != nil {
		return "", fmt.Errorf("forge: minting installation %d's token: %w", t.id, err)
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tokenPutTimeout)
	err = t.store.Put(pctx, fresh)
	cancel()
	if err != nil {
		t.logger.Warn("forge: storing the installation's fresh token failed; other replicas mint their own", "installation", t.id, "err", err)
	}
	t.keep(fresh)
	return fresh.Token, nil
}

// current is this replica's copy of the token while it is servable and
// not refused.
func (t *installationAuth) current(refused string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if servable(t.cur, time.Now()) && t.cur.Token != refused {
		return t.cur.Token, true
	}
	return "", false
}

// keep makes tok this replica's copy.
func (t *installationAuth) keep(tok InstallationToken) {
	t.mu.Lock()
	t.cur = tok
	t.mu.Unlock()
}

// forget drops tok, which GitHub refused, from this replica's copy and
// from the store (only if it is still tok there), waiting for the store
// tokenStoreWait at most so the retry has time to mint.
func (t *installationAuth) forget(ctx context.Context, tok string) {
	t.mu.Lock()
	if t.cur.Token == tok {
		t.cur = InstallationToken{}
	}
	t.mu.Unlock()
	dctx, cancel := context.WithTimeout(ctx, tokenStoreWait)
	defer cancel()
	if err := t.store.Drop(dctx, t.id, tok); err != nil {
		t.logger.Warn("forge: dropping the installation's refused token from the store failed", "installation", t.id, "err", err)
	}
}

// mint mints a token for installation id (POST
// /app/installations/{id}/access_tokens with the App's JWT: "Create an
// installation access token for an app",
// https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app),
// charged to LaneAuth and to installation id. It passes
// the App's rate gate: a mint the gate holds back, or GitHub refuses with
// a rate limit, fails with a *RateLimitError whose Reset is when to mint
// again. Its errors never carry the token.
func (a *AppClient) mint(ctx context.Context, id int64) (InstallationToken, error) {
	ctx = withInstallation(WithLane(ctx, LaneAuth), id)
	it, _, err := a.minter.Apps.CreateInstallationToken(ctx, id, nil)
	if err != nil {
		return InstallationToken{}, a.app.wrap(ctx, fmt.Sprintf("mint installation %d's token", id), err)
	}
	now := time.Now()
	// An expiry further ahead than tokenMaxAhead is held to it, so the
	// token is servable (a later one would have every request mint).
	exp := it.GetExpiresAt().Time
	if !exp.IsZero() && exp.After(now.Add(tokenMaxAhead)) {
		exp = now.Add(tokenMaxAhead)
	}
	tok := InstallationToken{Installation: id, Token: it.GetToken(), ExpiresAt: exp, MintedBy: a.cfg.Owner, MintedAt: now}
	if err := tok.Check(); err != nil {
		return InstallationToken{}, fmt.Errorf("forge: GitHub's answer to a token mint: %w", err)
	}
	return tok, nil
}

// closeBody closes req's body, as a RoundTripper must even when it sends
// nothing.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// drain reads what is left of resp's body, up to 64 KiB so the connection
// can be reused, and closes it.
func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}
