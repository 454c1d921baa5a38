// Package lease elects one replica of a deployment to run a periodic,
// idempotent background job (a "net"), so that the job's cost stops growing
// with the replica count (docs/design.md).
//
// A lease is a name that one owner holds until an expiry. A [Store] keeps
// leases; [MemoryStore] here and MongoStore in
// [iterion.dev/iterion/pkg/lease/mongolease] are its two twins and pass one
// conformance suite, [iterion.dev/iterion/pkg/lease/leasetest]. [Run] serves a
// term: it campaigns, runs the work while the lease is held, renews, and steps
// down fail-closed before the store could hand the lease to a successor.
// [RunGroup] serves the shards of a group the same way, spread over the
// live replicas. [Health] tracks work that outlives its term, and an
// [Event] reports each transition and each store call
// ([iterion.dev/iterion/pkg/lease/leaseprom] counts them as Prometheus
// metrics).
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
//
// # Campaign
//
// [Run] sends one Acquire every Retry (0 means TTL/3), each bounded by a
// timeout of TTL/3, never by Retry. Every Store call gets as now the instant
// it is sent. A store that cannot answer elects nobody: work does not start.
// An Acquire whose answer did not arrive (an error or the timeout) may still
// have landed, so Run follows it with a Release, so that a write that landed
// does not keep a successor waiting a TTL. The residual case is a write that
// lands after that Release: it keeps the lease one TTL, unrenewed, which is
// the bound of a crash. An Acquire answered with a win once ctx is done
// starts no term: Run releases the lease at once.
//
// # Term
//
// Once elected, Run calls work in its own goroutine with a context that is
// cancelled when the term ends, and renews every TTL/3, each renewal bounded
// by TTL/3, from the instant the winning Acquire was sent. A win Run gets
// to only at or after its deadline (below), because the store answered
// after the call's cut or Run's goroutine was held up, is a term over
// before it starts: work is not called, and the term steps down for the
// deadline and releases. The term ends
// (Run steps down, cancelling work's context) when:
//   - a renewal is refused: the lease moved on;
//   - no renewal Run can prove succeeded was sent within TTL − TTL/6 before
//     now. The store stamps a renewal sent at s to expire at
//     trunc(trunc(s)+TTL) (milliseconds), so the deadline is that expiry
//     minus TTL/6: the holder is gone TTL/6 before any successor can take
//     the lease. The winning Acquire's send is the first proven instant; a
//     successful renewal moves the deadline, a failed or unanswered one
//     does not end the term but leaves the deadline running;
//   - work returns (or panics);
//   - ctx is done.
//
// After stepping down, Run waits for work to return, then releases the lease
// on a context detached from ctx with its own TTL/3 timeout, so a rollout
// hands over within one Retry instead of a TTL. A release refused with
// [ErrLost] is logged as such, not as a success: a warning, except after a
// refused renewal or an unanswered attempt, where ErrLost is the expected
// answer (the step-down or the episode already warned), a debug line. If
// work panicked, Run re-panics with its value after the release. Timers use
// the monotonic clock.
//
// The lease is sticky: a healthy holder keeps its term for as long as work
// runs. Work returning ends the term; unless ctx is done, Run then campaigns
// again, Retry after the term ended. Each new term calls work afresh, so
// state built in work's closure starts anew with each term.
//
// The deadline and a refused renewal cancel work's context from their own
// goroutines, before anything is logged: a slow log sink delays neither.
// Likewise a granted renewal moves the deadline from its own goroutine as
// soon as the store answers, so a term on a starved machine is not stepped
// down for a grant Run's goroutine had yet to handle. A renewal answered
// after failed ones acts the same way first, and only then logs that the
// store is reachable again.
//
// # Late calls
//
// The timing above bounds what Run does, not what the network does with a
// call after Run gave up on it. Besides the late Acquire above, a Release
// may be held in the network until after this owner's next term began.
// When the store is a [TermStore] (both twins are), each attempt draws a
// random token, acquires with AcquireTerm and releases with ReleaseTerm, so
// that late Release deletes nothing. That holds when the attempt's Acquire
// lands late too, after this owner's next term took the lease: an
// AcquireTerm that does not move the lease's expiry forward leaves the term
// alone (see [TermStore]), and Run sends each attempt in a later
// millisecond than its previous calls, so a later term's expiry is always
// later. With a plain Store, Run falls back to Release, and any late
// Release deletes the later term's lease: the later term's next renewal, at
// most TTL/3 later, is refused and it steps down (or, if its renewals fail,
// at its deadline), but a successor may have been elected in between and
// overlap it until then. This is the store round trip among the bounds
// above (docs/design.md, decision 4).
//
// # Worked example
//
// TTL 3 minutes, Retry 1 minute. Attempts go out once a minute and each is cut
// after 1 minute. A holder renews every minute; a renewal is cut after a
// minute; the holder steps down 2m30s after the send of the last renewal it
// can prove succeeded, 30 s before the lease could expire in the store. A
// successor takes over within one Retry (1 minute) of a clean stop, and
// within TTL + Retry (4 minutes) of a crash.
//
// # Groups
//
// [RunGroup] serves a group: a job split into a fixed number of shards S,
// each shard a lease whose terms are Run's terms (the same campaign, term,
// step-down and release), spread over the live members. S is fixed per
// group and independent of the replica count, so a rescale moves leases,
// not data.
//
// Each member renews a member lease and lists the store once per Retry. The
// list shows the live members (an unexpired member lease; a member always
// counts itself) and who holds each shard. From the same list every member
// computes the same targets: S/N rounded up for S mod N members and down
// for the rest, the larger shares going to members that hold at least the
// larger share already (then by a hash of the owner). So no member's target exceeds
// ceil(S/N), the targets sum to S, and reaching them moves as few shards as
// possible. A member above its target gives up its excess once two lists in
// a row showed the same members (its terms step down with
// [ReasonRebalanced] and release, and a campaign still in flight releases
// its win at once for the same reason, so the shard is free at the taker's
// next list: a hand-over leaves a shard without a holder for at most one
// Retry while the membership holds). A member below its target campaigns only for
// free or expired shards, up to its target: first those the list gives it
// (each free shard, in order, goes to the member short of its target with
// the highest rendezvous hash for it, so members listing at once do not
// race for one shard), then those it hashes highest, so the members short
// of shards that list in the Retry after a shard came free take it. A
// member that stops releases its member lease before its shards, so no one
// counts it as live once its shards are free.
//
// Why this design, against consistent hashing or a leader that assigns:
// holders are sticky, with hysteresis. A member never gives up a shard
// because a hash would place it elsewhere, only because its count is above
// its target, and only once the membership held for a Retry. So a member
// that joins and leaves costs its own share twice, nothing more, one that
// flaps for less than a Retry costs nothing, and members joining one after
// the other move shards once, when the last has joined: S/N shards move when one of N members joins, about half the
// shards when a group doubles, and none while the membership holds. The
// rendezvous hash only orders which shards a member gives up and which free
// ones it wants, so members agree without talking, and none is special. A
// member that crashed frees its shards when their leases expire: each is
// held again within TTL + Retry of the crash.
//
// In steady state a group costs its store the shard renewals (S per TTL/3)
// and, per member and Retry, one member renewal and one list: Acquires
// only when something changed. The store must list its leases
// ([Inspector]). A member that cannot reach the store elects nothing,
// and its terms step down by their deadlines, as Run's do.
//
// # Observing it
//
// Run logs through Spec.Logger with attributes lease and owner: elected,
// renew failed (with the time left before the step-down), stepped down (with
// its reason and before_expiry, how long before the store's expiry of the
// term's last proven call work's context was cancelled: TTL/6 at a
// deadline; an error when it is zero or less, as a successor may then have
// overlapped the term), released, release failed, store unreachable and
// store reachable again. Each is logged once per episode, not once per attempt.
// Spec.OnEvent receives the same transitions as [Event]s, and each store
// call; Spec.Health tracks work that outlives its term. A group reports its
// shards' events the same way, with Event.Group and Event.Shard set, and a
// Surveyed event with the group as each list showed it ([GroupView]),
// with the groups of the same name and another shard count that list
// showed live ([GroupView.Others]: a change of the shard count under way);
// [Groups] reads the same view from any list of a store's leases.
package lease
