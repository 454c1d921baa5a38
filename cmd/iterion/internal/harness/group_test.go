package harness

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

// at is a time t0 + d, for terms written in offsets.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func term(shard int, replica string, from, to time.Duration) shardTerm {
	return shardTerm{shard: shard, replica: replica, from: at(from), to: at(to)}
}

// TestTermsOfPairsElectionsWithStepDowns pins how a replica's log becomes
// terms: an elected line opens a shard's term, its stepped-down line closes
// it, and a term still open ends where the replica's log ends (its kill or
// the scenario's end).
func TestTermsOfPairsElectionsWithStepDowns(t *testing.T) {
	lines := []termLine{
		{Time: at(0), Shard: 1, Event: lease.Elected.String()},
		{Time: at(time.Second), Shard: 2, Event: lease.Elected.String()},
		{Time: at(3 * time.Second), Shard: 1, Event: lease.SteppedDown.String()},
		{Time: at(4 * time.Second), Shard: 3, Event: lease.SteppedDown.String()}, // no term open: ignored
	}
	got := termsOf("r1", lines, at(10*time.Second))
	want := map[int]shardTerm{1: term(1, "r1", 0, 3*time.Second), 2: term(2, "r1", time.Second, 10*time.Second)}
	if len(got) != len(want) {
		t.Fatalf("got %d terms %v, want %v", len(got), got, want)
	}
	for _, g := range got {
		if w := want[g.shard]; !g.from.Equal(w.from) || !g.to.Equal(w.to) || g.replica != "r1" {
			t.Errorf("shard %d: got %v, want %v", g.shard, g, w)
		}
	}
}

// TestGroupArithmetic pins the figures the scenario's goals are checked
// on: the unheld spans, the re-hold after a kill, the moves, the balance
// and the overlaps.
func TestGroupArithmetic(t *testing.T) {
	s := time.Second
	terms := []shardTerm{
		// shard 0: a on [0,10), killed at 10; b from 13: 3s unheld.
		term(0, "a", 0, 10*s), term(0, "b", 13*s, 30*s),
		// shard 1: a on [0,10), killed; c from 11.
		term(1, "a", 0, 10*s), term(1, "c", 11*s, 30*s),
		// shard 2: b throughout.
		term(2, "b", 0, 30*s),
		// shard 3: c until 20, then d from 20.5 (a move with 0.5s unheld),
		// and an overlapping stale term of e on [19, 21).
		term(3, "c", 0, 20*s), term(3, "d", 20*s+s/2, 30*s), term(3, "e", 19*s, 21*s),
	}
	if n, d := reheld(terms, "a", at(10*s)); n != 2 || d != 3*s {
		t.Errorf("reheld after a's kill: got %d shards, %v; want 2 shards, 3s", n, d)
	}
	if d := longestUnheld(terms, 4, at(10*s), at(15*s)); d != 3*s {
		t.Errorf("longest unheld over [10s, 15s]: got %v, want 3s", d)
	}
	if d := longestUnheld(terms, 5, at(10*s), at(15*s)); d != 5*s {
		t.Errorf("longest unheld with a shard never held: got %v, want the whole 5s window", d)
	}
	if d := longestUnheld(terms[:7], 4, at(15*s), at(25*s)); d != s/2 {
		t.Errorf("longest unheld over [15s, 25s] without e: got %v, want 500ms", d)
	}
	if m := moves(terms[:7], 4, at(15*s), at(25*s)); m != 1 {
		t.Errorf("moves over [15s, 25s]: got %d, want 1 (shard 3, c → d)", m)
	}
	if m := maxHeldAt(terms, at(5*s)); m != 2 {
		t.Errorf("most held at 5s: got %d, want 2 (a holds 0 and 1)", m)
	}
	if n := overlaps(terms); n != 2 {
		t.Errorf("overlaps: got %d, want 2 (e overlaps c and d on shard 3)", n)
	}
	if n := overlaps(terms[:7]); n != 0 {
		t.Errorf("overlaps without e: got %d, want 0", n)
	}
}

