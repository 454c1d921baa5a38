package lease

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// MemoryStore is the in-memory twin of mongolease.MongoStore: one process's
// leases, kept in a map. It elects among the goroutines of one process, which
// is what a deployment without Mongo runs (docs/design.md, consequences: one process
// elects itself), and what tests use.
//
// The zero value is an empty store, ready to use. A MemoryStore is safe for
// concurrent use and must not be copied after first use.
type MemoryStore struct {
	mu     sync.Mutex
	leases map[string]memoryLease
}

// memoryLease is one lease as MemoryStore keeps it; expires is a stamp.
type memoryLease struct {
	owner   string
	expires time.Time
	token   string // the term's, "" when a plain Acquire took it
}

var (
	_ Store     = (*MemoryStore)(nil)
	_ TermStore = (*MemoryStore)(nil)
	_ Inspector = (*MemoryStore)(nil)
)

// NewMemoryStore returns an empty MemoryStore, the same as its zero value.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

// Acquire takes the lease name for owner until trunc(trunc(now)+ttl) when it
// is free, expired at now, or already owner's, and reports whether it did.
// It never moves an expiry backward. It returns false, nil when another owner
// holds the lease unexpired, and an error, changing nothing, when an argument
// is invalid (ErrInvalid) or ctx is done.
func (m *MemoryStore) Acquire(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (bool, error) {
	if err := CheckArgs(ctx, "acquire", name, owner, ttl); err != nil {
		return false, err
	}
	return m.acquire(name, owner, now, ttl, ""), nil
}

// AcquireTerm is Acquire that records token as the lease's term when it
// succeeds and moves the expiry forward (see [TermStore]). A blank token is
// an error wrapping ErrInvalid.
func (m *MemoryStore) AcquireTerm(ctx context.Context, name, owner string, now time.Time, ttl time.Duration, token string) (bool, error) {
	if err := CheckArgs(ctx, "acquire", name, owner, ttl); err != nil {
		return false, err
	}
	if err := CheckToken(token); err != nil {
		return false, err
	}
	return m.acquire(name, owner, now, ttl, token), nil
}

// acquire is Acquire's and AcquireTerm's write, recording token ("" for
// none) on success.
func (m *MemoryStore) acquire(name, owner string, now time.Time, ttl time.Duration, token string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.leases[name]
	if ok && l.owner != owner && Stamp(now).Before(l.expires) {
		return false
	}
	if !ok || l.owner != owner {
		// A takeover's expiry is always later than the old one: the old one
		// is at or before now, and the new one is at least now + MinTTL.
		l = memoryLease{owner: owner}
	}
	exp := Expiry(now, ttl)
	// A term-scoped re-take that does not move the expiry forward is a
	// late or same-millisecond call: the term stays (see TermStore).
	if token == "" || exp.After(l.expires) {
		l.token = token
	}
	m.put(name, l, exp)
	return true
}

// Renew extends owner's own lease name to trunc(trunc(now)+ttl), unless it
// already expires later, and reports whether owner held it. A lease past its
// expiry that nobody took is still owner's and renewable. Renew never creates
// or takes a lease: it returns false, nil when the lease is absent or
// another's. It returns an error, changing nothing, when an argument is
// invalid (ErrInvalid) or ctx is done.
func (m *MemoryStore) Renew(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (bool, error) {
	if err := CheckArgs(ctx, "renew", name, owner, ttl); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.leases[name]
	if !ok || l.owner != owner {
		return false, nil
	}
	m.put(name, l, Expiry(now, ttl))
	return true, nil
}

// Release deletes owner's lease name, expired or not. Releasing a lease
// nobody holds is a no-op that returns nil; releasing another owner's returns
// ErrLost and changes nothing. It returns an error, changing nothing, when an
// argument is invalid (ErrInvalid) or ctx is done.
func (m *MemoryStore) Release(ctx context.Context, name, owner string) error {
	if err := CheckReleaseArgs(ctx, name, owner); err != nil {
		return err
	}
	return m.release(name, owner, "")
}

// ReleaseTerm deletes owner's lease name when its term is token or it has
// none (see [TermStore]). Nobody's lease: no-op, nil; another owner's, or
// owner's of another term: ErrLost, changing nothing. It returns an error,
// changing nothing, when an argument is invalid (ErrInvalid) or ctx is done.
func (m *MemoryStore) ReleaseTerm(ctx context.Context, name, owner, token string) error {
	if err := CheckReleaseArgs(ctx, name, owner); err != nil {
		return err
	}
	if err := CheckToken(token); err != nil {
		return err
	}
	return m.release(name, owner, token)
}

// release is Release's (token "") and ReleaseTerm's delete.
func (m *MemoryStore) release(name, owner, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.leases[name]
	switch {
	case !ok:
		return nil
	case l.owner != owner:
		return fmt.Errorf("%w: %q is held by %q, not %q", ErrLost, name, l.owner, owner)
	case token != "" && l.token != "" && l.token != token:
		return fmt.Errorf("%w: %q is %q's term %q, not %q", ErrLost, name, owner, l.token, token)
	}
	delete(m.leases, name)
	return nil
}

// Holders returns every lease the store keeps, expired ones included, sorted
// by name, with Expires in UTC. It returns an error only when ctx is done.
func (m *MemoryStore) Holders(ctx context.Context) ([]Holder, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("lease: holders: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	hs := make([]Holder, 0, len(m.leases))
	for name, l := range m.leases {
		hs = append(hs, Holder{Name: name, Owner: l.owner, Expires: l.expires})
	}
	slices.SortFunc(hs, func(a, b Holder) int { return strings.Compare(a.Name, b.Name) })
	return hs, nil
}

// put stores l for name with the later of its expiry and exp. The caller
// holds m.mu.
func (m *MemoryStore) put(name string, l memoryLease, exp time.Time) {
	if exp.After(l.expires) {
		l.expires = exp
	}
	if m.leases == nil {
		m.leases = make(map[string]memoryLease)
	}
	m.leases[name] = l
}
