package lease

import (
	"fmt"
	"time"
)

// EventKind is the kind of an [Event].
type EventKind int

const (
	// Elected: an Acquire won the lease; work is about to start, unless
	// the term's deadline passed before it could (a SteppedDown for
	// [ReasonDeadline] follows, and work is not called).
	Elected EventKind = iota + 1
	// SteppedDown: the term ended; work's context has just been cancelled.
	// Event.Reason is one of the Reason constants.
	SteppedDown
	// Released: a Release was answered with success. Event.Reason is the
	// step-down reason of the term it ends, [ReasonUnanswered] after an
	// Acquire whose answer did not arrive (reported once per
	// store-unreachable episode, not once per attempt), or [ReasonCanceled]
	// after an Acquire won once ctx was done, which starts no term
	// ([ReasonRebalanced] when a group gave the shard up meanwhile).
	Released
	// Campaigning: reported once per Run, after its arguments are checked
	// and before its first store call.
	Campaigning
	// StoreCalled: a store call got an answer or failed on its own.
	// Event.Op, Event.Took and Event.Failed describe it. A call cut because
	// Run's context was done or the term ended says nothing about the store
	// and is not reported.
	StoreCalled
	// Surveyed: a group member listed its store. Event.View is the group
	// as that list showed it.
	Surveyed
)

// String returns the kind's lower-case name.
func (k EventKind) String() string {
	switch k {
	case Elected:
		return "elected"
	case SteppedDown:
		return "stepped down"
	case Released:
		return "released"
	case Campaigning:
		return "campaigning"
	case StoreCalled:
		return "store called"
	case Surveyed:
		return "surveyed"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one thing a Run reports to Spec.OnEvent: a transition of its
// lease, or a store call. At is the instant Run observed it.
type Event struct {
	Name, Owner string
	Kind        EventKind
	At          time.Time
	// Reason is why, for SteppedDown and Released: one of the Reason
	// constants. "" otherwise.
	Reason string
	// Op is the store call of a StoreCalled event: [OpAcquire], [OpRenew],
	// [OpRelease] or, for a group member's survey, [OpList]. Took is its
	// latency, and Failed is true when it got no answer (an error other
	// than [ErrLost], which is an answer).
	Op     string
	Took   time.Duration
	Failed bool
	// Margin is, for SteppedDown, how long before the store's expiry of
	// the last call the term proved (the winning Acquire or a granted
	// renewal) work's context was cancelled: no successor can be elected
	// before that expiry. TTL/6 at a deadline step-down; zero or less when
	// the step-down came at or after the expiry, so a successor may have
	// overlapped the term (a stalled process). 0 for other kinds.
	Margin time.Duration
	// Group is the group's name for the events of a group's leases
	// ([RunGroup]), "" for Run's. Shard is then the shard's index for a
	// shard's events, and −1 for the member lease's and Surveyed.
	Group string
	Shard int
	// View is the group as a Surveyed event's list showed it; nil for
	// other kinds.
	View *GroupView
}

// Reasons a term ends (Event.Reason of SteppedDown and Released, and the
// reason log attribute; ReasonRebalanced only for a group's shard), and
// ReasonUnanswered, the reason of the release
// that follows an Acquire whose answer did not arrive.
const (
	ReasonRefused      = "refused"       // a renewal was refused: the lease moved on
	ReasonDeadline     = "deadline"      // no renewal proven within TTL − TTL/6 of its send
	ReasonCanceled     = "ctx_done"      // Run's context is done
	ReasonWorkReturned = "work_returned" // work returned while the lease was held
	ReasonWorkPanicked = "work_panicked" // work panicked; Run re-panics after the release
	ReasonUnanswered   = "unanswered_acquire"
	ReasonRebalanced   = "rebalanced" // a group member gave the shard up to even the share
)

// Store operations as Event.Op and the logs name them.
const (
	OpAcquire = "acquire"
	OpRenew   = "renew"
	OpRelease = "release"
	OpList    = "list" // a group member's Holders
)

// event reports e, an event of l's lease, to l's OnEvent, when set, with
// the lease's name, owner and group and the instant.
func (l *lessee) event(e Event) {
	if l.onEvent == nil {
		return
	}
	e.Name, e.Owner, e.At = l.name, l.owner, time.Now()
	e.Group, e.Shard = l.group, l.shard
	l.onEvent(e)
}
