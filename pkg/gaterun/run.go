// Package gaterun holds the merge gate's gating runs: a [Run] is the review
// verdict for one head commit of one pull request, which the server
// publishes as a commit status.
//
// It holds the run and its [Verdict], the run [ID] every replica derives
// alike, the listing order ([Cursor]) and [Query], and the [Store] contract
// with two twins, [MemoryStore] for one process and [MongoStore] shared by
// every replica, which pass one conformance suite,
// [iterion.dev/iterion/pkg/gaterun/gateruntest]. The reconciler, the sweeper
// and the HTTP API that use them live in [iterion.dev/iterion/pkg/server].
//
// The name is the concept's, a gating run, and reads whole at call sites:
// gaterun.Run, gaterun.Store, gaterun.Query. A package named run would
// shadow the run variables every caller holds, and one named gate would
// read gate.Run as a verb and claim the reconciler, which stays in the
// server.
package gaterun

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"iterion.dev/iterion/internal/mongostore"
	"iterion.dev/iterion/pkg/forge"
)

// Run is one gating run: the review verdict for one head commit of one
// pull request, which the reconciler publishes as a commit status under
// Context until the pull request is closed, merged or its head moves (then
// the run is settled and no longer offered).
//
// Instants are UTC truncated to the millisecond, as the stores keep them.
type Run struct {
	// ID is derived from Host, Repo, Pull and HeadSHA by the function
	// [ID], so a second report for the same head updates the same run.
	ID string
	// Host is the forge host, e.g. "github.com".
	Host string
	// Repo is "owner/name", as first given: the stores compare and index
	// it by [forge.RepoKey], as GitHub compares names, without regard to
	// case, and keep the spelling of the run's first Put for display.
	Repo string
	// Pull is the pull request number, at least 1.
	Pull int
	// HeadSHA is the head commit the verdict is for.
	HeadSHA string
	// Context is the commit status context; DefaultContext when empty.
	Context string
	// Verdict is one of the Verdict constants.
	Verdict Verdict
	// Description and TargetURL are published with the status.
	Description string
	TargetURL   string
	// Created is when the run was first stored; Updated when it last was.
	Created time.Time
	Updated time.Time
	// Reported is when a Put last gave the run its verdict: Updated, but
	// for a Move, which changes Updated alone (the new installation's
	// sweeper lists by Updated) and reports no verdict. Of the runs of one
	// commit, the one reported last decides its status. A run stored
	// before Reported was kept reads its Updated here.
	Reported time.Time
	// Settled is true once the pull request was seen closed, merged or with
	// another head; a settled run is never offered by the sweeper.
	Settled bool
	// Installation is the GitHub App installation that covers Repo, whose
	// token offers the run; 0 when the server uses one credential for
	// every repository (a token, or a single installation). A later Put
	// replaces it, as a repository may move between installations.
	Installation int64
}

// Verdict is a gating run's verdict, published as the commit status state.
type Verdict string

// The verdicts a run may carry; they are GitHub's commit status states.
const (
	VerdictPending Verdict = "pending"
	VerdictSuccess Verdict = "success"
	VerdictFailure Verdict = "failure"
	VerdictError   Verdict = "error"
)

// DefaultContext is the commit status context of a run that names none.
const DefaultContext = "iterion/review"

// ErrInvalid reports a run or query field a store cannot use; errors that
// wrap it name the field and value.
var ErrInvalid = errors.New("gaterun: invalid")

// ErrNotFound reports that a run store has no run with the given id.
var ErrNotFound = errors.New("gaterun: run not found")

// runNamespace is the UUIDv5 namespace of run ids (itself UUIDv5 of a URL
// under the project's name, so ids are stable across releases).
var runNamespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://iterion.dev/gate-run"))

// ID is the id of the run for host, repo, pull and head: a UUIDv5, so
// every replica derives the same id for the same head without asking the
// store. The repository enters by its [forge.RepoKey], so names that differ
// only in case, which GitHub takes for one repository, give one id.
func ID(host, repo string, pull int, headSHA string) string {
	return uuid.NewSHA1(runNamespace, fmt.Appendf(nil, "%s/%s#%d@%s", host, forge.RepoKey(repo), pull, headSHA)).String()
}

// parseVerdict returns s as a Verdict, or an error wrapping ErrInvalid that
// names the field "verdict" and the value.
func parseVerdict(s string) (Verdict, error) {
	switch v := Verdict(s); v {
	case VerdictPending, VerdictSuccess, VerdictFailure, VerdictError:
		return v, nil
	}
	return "", fmt.Errorf("%w: verdict %q is not one of pending, success, failure, error", ErrInvalid, s)
}

