package harness

import (
	"slices"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

// The group scenario's figures, computed from the shard terms the
// replicas logged.

// shardTerm is one term of one shard on one replica, from its log: from
// its election to its step-down, or to its kill, or to the end of the
// scenario when still open.
type shardTerm struct {
	shard    int
	replica  string
	from, to time.Time
	reason   string // why it stepped down, as logged; "" if it did not
}

// termLine is the part of a replica's JSON log line the scenario reads.
type termLine struct {
	Time   time.Time `json:"time"`
	Msg    string    `json:"msg"`
	Shard  int       `json:"shard"`
	Event  string    `json:"event"`
	Reason string    `json:"reason"`
}

// termMsg is the message of a replica's logged shard term
// (pkg/server's measure_group.go).
const termMsg = "measure group: shard term"

// readTerms reads every replica's shard terms from its log; a term line it
// cannot read is an error (logRecords).
func readTerms(rs []*groupReplica, end time.Time) ([]shardTerm, error) {
	var out []shardTerm
	for _, g := range rs {
		lines, err := logRecords[termLine](g.r.p.stderrPath(), termMsg)
		if err != nil {
			return nil, err
		}
		last := end
		if !g.killed.IsZero() {
			last = g.killed
		}
		out = append(out, termsOf(g.r.name, lines, last)...)
	}
	return out, nil
}

// termsOf pairs one replica's elected and stepped-down lines by shard;
// terms still open end at end.
func termsOf(replica string, lines []termLine, end time.Time) []shardTerm {
	var out []shardTerm
	open := map[int]time.Time{}
	for _, l := range lines {
		switch l.Event {
		case lease.Elected.String():
			open[l.Shard] = l.Time
		case lease.SteppedDown.String():
			if from, ok := open[l.Shard]; ok {
				out = append(out, shardTerm{l.Shard, replica, from, l.Time, l.Reason})
				delete(open, l.Shard)
			}
		}
	}
	for shard, from := range open {
		out = append(out, shardTerm{shard: shard, replica: replica, from: from, to: end})
	}
	return out
}

// holdsAt reports whether t is within the term.
func (st shardTerm) holdsAt(t time.Time) bool { return !t.Before(st.from) && t.Before(st.to) }

// heldAt returns the terms holding a shard at t, of the replicas named
// (all when none are).
func heldAt(terms []shardTerm, t time.Time, replicas []string) []shardTerm {
	var out []shardTerm
	for _, st := range terms {
		if st.holdsAt(t) && (len(replicas) == 0 || slices.Contains(replicas, st.replica)) {
			out = append(out, st)
		}
	}
	return out
}

// maxHeldAt is the most shards one replica held at t.
func maxHeldAt(terms []shardTerm, t time.Time) int {
	by := map[string]int{}
	most := 0
	for _, st := range heldAt(terms, t, nil) {
		by[st.replica]++
		most = max(most, by[st.replica])
	}
	return most
}

// reheld returns how many shards replica held at t, and the longest of
// them went unheld from t on until another term of it started.
func reheld(terms []shardTerm, replica string, t time.Time) (int, time.Duration) {
	held := heldAt(terms, t.Add(-time.Nanosecond), []string{replica})
	var longest time.Duration
	for _, h := range held {
		next := time.Time{}
		for _, st := range terms {
			if st.shard == h.shard && !st.from.Before(t) && (next.IsZero() || st.from.Before(next)) {
				next = st.from
			}
		}
		if next.IsZero() {
			return len(held), time.Duration(1<<63 - 1) // never re-held
		}
		longest = max(longest, next.Sub(t))
	}
	return len(held), longest
}

// longestUnheld is the longest span within [from, to] during which some
// shard had no term.
func longestUnheld(terms []shardTerm, shards int, from, to time.Time) time.Duration {
	var longest time.Duration
	for i := range shards {
		var own []shardTerm
		for _, st := range terms {
			if st.shard == i && st.to.After(from) && st.from.Before(to) {
				own = append(own, st)
			}
		}
		slices.SortFunc(own, func(a, b shardTerm) int { return a.from.Compare(b.from) })
		covered := from // held up to here
		for _, st := range own {
			if st.from.After(covered) {
				longest = max(longest, st.from.Sub(covered))
			}
			if st.to.After(covered) {
				covered = st.to
			}
		}
		if to.After(covered) {
			longest = max(longest, to.Sub(covered))
		}
	}
	return longest
}

// handOverGap counts the terms that ended within [from, to] and that
// count (all when counts is nil), and returns the longest a shard went
// unheld after one of them: from the term's end to the next term of its
// shard, even past to. A shard never held again counts to `to`.
func handOverGap(terms []shardTerm, from, to time.Time, counts func(shardTerm) bool) (n int, longest time.Duration) {
	for _, e := range terms {
		if e.to.Before(from) || e.to.After(to) || (counts != nil && !counts(e)) {
			continue
		}
		n++
		var next time.Time
		for _, st := range terms {
			if st.shard == e.shard && !st.from.Before(e.to) && (next.IsZero() || st.from.Before(next)) {
				next = st.from
			}
		}
		if next.IsZero() {
			next = to
		}
		longest = max(longest, next.Sub(e.to)) // e ended by to: never negative
	}
	return n, longest
}

// stepDowns counts the terms that ended within [from, to] for reason.
func stepDowns(terms []shardTerm, from, to time.Time, reason string) int {
	n := 0
	for _, st := range terms {
		if st.reason == reason && !st.to.Before(from) && !st.to.After(to) {
			n++
		}
	}
	return n
}

// moves counts the shards whose holder at to differs from their holder
// at from.
func moves(terms []shardTerm, shards int, from, to time.Time) int {
	holder := func(i int, t time.Time) string {
		for _, st := range terms {
			if st.shard == i && st.holdsAt(t) {
				return st.replica
			}
		}
		return ""
	}
	n := 0
	for i := range shards {
		if holder(i, from) != holder(i, to) {
			n++
		}
	}
	return n
}

// overlaps counts the pairs of terms of one shard that overlap in time.
func overlaps(terms []shardTerm) int {
	n := 0
	for i, a := range terms {
		for _, b := range terms[i+1:] {
			if a.shard == b.shard && a.from.Before(b.to) && b.from.Before(a.to) {
				n++
			}
		}
	}
	return n
}
