package demo

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// TestDemo runs the demo with small durations and checks what it exists to
// show: without the lease every replica sweeps, with it one does (a ratio
// of about N between phases 1 and 2), and the same holds for the board
// sync under its own lease; both takeovers come within the ADR's bounds;
// and the report is HTML with a well-formed SVG chart.
func TestDemo(t *testing.T) {
	const n = 3
	interval, phase := 250*time.Millisecond, 2500*time.Millisecond
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{Replicas: n, Interval: interval, Phase: phase, Runs: 2, Issues: 3, Out: &out})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	t.Log("\n" + out.String() + "\n" + res.Table())
	if len(res.Phases) != 4 {
		t.Fatalf("got %d phases, want 4: the demo runs four phases", len(res.Phases))
	}
	if lines := strings.Count(out.String(), "\nphase "); lines != 4 {
		t.Errorf("got %d progress lines, want 4: one per phase", lines)
	}
	// A batched pass costs one request at this population, so a phase's
	// count is its passes: each replica's can be off by a pass or two
	// (where the phase cuts the ticks, and a tick late on a loaded
	// machine). lo and hi allow two passes either way per replica of the
	// Phase/Interval expected; they still exclude 1 (the lease failing to
	// elect, or --no-lease sweeping on one replica) by a wide margin.
	lo, hi := ratioBounds(n, phase, interval)
	if r := res.Ratio(); r < lo || r > hi {
		t.Errorf("got phase 1 / phase 2 ratio %.2f, want %d (in [%.2f, %.2f]): the lease divides the sweep's cost by N", r, n, lo, hi)
	}
	for i, c := range res.Phases[0].Requests {
		if c == 0 {
			t.Errorf("phase 1: got 0 requests from %s, want some: without the lease every replica sweeps", res.Replicas[i])
		}
	}
	if sweepers := active(res.Phases[1].Requests); sweepers != 1 {
		t.Errorf("phase 2: got %d replicas sweeping, want 1: the lease elects one", sweepers)
	}
	if r := res.BoardRatio(); r < lo || r > hi {
		t.Errorf("got board-sync phase 1 / phase 2 ratio %.2f, want %d (in [%.2f, %.2f]): the board's lease divides its cost by N", r, n, lo, hi)
	}
	if syncers := active(res.Phases[0].Board); syncers != n {
		t.Errorf("phase 1: got %d replicas syncing the board, want %d: without the lease every replica syncs", syncers, n)
	}
	if syncers := active(res.Phases[1].Board); syncers != 1 {
		t.Errorf("phase 2: got %d replicas syncing the board, want 1: the board's lease elects one", syncers)
	}
	for _, p := range res.Phases[2:] {
		// One interval of slack for scheduling on a loaded machine.
		if p.Takeover <= 0 || p.Takeover > p.Bound+interval {
			t.Errorf("%s: got takeover %v, want in (0, %v]: bound %v plus one interval of slack", p.Name, p.Takeover, p.Bound+interval, p.Bound)
		}
		if p.Successor == p.Stopped {
			t.Errorf("%s: got successor %s, the stopped replica, want another", p.Name, res.Replicas[p.Successor])
		}
	}
	// The one-interval slack above could pass a clean stop that left its
	// lease to expire: the store says whether it was released.
	if p := res.Phases[2]; !p.Clean || !p.Released {
		t.Errorf("phase 3: got clean %v, released %v, want both: a clean stop releases its lease, so its successor need not wait for the expiry", p.Clean, p.Released)
	}
	if p := res.Phases[3]; p.Clean || p.Released {
		t.Errorf("phase 4: got clean %v, released %v, want neither: a crashed leader's lease is left to expire, and the demo must see a lease not released", p.Clean, p.Released)
	}
	if got := res.Phases[2].StepDowns[lease.ReasonCanceled]; got < 1 {
		t.Errorf("phase 3: got %d sweeper step-downs with reason %s, want at least 1: the clean stop ends the leader's term, and the demo records it (%v)", got, lease.ReasonCanceled, res.Phases[2].StepDowns)
	}
	// A crashed leader is a dead process: it reports no step-down. The
	// demo's crash stops its replica after cutting it off, which ends the
	// term as cancelled; that must not be shown as a clean stop.
	if got := res.Phases[3].StepDowns[lease.ReasonCanceled]; got != 0 {
		t.Errorf("phase 4: got %d sweeper step-downs with reason %s, want 0: a crashed leader reports nothing (%v)", got, lease.ReasonCanceled, res.Phases[3].StepDowns)
	}
	if want := 3*interval + interval + interval; res.Phases[3].Bound != want {
		t.Errorf("got crash bound %v, want TTL + retry + tick = %v", res.Phases[3].Bound, want)
	}

	var page bytes.Buffer
	if err := res.WriteReport(&page); err != nil {
		t.Fatal(err)
	}
	svg, err := findSVG(page.Bytes())
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	// The chart must be well-formed XML, with one band per replica and one
	// term rectangle per lease term.
	polygons, rects, err := countSVG(svg)
	if err != nil {
		t.Fatalf("got SVG that is not well-formed XML (%v), want well-formed: browsers render inline SVG strictly", err)
	}
	if polygons != n {
		t.Errorf("got %d polygons in the chart, want %d: one stacked band per replica", polygons, n)
	}
	if len(res.BoardTerms) == 0 {
		t.Errorf("got no board sync lease terms, want at least one: the timeline shows the board's lease too")
	}
	if want := 1 + len(res.Terms) + len(res.BoardTerms); rects < want {
		t.Errorf("got %d rects, want at least %d: the plot frame and one per term of either lease", rects, want)
	}
	report := page.String()
	for _, want := range []string{
		`name="viewport"`, `width="100%" viewBox="0 0 `, "<table>", "<th>sweeper requests</th>", "#0072B2",
		"(bound " + res.Phases[2].Bound.String() + ")", "(bound " + res.Phases[3].Bound.String() + ")",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q, want it: a viewport, an SVG that scales, real tables, the Okabe–Ito palette, each takeover's bound on the chart", want)
		}
	}
	if strings.Contains(report, "<pre>") {
		t.Errorf("report has a <pre>, want real tables: a <pre> scrolls sideways and cuts columns")
	}
	labelled := false
	for _, name := range res.Replicas {
		labelled = labelled || strings.Contains(string(svg), `paint-order="stroke">`+name+`</text>`)
	}
	if !labelled {
		t.Errorf("got no holder bar labelled with a replica's name, want the long terms labelled")
	}
}

