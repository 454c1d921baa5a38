// Package demo is `iterion demo`: N merge-gate replicas in one process, on
// an in-memory lease store and run store and an in-process forge simulator,
// with compressed intervals. It runs four phases — every replica sweeps
// (--no-lease behaviour), the lease elects one, the leader stops cleanly, the
// leader crashes — and reports, from the simulator's own per-token counts,
// the sweeper requests per phase per replica, the ratio between the first two
// phases, each takeover's delay against the ADR's bound, and whether the
// stopped leader released its lease, as the lease store shows once that
// replica has stopped: a clean stop must, a crash does not. Every replica
// also runs the forge board sync, the second elected net (lease
// forge-board-sync), on a seeded repository: its requests (the simulator's
// issue-list route) are reported per phase per replica beside the
// sweeper's, with their own phase 1 ÷ phase 2 ratio.
package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"iterion.dev/iterion/internal/clock"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// ErrInvalid reports a Config field Run cannot use; the error names it.
var ErrInvalid = errors.New("demo: invalid config")

// ErrNoTakeover reports that no successor swept within three times the
// bound after the leader stopped.
var ErrNoTakeover = errors.New("demo: no successor swept")

// Config is the demo's knobs; the zero value of each field means its default.
type Config struct {
	// Replicas is how many replicas run. Default 5.
	Replicas int
	// Interval is the sweep interval; each lease's TTL and retry are the
	// multiples of it that pkg/server/leases.go declares. Default 200ms.
	Interval time.Duration
	// Phase is how long phases 1 and 2 are measured. Default 4s.
	Phase time.Duration
	// Settle is how long phases 3 and 4 go on after the takeover. Default
	// 5 intervals.
	Settle time.Duration
	// Runs is the number of seeded gating runs. Default 10.
	Runs int
	// Issues is the number of issues seeded beside the runs' pull requests
	// for the board sync, whose interval is Interval too. Default 10.
	Issues int
	// Out receives a progress line per phase and the final table; nil
	// discards.
	Out io.Writer
}

func (c *Config) defaults() error {
	c.Replicas = cmp.Or(c.Replicas, 5)
	c.Interval = cmp.Or(c.Interval, 200*time.Millisecond)
	c.Phase = cmp.Or(c.Phase, 4*time.Second)
	c.Settle = cmp.Or(c.Settle, 5*c.Interval)
	c.Runs = cmp.Or(c.Runs, 10)
	c.Issues = cmp.Or(c.Issues, 10)
	if c.Out == nil {
		c.Out = io.Discard
	}
	switch {
	case c.Replicas < 2:
		return fmt.Errorf("%w: Replicas (--replicas) %d is under 2: a takeover needs a successor", ErrInvalid, c.Replicas)
	case c.Interval < 20*time.Millisecond:
		return fmt.Errorf("%w: Interval (--interval) %v is under 20ms", ErrInvalid, c.Interval)
	case c.Phase < 2*c.Interval:
		return fmt.Errorf("%w: Phase (--phase) %v is under 2 intervals", ErrInvalid, c.Phase)
	case c.Runs < 1:
		return fmt.Errorf("%w: Runs (--runs) %d is under 1", ErrInvalid, c.Runs)
	case c.Issues < 1:
		return fmt.Errorf("%w: Issues (--issues) %d is under 1", ErrInvalid, c.Issues)
	}
	return nil
}

// ttl and retry are the sweeper lease's, as pkg/server/leases.go derives
// them from the interval; the demo measures the sweeper's takeovers.
func (c *Config) ttl() time.Duration   { return server.MergeGateSweeper().TTL(c.Interval) }
func (c *Config) retry() time.Duration { return server.MergeGateSweeper().Retry(c.Interval) }

// leaseTiming names each elected net's TTL and retry at the interval, as
// pkg/server/leases.go declares them, for the header and the report.
func (c *Config) leaseTiming() string {
	var parts []string
	for _, l := range []server.Lease{server.MergeGateSweeper(), server.ForgeBoardSync()} {
		parts = append(parts, fmt.Sprintf("%s TTL %v, retry %v", l.Name, l.TTL(c.Interval), l.Retry(c.Interval)))
	}
	return strings.Join(parts, "; ")
}

