package harness

import (
	"testing"
	"time"

	"iterion.dev/iterion/pkg/forge/forgesim"
)

var logT0 = time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)

// sec is logT0 plus s seconds.
func sec(s float64) time.Time { return logT0.Add(time.Duration(s * float64(time.Second))) }

// synthLog builds a request log of 1 s buckets: for each installation and
// owner, one request at each of the given seconds, on lane (the sweeper's
// unless given).
type synthLog struct {
	series map[[2]string]map[int64][]float64 // {agent, ""} → installation → seconds
}

func newSynthLog() *synthLog { return &synthLog{series: map[[2]string]map[int64][]float64{}} }

func (l *synthLog) add(id int64, owner, lane string, secs ...float64) *synthLog {
	k := [2]string{"iterion (" + owner + ") lane/" + lane}
	if l.series[k] == nil {
		l.series[k] = map[int64][]float64{}
	}
	l.series[k][id] = append(l.series[k][id], secs...)
	return l
}

func (l *synthLog) sweeps(id int64, owner string, secs ...float64) *synthLog {
	return l.add(id, owner, "merge-gate-sweeper", secs...)
}

func (l *synthLog) log() forgesim.RequestLog {
	out := forgesim.RequestLog{Interval: time.Second}
	for k, byID := range l.series {
		for id, secs := range byID {
			sr := forgesim.SenderRequests{Installation: id, Sender: k[0], Tokens: 1}
			for _, s := range secs {
				t := sec(s)
				start := t.Truncate(time.Second)
				n := len(sr.Buckets)
				if n > 0 && sr.Buckets[n-1].Start.Equal(start) {
					sr.Buckets[n-1].Requests++
					sr.Buckets[n-1].Last = t
					continue
				}
				sr.Buckets = append(sr.Buckets, forgesim.RequestBucket{Start: start, Requests: 1, First: t, Last: t})
			}
			out.Series = append(out.Series, sr)
		}
	}
	return out
}

func TestParseSenderReadsTheReplicasUserAgent(t *testing.T) {
	for _, c := range []struct {
		agent, owner, lane string
		ok                 bool
	}{
		{"iterion (web-7f9c-3a1b2c4d) lane/merge-gate-sweeper", "web-7f9c-3a1b2c4d", "merge-gate-sweeper", true},
		{"iterion (a) lane/api", "a", "api", true},
		{"go-github/v88.0.0", "", "", false},
		{"iterion (a)", "", "", false},
		{"iterion () lane/merge-gate-sweeper", "", "", false},
		{"", "", "", false},
	} {
		owner, lane, ok := parseSender(c.agent)
		if owner != c.owner || lane != c.lane || ok != c.ok {
			t.Errorf("parseSender(%q) = %q, %q, %v; want %q, %q, %v: the owner and lane of iterion's User-Agent, nothing else", c.agent, owner, lane, ok, c.owner, c.lane, c.ok)
		}
	}
}

func TestSweepsOfKeepsTheSweeperLaneOnly(t *testing.T) {
	log := newSynthLog().sweeps(1, "a", 1.1, 2.1).add(1, "b", "api", 1.5).add(2, "a", "webhook", 1.2).log()
	sl := sweepsOf(log)
	if len(sl) != 1 || len(sl[1]) != 2 || sl[1][0].owner != "a" {
		t.Fatalf("got %+v, want installation 1's two sweeper buckets from a: the API's and webhooks' offers are not sweeps", sl)
	}
}