// ratioBounds is the range of the phase 1 ÷ phase 2 ratio of n replicas
// when each replica's passes in a phase are within two of phase/interval:
// n(k-2)/(k+2) to n(k+2)/(k-2) for k expected passes.
func ratioBounds(n int, phase, interval time.Duration) (lo, hi float64) {
	k := float64(phase / interval)
	return float64(n) * (k - 2) / (k + 2), float64(n) * (k + 2) / (k - 2)
}

// active is how many replicas' counts are not zero.
func active(counts []int64) int {
	k := 0
	for _, c := range counts {
		if c > 0 {
			k++
		}
	}
	return k
}

// findSVG parses page as HTML, checks that it has an svg element, and
// returns that element's source as written.
func findSVG(page []byte) ([]byte, error) {
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		return nil, err
	}
	var svg *html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "svg" && svg == nil {
			svg = n
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if svg == nil {
		return nil, errors.New("got no <svg> element, want the chart inline")
	}
	start, end := bytes.Index(page, []byte("<svg")), bytes.LastIndex(page, []byte("</svg>"))
	if start < 0 || end < start {
		return nil, errors.New("got an svg element without its source, want <svg ...>...</svg>")
	}
	return page[start : end+len("</svg>")], nil
}

// countSVG decodes svg strictly as XML and counts its polygons and rects.
func countSVG(svg []byte) (polygons, rects int, err error) {
	d := xml.NewDecoder(bytes.NewReader(svg))
	d.Strict = true
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return polygons, rects, nil
		}
		if err != nil {
			return 0, 0, err
		}
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "polygon":
				polygons++
			case "rect":
				rects++
			}
		}
	}
}

