package harness

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

// The tenants scenario's figures, computed from the simulator's own
// per-installation request log (GET /_sim/installations/requests): who
// sent each installation's requests, and when, on the simulator's clock.
// The replicas name themselves in their User-Agent, "iterion (<owner>)
// lane/<lane>"; the sweeper's requests are those of lane
// merge-gate-sweeper.

// readRequestLog reads the simulator's request log from since on (all it
// keeps when since is zero).
func readRequestLog(ctx context.Context, s sim, since time.Time) (forgesim.RequestLog, error) {
	var log forgesim.RequestLog
	u := s.url + "/_sim/installations/requests"
	if !since.IsZero() {
		u += "?since=" + url.QueryEscape(since.UTC().Format(time.RFC3339Nano))
	}
	// A long log takes longer than the simulator client's timeout on a
	// loaded machine; the client's transport is kept.
	hc := &http.Client{Transport: s.hc.Transport, Timeout: time.Minute}
	err := doJSON(ctx, hc, http.MethodGet, u, "", nil, &log)
	return log, err
}

// parseSender reads an iterion replica's User-Agent: "iterion (<owner>)
// lane/<lane>". ok is false for any other sender.
func parseSender(agent string) (owner, lane string, ok bool) {
	rest, ok := strings.CutPrefix(agent, "iterion (")
	if !ok {
		return "", "", false
	}
	owner, lane, ok = strings.Cut(rest, ") lane/")
	if !ok || owner == "" || lane == "" {
		return "", "", false
	}
	return owner, lane, true
}

// sweep is one interval's sweeper requests of one installation from one
// replica.
type sweep struct {
	owner string
	b     forgesim.RequestBucket
}

// sweepLog is the sweeper's requests by installation, each installation's
// sorted by their first arrival.
type sweepLog map[int64][]sweep

// sweepsOf keeps the sweeper lane's buckets of log.
func sweepsOf(log forgesim.RequestLog) sweepLog {
	out := sweepLog{}
	for _, sr := range log.Series {
		owner, lane, ok := parseSender(sr.Sender)
		if !ok || lane != forge.LaneMergeGateSweeper {
			continue
		}
		for _, b := range sr.Buckets {
			out[sr.Installation] = append(out[sr.Installation], sweep{owner: owner, b: b})
		}
	}
	for id := range out {
		slices.SortFunc(out[id], func(a, b sweep) int { return a.b.First.Compare(b.b.First) })
	}
	return out
}

// between keeps the buckets that start within [from, to).
func (sl sweepLog) between(from, to time.Time) sweepLog {
	out := sweepLog{}
	for id, ss := range sl {
		for _, s := range ss {
			if !s.b.Start.Before(from) && s.b.Start.Before(to) {
				out[id] = append(out[id], s)
			}
		}
	}
	return out
}

// tenure is a stretch of time one owner swept one installation: from its
// first request to its last, with no pause longer than the gap its
// tenures are cut at.
type tenure struct {
	owner    string
	from, to time.Time
}

// tenuresOf cuts one installation's sweeps into each owner's tenures: an
// owner's tenure ends when it sends nothing for longer than gap.
func tenuresOf(ss []sweep, gap time.Duration) []tenure {
	var out []tenure
	open := map[string]int{} // owner → index of its latest tenure in out
	for _, s := range ss {   // sorted by first arrival
		if i, ok := open[s.owner]; ok && s.b.First.Sub(out[i].to) <= gap {
			if s.b.Last.After(out[i].to) {
				out[i].to = s.b.Last
			}
			continue
		}
		open[s.owner] = len(out)
		out = append(out, tenure{owner: s.owner, from: s.b.First, to: s.b.Last})
	}
	return out
}

// overlap is two replicas sweeping one installation at once: one's
// request arrived within the other's tenure.
type overlap struct {
	installation int64
	owners       [2]string
	length       time.Duration
}