func TestOverlapsOf(t *testing.T) {
	gap := 2 * time.Second // two intervals of 1 s
	cases := []struct {
		name string
		log  *synthLog
		want int
		why  string
	}{
		{"one sweeper", newSynthLog().sweeps(1, "a", 0.1, 1.1, 2.1, 3.1), 0, "one replica sweeping every interval overlaps nobody"},
		{"clean hand-over", newSynthLog().sweeps(1, "a", 0.1, 1.1, 2.1).sweeps(1, "b", 2.6, 3.6, 4.6), 0,
			"the successor's first request after the predecessor's last is a hand-over"},
		{"hand-over in one bucket", newSynthLog().sweeps(1, "a", 0.1, 1.1, 2.1).sweeps(1, "b", 2.9, 3.9), 0,
			"a hand-over within one interval is still a hand-over"},
		{"kill then takeover", newSynthLog().sweeps(1, "a", 0.1, 1.1).sweeps(1, "b", 5.3, 6.3), 0, "a successor after a kill overlaps nobody"},
		{"double sweep", newSynthLog().sweeps(1, "a", 0.1, 1.1, 2.1, 3.1).sweeps(1, "b", 0.6, 1.6, 2.6), 1,
			"two replicas each sweeping every interval is an overlap"},
		{"one stray pass", newSynthLog().sweeps(1, "a", 0.1, 1.1, 2.1, 3.1).sweeps(1, "b", 1.6), 1,
			"one request of another replica inside a holder's tenure is an overlap"},
		{"hand back after a pause", newSynthLog().sweeps(1, "a", 0.1, 1.1).sweeps(1, "b", 1.6, 2.6, 3.6, 4.6).sweeps(1, "a", 8.1, 9.1), 0,
			"a replica that lost an installation and won it back later opens a new tenure"},
		{"a pause longer than the gap ends a tenure", newSynthLog().sweeps(1, "a", 0.5, 1.5).sweeps(1, "b", 2.0, 3.0, 4.0).sweeps(1, "a", 4.5), 0,
			"a paused 3s, over the 2s gap: its return after b's last request is a new tenure, a hand back"},
		{"a pause of exactly the gap does not", newSynthLog().sweeps(1, "a", 0.5, 1.5, 3.5).sweeps(1, "b", 2.0), 1,
			"a paused 2s, no longer than the gap: its tenure runs on, and b's request inside it is an overlap"},
		{"two requests at one instant", newSynthLog().sweeps(1, "a", 0.5, 1.5).sweeps(1, "b", 1.5, 2.5), 1,
			"b's first request at the instant of a's last is two replicas at once"},
		{"other installations apart", newSynthLog().sweeps(1, "a", 0.1, 1.1).sweeps(2, "b", 0.1, 1.1), 0,
			"replicas sweeping different installations at once is the point"},
	}
	for _, c := range cases {
		got := overlapsOf(sweepsOf(c.log.log()), gap)
		if len(got) != c.want {
			t.Errorf("%s: got %d overlaps %+v, want %d: %s", c.name, len(got), got, c.want, c.why)
		}
	}
	o := overlapsOf(sweepsOf(newSynthLog().sweeps(1, "a", 0.1, 1.1, 2.1, 3.1).sweeps(1, "b", 0.6, 1.6, 2.6).log()), gap)
	if len(o) != 1 || o[0].length != 2*time.Second {
		t.Errorf("double sweep: got %+v, want one overlap of 2s (b's tenure 0.6–2.6 inside a's 0.1–3.1): the overlap is the shared time", o)
	}
}

func TestCostRatioIsPerInstallation(t *testing.T) {
	lo := map[int64]int64{1: 10, 2: 10, 3: 10, 4: 10}
	hi := map[int64]int64{1: 10, 2: 10, 3: 10, 4: 12, 5: 100}
	mean, p95, most := costRatio(lo, hi)
	if mean != 42.0/40 || most != 1.2 || p95 != 1.2 {
		t.Errorf("got mean %.3f, p95 %.3f, max %.3f; want 1.05, 1.2, 1.2: the ratio of the totals over the installations both windows swept (5 is new), and the spread of the installations' own", mean, p95, most)
	}
	lo[6] = 10 // swept at N=1, not in the N=hi window
	if m, p, x := costRatio(lo, hi); m != mean || p != p95 || x != most {
		t.Errorf("with installation 6 swept at N=1 only: got mean %.3f, p95 %.3f, max %.3f; want %.3f, %.3f, %.3f as without it: the ratio is over the installations both windows swept", m, p, x, mean, p95, most)
	}
	if mean, _, _ := costRatio(map[int64]int64{}, hi); mean != 0 {
		t.Errorf("got %v with nothing at N=1, want 0: no ratio without a base", mean)
	}
}

func TestHoldersAndBalance(t *testing.T) {
	log := newSynthLog().
		sweeps(1, "a", 0.1, 1.1, 2.1).sweeps(1, "b", 3.1). // a holds 1 (more requests)
		sweeps(2, "a", 0.2, 1.2).
		sweeps(3, "b", 0.3, 1.3).
		sweeps(4, "c", 0.4, 1.4).log()
	held := sweepsOf(log).holders()
	if held["a"] != 2 || held["b"] != 1 || held["c"] != 1 {
		t.Fatalf("got %v, want a 2, b 1, c 1: an installation is held by the replica that sent most of its sweep", held)
	}
	if b := balance(held, 4); b != 2 {
		t.Errorf("got balance %.2f over 4 replicas, want 2 (a holds 2, the mean is 1): a replica holding nothing counts in the mean", b)
	}
	if b := balance(held, 3); b != 1.5 {
		t.Errorf("got balance %.2f over 3 replicas, want 1.5", b)
	}
}