// TestHandOverGap pins the hand-over figures: only the terms that count
// and end within the window, each to the next term of its shard, and a
// shard never held again to the window's end; and the step-downs by
// reason.
func TestHandOverGap(t *testing.T) {
	s := time.Second
	terms := []shardTerm{
		{shard: 0, replica: "a", from: at(0), to: at(10 * s), reason: lease.ReasonCanceled},
		{shard: 0, replica: "b", from: at(10*s + 700*time.Millisecond), to: at(30 * s)},
		{shard: 1, replica: "a", from: at(0), to: at(11 * s), reason: lease.ReasonCanceled},
		{shard: 1, replica: "c", from: at(12*s + 200*time.Millisecond), to: at(30 * s)},
		{shard: 2, replica: "c", from: at(0), to: at(12 * s), reason: lease.ReasonDeadline}, // does not count
		{shard: 2, replica: "b", from: at(16 * s), to: at(30 * s)},
		{shard: 3, replica: "a", from: at(0), to: at(5 * s), reason: lease.ReasonCanceled},  // before the window
		{shard: 4, replica: "a", from: at(0), to: at(13 * s), reason: lease.ReasonCanceled}, // never held again
	}
	canceled := func(st shardTerm) bool { return st.reason == lease.ReasonCanceled }
	if n, d := handOverGap(terms, at(9*s), at(12*s), canceled); n != 2 || d != 1200*time.Millisecond {
		t.Errorf("hand-overs in [9s, 12s]: got %d, %v; want 2, 1.2s (shard 1)", n, d)
	}
	if n, d := handOverGap(terms, at(9*s), at(15*s), canceled); n != 3 || d != 2*s {
		t.Errorf("hand-overs in [9s, 15s]: got %d, %v; want 3, 2s (shard 4 unheld to the window's end)", n, d)
	}
	if n, d := handOverGap(terms, at(9*s), at(12*s), nil); n != 3 || d != 4*s {
		t.Errorf("every term ending in [9s, 12s]: got %d, %v; want 3, 4s (shard 2)", n, d)
	}
	if n := stepDowns(terms, at(0), at(30*s), lease.ReasonDeadline); n != 1 {
		t.Errorf("deadline step-downs: got %d, want 1", n)
	}
}

// TestStoreGoal pins the store-cost goal and the naive figure at the
// issue's S = 64, N = 10, with TTL 3s and retry 1s: 1.2 × (64 per second +
// 20 per second) per minute, and 640 per second per minute.
func TestStoreGoal(t *testing.T) {
	goal, naive := storeGoal(64, 10, 3*time.Second, time.Second)
	if goal != 1.2*(64+20)*60 || naive != 640*60 {
		t.Errorf("storeGoal(64, 10, 3s, 1s) = %v, %v; want %v, %v", goal, naive, 1.2*(64+20)*60, 640*60)
	}
}

// TestGroupGoalsFailWhenMissed pins that a result over each bound reports
// that goal unmet.
func TestGroupGoalsFailWhenMissed(t *testing.T) {
	g := GroupResult{Shards: 64, Replicas: 10, Interval: time.Second, TTL: 3 * time.Second, Retry: time.Second,
		Settled: map[string]bool{phaseBalance: true}, MaxHeld: 8, Fair: 7,
		KillReheld: 6 * time.Second, KillMaxUnheld: 6 * time.Second, Moves: 39, UpGap: 2 * time.Second,
		StopGap: 2 * time.Second, OpsPerMinute: 7000, GoalOpsPerMinute: 6048, Overlaps: 1}
	for _, gl := range g.Goals() {
		if gl.Met {
			t.Errorf("%s: measured %s, reported met", gl.Goal, gl.Measured)
		}
	}
}