// overlapsOf finds, for every installation, the pairs of tenures of two
// owners that share an instant; a tenure ends when its owner pauses for
// longer than gap. A hand-over, where the successor's first request comes
// after the predecessor's last, is not an overlap.
func overlapsOf(sl sweepLog, gap time.Duration) []overlap {
	var out []overlap
	for id, ss := range sl {
		ts := tenuresOf(ss, gap)
		for i, a := range ts {
			for _, b := range ts[i+1:] {
				if a.owner == b.owner || a.to.Before(b.from) || b.to.Before(a.from) {
					continue
				}
				from, to := a.from, a.to
				if b.from.After(from) {
					from = b.from
				}
				if b.to.Before(to) {
					to = b.to
				}
				out = append(out, overlap{installation: id, owners: [2]string{a.owner, b.owner}, length: to.Sub(from)})
			}
		}
	}
	slices.SortFunc(out, func(a, b overlap) int { return cmp.Compare(a.installation, b.installation) })
	return out
}

// requestsByInstallation sums the requests of every installation in sl.
func (sl sweepLog) requestsByInstallation() map[int64]int64 {
	out := map[int64]int64{}
	for id, ss := range sl {
		for _, s := range ss {
			out[id] += s.b.Requests
		}
	}
	return out
}

// costRatio compares the sweep's requests per installation in two windows
// of equal length, at many replicas (hi) over at one (lo), over the
// installations both swept: the ratio of the totals (the mean
// installation's), and the 95th percentile and the largest of the
// installations' own ratios.
func costRatio(lo, hi map[int64]int64) (mean, p95, most float64) {
	var sumLo, sumHi int64
	var each []float64
	for id, n := range lo {
		m, ok := hi[id]
		if !ok || n == 0 {
			continue
		}
		sumLo, sumHi = sumLo+n, sumHi+m
		each = append(each, float64(m)/float64(n))
	}
	if sumLo == 0 {
		return 0, 0, 0
	}
	slices.Sort(each)
	return float64(sumHi) / float64(sumLo), each[(len(each)*95+99)/100-1], each[len(each)-1]
}

// holders returns, per owner, the installations it swept most requests
// of in sl: the share of the installations each replica holds.
func (sl sweepLog) holders() map[string]int {
	out := map[string]int{}
	for _, ss := range sl {
		by := map[string]int64{}
		for _, s := range ss {
			by[s.owner] += s.b.Requests
		}
		best := ""
		for owner, n := range by {
			if best == "" || n > by[best] || (n == by[best] && owner < best) {
				best = owner
			}
		}
		out[best]++
	}
	return out
}

// balance is the most installations one replica holds over the mean over
// replicas live replicas (1 when perfectly even).
func balance(held map[string]int, replicas int) float64 {
	total, most := 0, 0
	for _, n := range held {
		total += n
		most = max(most, n)
	}
	if total == 0 || replicas == 0 {
		return 0
	}
	return float64(most) / (float64(total) / float64(replicas))
}

// longestGap is, over the installations ids, the longest the sweeper left
// one unswept within [from, to]: from the window's start to its first
// request, between two requests, or from its last to the window's end.
// An installation never swept in the window counts the whole window. It
// returns the gap and its installation. Within a bucket only the first and
// last requests are known; a bucket is never wider than an interval.
func (sl sweepLog) longestGap(ids []int64, from, to time.Time) (time.Duration, int64) {
	var longest time.Duration
	var worst int64
	for _, id := range ids {
		prev := from
		gap := time.Duration(0)
		for _, s := range sl[id] {
			if s.b.Last.Before(from) || s.b.First.After(to) {
				continue
			}
			gap = max(gap, s.b.First.Sub(prev))
			if s.b.Last.After(prev) {
				prev = s.b.Last
			}
		}
		gap = max(gap, to.Sub(prev))
		if gap > longest {
			longest, worst = gap, id
		}
	}
	return longest, worst
}

