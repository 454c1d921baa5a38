// Package lease elects one replica of a deployment to run a periodic,
// idempotent background job (a "net"), so that the job's cost stops growing
// with the replica count (docs/design.md).
//
// A lease is a name that one owner holds until an expiry. A [Store] keeps
// leases; [MemoryStore] here and MongoStore in
// [iterion.dev/iterion/pkg/lease/mongolease] are its two twins and pass one
// conformance suite, [iterion.dev/iterion/pkg/lease/leasetest]. [Run] serves a
// term: it campaigns, runs the work while the lease is held, renews, and steps
// down fail-closed before the store could hand the lease to a successor. Its
// [Health] tracks work that outlives its term, its [Event]s report each
// transition, and an [Observer] (Prometheus:
// [iterion.dev/iterion/pkg/lease/leaseprom]) counts terms and store calls.
//
// The package imports only the standard library: a user who brings their own
// Store compiles no database driver and no metrics library.
//
// # Guarantee and limits: for load, not for exclusion
//
// A healthy holder that can reach its store keeps its term, and stops its work
// before the store could elect anyone else. That is what a lease promises, and
// all it promises. Clocks that disagree, a holder that stalls (a GC pause, a
// frozen VM, a goroutine that ignores its context) and the store's round trip
// bound how exclusive a lease is: a holder that stalls past its TTL overlaps
// its successor for the length of the stall. The package does no fencing.
// So elect work that is already idempotent and whose cost scales with the
// number of replicas. Work that must never run twice keeps a claim on the item
// itself; a lease does not replace it.
//
// # Time
//
// The clock is the caller's: every Store call takes now explicitly. Both twins
// keep instants in UTC, truncated to the millisecond, as BSON does ([Stamp]):
// the expiry of a lease taken at now with ttl is trunc(trunc(now)+ttl)
// ([Expiry]), and a lease is expired at its expiry instant.
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
// so that a late Release of an earlier term never deletes a later term's
// lease. It is optional: [Run] uses it when its store implements it and
// falls back to Store.Release otherwise; both twins implement it.
//
// A term is named by a token its caller chooses, unique per Acquire (Run
// draws 128 random bits per attempt). The three Store methods keep their
// meaning: Acquire records no token (it clears any), Renew keeps the token,
// and Release deletes owner's lease whatever its token.
type TermStore interface {
	Store
	// AcquireTerm is Acquire that, when it succeeds, records token as the
	// lease's term, also when the lease was already owner's: the term is
	// the last successful AcquireTerm's. A refusal or an error records
	// nothing. token must not be blank (ErrInvalid).
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