// TestGroupGoalsAreNeverMetUnmeasured pins that a goal whose figures were
// not measured is reported unmet, never met on zeros: bench renders the
// result of a run that failed part-way, whose terms (read from the logs
// at the end) are then missing.
func TestGroupGoalsAreNeverMetUnmeasured(t *testing.T) {
	s := time.Second
	measured := GroupResult{Shards: 64, Replicas: 10, Interval: s, TTL: 3 * s, Retry: s,
		Settled: map[string]bool{phaseBalance: true}, MaxHeld: 7, Fair: 7,
		KilledShards: 6, KillReheld: 4 * s, KillMaxUnheld: 4 * s, Moves: 30, UpHandOvers: 30, UpGap: s / 2,
		StopHandOvers: 32, StopGap: s / 2, OpsPerMinute: 5000, GoalOpsPerMinute: 6048, Terms: 195}
	for _, gl := range measured.Goals() {
		if !gl.Met {
			t.Fatalf("%s: measured %s, reported unmet; want the measured result to meet every goal", gl.Goal, gl.Measured)
		}
	}
	for _, c := range []struct {
		name  string
		unset func(*GroupResult)
		unmet []string // the goals, by the start of their text
		why   string
	}{
		{"no term logged", func(g *GroupResult) {
			g.Terms, g.MaxHeld, g.KilledShards, g.KillReheld, g.KillMaxUnheld = 0, 0, 0, 0, 0
			g.Moves, g.UpHandOvers, g.UpGap, g.StopHandOvers, g.StopGap = 0, 0, 0, 0, 0
		}, []string{"balance", "kill -9: its", "kill -9: no shard", "5 → 10: shards", "5 → 10: each", "10 → 5", "overlapping"}, "every figure but the store calls comes from the logged terms"},
		{"the killed replica held no shard", func(g *GroupResult) { g.KilledShards, g.KillReheld = 0, 0 },
			[]string{"kill -9: its"}, "no shard of the victim was re-held, so none was timed"},
		{"no hand-over while scaling up", func(g *GroupResult) { g.UpHandOvers, g.UpGap = 0, 0 },
			[]string{"5 → 10: each"}, "scaling up hands shards over; none timed is none measured"},
		{"no stopped replica's release", func(g *GroupResult) { g.StopHandOvers, g.StopGap = 0, 0 },
			[]string{"10 → 5"}, "the stopped replicas held shards; none timed is none measured"},
		{"no store call counted", func(g *GroupResult) { g.OpsPerMinute = 0 },
			[]string{"store calls"}, "a group that renews makes store calls; zero is a counter not read"},
	} {
		g := measured
		c.unset(&g)
		for _, gl := range g.Goals() {
			if gl.Met && slices.ContainsFunc(c.unmet, func(p string) bool { return strings.HasPrefix(gl.Goal, p) }) {
				t.Errorf("%s: %q measured %s, reported met; want unmet: %s", c.name, gl.Goal, gl.Measured, c.why)
			}
		}
	}
}

// TestGroupGoalsAreMetAtTheirBounds pins that each group goal's bound is
// inclusive and that one figure past it misses that goal: the measured
// result at every bound meets them all.
func TestGroupGoalsAreMetAtTheirBounds(t *testing.T) {
	s := time.Second
	atBounds := func() GroupResult {
		return GroupResult{Shards: 64, Replicas: 10, Interval: s, TTL: 3 * s, Retry: s,
			Settled: map[string]bool{phaseBalance: true}, MaxHeld: 7, Fair: 7,
			KilledShards: 6, KillReheld: 5 * s, KillMaxUnheld: 5 * s, Moves: 38, UpHandOvers: 30, UpGap: s,
			StopHandOvers: 32, StopGap: s, OpsPerMinute: 6048, GoalOpsPerMinute: 6048, Terms: 195}
	}
	for _, gl := range atBounds().Goals() {
		if !gl.Met {
			t.Errorf("at its bound: %q measured %s, reported missed; want met: the bounds are inclusive", gl.Goal, gl.Measured)
		}
	}
	for _, c := range []struct {
		goal string
		miss func(*GroupResult)
	}{
		{"balance", func(g *GroupResult) { g.MaxHeld++ }},
		{"kill -9: its", func(g *GroupResult) { g.KillReheld += time.Millisecond }},
		{"kill -9: no shard", func(g *GroupResult) { g.KillMaxUnheld += time.Millisecond }},
		{"5 → 10: shards", func(g *GroupResult) { g.Moves++ }},
		{"5 → 10: each", func(g *GroupResult) { g.UpGap += time.Millisecond }},
		{"10 → 5", func(g *GroupResult) { g.StopGap += time.Millisecond }},
		{"store calls", func(g *GroupResult) { g.OpsPerMinute++ }},
		{"overlapping", func(g *GroupResult) { g.Overlaps = 1 }},
	} {
		g := atBounds()
		c.miss(&g)
		for _, gl := range g.Goals() {
			if missed := strings.HasPrefix(gl.Goal, c.goal); gl.Met == missed {
				t.Errorf("%q measured %s: got met %v, want %v: only the goal whose figure is past its bound is missed", gl.Goal, gl.Measured, gl.Met, !missed)
			}
		}
	}
}