// firstSweepAfter is when installation id was first swept at or after t
// by an owner other than not ("" excludes none); zero when it was not.
// A bucket that straddles t counts its last request: late by at most its
// spread, never early.
func (sl sweepLog) firstSweepAfter(id int64, t time.Time, not string) time.Time {
	for _, s := range sl[id] {
		if s.owner == not && not != "" {
			continue
		}
		switch {
		case !s.b.First.Before(t):
			return s.b.First
		case !s.b.Last.Before(t):
			return s.b.Last
		}
	}
	return time.Time{}
}

// sweptBy returns the installations owner swept within [from, to).
func (sl sweepLog) sweptBy(owner string, from, to time.Time) []int64 {
	var out []int64
	for id, ss := range sl {
		for _, s := range ss {
			if s.owner == owner && !s.b.Last.Before(from) && s.b.First.Before(to) {
				out = append(out, id)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// lastRequest is the latest request of installation id in log, any
// sender and lane; zero when it has none.
func lastRequest(log forgesim.RequestLog, id int64) time.Time {
	var last time.Time
	for _, sr := range log.Series {
		if sr.Installation != id {
			continue
		}
		for _, b := range sr.Buckets {
			if b.Last.After(last) {
				last = b.Last
			}
		}
	}
	return last
}

// limitedIn sums the requests a rate limit refused in log's buckets that
// start within [from, to), any installation and lane, of the senders keep
// admits (every sender when keep is nil).
func limitedIn(log forgesim.RequestLog, from, to time.Time, keep func(sender string) bool) int64 {
	var n int64
	for _, sr := range log.Series {
		if keep != nil && !keep(sr.Sender) {
			continue
		}
		for _, b := range sr.Buckets {
			if !b.Start.Before(from) && b.Start.Before(to) {
				n += b.Limited
			}
		}
	}
	return n
}

// seedAndReplicaRefusals splits the requests a rate limit refused in log's
// buckets that start within [from, to), any installation and lane, between
// the seeding replica, whose lease owner is seeder, and every other sender:
// the replicas measured after it. The split is by sender, not by time: the
// replicas start in the interval the seeding ended in, and one bucket holds
// that whole interval, so a split by time charges their first requests'
// refusals to the seeding, or the seeding's to them.
func seedAndReplicaRefusals(log forgesim.RequestLog, seeder string, from, to time.Time) (seeding, replicas int64) {
	bySeeder := func(sender string) bool {
		owner, _, ok := parseSender(sender)
		return ok && owner == seeder
	}
	seeding = limitedIn(log, from, to, bySeeder)
	replicas = limitedIn(log, from, to, func(sender string) bool { return !bySeeder(sender) })
	return seeding, replicas
}

// settleHalf is how many intervals each half of settled's look spans: an
// installation swept less often than every interval still settles.
const settleHalf = 2

// settled tells whether, in the 2 × settleHalf whole intervals from from,
// every installation of ids was swept in each half, by one replica, the
// same in both, and n replicas swept; when not, why not.
func settled(sl sweepLog, ids []int64, n int, from time.Time, iv time.Duration) (bool, string) {
	owners := map[string]bool{}
	for _, id := range ids {
		var by [2]map[string]bool
		for _, sw := range sl[id] {
			k := int(sw.b.Start.Sub(from) / (settleHalf * iv))
			if sw.b.Start.Before(from) || k > 1 {
				continue
			}
			if by[k] == nil {
				by[k] = map[string]bool{}
			}
			by[k][sw.owner] = true
		}
		if len(by[0]) != 1 || len(by[1]) != 1 {
			return false, fmt.Sprintf("installation %d swept by %d and then %d replicas", id, len(by[0]), len(by[1]))
		}
		for o := range by[0] {
			if !by[1][o] {
				return false, fmt.Sprintf("installation %d moved", id)
			}
			owners[o] = true
		}
	}
	if len(owners) != n {
		return false, fmt.Sprintf("%d of %d replicas sweep", len(owners), n)
	}
	return true, ""
}

// total64 sums m's values.
func total64(m map[int64]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
