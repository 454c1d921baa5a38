package lease

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A group of name with S shards keeps its leases under the prefix name[S]/:
// shard i is name[S]/shard/i (i zero-padded to the width of S−1, so a list
// sorted by name is sorted by shard), and member owner is
// name[S]/member/owner. S is part of the prefix: a group declared again with
// another S is another group.
const (
	shardInfix  = "]/shard/"
	memberInfix = "]/member/"
)

// groupPrefix is the lease-name prefix of group name with shards shards,
// up to its closing bracket.
func groupPrefix(name string, shards int) string {
	return name + "[" + strconv.Itoa(shards)
}

// ShardName is the lease name of shard i of the group name with shards
// shards.
func ShardName(name string, shards, i int) string {
	width := len(strconv.Itoa(max(shards-1, 0)))
	return fmt.Sprintf("%s%s%0*d", groupPrefix(name, shards), shardInfix, width, i)
}

// MemberName is the lease name of member owner of the group name with
// shards shards.
func MemberName(name string, shards int, owner string) string {
	return groupPrefix(name, shards) + memberInfix + owner
}

// parseGroupLease splits a group's lease name into the group's name and
// shard count, and either the shard index (member "") or the member's owner
// (shard −1). ok is false for a name no group uses.
func parseGroupLease(lease string) (name string, shards, shard int, member string, ok bool) {
	infix, i := shardInfix, strings.Index(lease, shardInfix)
	if i < 0 {
		infix, i = memberInfix, strings.Index(lease, memberInfix)
	}
	if i < 0 {
		return "", 0, 0, "", false
	}
	open := strings.LastIndex(lease[:i], "[")
	if open <= 0 {
		return "", 0, 0, "", false
	}
	shards, err := strconv.Atoi(lease[open+1 : i])
	if err != nil || shards < 1 {
		return "", 0, 0, "", false
	}
	name, rest := lease[:open], lease[i+len(infix):]
	if infix == memberInfix {
		return name, shards, -1, rest, rest != ""
	}
	shard, err = strconv.Atoi(rest)
	if err != nil || shard < 0 || shard >= shards {
		return "", 0, 0, "", false
	}
	return name, shards, shard, "", true
}

// GroupView is a lease group as one list of its store showed it: who holds
// each shard, and each live member's count against its share.
type GroupView struct {
	Name   string
	Shards int
	// At is the instant the leases were compared with: a lease expired at
	// At is unheld.
	At time.Time
	// Holders[i] is the owner of shard i's unexpired lease, "" when it is
	// unheld. An owner may hold shards without being a live member (its
	// member lease expired first).
	Holders []string
	// Members are the live members (an unexpired member lease), sorted by
	// owner.
	Members []GroupMember
	// Overdue, in a Surveyed event, are the shards the surveying member has
	// seen unheld in every list for longer than TTL + Retry, in order: the
	// bound of a hand-over after a crash, past which a shard is stuck. It
	// is nil in a view from [Groups], which sees one list.
	Overdue []int
	// Others, in a Surveyed event, are the groups of the same Name with
	// another shard count that the list showed any unexpired lease of,
	// by shard count: members declaring the group with another Shards,
	// as during a rolling change of it, which serve their own shards
	// alongside this group's. nil when there are none, and in a view
	// from [Groups], which lists each of them on its own.
	Others []GroupView
}

// GroupMember is one live member of a group.
type GroupMember struct {
	Owner string
	// Held is how many shards it holds.
	Held int
	// Target is its share: Shards/len(Members) rounded up for Shards mod
	// len(Members) of the members and down for the rest, so the targets
	// sum to Shards and none exceeds [GroupView.Fair]. The members that
	// hold the larger share already keep it (ties go by a hash of the
	// owner), so evening the share moves as few shards as it can.
	Target int
}

// Fair is the most shards any live member should hold: ceil(Shards / live
// members); Shards when there is no live member.
func (v GroupView) Fair() int {
	if len(v.Members) == 0 {
		return v.Shards
	}
	return (v.Shards + len(v.Members) - 1) / len(v.Members)
}

// Unheld returns the shards no unexpired lease holds, in order.
func (v GroupView) Unheld() []int {
	var out []int
	for i, h := range v.Holders {
		if h == "" {
			out = append(out, i)
		}
	}
	return out
}

// GroupHolding is one owner's part of a [GroupView]: a live member, or an
// owner that holds shards without being one.
type GroupHolding struct {
	Owner string
	// Shards are the shards it holds, in order.
	Shards []int
	// Member: it is a live member, whose share is Target.
	Member bool
	Target int
}

// Holdings returns every live member and every other owner holding a shard,
// sorted by owner: the shards by holder.
func (v GroupView) Holdings() []GroupHolding {
	by := map[string]*GroupHolding{}
	for _, m := range v.Members {
		by[m.Owner] = &GroupHolding{Owner: m.Owner, Member: true, Target: m.Target}
	}
	for i, o := range v.Holders {
		if o == "" {
			continue
		}
		if by[o] == nil {
			by[o] = &GroupHolding{Owner: o}
		}
		by[o].Shards = append(by[o].Shards, i)
	}
	out := make([]GroupHolding, 0, len(by))
	for _, h := range by {
		out = append(out, *h)
	}
	slices.SortFunc(out, func(a, b GroupHolding) int { return strings.Compare(a.Owner, b.Owner) })
	return out
}