// TestTakeoverLabelsDoNotOverlap pins the chart's takeover labels: two
// takeovers closer than a label's width (the clean stop and the crash,
// at the default settings) get different rows, and a takeover far enough
// from the last one keeps the row above the bars.
func TestTakeoverLabelsDoNotOverlap(t *testing.T) {
	ts := []chartTakeover{
		{X: 600, Delay: "211ms", Bound: "400ms"},
		{X: 640, Delay: "814ms", Bound: "1s"},
		{X: 900, Delay: "300ms", Bound: "1s"},
	}
	placeTakeoverLabels(ts, 300)
	a, b := ts[0], ts[1]
	if a.TextY == b.TextY && a.X+labelWidth(a.label()) > b.X {
		t.Errorf("labels %q at x %v and %q at x %v share row y=%v: got overlapping text, want them on different rows", a.label(), a.X, b.label(), b.X, a.TextY)
	}
	if ts[0].TextY != 296 || ts[2].TextY != 296 {
		t.Errorf("rows %v, %v: want the row above the bars (y 296) for a label with room there", ts[0].TextY, ts[2].TextY)
	}
}

// TestTableCellsKeepHyphenatedWordsWhole pins the report's table cells: a
// word with a hyphen (a flag, a lease name) is kept on one line, and the
// text is still escaped.
func TestTableCellsKeepHyphenatedWordsWhole(t *testing.T) {
	got := string(nobreak("every replica sweeps (--no-lease) <b>"))
	want := `every replica sweeps <span class="nw">(--no-lease)</span> &lt;b&gt;`
	if got != want {
		t.Errorf("nobreak: got %q, want %q", got, want)
	}
}

// TestDemoStopsItsReplicasWhenAPhaseFails pins the demo's clean-up: when a
// phase after the election fails (a takeover that never comes), the
// replicas phase 2 left running are stopped before the demo returns its
// error, not left sweeping until the caller's context ends.
func TestDemoStopsItsReplicasWhenAPhaseFails(t *testing.T) {
	cfg := Config{Replicas: 2, Interval: 50 * time.Millisecond, Phase: 100 * time.Millisecond}
	if err := cfg.defaults(); err != nil {
		t.Fatal(err)
	}
	d, closeSim := newDemo(cfg)
	defer closeSim()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errPhase := errors.New("phase 3 failed")
	failing := func(context.Context) (Phase, error) { return Phase{}, errPhase }
	if _, err := d.run(ctx, []phase{d.elected, failing}); !errors.Is(err, errPhase) {
		t.Fatalf("got %v, want the failed phase's error", err)
	}
	if len(d.live) != cfg.Replicas {
		t.Fatalf("got %d live replicas, want phase 2's %d", len(d.live), cfg.Replicas)
	}
	for i, r := range d.live {
		select {
		case <-r.done:
		default:
			t.Errorf("got %s still running after the demo returned its error, want it stopped: every failure path stops what it started", d.names[i])
		}
	}
}

// TestStoppedLeadersReleaseIsReadFromTheStore pins how the demo tells a
// stop that released the sweeper lease from one that left it to expire:
// from the lease store once the replica has stopped, where a release
// deletes the lease and a successor can take it only once it is gone or
// expired.
func TestStoppedLeadersReleaseIsReadFromTheStore(t *testing.T) {
	sweeper := server.MergeGateSweeper().Name
	now := time.Now()
	for _, c := range []struct {
		why     string
		expired bool // the leader's leases expired before the read
		play    func(lease.Store) error
		want    bool
	}{
		{"the leader released its lease: no record left", false, func(st lease.Store) error {
			return st.Release(t.Context(), sweeper, "replica-1")
		}, true},
		{"the leader released it and a successor took it at once", false, func(st lease.Store) error {
			if err := st.Release(t.Context(), sweeper, "replica-1"); err != nil {
				return err
			}
			_, err := st.Acquire(t.Context(), sweeper, "replica-2", now, time.Second)
			return err
		}, true},
		{"the leader stopped without releasing: its record stays", false, func(lease.Store) error { return nil }, false},
		{"the record stays past its expiry, still not released", true, func(lease.Store) error { return nil }, false},
		{"another lease of the leader's gone does not count for the sweeper's", false, func(st lease.Store) error {
			return st.Release(t.Context(), server.ForgeBoardSync().Name, "replica-1")
		}, false},
	} {
		t.Run(c.why, func(t *testing.T) {
			st := lease.NewMemoryStore()
			for _, name := range []string{sweeper, server.ForgeBoardSync().Name} {
				at := now
				if c.expired {
					at = now.Add(-time.Hour)
				}
				if ok, err := st.Acquire(t.Context(), name, "replica-1", at, time.Minute); !ok || err != nil {
					t.Fatalf("acquire %s: %v, %v", name, ok, err)
				}
			}
			if err := c.play(st); err != nil {
				t.Fatal(err)
			}
			d := &demo{leases: st, names: []string{"replica-1", "replica-2"}}
			got, err := d.released(t.Context(), 0)
			if err != nil || got != c.want {
				t.Errorf("got released %v (err %v), want %v: %s", got, err, c.want, c.why)
			}
		})
	}
}