// Validate reports the first field of r a store would refuse, as an error
// wrapping ErrInvalid that names the field and value; nil when r is whole.
func (r Run) Validate() error {
	switch {
	case strings.TrimSpace(r.ID) == "":
		return fmt.Errorf("%w: id %q is empty", ErrInvalid, r.ID)
	case strings.TrimSpace(r.Host) == "":
		return fmt.Errorf("%w: host %q is empty", ErrInvalid, r.Host)
	case !validRepo(r.Repo):
		return fmt.Errorf("%w: repo %q is not owner/name", ErrInvalid, r.Repo)
	case r.Pull < 1:
		return fmt.Errorf("%w: pull %d is not a pull request number", ErrInvalid, r.Pull)
	case strings.TrimSpace(r.HeadSHA) == "" || strings.ContainsAny(r.HeadSHA, " \t\r\n/"):
		return fmt.Errorf("%w: head_sha %q is not a commit", ErrInvalid, r.HeadSHA)
	case strings.TrimSpace(r.Context) == "":
		return fmt.Errorf("%w: context %q is empty", ErrInvalid, r.Context)
	case r.Installation < 0:
		return fmt.Errorf("%w: installation %d is negative", ErrInvalid, r.Installation)
	}
	if _, err := parseVerdict(string(r.Verdict)); err != nil {
		return err
	}
	return nil
}

// validRepo reports whether repo follows the forge's repository-name rule.
func validRepo(repo string) bool {
	_, _, err := forge.ParseRepo(repo)
	return err == nil
}

// Cursor is a position in the order the sweeper lists runs in: by Updated,
// then ID. The zero Cursor is before every run.
type Cursor struct {
	Updated time.Time
	ID      string
}

// Before reports whether c comes before r in listing order, i.e. whether a
// listing that resumes at c includes r. c's instant is taken to the
// millisecond, as the stores keep instants (and as they take a listing's
// since): a cursor within a millisecond is at its start.
func (c Cursor) Before(r Run) bool {
	at := mongostore.Stamp(c.Updated)
	if !r.Updated.Equal(at) {
		return r.Updated.After(at)
	}
	return r.ID > c.ID
}

// CursorAt is the cursor just past r: a listing resumed at it starts with
// the run after r.
func CursorAt(r Run) Cursor { return Cursor{Updated: r.Updated, ID: r.ID} }

// State selects runs by whether they are settled.
type State string

// The states a Query selects; the zero State selects every run.
const (
	StateAll       State = ""
	StateUnsettled State = "unsettled"
	StateSettled   State = "settled"
)

// Query selects runs for Store.List. A zero field matches every run.
type Query struct {
	// Host and Repo ("owner/name") select one repository, Repo compared
	// without regard to case ([forge.RepoKey]); Pull one pull request (at
	// least 1) of it.
	Host, Repo string
	Pull       int
	// Installation selects the runs of one App installation (at least 1);
	// 0 matches every run, whatever its installation.
	Installation int64
	// State selects settled or unsettled runs.
	State State
	// After is where the page starts: the runs after it in listing order.
	After Cursor
	// Limit is the most runs one page holds, at least 1.
	Limit int
}

// Validate reports the first field of q a store would refuse, as an error
// wrapping ErrInvalid that names the field and value.
func (q Query) Validate() error {
	switch {
	case q.Repo != "" && !validRepo(q.Repo):
		return fmt.Errorf("%w: repo %q is not owner/name", ErrInvalid, q.Repo)
	case q.Pull < 0:
		return fmt.Errorf("%w: pull %d is not a pull request number", ErrInvalid, q.Pull)
	case q.Installation < 0:
		return fmt.Errorf("%w: installation %d is negative", ErrInvalid, q.Installation)
	case q.State != StateAll && q.State != StateUnsettled && q.State != StateSettled:
		return fmt.Errorf("%w: state %q is not settled or unsettled", ErrInvalid, q.State)
	case q.Limit < 1:
		return fmt.Errorf("%w: limit %d is under 1", ErrInvalid, q.Limit)
	}
	return nil
}

// Matches reports whether r has q's host, repo (compared by
// [forge.RepoKey]), pull, installation and state (the cursor and limit
// aside).
func (q Query) Matches(r Run) bool {
	return (q.Host == "" || r.Host == q.Host) && (q.Repo == "" || forge.RepoKey(r.Repo) == forge.RepoKey(q.Repo)) &&
		(q.Pull == 0 || r.Pull == q.Pull) && (q.Installation == 0 || r.Installation == q.Installation) &&
		(q.State == StateAll || r.Settled == (q.State == StateSettled))
}
