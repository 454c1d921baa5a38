package forge_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/forge"
)

// hourlySetup is a Client made at start on a simulator with pull 1, its
// clock, its log records and the simulator's host.
func hourlySetup(t *testing.T, start time.Time) (*forge.Client, *testClock, *records, string) {
	t.Helper()
	sim, srv := startSim(t)
	if err := sim.SeedPull("acme", "app", 1, "sha", "open"); err != nil {
		t.Fatal(err)
	}
	clk := newTestClock(start)
	logs := &records{}
	c := newClient(t, srv, forge.Config{Token: "t", Now: clk.Now, Logger: slog.New(logs), ETagCacheBytes: -1})
	return c, clk, logs, strings.TrimPrefix(srv.URL, "http://")
}

func TestHourlyLine(t *testing.T) {
	c, clk, logs, host := hourlySetup(t, time.Date(2026, 9, 30, 14, 23, 5, 0, time.UTC))
	get := func(lane string, n int) {
		t.Helper()
		ctx := forge.WithLane(context.Background(), lane)
		for range n {
			if _, err := c.GetPull(ctx, "acme", "app", 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	expect := func(rule string, want ...string) {
		t.Helper()
		got := logs.messages()
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("log lines:\ngot  %q\nwant %q\nrule: %s", got, want, rule)
		}
	}

	clk.Set(time.Date(2026, 9, 30, 14, 30, 0, 0, time.UTC))
	get(forge.LaneWebhook, 1)
	get(forge.LaneMergeGateSweeper, 2)
	clk.Set(time.Date(2026, 9, 30, 14, 59, 59, 999e6, time.UTC))
	get(forge.LaneAPI, 1)
	expect("nothing is written before a request of a later hour arrives")

	clk.Set(time.Date(2026, 9, 30, 15, 0, 0, 0, time.UTC))
	get(forge.LaneAPI, 1)
	line1 := "forge HTTP: 4 requests in the partial hour 14:23:05Z–15:00:00Z ending 2026-09-30T15:00Z — " +
		host + " REST merge-gate-sweeper 2, " + host + " REST api 1, " + host + " REST webhook 1"
	expect("the first request of a later hour writes the hour before; the process started inside it, so it is partial; sorted by count, then name", line1)

	clk.Set(time.Date(2026, 9, 30, 15, 40, 0, 0, time.UTC))
	get(forge.LaneMergeGateSweeper, 3)
	clk.Set(time.Date(2026, 9, 30, 18, 10, 0, 0, time.UTC))
	get(forge.LaneWebhook, 1)
	line2 := "forge HTTP: 4 requests in the hour ending 2026-09-30T16:00Z — " +
		host + " REST merge-gate-sweeper 3, " + host + " REST api 1"
	expect("a whole hour says so; hours without requests write no line", line1, line2)

	clk.Set(time.Date(2026, 9, 30, 18, 47, 10, 0, time.UTC))
	c.Close()
	line3 := "forge HTTP: 1 requests in the partial hour 18:00:00Z–18:47:10Z ending 2026-09-30T19:00Z — " + host + " REST webhook 1"
	expect("Close flushes the hour being counted as a partial hour ending at the stop", line1, line2, line3)
	c.Close()
	expect("a second Close has nothing to flush", line1, line2, line3)

	rec := logs.all()[1]
	attrs := map[string]slog.Value{}
	rec.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value; return true })
	if got := attrs["hour_end"].Time(); !got.Equal(time.Date(2026, 9, 30, 16, 0, 0, 0, time.UTC)) {
		t.Errorf("hour_end: got %v, want 16:00Z", got)
	}
	if got := attrs["requests"].Int64(); got != 4 {
		t.Errorf("requests: got %d, want 4", got)
	}
	if got := attrs["partial"].Bool(); got {
		t.Errorf("partial: got true, want false for a whole hour")
	}
	if got := attrs["from"].Time(); !got.Equal(time.Date(2026, 9, 30, 15, 0, 0, 0, time.UTC)) {
		t.Errorf("from: got %v, want 15:00Z", got)
	}
	counts := map[string]int64{}
	for _, a := range attrs["counts"].Group() {
		counts[a.Key] = a.Value.Int64()
	}
	if counts[host+" REST merge-gate-sweeper"] != 3 || counts[host+" REST api"] != 1 || len(counts) != 2 {
		t.Errorf("counts group: got %v, want merge-gate-sweeper 3 and api 1: the line's figures as attributes", counts)
	}
}

func TestHourlyLineAfterCloseStartsAPartialHour(t *testing.T) {
	c, clk, logs, host := hourlySetup(t, time.Date(2026, 9, 30, 13, 50, 0, 0, time.UTC))
	clk.Set(time.Date(2026, 9, 30, 14, 10, 0, 0, time.UTC))
	if _, err := c.GetPull(context.Background(), "acme", "app", 1); err != nil {
		t.Fatal(err)
	}
	clk.Set(time.Date(2026, 9, 30, 15, 30, 0, 0, time.UTC))
	c.Close()
	clk.Set(time.Date(2026, 9, 30, 15, 45, 0, 0, time.UTC))
	if _, err := c.GetPull(context.Background(), "acme", "app", 1); err != nil {
		t.Fatal(err)
	}
	clk.Set(time.Date(2026, 9, 30, 16, 5, 0, 0, time.UTC))
	if _, err := c.GetPull(context.Background(), "acme", "app", 1); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"forge HTTP: 1 requests in the hour ending 2026-09-30T15:00Z — " + host + " REST unlaned 1",
		"forge HTTP: 1 requests in the partial hour 15:30:00Z–16:00:00Z ending 2026-09-30T16:00Z — " + host + " REST unlaned 1",
	}
	if got := logs.messages(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got %q\nwant %q\nrule: started before the hour it counted, the client covered it whole, even when closed after it ended; requests after Close start a partial hour at the Close", got, want)
	}
}

func TestHourlyLineCountsNotModifiedAnswers(t *testing.T) {
	sim, srv := startSim(t)
	if err := sim.SeedPull("acme", "app", 1, "sha", "open"); err != nil {
		t.Fatal(err)
	}
	clk := newTestClock(time.Date(2026, 9, 30, 14, 0, 0, 0, time.UTC))
	logs := &records{}
	c := newClient(t, srv, forge.Config{Token: "t", Now: clk.Now, Logger: slog.New(logs)}) // ETag cache on
	for range 3 {
		if _, err := c.GetPull(context.Background(), "acme", "app", 1); err != nil {
			t.Fatal(err)
		}
	}
	clk.Set(time.Date(2026, 9, 30, 15, 0, 0, 0, time.UTC))
	c.Close()
	recs := logs.all()
	if len(recs) != 1 {
		t.Fatalf("got %d lines, want 1", len(recs))
	}
	attrs := map[string]slog.Value{}
	recs[0].Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value; return true })
	if got, want := attrs["requests"].Int64(), int64(3); got != want {
		t.Errorf("requests: got %d, want %d: a 304 is a request sent", got, want)
	}
	if got, want := attrs["not_modified"].Int64(), int64(2); got != want {
		t.Errorf("not_modified: got %d, want %d: the 304s among the hour's requests, which cost no primary budget", got, want)
	}
}