// Phase is what one phase measured.
type Phase struct {
	Name     string
	From, To time.Time
	// Requests is each replica's sweeper requests in the phase, as the
	// simulator counted them (by forge token).
	Requests []int64
	// Board is each replica's board-sync requests in the phase (the
	// simulator's issue-list route, by forge token).
	Board []int64
	// Stopped is the replica stopped or crashed at From (-1: none), and
	// Successor the one whose first sweeper request came Takeover later;
	// Bound is the ADR's bound for that takeover.
	Stopped, Successor int
	Takeover, Bound    time.Duration
	// Clean is set when the stop was a clean one, which must release the
	// sweeper lease; Released reports whether the store no longer held the
	// stopped leader's sweeper lease once that replica had stopped (a
	// crash leaves it to expire).
	Clean, Released bool
	// StepDowns counts the sweeper lease's step-downs in the phase by
	// reason (lease.ReasonDeadline, ...), from the replicas' lease events:
	// in phase 2 a step-down is a hand-over that only a stall explains.
	StepDowns map[string]int
}

// Unreleased reports a clean stop that left its lease to expire: its
// successor could take over only at the expiry, which the bound after a
// clean stop does not allow for, though a loaded machine's slack might.
func (p Phase) Unreleased() bool { return p.Clean && !p.Released }

// PerSecond is the phase's sweeper requests per second, all replicas.
func (p Phase) PerSecond() float64 { return p.rate(p.Requests) }

// BoardPerSecond is the phase's board-sync requests per second, all
// replicas.
func (p Phase) BoardPerSecond() float64 { return p.rate(p.Board) }

func (p Phase) rate(counts []int64) float64 {
	var n int64
	for _, r := range counts {
		n += r
	}
	return float64(n) / p.To.Sub(p.From).Seconds()
}

// Result is what the demo measured: a plain value, safe to read from
// several goroutines once Run has returned it.
type Result struct {
	Config   Config
	Replicas []string // names, which are also their forge tokens
	Phases   []Phase
	Samples  []Sample
	Terms    []Span // the sweeper lease's holder over time
	// BoardTerms is the board sync lease's holder over time.
	BoardTerms []Span
}

// Ratio is phase 1's sweeper request rate over phase 2's: the replica count
// when the lease works.
func (r *Result) Ratio() float64 { return r.ratio(Phase.PerSecond) }

// BoardRatio is phase 1's board-sync request rate over phase 2's: the
// replica count when the board's lease works.
func (r *Result) BoardRatio() float64 { return r.ratio(Phase.BoardPerSecond) }

func (r *Result) ratio(rate func(Phase) float64) float64 {
	if len(r.Phases) < 2 || rate(r.Phases[1]) == 0 {
		return 0
	}
	return rate(r.Phases[0]) / rate(r.Phases[1])
}

// demo is one run's state.
type demo struct {
	cfg    Config
	sim    *forgesim.Sim
	simURL string
	leases *lease.MemoryStore
	runs   *gaterun.MemoryStore
	names  []string
	live   []*replica // phase 2's replicas, which phases 3 and 4 stop

	mu         sync.Mutex
	samples    []Sample
	terms      []Span // the sweeper lease's
	boardTerms []Span // the board sync lease's
	stepDowns  []lease.Event
}

// leaseEvent keeps the sweeper lease's step-downs; it is every replica's
// server.Config.OnLeaseEvent.
func (d *demo) leaseEvent(ev lease.Event) {
	if ev.Kind != lease.SteppedDown || ev.Name != server.MergeGateSweeper().Name {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stepDowns = append(d.stepDowns, ev)
}

// stepDownsIn counts the sweeper lease's step-downs from..to by reason.
func (d *demo) stepDownsIn(from, to time.Time) map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]int{}
	for _, ev := range d.stepDowns {
		if !ev.At.Before(from) && ev.At.Before(to) {
			out[ev.Reason]++
		}
	}
	return out
}