// TestFindingsJudgeEachTakeoverAgainstItsBound pins the demo's figures
// from a constructed result: each ratio is phase 1's requests per second
// over phase 2's, phases of different lengths included; each takeover is
// within its bound up to it, inclusive, and OVER past it, in the
// findings and on the chart; and a clean stop that left its lease to
// expire says so.
func TestFindingsJudgeEachTakeoverAgainstItsBound(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	sec := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	bound := 500 * time.Millisecond
	r := &Result{Replicas: []string{"r1", "r2", "r3"}, Phases: []Phase{
		{Name: "every replica sweeps", From: sec(0), To: sec(10), Requests: []int64{40, 40, 40}, Board: []int64{10, 10, 10}, Stopped: -1, Successor: -1},
		{Name: "the lease elects one", From: sec(10), To: sec(30), Requests: []int64{0, 80, 0}, Board: []int64{0, 0, 40}, Stopped: -1, Successor: -1},
		{Name: "the leader stops cleanly", From: sec(30), To: sec(35), Stopped: 1, Successor: 0, Takeover: bound, Bound: bound, Clean: true, Released: true},
		{Name: "the leader crashes", From: sec(35), To: sec(40), Stopped: 0, Successor: 2, Takeover: bound + time.Millisecond, Bound: bound},
	}}
	if got := r.Phases[0].PerSecond(); got != 12 {
		t.Errorf("got phase 1 at %.1f requests/s, want 12: 120 requests over 10s", got)
	}
	if got := r.Ratio(); got != 3 {
		t.Errorf("got sweeper ratio %.2f, want 3: 12 requests/s over phase 2's 4 (80 over 20s)", got)
	}
	if got := r.BoardRatio(); got != 1.5 {
		t.Errorf("got board ratio %.2f, want 1.5: 3 requests/s over phase 2's 2", got)
	}
	findings := strings.Join(r.findings(), "\n")
	for _, want := range []string{
		"phase 1 ÷ phase 2: 3.00", "phase 1 ÷ phase 2: 1.50",
		"phase 3 takeover: r2 stopped (lease released), r1 swept 500ms later: within the bound 500ms",
		"phase 4 takeover: r1 stopped (lease left to expire), r3 swept 501ms later: OVER the bound 500ms",
	} {
		if !strings.Contains(findings, want) {
			t.Errorf("the findings lack %q:\n%s", want, findings)
		}
	}
	c := buildChart(r.Replicas, []Sample{{At: sec(0), Counts: []int64{0, 0, 0}}, {At: sec(40), Counts: []int64{1, 1, 1}}}, nil, nil, nil, r.takeovers(), time.Second)
	if len(c.Takeovers) != 2 || c.Takeovers[0].Over != "" || c.Takeovers[1].Over != " (over)" {
		t.Errorf("got chart takeovers %+v, want the first within its bound and the second over", c.Takeovers)
	}
	r.Phases[2].Released = false
	if findings := strings.Join(r.findings(), "\n"); !strings.Contains(findings, "r2 stopped (lease NOT RELEASED") {
		t.Errorf("a clean stop that left its lease: the findings lack NOT RELEASED:\n%s", findings)
	}
}

// TestSuccessorIsAnotherReplica pins the demo's takeover: the successor is
// a replica other than the stopped leader whose sweeper count grew; the
// stopped leader's own request, counted after the stop, is no takeover.
func TestSuccessorIsAnotherReplica(t *testing.T) {
	before := []int64{5, 9, 2}
	if got := successor(before, []int64{5, 10, 2}, 1); got != -1 {
		t.Errorf("got successor %d when only the stopped leader's count grew, want none", got)
	}
	if got := successor(before, []int64{5, 10, 3}, 1); got != 2 {
		t.Errorf("got successor %d, want 2: its count grew", got)
	}
}