func TestLongestGap(t *testing.T) {
	sl := sweepsOf(newSynthLog().sweeps(1, "a", 0.1, 1.1, 2.1, 3.1).sweeps(2, "a", 0.2, 2.9).sweeps(3, "b", 0.5, 1.0, 1.5).log())
	if g, id := sl.longestGap([]int64{1}, sec(0), sec(4)); g != time.Second || id != 1 {
		t.Errorf("installation 1: got %v (%d), want 1s between two sweeps: swept every interval", g, id)
	}
	if g, id := sl.longestGap([]int64{1, 2}, sec(0), sec(4)); g != 2700*time.Millisecond || id != 2 {
		t.Errorf("installations 1 and 2: got %v (%d), want 2.7s of installation 2: the longest gap between two sweeps", g, id)
	}
	if g, id := sl.longestGap([]int64{1, 3, 9}, sec(0), sec(4)); g != 4*time.Second || id != 9 {
		t.Errorf("with installation 9 never swept: got %v (%d), want the whole window, 4s: an unswept installation is the worst", g, id)
	}
	// Installation 4 in the window [1, 4]: a bucket before it, one of two
	// requests (3.3 and 3.9) in it, one after it.
	sl = sweepsOf(newSynthLog().sweeps(4, "a", 0.2, 0.8, 3.3, 3.9, 6.5).log())
	if g, want := func() time.Duration { g, _ := sl.longestGap([]int64{4}, sec(1), sec(4)); return g }(), sec(3.3).Sub(sec(1)); g != want {
		t.Errorf("installation 4 in [1s, 4s]: got %v, want %v, from the window's start to the first request of the bucket in it: buckets outside the window do not count, and a gap ends at a bucket's first request", g, want)
	}
}

func TestFirstSweepAfterAndSweptBy(t *testing.T) {
	sl := sweepsOf(newSynthLog().sweeps(1, "a", 0.1, 1.1).sweeps(1, "b", 5.3, 6.3).sweeps(2, "b", 0.5, 1.5, 2.5).log())
	if got := sl.firstSweepAfter(1, sec(1.5), "a"); !got.Equal(sec(5.3)) {
		t.Errorf("installation 1 after a's kill at 1.5: got %v, want b's first sweep at 5.3", got)
	}
	if got := sl.firstSweepAfter(1, sec(7), ""); !got.IsZero() {
		t.Errorf("installation 1 after its last sweep: got %v, want zero: never swept again", got)
	}
	// A bucket straddling t counts its last request: late, never early.
	if got := sl.firstSweepAfter(2, sec(2.2), ""); !got.Equal(sec(2.5)) {
		t.Errorf("installation 2 after 2.2: got %v, want 2.5", got)
	}
	if got := sl.sweptBy("a", sec(0), sec(2)); len(got) != 1 || got[0] != 1 {
		t.Errorf("swept by a in [0, 2): got %v, want [1]", got)
	}
	// Buckets of two requests that straddle the instant asked about.
	sl = sweepsOf(newSynthLog().sweeps(3, "b", 2.1, 2.8).sweeps(5, "a", 1.2, 1.9).log())
	if got := sl.firstSweepAfter(3, sec(2.5), ""); !got.Equal(sec(2.8)) {
		t.Errorf("installation 3 after 2.5, its bucket's requests at 2.1 and 2.8: got %v, want 2.8: the bucket's last request, late by at most its spread, never early", got)
	}
	if got := sl.sweptBy("a", sec(1.5), sec(3)); len(got) != 1 || got[0] != 5 {
		t.Errorf("swept by a in [1.5, 3): got %v, want [5]: its bucket's last request, at 1.9, is in the window", got)
	}
}

func TestLastRequestAndLimited(t *testing.T) {
	log := newSynthLog().sweeps(1, "a", 0.1, 1.1).add(1, "b", "api", 3.4).sweeps(2, "a", 0.2).add(7, "b", "api", 3.1, 3.7).log()
	if got := lastRequest(log, 1); !got.Equal(sec(3.4)) {
		t.Errorf("got %v, want 3.4: the last request of any lane", got)
	}
	if got := lastRequest(log, 7); !got.Equal(sec(3.7)) {
		t.Errorf("got %v, want 3.7: the last request of a bucket of two", got)
	}
	log.Series[0].Buckets[0].Limited = 2
	if n := limitedIn(log, sec(0), sec(10), nil); n != 2 {
		t.Errorf("got %d limited, want 2", n)
	}
	if n := limitedIn(log, sec(5), sec(10), nil); n != 0 {
		t.Errorf("got %d limited after 5s, want 0: only the window's buckets count", n)
	}
	if n := limitedIn(log, sec(-10), sec(0), nil); n != 0 {
		t.Errorf("got %d limited before 0s, want 0: a bucket starting at the window's end is not in it", n)
	}
}