// Served reports whether anybody serves the group with this shard count
// at At: a live member, or an owner of an unexpired shard lease. A group
// whose leases all expired unreleased, as a replica killed while it
// served this shard count leaves them (during a change of it, say), is
// served by nobody: it has no member to share its shards, and its shards
// are no shards of a group in use left unheld. Its leases stay in the
// store, each its owner's to renew, until a member serving this count
// takes them.
func (v GroupView) Served() bool {
	return len(v.Members) > 0 || slices.ContainsFunc(v.Holders, func(h string) bool { return h != "" })
}

// Groups returns every lease group hs shows at now, sorted by name: the
// shards' holders and the live members with their counts and targets. A
// group shows once any of its leases is in hs.
func Groups(hs []Holder, now time.Time) []GroupView {
	type key struct {
		name   string
		shards int
	}
	byKey := map[key][]Holder{}
	for _, h := range hs {
		if name, shards, _, _, ok := parseGroupLease(h.Name); ok {
			k := key{name, shards}
			byKey[k] = append(byKey[k], h)
		}
	}
	out := make([]GroupView, 0, len(byKey))
	for k, hs := range byKey {
		out = append(out, viewGroup(k.name, k.shards, hs, now, ""))
	}
	slices.SortFunc(out, func(a, b GroupView) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.Shards, b.Shards))
	})
	return out
}

// otherCounts is the groups named name with a shard count other than
// shards that hs shows at now with an unexpired lease (a shard's or a
// member's), by shard count; nil when there are none.
func otherCounts(name string, shards int, hs []Holder, now time.Time) []GroupView {
	var out []GroupView
	for _, v := range Groups(hs, now) {
		if v.Name == name && v.Shards != shards && v.Served() {
			out = append(out, v)
		}
	}
	return out
}

// OtherOwners returns the owners v.Others show (their live members and
// the holders of their unexpired shard leases), each once, sorted: who
// serves the group with another shard count. None once every member
// declares it alike.
func (v GroupView) OtherOwners() []string {
	var out []string
	for _, o := range v.Others {
		for _, h := range o.Holdings() {
			out = append(out, h.Owner)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// viewGroup is the view of group name with shards shards that hs shows at
// now; self, when not "", counts as a live member whatever hs says (a
// replica knows it is alive).
func viewGroup(name string, shards int, hs []Holder, now time.Time, self string) GroupView {
	v := GroupView{Name: name, Shards: shards, At: now, Holders: make([]string, shards)}
	now = Stamp(now)
	live := map[string]bool{}
	if self != "" {
		live[self] = true
	}
	for _, h := range hs {
		n, s, shard, member, ok := parseGroupLease(h.Name)
		if !ok || n != name || s != shards || !now.Before(h.Expires) {
			continue
		}
		if member != "" {
			live[member] = true
		} else {
			v.Holders[shard] = h.Owner
		}
	}
	held := map[string]int{}
	for _, h := range v.Holders {
		if h != "" {
			held[h]++
		}
	}
	for o := range live {
		v.Members = append(v.Members, GroupMember{Owner: o, Held: held[o]})
	}
	v.setTargets()
	slices.SortFunc(v.Members, func(a, b GroupMember) int { return strings.Compare(a.Owner, b.Owner) })
	return v
}

// setTargets gives each member its target: the larger share goes to the
// Shards mod N members that already hold at least it, then by rank. Only
// "holds the larger share already" counts, not how much it holds: members
// filling up from below keep their targets while they take free shards,
// so members surveying one after the other agree on who takes which.
func (v *GroupView) setTargets() {
	n := len(v.Members)
	if n == 0 {
		return
	}
	ceil := (v.Shards + n - 1) / n
	full := func(m GroupMember) int {
		if m.Held >= ceil {
			return 0
		}
		return 1
	}
	slices.SortFunc(v.Members, func(a, b GroupMember) int {
		return cmp.Or(cmp.Compare(full(a), full(b)),
			cmp.Compare(score(v.Name, -1, a.Owner), score(v.Name, -1, b.Owner)),
			strings.Compare(a.Owner, b.Owner))
	})
	for i := range v.Members {
		v.Members[i].Target = v.Shards / n
		if i < v.Shards%n {
			v.Members[i].Target++
		}
	}
}

// member returns owner's entry; false when owner is no live member.
func (v GroupView) member(owner string) (GroupMember, bool) {
	for _, m := range v.Members {
		if m.Owner == owner {
			return m, true
		}
	}
	return GroupMember{}, false
}

// score is the rendezvous weight of owner for shard in group name (shard −1
// ranks the owner itself): who a free shard goes to, which other free
// shards a member prefers, and which it gives up first. Every replica
// computes the same.
func score(name string, shard int, owner string) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%d\x00%s", name, shard, owner)
	// splitmix64's finalizer spreads FNV's low-entropy high bits.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// allocate returns the free shards that the list gives self: each free
// shard, in order, goes to the live member short of its target with the
// highest score for it. Members that listed at the same instant agree on
// it, so they do not race for one shard. held overrides self's count in v
// (what it serves now, which the list may not show yet).
func (v GroupView) allocate(self string, held int, free []int) []int {
	short := map[string]int{}
	for _, m := range v.Members {
		h := m.Held
		if m.Owner == self {
			h = held
		}
		if m.Target > h {
			short[m.Owner] = m.Target - h
		}
	}
	var mine []int
	for _, shard := range free {
		best, bestScore := "", uint64(0)
		for o, n := range short {
			if s := score(v.Name, shard, o); n > 0 && (best == "" || s > bestScore || (s == bestScore && o < best)) {
				best, bestScore = o, s
			}
		}
		if best == "" {
			break
		}
		short[best]--
		if best == self {
			mine = append(mine, shard)
		}
	}
	return mine
}