// TestTermsMeetWithoutOverlapping pins where a term ends: at its
// step-down, exclusive, so a successor elected at that instant holds the
// shard alone and the two terms are no overlap; a shard a killed replica
// held and nobody took again is never re-held; a step-down after the
// window is not counted in it.
func TestTermsMeetWithoutOverlapping(t *testing.T) {
	s := time.Second
	terms := []shardTerm{term(0, "a", 0, 10*s), term(0, "b", 10*s, 20*s), term(1, "a", 0, 10*s)}
	if n := overlaps(terms); n != 0 {
		t.Errorf("got %d overlaps, want 0: b elected as a stepped down holds shard 0 alone", n)
	}
	if got := heldAt(terms, at(10*s), nil); len(got) != 1 || got[0].replica != "b" {
		t.Errorf("got %v holding at 10s, want b alone: a term ends at its step-down", got)
	}
	if n, d := reheld(terms, "a", at(10*s)); n != 2 || d != time.Duration(1<<63-1) {
		t.Errorf("got %d shards re-held after %v, want 2 and never: shard 1 was not held again", n, d)
	}
	downs := []shardTerm{{shard: 0, replica: "a", from: at(0), to: at(10 * s), reason: lease.ReasonDeadline}}
	if n := stepDowns(downs, at(0), at(9*s), lease.ReasonDeadline); n != 0 {
		t.Errorf("got %d step-downs in [0s, 9s], want 0: the one at 10s is after the window", n)
	}
}

// TestLogRecordsReadsEveryRecordOrFails pins how the group and clock
// scenarios read the replicas' logs: every record with the message,
// decoded as serve's JSON handler writes it (durations in nanoseconds);
// other records and lines that are not JSON skipped; and a line that
// names the message but does not decode an error, never a term or pass
// dropped unseen.
func TestLogRecordsReadsEveryRecordOrFails(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	log.Info(termMsg, "lease", "measure", "shard", 3, "event", lease.Elected.String(), "reason", "")
	log.Info("lease: elected", "lease", "merge-gate-sweeper")
	log.Debug(passMsg, "pass", 7, "offered", 120, "took", 1500*time.Millisecond, "behind", true)
	buf.WriteString("panic: not a log record\n")
	log.Info(termMsg, "lease", "measure", "shard", 4, "event", lease.SteppedDown.String(), "reason", lease.ReasonCanceled)
	path := filepath.Join(t.TempDir(), "replica.stderr")
	if err := os.WriteFile(path, []byte(buf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	terms, err := logRecords[termLine](path, termMsg)
	if err != nil || len(terms) != 2 || terms[0].Shard != 3 || terms[0].Event != lease.Elected.String() || terms[1].Reason != lease.ReasonCanceled {
		t.Errorf("got terms %+v, %v; want shard 3 elected, then shard 4 stepped down (cancelled)", terms, err)
	}
	passes, err := logRecords[passLog](path, passMsg)
	if err != nil || len(passes) != 1 || passes[0].Took != 1500*time.Millisecond || passes[0].Offered != 120 || !passes[0].Behind {
		t.Errorf("got passes %+v, %v; want one that took 1.5s, offered 120 runs, behind", passes, err)
	}
	for _, bad := range []string{
		`{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"measure group: shard term","shard":"3","event":"elected"}`,
		`{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"measure group: shard term","shard":3,"ev`,
	} {
		if err := os.WriteFile(path, []byte(buf.String()+bad+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := logRecords[termLine](path, termMsg); !errors.Is(err, ErrMeasure) || !strings.Contains(err.Error(), "line 6") {
			t.Errorf("with %s: got %d terms, err %v; want an error wrapping ErrMeasure naming line 6: a term line not read would hide a holder", bad, len(got), err)
		}
	}
}
