package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrLost reports that the lease moved on: another owner holds it.
var ErrLost = errors.New("lease: lost: another owner holds it")

// ErrInvalid reports an argument a Store or Run cannot use. Errors that wrap
// it name the bad field and value.
var ErrInvalid = errors.New("lease: invalid argument")

// Store keeps named leases. Implementations are safe for concurrent use.
//
// An error from any method means "no answer": the call may or may not have
// landed. A refusal is never an error: Acquire and Renew report it as
// false, nil, and Release as ErrLost.
type Store interface {
	// Acquire takes the lease when free, expired at now (expiry inclusive),
	// or already owner's. false, nil: another owner holds it unexpired.
	Acquire(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (bool, error)
	// Renew extends owner's own lease and never creates or takes one.
	Renew(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (bool, error)
	// Release gives owner's lease up; nobody's lease: no-op; another's: ErrLost.
	Release(ctx context.Context, name, owner string) error
}

// TermStore is implemented by stores that can scope a release to one term,
// so that a late Release of an earlier term does not delete a later term's
// lease, even when that earlier term's Acquire landed late too. It is
// optional: [Run] uses it when its store implements it and falls back to
// Store.Release otherwise; both twins implement it.
//
// A term is named by a token its caller chooses, unique per Acquire (Run
// draws 128 random bits per attempt). The three Store methods keep their
// meaning: Acquire records no token (it clears any), Renew keeps the token,
// and Release deletes owner's lease whatever its token.
//
// The term moves only with the expiry. Calls reach the store in any order,
// so the store orders one owner's terms by their send instants, which it
// sees only as the expiry trunc(trunc(now)+ttl) each asks for: an
// AcquireTerm that re-takes owner's own lease records its token only when
// its expiry is strictly after the lease's. A late AcquireTerm, sent before
// the term that holds the lease (or before that term's last renewal), asks
// for an expiry at or before the lease's, and so leaves the term alone; its
// ReleaseTerm is then refused like any other term's. The condition is
// strict because instants are kept in milliseconds: two sends in the same
// millisecond ask for the same expiry and the store cannot tell which came
// first, so "not backward" would let a late send of the same millisecond
// take the term back. The price is that a new term sent in the same
// millisecond as the owner's last Acquire or Renew of that lease (with the
// same ttl) is granted but leaves the earlier term's token; [Run] never
// does that, as it starts a new term at least a millisecond after its
// previous call on the lease. A re-take with a shorter ttl than the lease
// was taken or renewed with may likewise leave the term; its own
// ReleaseTerm is then refused and the lease expires instead.
type TermStore interface {
	Store
	// AcquireTerm is Acquire that, when it succeeds, records token as the
	// lease's term when it took the lease (free, or expired and another's)
	// or moved owner's own lease's expiry forward; an AcquireTerm of
	// owner's lease that moves no expiry succeeds and leaves the term. A
	// refusal or an error records nothing. token must not be blank
	// (ErrInvalid).
	AcquireTerm(ctx context.Context, name, owner string, now time.Time, ttl time.Duration, token string) (bool, error)
	// ReleaseTerm is Release scoped to the term token: it deletes owner's
	// lease when its term is token, or when it has none (a plain Acquire
	// took it). Nobody's lease: no-op. Another owner's lease, or owner's
	// lease of another term: ErrLost, changing nothing. token must not be
	// blank (ErrInvalid).
	ReleaseTerm(ctx context.Context, name, owner, token string) error
}

// CheckToken is what AcquireTerm and ReleaseTerm check after [CheckArgs] or
// [CheckReleaseArgs]: token not blank, else an error wrapping [ErrInvalid]
// naming the field and value.
func CheckToken(token string) error {
	if strings.TrimSpace(token) == "" {
		return fmt.Errorf("%w: token %q is empty", ErrInvalid, token)
	}
	return nil
}

// Holder is who holds a lease and until when, as a store last recorded it.
// A Holder whose Expires is at or before now is expired but, until someone
// takes it, still its owner's.
type Holder struct {
	Name    string
	Owner   string
	Expires time.Time
}

// Inspector is implemented by stores that can list their leases. It is
// optional, so a user's Store need not implement it; both twins do.
type Inspector interface {
	// Holders returns every lease the store keeps, sorted by name.
	Holders(ctx context.Context) ([]Holder, error)
}

// MinTTL is the shortest TTL a Store accepts: the stores keep milliseconds.
const MinTTL = time.Millisecond

// CheckArgs is what Acquire and Renew check before touching their store, in
// the order the conformance suite pins: name and owner not blank, ttl at
// least [MinTTL] (an error wrapping [ErrInvalid] naming the field and value),
// then ctx not done (ctx's error, wrapped to name op and name). A Store whose
// calls start with it fail, changing nothing, on every bad argument the
// suite tries. op names the call in the error, e.g. "acquire".
func CheckArgs(ctx context.Context, op, name, owner string, ttl time.Duration) error {
	if err := checkNames(name, owner); err != nil {
		return err
	}
	if ttl < MinTTL {
		return fmt.Errorf("%w: ttl %v is under %v", ErrInvalid, ttl, MinTTL)
	}
	return ctxErr(ctx, op, name)
}

// CheckReleaseArgs is [CheckArgs] for Release, which has no ttl.
func CheckReleaseArgs(ctx context.Context, name, owner string) error {
	if err := checkNames(name, owner); err != nil {
		return err
	}
	return ctxErr(ctx, "release", name)
}

// checkNames validates the arguments every Store method shares.
func checkNames(name, owner string) error {
	if strings.TrimSpace(name) == "" {
		return fmt.Errorf("%w: name %q is empty", ErrInvalid, name)
	}
	if strings.TrimSpace(owner) == "" {
		return fmt.Errorf("%w: owner %q is empty", ErrInvalid, owner)
	}
	return nil
}

// ctxErr is ctx's error, if ctx is done, wrapped to name the call. The twins
// check it after their arguments and before touching their store, so that a
// call on a done context changes nothing.
func ctxErr(ctx context.Context, op, name string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("lease: %s %q: %w", op, name, err)
	}
	return nil
}

// Stamp is now as a Store keeps it: UTC, truncated to the millisecond, as
// BSON keeps instants.
func Stamp(now time.Time) time.Time { return now.UTC().Truncate(time.Millisecond) }

// Expiry is the instant a lease taken or renewed at now with ttl expires:
// trunc(trunc(now)+ttl), UTC. A lease is expired at this instant.
func Expiry(now time.Time, ttl time.Duration) time.Time {
	return Stamp(Stamp(now).Add(ttl))
}