// Run runs the demo's four phases and returns what they measured. It takes
// about 2×Phase + the two takeovers + 2×Settle. Whether it succeeds or
// fails, every replica it started has stopped when it returns.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	d, closeSim := newDemo(cfg)
	defer closeSim()
	if err := seed(ctx, d.sim, d.runs, cfg.Runs, cfg.Issues); err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Out, "iterion demo: %d replicas in one process, sweep and board sync every %v (%s), %d gating runs, %d board issues, a forge simulator that lives only while the demo runs\n",
		cfg.Replicas, cfg.Interval, cfg.leaseTiming(), cfg.Runs, cfg.Issues)
	return d.run(ctx, []phase{d.everyone, d.elected, d.cleanStop, d.crash})
}

// newDemo is the demo of cfg (defaults applied) before its phases: the
// simulator, served until closeSim, the stores and the replicas' names.
func newDemo(cfg Config) (d *demo, closeSim func()) {
	// The sweep interval is the compressed minute: GitHub's per-minute
	// secondary limits apply per interval.
	sim := forgesim.New(forgesim.WithBudget(10_000_000), forgesim.WithMinute(cfg.Interval))
	srv := httptest.NewServer(sim)
	d = &demo{cfg: cfg, sim: sim, simURL: srv.URL, leases: lease.NewMemoryStore(), runs: gaterun.NewMemoryStore()}
	for i := range cfg.Replicas {
		d.names = append(d.names, fmt.Sprintf("replica-%d", i+1))
	}
	return d, srv.Close
}

// phase is one of the demo's phases: it measures, and returns an error
// when it cannot.
type phase func(context.Context) (Phase, error)

// run runs phases in order, sampling the counts and the lease holders
// throughout. When a phase fails, it stops there and returns its error;
// either way, the replicas a phase left running (phase 2's, which phases 3
// and 4 go on with) are stopped before it returns, so a failure does not
// leave them sweeping until ctx ends.
func (d *demo) run(ctx context.Context, phases []phase) (*Result, error) {
	defer func() { stopAll(d.live) }()
	sctx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() { defer close(sampled); d.sample(sctx) }()
	res := &Result{Config: d.cfg, Replicas: d.names}
	for _, p := range phases {
		ph, err := p(ctx)
		if err != nil {
			stopSampling()
			<-sampled
			return nil, err
		}
		ph.StepDowns = d.stepDownsIn(ph.From, ph.To)
		res.Phases = append(res.Phases, ph)
		fmt.Fprintln(d.cfg.Out, progressLine(len(res.Phases), ph, d.names))
	}
	stopSampling()
	<-sampled
	res.Samples = d.samples
	res.Terms, res.BoardTerms = d.closedTerms(d.terms), d.closedTerms(d.boardTerms)
	return res, nil
}

// boardRoute is the simulator's route of the board sync's requests.
const boardRoute = "GET /repos/{owner}/{repo}/issues"

// counts reads, from one snapshot of the simulator's counts, each replica
// token's sweeper requests (every route but the board's) and board-sync
// requests.
func (d *demo) counts() (sweep, board []int64) {
	sweep, board = make([]int64, len(d.names)), make([]int64, len(d.names))
	for _, rc := range d.sim.Stats().Requests {
		i := slices.Index(d.names, rc.Token)
		switch {
		case i < 0:
		case rc.Route == boardRoute:
			board[i] += rc.Count
		default:
			sweep[i] += rc.Count
		}
	}
	return sweep, board
}

// sample records the counts and the lease holder every 20 ms until ctx ends.
func (d *demo) sample(ctx context.Context) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		now := time.Now()
		c, _ := d.counts()
		holder := d.holder(ctx, now, server.MergeGateSweeper().Name)
		boardHolder := d.holder(ctx, now, server.ForgeBoardSync().Name)
		d.mu.Lock()
		d.samples = append(d.samples, Sample{At: now, Counts: c})
		d.terms = d.track(d.terms, holder, now)
		d.boardTerms = d.track(d.boardTerms, boardHolder, now)
		d.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// track extends terms with the lease holder seen at now (-1: none): a new
// term when the holder changed, the open one closed when there is none.
func (d *demo) track(terms []Span, holder int, now time.Time) []Span {
	n := len(terms)
	switch {
	case holder >= 0 && (n == 0 || !terms[n-1].To.IsZero() || terms[n-1].Replica != holder):
		if n > 0 && terms[n-1].To.IsZero() {
			terms[n-1].To = now
		}
		terms = append(terms, Span{Name: d.names[holder], Replica: holder, From: now})
	case holder < 0 && n > 0 && terms[n-1].To.IsZero():
		terms[n-1].To = now
	}
	return terms
}

