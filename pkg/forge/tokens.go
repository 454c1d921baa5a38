// Installation tokens an AppClient's replicas share through a TokenStore.

package forge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// TokenMargin is how long before its expiry an installation token stops
// being served from a TokenStore or an AppClient's own copy: a token with
// less left is minted afresh. A minute, as ghinstallation refreshes its
// tokens: it covers a request in flight (RequestTimeout is at most 15 s)
// and clock skew between replicas and GitHub, and keeps the rotation of a
// token minted with a short lifetime (the harness's compressed hour) as it
// was. GitHub's installation tokens live an hour ("Generating an
// installation access token for a GitHub App":
// https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app/generating-an-installation-access-token-for-a-github-app),
// so a token is served for its first 59 minutes.
const TokenMargin = time.Minute

// tokenLifetime is how long GitHub's installation tokens live ("Generating
// an installation access token for a GitHub App", above).
const tokenLifetime = time.Hour

// tokenMaxAhead is the furthest ahead of a replica's clock a token's
// expiry may be: GitHub's lifetime, plus the drift behind GitHub's clock
// an App JWT allows (jwtLifetime; a replica further behind cannot mint).
// A stored expiry further ahead is not GitHub's (a hand-edited or corrupt
// document): trusted, it would have the token sent past its real expiry.
const tokenMaxAhead = tokenLifetime + jwtLifetime

// ErrMalformedToken reports a stored installation token that lacks its
// token or its expiry, or has a field of the wrong type, and a token Put
// refuses for the same reasons. Its messages name the installation and
// the field, never the token.
var ErrMalformedToken = errors.New("forge: malformed installation token")

// InstallationToken is one installation's token as a TokenStore keeps it.
type InstallationToken struct {
	Installation int64
	// Token is the secret: whoever reads it can act as the App on the
	// installation until ExpiresAt. It is never logged.
	Token     string
	ExpiresAt time.Time
	// MintedBy names the replica that minted it (AppConfig.Owner), and
	// MintedAt when, by its clock.
	MintedBy string
	MintedAt time.Time
}

// String names the installation and the expiry, never the token, so a
// token printed by mistake (%v, %s, %+v) does not leak.
func (t InstallationToken) String() string {
	return fmt.Sprintf("installation %d token expiring %s, minted by %q", t.Installation, t.ExpiresAt.UTC().Format(time.RFC3339), t.MintedBy)
}

// GoString is String, for %#v.
func (t InstallationToken) GoString() string { return t.String() }

// LogValue is String, so a token passed to a logger as an attribute does
// not leak either: slog's JSON handler would otherwise write every field,
// the token among them (serve logs JSON).
func (t InstallationToken) LogValue() slog.Value { return slog.StringValue(t.String()) }

// Check reports what makes t unstorable, wrapping ErrMalformedToken: a
// TokenStore's Put refuses such a token.
func (t InstallationToken) Check() error {
	switch {
	case t.Installation <= 0:
		return fmt.Errorf("%w: installation %d: must be positive", ErrMalformedToken, t.Installation)
	case t.Token == "":
		return fmt.Errorf("%w: installation %d: token is empty", ErrMalformedToken, t.Installation)
	case t.ExpiresAt.IsZero():
		return fmt.Errorf("%w: installation %d: expires_at is missing", ErrMalformedToken, t.Installation)
	}
	return nil
}

// TokenStore keeps one installation token per installation, for every
// replica of a deployment to share: a token one replica minted is served
// to the others until it nears expiry, so an App mints about one token per
// installation an hour however many replicas there are. The conformance
// suite pkg/forge/tokenstest pins the contract; MemoryTokenStore and
// pkg/forge/mongotokens pass it. Implementations are safe for concurrent
// use, keep times to the millisecond in UTC, and never put a token in an
// error.
type TokenStore interface {
	// Get returns installation id's stored token; ok is false when none is
	// stored. A stored token of the wrong shape is not returned: the error
	// wraps ErrMalformedToken and names the installation and the field.
	// Get does not look at the expiry; the caller does. The token
	// returned is installation id's (tok.Installation == id).
	Get(ctx context.Context, id int64) (tok InstallationToken, ok bool, err error)
	// Put stores tok as its installation's token, replacing any stored one
	// (the last Put wins: two replicas minting at once both hold valid
	// tokens). A token without its installation, token or expiry is
	// refused with an error wrapping ErrMalformedToken.
	Put(ctx context.Context, tok InstallationToken) error
	// Drop removes installation id's stored token if it is still token, so
	// a replica dropping a token GitHub refused never drops a newer one
	// another replica stored. Dropping what is not stored is not an error.
	Drop(ctx context.Context, id int64, token string) error
}

// MemoryTokenStore is the in-process TokenStore twin: tokens shared by the
// AppClients of one process only. The zero value is ready; safe for
// concurrent use.
type MemoryTokenStore struct {
	mu     sync.Mutex
	tokens map[int64]InstallationToken
}

var _ TokenStore = (*MemoryTokenStore)(nil)

// Get implements TokenStore.
func (s *MemoryTokenStore) Get(_ context.Context, id int64) (InstallationToken, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok, ok := s.tokens[id]
	return tok, ok, nil
}

// Put implements TokenStore.
func (s *MemoryTokenStore) Put(_ context.Context, tok InstallationToken) error {
	if err := tok.Check(); err != nil {
		return err
	}
	tok.ExpiresAt = tok.ExpiresAt.UTC().Truncate(time.Millisecond)
	tok.MintedAt = tok.MintedAt.UTC().Truncate(time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tokens == nil {
		s.tokens = make(map[int64]InstallationToken)
	}
	s.tokens[tok.Installation] = tok
	return nil
}

// Drop implements TokenStore.
func (s *MemoryTokenStore) Drop(_ context.Context, id int64, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tokens[id].Token == token {
		delete(s.tokens, id)
	}
	return nil
}