func TestSettled(t *testing.T) {
	iv := time.Second
	ids := []int64{1, 2}
	cases := []struct {
		name string
		log  *synthLog
		n    int
		want bool
		why  string
	}{
		{"each on one replica", newSynthLog().sweeps(1, "a", 0.1, 2.1, 4.1).sweeps(2, "b", 0.5, 3.5), 2, true,
			"every installation swept in each half by the same one replica, and both replicas sweep"},
		{"an installation moved", newSynthLog().sweeps(1, "a", 0.1, 1.1).sweeps(1, "b", 4.1).sweeps(2, "b", 0.5, 3.5), 2, false,
			"an installation swept by another replica in the second half is still moving"},
		{"an installation unswept", newSynthLog().sweeps(1, "a", 0.1, 4.1).sweeps(2, "b", 0.5), 2, false,
			"an installation not swept in the second half has not settled"},
		{"a replica idle", newSynthLog().sweeps(1, "a", 0.1, 2.1).sweeps(2, "a", 0.5, 3.5), 2, false,
			"at N=2 both replicas must sweep"},
		{"swept by another before the look", newSynthLog().sweeps(1, "b", -0.5).sweeps(1, "a", 0.1, 2.1).sweeps(2, "b", 0.5, 3.5), 2, true,
			"a sweep before the look's start is not in either half"},
		{"two replicas in the second half", newSynthLog().sweeps(1, "a", 0.1, 2.1).sweeps(1, "b", 3.1).sweeps(2, "b", 0.5, 3.5), 2, false,
			"an installation swept by two replicas in the second half has not settled on one"},
	}
	for _, c := range cases {
		if got, _ := settled(sweepsOf(c.log.log()), ids, c.n, sec(0), iv); got != c.want {
			t.Errorf("%s: got %v, want %v: %s", c.name, got, c.want, c.why)
		}
	}
}

// TestSeedAndReplicaRefusalsSplitBySender pins whose refusals the tenants
// scenario's goal of none counts: every sender's but the seeding
// replica's, from the seeding's start. The seeding replica stops and the
// measured replicas start within one interval of the log, whose bucket
// holds both: a refusal of the replicas' first requests there is theirs,
// and one of the seeding's last requests is not.
func TestSeedAndReplicaRefusalsSplitBySender(t *testing.T) {
	// The seeding replica "seed" sends in [0, 3.2); replica "a" starts at
	// 3.4, in the same 1 s bucket, and sends again at 4.5.
	log := newSynthLog().add(1, "seed", "api", 0.5, 3.1).sweeps(1, "a", 3.4, 4.5).sweeps(2, "a", 3.6).log()
	limit := func(owner string, id int64, start float64, n int64) {
		for i, sr := range log.Series {
			if o, _, _ := parseSender(sr.Sender); o != owner || sr.Installation != id {
				continue
			}
			for j, b := range sr.Buckets {
				if b.Start.Equal(sec(start)) {
					log.Series[i].Buckets[j].Limited = n
					return
				}
			}
		}
		t.Fatalf("no bucket of %s, installation %d, at %v", owner, id, start)
	}
	limit("seed", 1, 3, 1) // the seeding's last request
	limit("a", 1, 3, 2)    // the replicas' first requests, in the same interval
	limit("a", 2, 3, 4)
	limit("a", 1, 4, 8) // and later
	seeding, replicas := seedAndReplicaRefusals(log, "seed", sec(0), sec(10))
	if seeding != 1 || replicas != 14 {
		t.Errorf("got %d refusals while seeding and %d of the replicas, want 1 and 14: the replicas' refusals count from their first request, the seeding's never", seeding, replicas)
	}
}

// TestBetweenKeepsTheWindowsBuckets pins the tenants scenario's windows:
// a bucket is in [from, to) when it starts there, the one starting at to
// is the next window's.
func TestBetweenKeepsTheWindowsBuckets(t *testing.T) {
	sl := sweepsOf(newSynthLog().sweeps(1, "a", 0.5, 1.5, 2.5, 3.5).log())
	got := sl.between(sec(1), sec(3))
	if len(got[1]) != 2 || !got[1][0].b.Start.Equal(sec(1)) || !got[1][1].b.Start.Equal(sec(2)) {
		t.Errorf("got %+v in [1s, 3s), want the buckets starting at 1s and 2s: not the one before the window, nor the one starting at its end", got[1])
	}
}