// holder is the index of the replica holding lease name unexpired at now,
// or -1.
func (d *demo) holder(ctx context.Context, now time.Time, name string) int {
	hs, err := d.leases.Holders(ctx)
	if err != nil {
		return -1
	}
	for _, h := range hs {
		if h.Name == name && now.Before(h.Expires) {
			return d.index(h.Owner)
		}
	}
	return -1
}

// index is the replica whose owner identity is owner, or -1.
func (d *demo) index(owner string) int {
	for i, n := range d.names {
		if owner == n || strings.HasPrefix(owner, n+"-") {
			return i
		}
	}
	return -1
}

// closedTerms returns a copy of terms with the open one ending at the last
// sample. Call it once sampling has stopped.
func (d *demo) closedTerms(terms []Span) []Span {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := append([]Span(nil), terms...)
	if n := len(out); n > 0 && out[n-1].To.IsZero() && len(d.samples) > 0 {
		out[n-1].To = d.samples[len(d.samples)-1].At
	}
	return out
}

// measure returns a phase spanning from..to with the counts' growth since
// before (sweeper) and boardBefore (board sync).
func (d *demo) measure(name string, from, to time.Time, before, boardBefore []int64) Phase {
	after, boardAfter := d.counts()
	p := Phase{Name: name, From: from, To: to, Requests: make([]int64, len(after)), Board: make([]int64, len(after)), Stopped: -1, Successor: -1}
	for i := range after {
		p.Requests[i] = after[i] - before[i]
		p.Board[i] = boardAfter[i] - boardBefore[i]
	}
	return p
}

// quiesce waits until the simulator's counts stop moving: a stopped
// replica's last request may be counted just after its client gave up on it.
func (d *demo) quiesce() {
	prev, prevBoard := d.counts()
	for range 50 {
		time.Sleep(20 * time.Millisecond)
		c, board := d.counts()
		if slices.Equal(c, prev) && slices.Equal(board, prevBoard) {
			return
		}
		prev, prevBoard = c, board
	}
}

// everyone is phase 1: every replica sweeps, as with --no-lease.
func (d *demo) everyone(ctx context.Context) (Phase, error) {
	before, boardBefore := d.counts()
	from := time.Now()
	rs, err := d.startAll(ctx, true)
	if err != nil {
		return Phase{}, err
	}
	clock.Sleep(ctx, d.cfg.Phase)
	to := time.Now()
	stopAll(rs)
	d.quiesce()
	return d.measure("every replica sweeps (--no-lease)", from, to, before, boardBefore), nil
}

// elected is phase 2: the same replicas elect one sweeper through the lease.
// Its replicas keep running into phases 3 and 4, until run stops them.
func (d *demo) elected(ctx context.Context) (Phase, error) {
	before, boardBefore := d.counts()
	from := time.Now()
	rs, err := d.startAll(ctx, false)
	if err != nil {
		return Phase{}, err
	}
	d.live = rs
	clock.Sleep(ctx, d.cfg.Phase)
	return d.measure("the lease elects one", from, time.Now(), before, boardBefore), nil
}

// cleanStop is phase 3: the leader stops cleanly and releases its lease.
func (d *demo) cleanStop(ctx context.Context) (Phase, error) {
	p, err := d.takeover(ctx, "the leader stops cleanly", d.cfg.retry()+d.cfg.Interval, func(r *replica) { r.stop() })
	p.Clean = true
	return p, err
}

// crash is phase 4: the leader crashes: from that instant its lease store
// answers nothing, so it neither renews nor releases.
func (d *demo) crash(ctx context.Context) (Phase, error) {
	return d.takeover(ctx, "the leader crashes", d.cfg.ttl()+d.cfg.retry()+d.cfg.Interval, func(r *replica) { r.crash() })
}

// takeover stops the current leader with stop and measures the delay until
// another replica's first sweeper request.
func (d *demo) takeover(ctx context.Context, name string, bound time.Duration, stop func(*replica)) (Phase, error) {
	leader := -1
	for deadline := time.Now().Add(bound + 5*time.Second); leader < 0; {
		if leader = d.holder(ctx, time.Now(), server.MergeGateSweeper().Name); leader < 0 {
			if time.Now().After(deadline) {
				return Phase{}, fmt.Errorf("%w: no leader before %q", ErrNoTakeover, name)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	before, boardBefore := d.counts()
	from := time.Now()
	stop(d.live[leader])
	released, err := d.released(ctx, leader)
	if err != nil {
		return Phase{}, err
	}
	p := Phase{Name: name, Stopped: leader, Successor: -1, Bound: bound, Released: released}
	for deadline := from.Add(3*bound + 5*time.Second); p.Successor < 0; {
		c, _ := d.counts()
		if i := successor(before, c, leader); i >= 0 {
			p.Successor, p.Takeover = i, time.Since(from)
		}
		if p.Successor < 0 {
			if time.Now().After(deadline) {
				return Phase{}, fmt.Errorf("%w within %v after %s stopped", ErrNoTakeover, 3*bound+5*time.Second, d.names[leader])
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	clock.Sleep(ctx, d.cfg.Settle)
	m := d.measure(name, from, time.Now(), before, boardBefore)
	m.Stopped, m.Successor, m.Takeover, m.Bound, m.Released = p.Stopped, p.Successor, p.Takeover, p.Bound, p.Released
	return m, nil
}

// successor is a replica other than the stopped leader whose sweeper
// count grew from before to now, or -1 when none did: the stopped
// leader's own last requests, counted after the stop, are not a takeover.
func successor(before, now []int64, leader int) int {
	for i := range now {
		if i != leader && now[i] > before[i] {
			return i
		}
	}
	return -1
}

// released reports whether the store no longer holds replica i's sweeper
// lease: read once the replica has stopped, whose Run ends its terms and
// sends their releases before it returns. A release deletes the lease,
// and a successor takes it only once it is released or expired; so a
// lease still naming i, expired or not, was not released, and one gone or
// naming another replica was (i held it unexpired just before the stop).
func (d *demo) released(ctx context.Context, i int) (bool, error) {
	hs, err := d.leases.Holders(ctx)
	if err != nil {
		return false, fmt.Errorf("demo: reading the lease store after %s stopped: %w", d.names[i], err)
	}
	for _, h := range hs {
		if h.Name == server.MergeGateSweeper().Name && d.index(h.Owner) == i {
			return false, nil
		}
	}
	return true, nil
}

// releaseNote says what became of a stopped leader's lease.
func releaseNote(p Phase) string {
	switch {
	case p.Unreleased():
		return "lease NOT RELEASED: its successor waited for it to expire"
	case p.Released:
		return "lease released"
	}
	return "lease left to expire"
}

func progressLine(n int, p Phase, names []string) string {
	s := fmt.Sprintf("phase %d: %-36s %6.0f sweeper, %3.0f board-sync requests/s over %.1fs", n, p.Name, p.PerSecond(), p.BoardPerSecond(), p.To.Sub(p.From).Seconds())
	if p.Stopped >= 0 {
		s += fmt.Sprintf("; %s stopped (%s), %s swept %v later (bound %v)", names[p.Stopped], releaseNote(p), names[p.Successor], p.Takeover.Round(time.Millisecond), p.Bound)
	}
	if len(p.StepDowns) > 0 {
		reasons := slices.Sorted(maps.Keys(p.StepDowns))
		parts := make([]string, len(reasons))
		for i, r := range reasons {
			parts[i] = fmt.Sprintf("%s %d", r, p.StepDowns[r])
		}
		s += "; sweeper step-downs: " + strings.Join(parts, ", ")
	}
	return s
}

// Table renders the result: sweeper and board-sync requests per phase per
// replica, the ratio between phases 1 and 2 of each, and the takeovers
// against their bounds.
func (r *Result) Table() string {
	var b strings.Builder
	for i, t := range r.tables() {
		if i > 0 {
			b.WriteString("\n")
		}
		t.writeText(&b)
	}
	b.WriteString("\n")
	for _, line := range r.findings() {
		b.WriteString(line + "\n")
	}
	return b.String()
}

// findings are the ratios and each takeover against its bound, one line
// each.
func (r *Result) findings() []string {
	out := []string{
		fmt.Sprintf("sweeper requests/s, phase 1 ÷ phase 2: %.2f (%d replicas: without the lease every one sweeps, with it one does)",
			r.Ratio(), len(r.Replicas)),
		fmt.Sprintf("board-sync requests/s, phase 1 ÷ phase 2: %.2f (the board's own lease, forge-board-sync: one replica syncs)", r.BoardRatio()),
	}
	for i, p := range r.Phases {
		if p.Stopped < 0 {
			continue
		}
		verdict := "within"
		if p.Takeover > p.Bound {
			verdict = "OVER"
		}
		out = append(out, fmt.Sprintf("phase %d takeover: %s stopped (%s), %s swept %v later: %s the bound %v",
			i+1, r.Replicas[p.Stopped], releaseNote(p), r.Replicas[p.Successor], p.Takeover.Round(time.Millisecond), verdict, p.Bound))
	}
	return out
}

// table is one table of the report: a header row and rows of cells, the
// first column a label, the others numbers.
type table struct {
	Header []string
	Rows   [][]string
}

// tables are the sweeper's and the board sync's requests per phase per
// replica.
func (r *Result) tables() []table {
	return []table{
		r.phaseTable("sweeper requests", func(p Phase) []int64 { return p.Requests }, Phase.PerSecond),
		r.phaseTable("board-sync requests (lane forge-board-sync)", func(p Phase) []int64 { return p.Board }, Phase.BoardPerSecond),
	}
}

// phaseTable is the counts of each phase per replica, under a header that
// starts with title, with their total and rate.
func (r *Result) phaseTable(title string, counts func(Phase) []int64, rate func(Phase) float64) table {
	t := table{Header: append(append([]string{title}, r.Replicas...), "total", "requests/s", "seconds")}
	for i, p := range r.Phases {
		row := []string{fmt.Sprintf("%d %s", i+1, p.Name)}
		var total int64
		for _, c := range counts(p) {
			row = append(row, fmt.Sprint(c))
			total += c
		}
		t.Rows = append(t.Rows, append(row, fmt.Sprint(total), fmt.Sprintf("%.1f", rate(p)), fmt.Sprintf("%.1f", p.To.Sub(p.From).Seconds())))
	}
	return t
}

// writeText writes t as aligned text: the label column left, the others
// right, two spaces apart.
func (t table) writeText(b *strings.Builder) {
	widths := make([]int, len(t.Header))
	for _, row := range append([][]string{t.Header}, t.Rows...) {
		for i, c := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	for _, row := range append([][]string{t.Header}, t.Rows...) {
		for i, c := range row {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			switch {
			case i == 0:
				b.WriteString(c + pad)
			default:
				b.WriteString("  " + pad + c)
			}
		}
		b.WriteString("\n")
	}
}

// WriteReport writes the self-contained HTML report: the chart of sweeper
// requests per second per replica with the timelines of both leases'
// holders (sweeper, board sync), and the table.
func (r *Result) WriteReport(w io.Writer) error {
	// Buckets of two intervals: whole passes, so the rates do not alias.
	c := buildChart(r.Replicas, r.Samples, r.Terms, r.BoardTerms, r.phaseSpans(), r.takeovers(), 2*r.Config.Interval)
	summary := fmt.Sprintf("%d replicas in one process, sweep and board sync interval %v (%s). "+
		"Every count is the forge simulator's own, per replica token.", len(r.Replicas), r.Config.Interval, r.Config.leaseTiming())
	return writeHTML(w, summary, r.tables(), r.findings(), c)
}

// takeovers are the phases' takeovers, for the chart.
func (r *Result) takeovers() []takeover {
	var out []takeover
	for _, p := range r.Phases {
		if p.Stopped >= 0 {
			out = append(out, takeover{At: p.From, Delay: p.Takeover, Bound: p.Bound})
		}
	}
	return out
}

// phaseLabel is phase i's short name on the chart.
func phaseLabel(i int) string {
	switch i {
	case 0:
		return "no lease"
	case 1:
		return "lease"
	case 2:
		return "clean stop"
	}
	return "crash"
}

func (r *Result) phaseSpans() []Span {
	out := make([]Span, len(r.Phases))
	for i, p := range r.Phases {
		out[i] = Span{Name: fmt.Sprintf("%d %s", i+1, phaseLabel(i)), Replica: -1, From: p.From, To: p.To}
	}
	return out
}
