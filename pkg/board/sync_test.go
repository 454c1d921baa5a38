package board_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/board"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/lease"
)

// issuesRoute is the simulator's route of the issues list.
const issuesRoute = "GET /repos/{owner}/{repo}/issues"

// watchedTransport passes requests to the simulator's transport and
// records each URL it sent; while fail is set, every request is a transport
// error instead (the forge unreachable). before, when set, runs before each
// request is sent, so a test changes the forge between two pages; after,
// when set, may change each answer before the client reads it.
type watchedTransport struct {
	next   http.RoundTripper
	fail   atomic.Bool
	before func(*http.Request)
	after  func(*http.Response) error
	mu     sync.Mutex
	urls   []*url.URL
}

var errUnreachable = errors.New("forge unreachable (injected)")

func (p *watchedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if p.fail.Load() {
		return nil, errUnreachable
	}
	p.mu.Lock()
	p.urls = append(p.urls, req.URL)
	p.mu.Unlock()
	if p.before != nil {
		p.before(req)
	}
	resp, err := p.next.RoundTrip(req)
	if err == nil && p.after != nil {
		err = p.after(resp)
	}
	return resp, err
}

// sinces returns the since parameter of every issues list sent for repo
// ("" when absent), in order.
func (p *watchedTransport) sinces(repo string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, u := range p.urls {
		if u.Path == "/repos/"+repo+"/issues" && u.Query().Get("page") == "" {
			out = append(out, u.Query().Get("since"))
		}
	}
	return out
}

// boardRig is one replica's board sync on a simulator, in a synctest bubble.
type boardRig struct {
	sim    *forgesim.Sim
	net    *watchedTransport
	client *forge.Client
	board  *board.MemoryStore
	sync   *board.Sync
	passes chan board.Pass
	logs   *forgetest.LogBuffer
}

const (
	boardToken    = "board-token"
	boardInterval = time.Minute
)

// newBoardRig must be called inside a synctest bubble.
func newBoardRig(t *testing.T, repos ...string) *boardRig {
	t.Helper()
	return newBoardRigWith(t, nil, repos...)
}

// newBoardRigWith is newBoardRig whose sync's config tune changes first,
// when not nil.
func newBoardRigWith(t *testing.T, tune func(*board.Config), repos ...string) *boardRig {
	t.Helper()
	r := &boardRig{sim: forgesim.New(), board: board.NewMemoryStore(), passes: make(chan board.Pass, 100)}
	tr, stop := forgetest.ServeSimOnPipe(r.sim)
	t.Cleanup(stop)
	r.net = &watchedTransport{next: tr}
	r.client = forgetest.NewForge(t, "http://forge.test/", r.net, boardToken, nil, nil)
	var logger *slog.Logger
	logger, r.logs = forgetest.TextLogger()
	cfg := board.Config{
		Store: r.board, Forge: r.client, Host: "github.com", Repos: repos, Interval: boardInterval,
		Owner: "replica-a", Logger: logger, OnPass: func(p board.Pass) { r.passes <- p },
	}
	if tune != nil {
		tune(&cfg)
	}
	var err error
	r.sync, err = board.NewSync(cfg)
	if err != nil {
		t.Fatalf("NewSync: %v", err)
	}
	return r
}

// start runs one term of the sync until the test ends or stop is called.
func (r *boardRig) start(t *testing.T) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.sync.Work(ctx) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// oneTerm runs a term of the sync for one pass, which stores the
// forge's issues as cards, and ends it: the next term starts with a full
// sync.
func (r *boardRig) oneTerm(t *testing.T) {
	t.Helper()
	stop := r.start(t)
	r.next(t)
	stop()
}

// next lets one interval pass and returns the pass it made.
func (r *boardRig) next(t *testing.T) board.Pass {
	t.Helper()
	time.Sleep(boardInterval)
	synctest.Wait()
	select {
	case p := <-r.passes:
		return p
	default:
		t.Fatalf("no pass after one interval: the sync passes every interval")
		return board.Pass{}
	}
}

func (r *boardRig) seed(t *testing.T, repo string, is forgesim.Issue) {
	t.Helper()
	owner, name, _ := strings.Cut(repo, "/")
	if err := r.sim.SeedIssue(owner, name, is); err != nil {
		t.Fatalf("SeedIssue: %v", err)
	}
}

func (r *boardRig) cards(t *testing.T) map[int]board.Card {
	t.Helper()
	cards, err := r.board.Cards(context.Background(), board.Query{Limit: 10000})
	if err != nil {
		t.Fatalf("Cards: %v", err)
	}
	out := map[int]board.Card{}
	for _, c := range cards {
		out[c.Number] = c
	}
	return out
}

// laneRequests is how many issue-list requests the simulator answered with
// code (0: any).
func (r *boardRig) listRequests(code int) int64 {
	return r.sim.Requests(forgesim.Filter{Token: boardToken, Route: issuesRoute, Status: code})
}

func TestSyncStoresNewChangedAndClosedIssues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "crash on start", State: "open", Labels: []string{"bug"}, Assignees: []string{"ana"}})
		r.seed(t, "acme/app", forgesim.Issue{Number: 2, Title: "docs", State: "open"})
		if err := r.sim.SeedPull("acme", "app", 3, "sha3", "open"); err != nil {
			t.Fatal(err)
		}
		r.start(t)

		p := r.next(t)
		if p.Term != 1 || p.Pass != 1 || !p.Complete || len(p.Repos) != 1 || p.Repos[0].Listed != 3 || p.Repos[0].Changed != 3 || !p.Repos[0].Since.IsZero() {
			t.Fatalf("first pass: got %+v, want term 1 pass 1 complete, 3 listed and changed since zero: the first pass of a term is a full sync", p)
		}
		cards := r.cards(t)
		c1 := cards[1]
		if len(cards) != 3 || c1.Title != "crash on start" || c1.State != "open" || fmt.Sprint(c1.Labels, c1.Assignees) != "[bug] [ana]" ||
			c1.PullRequest || !cards[3].PullRequest || c1.Host != "github.com" || c1.Repo != "acme/app" || c1.URL != "https://github.com/acme/app/issues/1" {
			t.Fatalf("cards: got %+v, want the issues numbered 1 and 2 and pull request 3 as the forge has them: a new issue becomes a card", cards)
		}

		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "crash on start (macOS)", State: "open", Labels: []string{"bug", "p1"}})
		r.seed(t, "acme/app", forgesim.Issue{Number: 2, Title: "docs", State: "closed"})
		r.seed(t, "acme/app", forgesim.Issue{Number: 4, Title: "new idea", State: "open"})
		p = r.next(t)
		if rp := p.Repos[0]; rp.Changed != 3 || rp.Err != nil {
			t.Fatalf("second pass: got %+v, want 3 changed cards: a changed, a closed and a new issue", rp)
		}
		cards = r.cards(t)
		if cards[1].Title != "crash on start (macOS)" || fmt.Sprint(cards[1].Labels, cards[1].Assignees) != "[bug p1] []" {
			t.Errorf("card 1: got %+v, want the new title and labels, no assignee: a changed issue changes its card", cards[1])
		}
		if cards[2].State != "closed" {
			t.Errorf("card 2: got state %q, want closed: a closed issue closes its card", cards[2].State)
		}
		if cards[4].Title != "new idea" || len(cards) != 4 {
			t.Errorf("cards: got %d, card 4 %+v, want 4 with the new idea: a new issue becomes a card", len(cards), cards[4])
		}
		if got := r.logs.Logged("board sync pass"); got != 2 {
			t.Errorf("pass log lines: got %d, want 2: one structured line per pass", got)
		}
		if bad := r.logs.NotOnce("owner=replica-a"); len(bad) > 0 {
			t.Errorf("log lines without owner=replica-a exactly once: %q, want none: NewSync adds the owner to every line, once", bad)
		}
	})
}

func TestSyncWatermarkAnd304s(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "one", State: "open"})
		r.start(t)
		time.Sleep(boardInterval / 2)
		r.seed(t, "acme/app", forgesim.Issue{Number: 2, Title: "two", State: "open"})
		latest := r.sim.Now().UTC().Truncate(time.Second)

		p := r.next(t)
		if got := p.Repos[0].Watermark; !got.Equal(latest) {
			t.Fatalf("watermark after the first pass: got %v, want %v: the watermark is the latest updated time the forge returned", got, latest)
		}
		r.seed(t, "acme/app", forgesim.Issue{Number: 2, Title: "two, edited", State: "open"})
		edited := r.sim.Now().UTC().Truncate(time.Second)
		p = r.next(t)
		if rp := p.Repos[0]; !rp.Since.Equal(latest) || rp.Listed != 1 || rp.Changed != 1 || !rp.Watermark.Equal(edited) {
			t.Fatalf("second pass: got %+v, want since %v, 1 listed and changed, watermark %v: only issues updated since the watermark are listed", rp, latest, edited)
		}
		p = r.next(t)
		if rp := p.Repos[0]; !rp.Since.Equal(edited) || rp.Listed != 1 || rp.Changed != 0 || !rp.Watermark.Equal(edited) {
			t.Fatalf("third pass: got %+v, want since %v, the boundary issue listed again, nothing changed: the list overlaps the watermark and an unchanged card is no change", rp, edited)
		}
		r.next(t)
		early := func(t time.Time) string { return t.Add(-time.Second).Format(time.RFC3339) }
		want := []string{"", early(latest), early(edited), early(edited)}
		if got := r.net.sinces("acme/app"); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("since sent: got %v, want %v: each pass sends the repository's watermark less one second, an overlap correct whether since is inclusive or not", got, want)
		}
		if got := r.listRequests(http.StatusNotModified); got != 1 {
			t.Errorf("simulator 304s: got %d, want 1: the fourth pass asks what the third did of an unchanged repository, which answers 304", got)
		}
		if got := forgetest.LaneCount(r.client, forge.LaneBoardSync, http.StatusNotModified); got != 1 {
			t.Errorf("client 304s on lane %s: got %d, want 1: the counts show the 304", forge.LaneBoardSync, got)
		}
	})
}

// budgetUsed is the core budget the board's token has spent this hour.
func (r *boardRig) budgetUsed() int {
	for _, w := range r.sim.Stats().Budget.Windows {
		if w.Token == boardToken && w.Resource == "core" {
			return w.Used
		}
	}
	return 0
}

// TestSyncFullSyncOfAnUnchangedForgeCostsNoBudget pins a full sync's
// conditional list. A term's full sync of a repository the forge has not
// changed since the last one is answered 304 and served the list the
// client kept: it costs no budget ("Making a conditional request does not
// count against your primary rate limit if a 304 response is returned and
// the request was made while correctly authorized with an Authorization
// header": Best practices for using the REST API, Use conditional requests
// if appropriate,
// https://docs.github.com/rest/using-the-rest-api/best-practices-for-using-the-rest-api#use-conditional-requests-if-appropriate)
// and still syncs every issue. Once the forge changed, the next full sync
// reads the new list, charged, and stores the change.
func TestSyncFullSyncOfAnUnchangedForgeCostsNoBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "one", State: "open"})
		r.seed(t, "acme/app", forgesim.Issue{Number: 2, Title: "two", State: "open"})
		fullSync := func(which string) board.RepoPass {
			t.Helper()
			stop := r.start(t) // a new term: a full sync
			rp := r.next(t).Repos[0]
			stop()
			if !rp.Since.IsZero() || rp.Err != nil {
				t.Fatalf("%s: got %+v, want a full sync, no error", which, rp)
			}
			return rp
		}
		fullSync("first full sync")
		used := r.budgetUsed()
		if used != 1 {
			t.Fatalf("budget after the first full sync: got %d, want 1: one list, read", used)
		}

		rp := fullSync("full sync of an unchanged forge")
		if got := r.budgetUsed(); got != used {
			t.Errorf("budget after a full sync of an unchanged forge: got %d, want %d: its list is answered 304, free", got, used)
		}
		if got := r.listRequests(http.StatusNotModified); got != 1 {
			t.Errorf("list answers 304: got %d, want 1: an unchanged forge answers the full sync's conditional list 304", got)
		}
		if rp.Listed != 2 || rp.Removed != 0 || len(r.cards(t)) != 2 {
			t.Errorf("full sync served from the cache: got %+v and %d cards, want 2 listed, none removed, 2 cards: the cached list is the whole list", rp, len(r.cards(t)))
		}

		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "one, edited", State: "open"})
		rp = fullSync("full sync of a changed forge")
		if got := r.budgetUsed(); got != used+1 {
			t.Errorf("budget after a full sync of a changed forge: got %d, want %d: the changed list is read, charged", got, used+1)
		}
		if got := r.cards(t)[1].Title; rp.Changed != 1 || got != "one, edited" {
			t.Errorf("full sync of a changed forge: got %+v, card 1 titled %q, want 1 changed, titled %q: a changed forge is read, never the cached list", rp, got, "one, edited")
		}
	})
}

func TestSyncFollowsEveryPage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app")
		for n := 1; n <= 250; n++ {
			r.seed(t, "acme/app", forgesim.Issue{Number: n, Title: fmt.Sprint("issue ", n), State: "open"})
		}
		r.start(t)
		p := r.next(t)
		if rp := p.Repos[0]; rp.Listed != 250 || rp.Changed != 250 || len(r.cards(t)) != 250 {
			t.Fatalf("got %+v and %d cards, want 250 listed, changed and stored: every page is followed", rp, len(r.cards(t)))
		}
		if got := r.listRequests(0); got != 3 {
			t.Fatalf("list requests: got %d, want 3: 250 issues at 100 a page, one request a page", got)
		}
	})
}

// TestSyncMissesNoIssueUpdatedWhileItsPagesAreRead pins that the watermark
// never passes an update the pass did not see: an issue on a page already
// read that is edited before a later page shows a later edit is listed by
// the next pass, not skipped behind the later edit's updated time.
func TestSyncMissesNoIssueUpdatedWhileItsPagesAreRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app")
		for n := 1; n <= 150; n++ {
			r.seed(t, "acme/app", forgesim.Issue{Number: n, Title: fmt.Sprint("issue ", n), State: "open"})
		}
		var once sync.Once
		r.net.before = func(req *http.Request) {
			if req.URL.Query().Get("page") != "2" {
				return
			}
			once.Do(func() { // the newest issue, on the first page, then the oldest, on the second, 2 s later
				r.seed(t, "acme/app", forgesim.Issue{Number: 150, Title: "edited between the pages", State: "open"})
				if err := r.sim.Advance(2 * time.Second); err != nil {
					t.Error(err)
				}
				r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "edited between the pages", State: "open"})
			})
		}
		r.start(t)
		r.next(t)
		r.next(t)
		for n, c := range r.cards(t) {
			if (n == 1 || n == 150) && c.Title != "edited between the pages" {
				t.Errorf("card %d: got title %q after the next pass, want the edit made while the first pass read its pages: no update is skipped", n, c.Title)
			}
		}
	})
}

// TestSyncLeavesOutAnIssueGitHubDescribedBadly pins what a pass does with
// an issue whose listed fields break GitHub's own schema (here a state
// other than open or closed), which no card can hold: it leaves that one
// issue out, logging it by number with the field, and stores every other
// issue of the list; the repository is synced, not failed on every pass
// for one issue.
func TestSyncLeavesOutAnIssueGitHubDescribedBadly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app")
		for n := 1; n <= 3; n++ {
			r.seed(t, "acme/app", forgesim.Issue{Number: n, Title: fmt.Sprintf("title %d", n), State: "open"})
			time.Sleep(time.Second) // the last seeded is the most recently updated, listed first
		}
		r.net.after = func(resp *http.Response) error {
			if resp.StatusCode != http.StatusOK || !strings.HasSuffix(resp.Request.URL.Path, "/issues") {
				return nil
			}
			var issues []map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&issues); err != nil {
				return err
			}
			for _, is := range issues {
				if is["number"] == float64(2) {
					is["state"] = "reopened"
				}
			}
			b, err := json.Marshal(issues)
			resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
			return err
		}
		r.start(t)

		rp := r.next(t).Repos[0]
		if rp.Err != nil || rp.Listed != 3 || rp.Changed != 2 || rp.LeftOut != 1 {
			t.Errorf("pass: got %+v, want acme/app synced with 3 listed, 2 changed and 1 left out: one badly described issue does not stop its repository", rp)
		}
		cards := r.cards(t)
		if _, ok := cards[2]; len(cards) != 2 || ok || cards[1].Title != "title 1" || cards[3].Title != "title 3" {
			t.Errorf("cards: got %v, want cards 1 and 3: every other issue of the list is stored", cards)
		}
		if n := r.logs.Logged(`board sync: issue left out`); n != 1 || !strings.Contains(r.logs.String(), `number=2`) || !strings.Contains(r.logs.String(), `state \"reopened\"`) {
			t.Errorf("log: %d lines of the issue left out, want 1 naming number 2 and its state:\n%s", n, r.logs.String())
		}
	})
}

func TestSyncForgeErrorKeepsTheWatermark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app", "acme/lib")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "one", State: "open"})
		r.seed(t, "acme/lib", forgesim.Issue{Number: 1, Title: "lib one", State: "open"})
		r.start(t)
		first := r.next(t).Repos[0].Watermark

		r.seed(t, "acme/app", forgesim.Issue{Number: 2, Title: "filed while the forge was unreachable", State: "open"})
		r.net.fail.Store(true)
		p := r.next(t)
		r.net.fail.Store(false)
		if len(p.Repos) != 2 || !errors.Is(p.Repos[0].Err, errUnreachable) || !p.Repos[0].Watermark.Equal(first) || p.Repos[1].Err == nil || !p.Complete {
			t.Fatalf("failed pass: got %+v, want both repositories failed with the injected error, app's watermark still %v, the pass complete: a forge error leaves the watermark unmoved and the pass goes on", p, first)
		}
		if got := r.logs.Logged("board sync: repository not synced"); got != 2 {
			t.Errorf("warnings: got %d, want 2: each repository not synced is logged", got)
		}

		p = r.next(t)
		if rp := p.Repos[0]; rp.Err != nil || !rp.Since.Equal(first) || rp.Changed != 1 || r.cards(t)[2].Title != "filed while the forge was unreachable" {
			t.Fatalf("pass after the fault: got %+v, want since %v and the issue filed meanwhile stored: nothing is lost to a forge error", rp, first)
		}
	})
}

func TestSyncStoreErrorKeepsTheWatermark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "one", State: "open"})
		flaky := &flakyBoard{Store: r.board}
		var err error
		r.sync, err = board.NewSync(board.Config{Store: flaky, Forge: r.client, Host: "github.com",
			Repos: []string{"acme/app"}, Interval: boardInterval, OnPass: func(p board.Pass) { r.passes <- p }})
		if err != nil {
			t.Fatal(err)
		}
		r.start(t)
		first := r.next(t).Repos[0].Watermark
		time.Sleep(time.Second)
		r.seed(t, "acme/app", forgesim.Issue{Number: 2, Title: "two", State: "open"})
		flaky.fail.Store(true)
		p := r.next(t)
		flaky.fail.Store(false)
		if rp := p.Repos[0]; !errors.Is(rp.Err, errStoreDown) || !rp.Watermark.Equal(first) {
			t.Fatalf("pass with the store down: got %+v, want the store error and the watermark still %v: a card not stored is listed again", rp, first)
		}
		if rp := r.next(t).Repos[0]; rp.Err != nil || !rp.Since.Equal(first) || rp.Changed != 1 {
			t.Fatalf("pass after: got %+v, want since %v and the missed card stored: nothing is lost to a store error", rp, first)
		}
	})
}

var errStoreDown = errors.New("board store down (injected)")

// flakyBoard fails every Put while fail is set.
type flakyBoard struct {
	board.Store
	fail atomic.Bool
}

func (f *flakyBoard) Put(ctx context.Context, c board.Card) (bool, error) {
	if f.fail.Load() {
		return false, errStoreDown
	}
	return f.Store.Put(ctx, c)
}

func TestSyncRateLimitStopsThePassUntilTheReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app", "acme/lib")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "one", State: "open"})
		r.seed(t, "acme/lib", forgesim.Issue{Number: 1, Title: "lib one", State: "open"})
		if err := r.sim.SetBudget(boardToken, 2); err != nil {
			t.Fatal(err)
		}
		r.start(t)
		r.next(t) // spends the budget: one request a repository
		r.seed(t, "acme/app", forgesim.Issue{Number: 2, Title: "two", State: "open"})
		r.seed(t, "acme/lib", forgesim.Issue{Number: 2, Title: "lib two", State: "open"})
		p := r.next(t)
		var rl *forge.RateLimitError
		if p.Complete || len(p.Repos) != 1 || !errors.As(p.Repos[0].Err, &rl) {
			t.Fatalf("pass with the budget spent: got %+v, want it stopped at its first repository with a *forge.RateLimitError: a rate limit stops the pass", p)
		}
		sent := r.listRequests(0)
		time.Sleep(time.Until(rl.Reset) - time.Nanosecond)
		synctest.Wait()
		if n := len(r.passes); n != 0 || r.listRequests(0) != sent {
			t.Fatalf("before the reset at %v: got %d passes and %d requests, want none: ticks before the reset are skipped", rl.Reset, n, r.listRequests(0)-sent)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		p = <-r.passes
		if !p.At.Equal(rl.Reset) || !p.Complete || len(p.Repos) != 2 || p.Repos[0].Changed != 1 || p.Repos[1].Changed != 1 {
			t.Fatalf("pass at the reset: got %+v, want it at %v, both repositories synced with their new issue: nothing is lost to a rate limit", p, rl.Reset)
		}
		if got := r.logs.Logged("board sync stopped: rate limited"); got != 1 {
			t.Errorf("rate-limit warnings: got %d, want 1: the stop is logged once, skipped ticks at debug", got)
		}
	})
}

func TestSyncEachTermStartsWithAFullSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "one", State: "open"})
		stop := r.start(t)
		r.next(t)
		if p := r.next(t); p.Repos[0].Since.IsZero() {
			t.Fatalf("second pass of a term: got since zero, want the watermark")
		}
		stop()
		r.start(t)
		p := r.next(t)
		if p.Term != 2 || p.Pass != 1 || !p.Repos[0].Since.IsZero() {
			t.Fatalf("first pass of the next term: got term %d pass %d since %v, want term 2 pass 1 since zero: the watermark lives for one term", p.Term, p.Pass, p.Repos[0].Since)
		}
	})
}

func TestSyncCadence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "one", State: "open"})
		begin := time.Now()
		r.start(t)
		time.Sleep(boardInterval - time.Nanosecond)
		synctest.Wait()
		if len(r.passes) != 0 || r.listRequests(0) != 0 {
			t.Fatalf("before one interval: got %d passes, %d requests, want none: the first pass is one interval after the term starts", len(r.passes), r.listRequests(0))
		}
		time.Sleep(time.Nanosecond)
		for i := 1; i <= 5; i++ {
			synctest.Wait()
			p := <-r.passes
			if want := begin.Add(time.Duration(i) * boardInterval); !p.At.Equal(want) {
				t.Fatalf("pass %d at %v, want %v: a pass every interval", i, p.At.Sub(begin), want.Sub(begin))
			}
			time.Sleep(boardInterval)
		}
	})
}

// newPruner is a Pruner of host's board of repos on a memory store.
func newPruner(t *testing.T, host string, repos ...string) *board.Pruner {
	t.Helper()
	p, err := board.NewPruner(board.NewMemoryStore(), host, repos, 0)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNewPrunerRefusesBadConfigNamingTheField pins NewPruner's checks:
// each bad argument is an ErrConfig naming the field and value.
func TestNewPrunerRefusesBadConfigNamingTheField(t *testing.T) {
	for _, tc := range []struct {
		field string
		store board.Store
		host  string
		repos []string
		every time.Duration
	}{
		{"Store is nil", nil, "github.com", []string{"acme/app"}, 0},
		{`Host "git hub"`, board.NewMemoryStore(), "git hub", []string{"acme/app"}, 0},
		{"BoardRepos is empty", board.NewMemoryStore(), "github.com", nil, 0},
		{`BoardRepos entry "Acme/App" names the repository of entry "acme/app"`, board.NewMemoryStore(), "github.com", []string{"acme/app", "Acme/App"}, 0},
		{"FullEvery -1s", board.NewMemoryStore(), "github.com", []string{"acme/app"}, -time.Second},
	} {
		if _, err := board.NewPruner(tc.store, tc.host, tc.repos, tc.every); !errors.Is(err, board.ErrConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("got %v, want ErrConfig naming %s: bad config names the field and value", err, tc.field)
		}
	}
}

func TestNewSyncRefusesBadConfigNamingTheField(t *testing.T) {
	good := func() board.Config {
		return board.Config{Store: board.NewMemoryStore(), Forge: &forge.Client{}, Host: "github.com", Repos: []string{"acme/app"}}
	}
	for _, tc := range []struct {
		field string
		bad   func(*board.Config)
	}{
		{"Store", func(c *board.Config) { c.Store = nil }},
		{"Forge", func(c *board.Config) { c.Forge = nil }},
		{`Host ""`, func(c *board.Config) { c.Host = "" }},
		{"Repos is empty", func(c *board.Config) { c.Repos = nil }},
		{`Repos entry "acme"`, func(c *board.Config) { c.Repos = []string{"acme"} }},
		{`Repos entry "acme/app" names the repository of entry "acme/app": it is listed twice`, func(c *board.Config) { c.Repos = []string{"acme/app", "acme/app"} }},
		{`Repos entry "Acme/App" names the repository of entry "acme/app"`, func(c *board.Config) { c.Repos = []string{"acme/app", "Acme/App"} }},
		{"Interval -1s", func(c *board.Config) { c.Interval = -time.Second }},
		{"FullEvery -1s", func(c *board.Config) { c.FullEvery = -time.Second }},
		{`BoardRepos entry "lib"`, func(c *board.Config) { c.BoardRepos = []string{"acme/app", "lib"} }},
		{`Repos entry "acme/app" is not in BoardRepos`, func(c *board.Config) { c.BoardRepos = []string{"acme/lib"} }},
		{`Pruner's host "ghe.example" is not Host "github.com"`, func(c *board.Config) { c.Pruner = newPruner(t, "ghe.example", "acme/app") }},
		{"BoardRepos and Pruner are both set", func(c *board.Config) {
			c.Pruner, c.BoardRepos = newPruner(t, "github.com", "acme/app"), []string{"acme/app"}
		}},
		{`Repos entry "acme/app" is not in BoardRepos`, func(c *board.Config) { c.Pruner = newPruner(t, "github.com", "acme/lib") }},
	} {
		cfg := good()
		tc.bad(&cfg)
		if _, err := board.NewSync(cfg); !errors.Is(err, board.ErrConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("got %v, want ErrConfig naming %s: bad config names the field and value", err, tc.field)
		}
	}
	s, err := board.NewSync(good())
	if err != nil || s.Interval() != board.DefaultInterval {
		t.Errorf("got %v, %v, want interval %v: a zero interval is the default", s, err, board.DefaultInterval)
	}
}

// TestSyncKeepsOneCardPerIssueWhateverTheCaseConfigured pins that the
// repository's name as configured does not key the cards: a sync
// configured with acme/app and its successor configured with Acme/App,
// which GitHub takes for one repository, keep one card per issue, showing
// the name now configured.
func TestSyncKeepsOneCardPerIssueWhateverTheCaseConfigured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "one", State: "open"})
		r.seed(t, "acme/app", forgesim.Issue{Number: 2, Title: "two", State: "open"})
		r.oneTerm(t)

		renamed, err := board.NewSync(board.Config{Store: r.board, Forge: r.client, Host: "github.com",
			Repos: []string{"Acme/App"}, Interval: boardInterval, OnPass: func(p board.Pass) { r.passes <- p }})
		if err != nil {
			t.Fatal(err)
		}
		r.sync = renamed
		r.start(t)
		if rp := r.next(t).Repos[0]; rp.Err != nil || rp.Listed != 2 {
			t.Fatalf("pass as Acme/App: got %+v, want 2 listed", rp)
		}
		cards := r.cards(t)
		if len(cards) != 2 || cards[1].Repo != "Acme/App" || cards[2].Repo != "Acme/App" {
			t.Fatalf("cards after the sync configured as acme/app then Acme/App: got %+v, want the two issues once each, as Acme/App: one issue has one card whatever the case configured", cards)
		}
		all, _ := r.board.Cards(context.Background(), board.Query{Limit: 10})
		if len(all) != 2 {
			t.Fatalf("cards stored: got %d, want 2: no stale duplicate beside the renamed ones", len(all))
		}
	})
}

// issueReadsRoute is the simulator's route of one issue's read.
const issueReadsRoute = "GET /repos/{owner}/{repo}/issues/{number}"

// dropFromLists makes every issue list answer leave out issue number, as
// a list does that an edit shifted between two of its pages.
func dropFromLists(r *boardRig, number int) {
	editIssues(r, func(list bool, is map[string]any) bool { return !list || is["number"] != float64(number) })
}

// editIssues has keep see, and may change, every issue of each 200 answer
// of an issue list (list true) or of one issue's read, before the client
// reads it; a listed issue keep returns false for is left out.
func editIssues(r *boardRig, keep func(list bool, is map[string]any) bool) {
	r.net.after = func(resp *http.Response) error {
		path := resp.Request.URL.Path
		list := strings.HasSuffix(path, "/issues")
		if resp.StatusCode != http.StatusOK || !list && !strings.Contains(path, "/issues/") {
			return nil
		}
		var v any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			return err
		}
		switch x := v.(type) {
		case []any:
			v = slices.DeleteFunc(x, func(is any) bool { return !keep(true, is.(map[string]any)) })
		case map[string]any:
			keep(false, x)
		}
		b, err := json.Marshal(v)
		resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		return err
	}
}

// TestSyncRemovesTheCardsOfDeletedAndTransferredIssues pins that a full
// sync (here a term's first pass) removes the card of an issue deleted
// from its repository or transferred to another, which GitHub's list no
// longer shows, and keeps the card of an issue the list passed over but
// the forge still has (an edit moved it between two pages): each missing
// card is read once, and only then.
func TestSyncRemovesTheCardsOfDeletedAndTransferredIssues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app")
		for n := 1; n <= 4; n++ {
			r.seed(t, "acme/app", forgesim.Issue{Number: n, Title: fmt.Sprint("title ", n), State: "open"})
		}
		stop := r.start(t)
		r.next(t)
		if err := r.sim.DeleteIssue("acme", "app", 1); err != nil {
			t.Fatal(err)
		}
		if _, err := r.sim.TransferIssue("acme", "app", 2, "acme", "lib"); err != nil {
			t.Fatal(err)
		}
		r.next(t)
		if got := len(r.cards(t)); got != 4 {
			t.Fatalf("cards after an incremental pass: got %d, want 4: a pass listing since its watermark cannot see what left the list", got)
		}
		if got := r.sim.Requests(forgesim.Filter{Route: issueReadsRoute}); got != 0 {
			t.Fatalf("issue reads by incremental passes: got %d, want 0: no per-card read on every pass", got)
		}
		stop()

		dropFromLists(r, 3)
		r.seed(t, "acme/app", forgesim.Issue{Number: 3, Title: "title 3, edited", State: "open"})
		r.start(t)
		r.next(t)
		cards := r.cards(t)
		if _, ok := cards[1]; ok {
			t.Errorf("card 1 after a full sync: still there, want it removed: the issue was deleted")
		}
		if _, ok := cards[2]; ok {
			t.Errorf("card 2 after a full sync: still there, want it removed: the issue was transferred to another repository")
		}
		if len(cards) != 2 || cards[3].Title != "title 3, edited" || cards[4].Title != "title 4" {
			t.Errorf("cards after a full sync: got %v, want 3, refreshed from its read, and 4: an issue the list passed over but the forge has keeps its card, as the forge now has it", cards)
		}
		// The deleted one's read answers 410, the transferred one's 301 and
		// then its new address, the passed-over one's 200.
		if got := r.sim.Requests(forgesim.Filter{Route: issueReadsRoute}); got != 4 {
			t.Errorf("issue reads: got %d, want 4: one read of each card the full list did not show (the transfer's redirect is a second request)", got)
		}
		if n := r.logs.Logged("board sync: card removed"); n != 2 || !strings.Contains(r.logs.String(), "transferred to acme/lib") {
			t.Errorf("log: %d lines of a card removed, want 2, one naming the repository it went to:\n%s", n, r.logs.String())
		}
	})
}

// TestSyncRemovesACardNoEarlierThanItsLastUpdate pins that a full sync
// removes the card of a deleted issue as gone at the card's Updated when
// the replica's clock runs behind the forge's: the forge said the issue
// is gone, so it went after its last update whatever this clock says, and
// a racing pass's read of the issue from before the deletion (updated at
// the card's instant) must not put the card back.
func TestSyncRemovesACardNoEarlierThanItsLastUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRigWith(t, func(c *board.Config) {
			c.Now = func() time.Time { return time.Now().Add(-time.Hour) } // an hour behind the forge
		}, "acme/app")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "doomed", State: "open"})
		stop := r.start(t)
		r.next(t)
		read, ok := r.cards(t)[1]
		if !ok {
			t.Fatalf("no card 1 after the first pass")
		}
		stop()
		if err := r.sim.DeleteIssue("acme", "app", 1); err != nil {
			t.Fatal(err)
		}
		r.start(t) // a new term: a full sync
		r.next(t)
		if _, ok := r.cards(t)[1]; ok {
			t.Fatalf("card 1 after a full sync: still there, want it removed: the issue was deleted")
		}
		if changed, err := r.board.Put(context.Background(), read); err != nil || changed {
			t.Errorf("Put of the card as read before the deletion = %v, %v; want false, nil: a removal is not before the card's last update, so a stale read does not put it back", changed, err)
		}
	})
}

// TestSyncListsInFullEveryFullEvery pins that a term long enough syncs
// each repository in full again once Config.FullEvery has passed since its
// last full sync, and removes then the cards of the issues that left it;
// the passes between list since the watermark.
func TestSyncListsInFullEveryFullEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRigWith(t, func(c *board.Config) { c.FullEvery = 3 * boardInterval }, "acme/app")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "one", State: "open"})
		r.seed(t, "acme/app", forgesim.Issue{Number: 2, Title: "two", State: "open"})
		r.start(t)
		var fulls []int
		for pass := 1; pass <= 7; pass++ {
			if pass == 2 {
				if err := r.sim.DeleteIssue("acme", "app", 1); err != nil {
					t.Fatal(err)
				}
			}
			rp := r.next(t).Repos[0]
			if rp.Err != nil {
				t.Fatalf("pass %d: %v", pass, rp.Err)
			}
			if rp.Since.IsZero() {
				fulls = append(fulls, pass)
			}
			if pass == 4 && (rp.Removed != 1 || len(r.cards(t)) != 1) {
				t.Errorf("pass 4, the first full sync after the deletion: got %+v and %d cards, want 1 removed and 1 card left", rp, len(r.cards(t)))
			}
		}
		if want := []int{1, 4, 7}; !slices.Equal(fulls, want) {
			t.Errorf("full syncs: passes %v, want %v: one every FullEvery (three intervals), the others since the watermark", fulls, want)
		}
		if n := strings.Count(r.logs.String(), " removed=1 "); n != 1 {
			t.Errorf("pass lines with removed=1: got %d, want 1: the pass line counts the cards removed\n%s", n, r.logs.String())
		}
	})
}

// TestSyncRemovalErrorKeepsTheWatermark pins that a full sync whose check
// of a missing card fails (the forge unreachable) fails its repository as
// a list error does: the watermark stays, the card stays, and the next
// pass syncs in full again and removes it.
func TestSyncRemovalErrorKeepsTheWatermark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "one", State: "open"})
		r.seed(t, "acme/app", forgesim.Issue{Number: 2, Title: "two", State: "open"})
		r.oneTerm(t)
		if err := r.sim.DeleteIssue("acme", "app", 1); err != nil {
			t.Fatal(err)
		}
		var unreachable atomic.Bool // the term's goroutine reads it
		unreachable.Store(true)
		r.net.after = func(resp *http.Response) error {
			if unreachable.Load() && strings.HasSuffix(resp.Request.URL.Path, "/issues/1") {
				return errUnreachable
			}
			return nil
		}
		r.start(t)
		rp := r.next(t).Repos[0]
		if !errors.Is(rp.Err, errUnreachable) || !rp.Watermark.IsZero() || rp.Removed != 0 || len(r.cards(t)) != 2 {
			t.Fatalf("full sync whose check failed: got %+v and %d cards, want the error, the watermark unmoved, nothing removed", rp, len(r.cards(t)))
		}
		unreachable.Store(false)
		rp = r.next(t).Repos[0]
		if rp.Err != nil || !rp.Since.IsZero() || rp.Removed != 1 || len(r.cards(t)) != 1 {
			t.Fatalf("next pass: got %+v and %d cards, want a full sync again that removes the deleted issue's card", rp, len(r.cards(t)))
		}
	})
}

// TestSyncPutsNoCardBackThatTheWebhookRemovedWhileItsListWasRead pins the
// race between a pass and the issues webhook: the pass lists two issues,
// one deleted and one transferred away before it stores their cards, and
// the webhook removes both cards (Store.Remove, gone the forge's instant)
// between the list's answer and the pass's puts. The pass's reads are from
// before the removal, so they put neither card back: not at that pass, and
// not at the next, which no longer lists them.
func TestSyncPutsNoCardBackThatTheWebhookRemovedWhileItsListWasRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app")
		for n := 1; n <= 3; n++ {
			r.seed(t, "acme/app", forgesim.Issue{Number: n, Title: fmt.Sprint("title ", n), State: "open"})
		}
		var armed atomic.Bool // the term's goroutine reads it
		r.net.after = func(resp *http.Response) error {
			if resp.StatusCode != http.StatusOK || !strings.HasSuffix(resp.Request.URL.Path, "/issues") || !armed.CompareAndSwap(true, false) {
				return nil
			}
			// The list's answer is in; the issues go, and the webhook
			// removes their cards, before the pass stores what it read.
			if err := r.sim.DeleteIssue("acme", "app", 1); err != nil {
				return err
			}
			if _, err := r.sim.TransferIssue("acme", "app", 2, "acme", "lib"); err != nil {
				return err
			}
			for n := 1; n <= 2; n++ {
				if _, err := r.board.Remove(context.Background(), "github.com", "acme/app", n, r.sim.Now()); err != nil {
					return err
				}
			}
			return nil
		}
		r.start(t)
		r.next(t)
		time.Sleep(time.Second)
		for n := 1; n <= 3; n++ { // edited, so the next pass lists all three
			r.seed(t, "acme/app", forgesim.Issue{Number: n, Title: fmt.Sprint("edited ", n), State: "open"})
		}
		armed.Store(true)
		if rp := r.next(t).Repos[0]; rp.Err != nil || rp.Listed != 3 || rp.Changed != 1 {
			t.Fatalf("pass racing the webhook: got %+v, want 3 listed and 1 changed: the two removed issues' reads change nothing", rp)
		}
		cards := r.cards(t)
		if _, ok := cards[1]; ok {
			t.Errorf("card 1 after the pass: back, want removed: a read of the issue from before its deletion does not undo the webhook's removal")
		}
		if _, ok := cards[2]; ok {
			t.Errorf("card 2 after the pass: back, want removed: a read of the issue from before its transfer does not undo the webhook's removal")
		}
		if cards[3].Title != "edited 3" {
			t.Errorf("card 3: got %+v, want the edit stored: the race touches only the removed cards", cards[3])
		}
		r.next(t)
		if got := len(r.cards(t)); got != 1 {
			t.Errorf("cards after the next pass: got %d, want 1: the removed cards stay removed until any full sync", got)
		}
	})
}

// TestSyncRemovesTheCardsOfRepositoriesOffTheBoard pins that a repository
// dropped from the board takes its cards with it: the term's first pass,
// and the first pass every FullEvery after, removes the cards of every
// repository not in Config.BoardRepos (the board's, of which this sync
// has a share), counts them in the pass and logs them; the board's other
// repositories' cards and another host's stay.
func TestSyncRemovesTheCardsOfRepositoriesOffTheBoard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRigWith(t, func(c *board.Config) {
			c.BoardRepos, c.FullEvery = []string{"acme/app", "Acme/Lib"}, 3*boardInterval
		}, "acme/app")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "synced", State: "open"})
		card := func(host, repo string, n int) board.Card {
			return board.Card{Host: host, Repo: repo, Number: n, Title: "stored before", State: "open", Updated: time.Now()}
		}
		for _, c := range []board.Card{card("github.com", "acme/old", 1), card("github.com", "Acme/Old", 2),
			card("github.com", "acme/lib", 1), card("ghe.example", "acme/old", 1)} {
			if _, err := r.board.Put(context.Background(), c); err != nil {
				t.Fatal(err)
			}
		}
		r.start(t)
		var pruned []int
		for pass := 1; pass <= 4; pass++ {
			if pass == 2 { // a replica still configured with acme/old puts a card back
				if _, err := r.board.Put(context.Background(), card("github.com", "acme/old", 3)); err != nil {
					t.Fatal(err)
				}
			}
			p := r.next(t)
			if p.PruneErr != nil {
				t.Fatalf("pass %d: %v", pass, p.PruneErr)
			}
			pruned = append(pruned, p.Pruned)
		}
		if want := []int{2, 0, 0, 1}; !slices.Equal(pruned, want) {
			t.Errorf("cards pruned by passes 1 to 4: got %v, want %v: the term's first pass, then one every FullEvery (three intervals), removes the cards of a repository off the board", pruned, want)
		}
		all, err := r.board.Cards(context.Background(), board.Query{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range all {
			got = append(got, c.ID())
		}
		slices.Sort(got)
		if want := []string{"ghe.example/acme/old#1", "github.com/acme/app#1", "github.com/acme/lib#1"}; !slices.Equal(got, want) {
			t.Errorf("cards: got %v, want %v: the synced repository's, another sync's board repository's, and another host's stay", got, want)
		}
		if n := r.logs.Logged("board sync: cards of repositories off the board removed"); n != 2 {
			t.Errorf("log lines of cards pruned: got %d, want 2, one a pass that removed any:\n%s", n, r.logs.String())
		}
		if n := strings.Count(r.logs.String(), " pruned=2 "); n != 1 {
			t.Errorf("pass lines with pruned=2: got %d, want 1: the pass line counts the cards pruned", n)
		}
	})
}

// TestSyncExpiresTombstonesWithoutARemoval pins that a removed card's
// tombstone expires by age, at the periodic prune, though no other card
// is removed: a board that stops removing keeps none longer than
// TombstoneTTL and a FullEvery.
func TestSyncExpiresTombstonesWithoutARemoval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRigWith(t, func(c *board.Config) { c.Interval, c.FullEvery = time.Hour, 6*time.Hour }, "acme/app")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "synced", State: "open"})
		ctx := context.Background()
		if _, err := r.board.Remove(ctx, "github.com", "acme/app", 9, time.Now()); err != nil {
			t.Fatal(err)
		}
		old := board.Card{Host: "github.com", Repo: "acme/app", Number: 9, Title: "read before the removal", State: "open", Updated: time.Now().Add(-time.Hour)}
		r.start(t)
		time.Sleep(board.TombstoneTTL - time.Minute) // passes and prunes, no removal
		synctest.Wait()
		if changed, err := r.board.Put(ctx, old); err != nil || changed {
			t.Fatalf("Put of a read before the removal, under TombstoneTTL after it = %v, %v, want false: the tombstone is kept its TTL", changed, err)
		}
		time.Sleep(time.Hour + 2*time.Minute) // the pass at 25h prunes, a period after the one at 19h
		synctest.Wait()
		if changed, err := r.board.Put(ctx, old); err != nil || !changed {
			t.Errorf("Put of a read before the removal, TombstoneTTL and a pass after it = %v, %v, want true: the periodic prune drops an expired tombstone without another removal", changed, err)
		}
	})
}

// prunesCounted is a board.MemoryStore that counts its Prunes.
type prunesCounted struct {
	*board.MemoryStore
	prunes atomic.Int32
}

func (s *prunesCounted) Prune(ctx context.Context, host string, repos []string) (int, error) {
	s.prunes.Add(1)
	return s.MemoryStore.Prune(ctx, host, repos)
}

// TestReplicasSharingAStorePruneOncePerPeriod pins that replicas whose
// syncs share the board's store, each with its own Pruner (App mode's
// replicas, each holding board shards), prune the host once a FullEvery
// between them, not once each: the store grants one claim a period. The
// next period's prune still takes a card of a repository off the board
// put back since.
func TestReplicasSharingAStorePruneOncePerPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &prunesCounted{MemoryStore: board.NewMemoryStore()}
		ctx := context.Background()
		dropped := func(n int) board.Card {
			return board.Card{Host: "github.com", Repo: "acme/dropped", Number: n, Title: "off the board", State: "open", Updated: time.Now()}
		}
		if _, err := store.Put(ctx, dropped(1)); err != nil {
			t.Fatal(err)
		}
		const replicas = 3
		for i := range replicas {
			r := newBoardRigWith(t, func(c *board.Config) {
				c.Store, c.FullEvery, c.Owner = store, 3*boardInterval, fmt.Sprintf("replica-%d", i)
				c.BoardRepos = []string{"acme/app", "acme/lib"}
			}, "acme/app")
			r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "synced", State: "open"})
			r.start(t)
		}
		time.Sleep(boardInterval + time.Second) // every replica's first pass
		synctest.Wait()
		if got := store.prunes.Load(); got != 1 {
			t.Errorf("prunes after %d replicas' first passes: %d, want 1: replicas sharing the store prune once a period between them", replicas, got)
		}
		if _, err := store.Put(ctx, dropped(2)); err != nil { // as a replica still configured with it would
			t.Fatal(err)
		}
		time.Sleep(3 * boardInterval) // the next period's first passes
		synctest.Wait()
		if got := store.prunes.Load(); got != 2 {
			t.Errorf("prunes after a FullEvery: %d, want 2: one a period", got)
		}
		cards, err := store.Cards(ctx, board.Query{Repo: "acme/dropped", Limit: 10})
		if err != nil || len(cards) != 0 {
			t.Errorf("cards of acme/dropped after the second period's prune: %v, %v, want none: the period's one prune takes them", cards, err)
		}
	})
}

// pruneFaults is a board.MemoryStore whose next Prunes, ClaimPrunes and
// ExpireTombstones fail, as many of each as set, and that counts the
// Prunes it was asked for.
type pruneFaults struct {
	*board.MemoryStore
	prunes, claims, expiries atomic.Int32
	asked                    atomic.Int32 // Prunes asked for, failed or not
}

var errPruneFault = errors.New("store did not answer (injected)")

func (s *pruneFaults) Prune(ctx context.Context, host string, repos []string) (int, error) {
	s.asked.Add(1)
	if s.prunes.Add(-1) >= 0 {
		return 0, errPruneFault
	}
	return s.MemoryStore.Prune(ctx, host, repos)
}

func (s *pruneFaults) ClaimPrune(ctx context.Context, host, board string, at time.Time, every time.Duration) (bool, error) {
	if s.claims.Add(-1) >= 0 {
		return false, errPruneFault
	}
	return s.MemoryStore.ClaimPrune(ctx, host, board, at, every)
}

func (s *pruneFaults) ExpireTombstones(ctx context.Context, now time.Time) (int, error) {
	if s.expiries.Add(-1) >= 0 {
		return 0, errPruneFault
	}
	return s.MemoryStore.ExpireTombstones(ctx, now)
}

// TestSyncRetriesAFailedPruneAtTheNextPass pins that a prune that fails
// is tried again at the next pass, not a period later: a claim the store
// did not answer is asked again, and a prune whose claim was granted is
// retried under that claim, which a new claim within the period would not
// get.
func TestSyncRetriesAFailedPruneAtTheNextPass(t *testing.T) {
	for _, c := range []struct {
		name          string
		prune, claims int32
	}{
		{"the prune fails", 1, 0},
		{"the claim fails", 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := &pruneFaults{MemoryStore: board.NewMemoryStore()}
				store.prunes.Store(c.prune)
				store.claims.Store(c.claims)
				off := board.Card{Host: "github.com", Repo: "acme/old", Number: 1, Title: "off the board", State: "open", Updated: time.Now()}
				if _, err := store.Put(context.Background(), off); err != nil {
					t.Fatal(err)
				}
				r := newBoardRigWith(t, func(cfg *board.Config) { cfg.Store, cfg.FullEvery = store, 10*boardInterval }, "acme/app")
				r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "synced", State: "open"})
				r.start(t)
				if p := r.next(t); !errors.Is(p.PruneErr, errPruneFault) {
					t.Errorf("pass 1: PruneErr %v, want the store's error: a failed prune is reported", p.PruneErr)
				}
				if p := r.next(t); p.PruneErr != nil || p.Pruned != 1 {
					t.Errorf("pass 2: pruned %d, err %v, want 1, nil: a failed prune is tried again at the next pass", p.Pruned, p.PruneErr)
				}
				if p := r.next(t); p.PruneErr != nil || p.Pruned != 0 {
					t.Errorf("pass 3: pruned %d, err %v, want 0, nil", p.Pruned, p.PruneErr)
				}
			})
		})
	}
}

// TestSyncRetriesOnlyThePartOfAPruneThatFailed pins that a prune whose
// removal of the cards off the board succeeded and whose expiry of the
// tombstones failed (a term's end cancels the pass between the two) is
// retried at the next pass for the tombstones alone: the period's cards
// were removed once, and scanning the card collection for them again
// would be a second prune in the period.
func TestSyncRetriesOnlyThePartOfAPruneThatFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &pruneFaults{MemoryStore: board.NewMemoryStore()}
		store.expiries.Store(1)
		ctx := context.Background()
		off := board.Card{Host: "github.com", Repo: "acme/old", Number: 1, Title: "off the board", State: "open", Updated: time.Now()}
		if _, err := store.Put(ctx, off); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Remove(ctx, "github.com", "acme/app", 9, time.Now().Add(-board.TombstoneTTL-time.Hour)); err != nil {
			t.Fatal(err)
		}
		r := newBoardRigWith(t, func(cfg *board.Config) { cfg.Store, cfg.FullEvery = store, 10*boardInterval }, "acme/app")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "synced", State: "open"})
		r.start(t)
		if p := r.next(t); !errors.Is(p.PruneErr, errPruneFault) || p.Pruned != 1 {
			t.Errorf("pass 1: pruned %d, err %v, want 1 and the store's error: the cards were removed, the tombstones not", p.Pruned, p.PruneErr)
		}
		if p := r.next(t); p.PruneErr != nil || p.Expired != 1 {
			t.Errorf("pass 2: expired %d, err %v, want 1, nil: the failed expiry is tried again at the next pass", p.Expired, p.PruneErr)
		}
		if got := store.asked.Load(); got != 1 {
			t.Errorf("Prunes asked for in the period: %d, want 1: a retry does not remove again the cards a period's prune removed", got)
		}
	})
}

// TestAReplicaWithAnotherBoardListPrunesAtOnce pins that the period's
// claim is per repository list: a replica listing the same repositories
// in another order or case shares it, while one with another list (a
// rolling change of --board-repos) prunes at its first pass, within the
// period another list's replica claimed.
func TestAReplicaWithAnotherBoardListPrunesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &prunesCounted{MemoryStore: board.NewMemoryStore()}
		for i, list := range [][]string{{"acme/app", "acme/lib"}, {"Acme/Lib", "acme/app"}, {"acme/app"}} {
			r := newBoardRigWith(t, func(c *board.Config) {
				c.Store, c.FullEvery, c.BoardRepos, c.Owner = store, 10*boardInterval, list, fmt.Sprintf("replica-%d", i)
			}, "acme/app")
			r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "synced", State: "open"})
			r.start(t)
			time.Sleep(boardInterval + time.Second) // its first pass
			synctest.Wait()
			if got, want := store.prunes.Load(), []int32{1, 1, 2}[i]; got != want {
				t.Errorf("prunes after replica %d's first pass (board %v): %d, want %d: the same repositories share the period's claim, another list prunes at once", i, list, got, want)
			}
		}
	})
}

// TestSyncPassReportsTheTombstonesItsPruneExpired pins that the pass
// whose periodic prune drops expired tombstones says how many, in Pass
// and in its log line (expired), as it does for the cards it prunes, and
// that no other pass claims any.
func TestSyncPassReportsTheTombstonesItsPruneExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRigWith(t, func(c *board.Config) { c.Interval, c.FullEvery = time.Hour, 6*time.Hour }, "acme/app")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "synced", State: "open"})
		ctx := context.Background()
		for _, n := range []int{8, 9} {
			if _, err := r.board.Remove(ctx, "github.com", "acme/app", n, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		r.start(t)
		time.Sleep(board.TombstoneTTL + time.Hour + 2*time.Minute) // the pass at 25h prunes, a period after the one at 19h
		synctest.Wait()
		var expired []int
		for len(r.passes) > 0 {
			if p := <-r.passes; p.Expired != 0 {
				expired = append(expired, p.Expired)
			}
		}
		if !slices.Equal(expired, []int{2}) {
			t.Errorf("tombstones expired by the passes that expired any: got %v, want [2]: one prune past TombstoneTTL drops both, and its pass says so", expired)
		}
		if n := strings.Count(r.logs.String(), " expired=2 "); n != 1 {
			t.Errorf("pass lines with expired=2: got %d, want 1: the pass line counts the tombstones expired:\n%s", n, r.logs.String())
		}
	})
}

// TestSyncReportsAPassBeforeItLogsIt pins the order of a pass's two
// reports: Config.OnPass (which the server's GET /board status and
// metrics read) is called before the "board sync pass" line is logged,
// so whoever reads that line, an operator or a test waiting for it,
// finds the pass already recorded rather than racing its record.
func TestSyncReportsAPassBeforeItLogsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logged []bool // per OnPass: whether its pass line was logged already
		var r *boardRig
		r = newBoardRigWith(t, func(c *board.Config) {
			next := c.OnPass
			c.OnPass = func(p board.Pass) {
				logged = append(logged, strings.Count(r.logs.String(), "board sync pass") >= len(logged)+1)
				next(p)
			}
		}, "acme/app")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "synced", State: "open"})
		r.start(t)
		r.next(t)
		r.next(t)
		if len(logged) < 2 || slices.Contains(logged, true) {
			t.Errorf("pass line already logged when OnPass was called, per pass: %v, want every false: a pass is recorded before its line says it ended", logged)
		}
	})
}

// TestSyncKeepsTheCardOfAnIssueStillInItsRepositoryUnderAnotherName pins
// that a full sync removes no card of an issue still in its repository
// when the forge names that repository otherwise than the configuration:
// in another case (GitHub compares names without case) or by a new name
// after a rename (GitHub redirects the old one). The issue the list passed
// over is read, answers in the repository the list's issues named, and
// keeps its card.
func TestSyncKeepsTheCardOfAnIssueStillInItsRepositoryUnderAnotherName(t *testing.T) {
	for _, c := range []struct{ name, forgeSays string }{
		{"another case", "Acme/App"},
		{"renamed", "acme/application"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newBoardRig(t, "acme/app")
				for n := 1; n <= 3; n++ {
					r.seed(t, "acme/app", forgesim.Issue{Number: n, Title: fmt.Sprint("title ", n), State: "open"})
				}
				r.oneTerm(t)
				// Edited, so the full list answers 200 rather than 304 with the
				// list the client kept.
				r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "title 1, edited", State: "open"})
				editIssues(r, func(list bool, is map[string]any) bool {
					is["repository_url"] = "http://forge.test/repos/" + c.forgeSays
					return !list || is["number"] != float64(3) // passed over by the list
				})
				r.start(t) // a new term: a full sync
				rp := r.next(t).Repos[0]
				if _, ok := r.cards(t)[3]; !ok || rp.Err != nil || rp.Removed != 0 {
					t.Errorf("full sync with the forge naming acme/app %s: card 3 kept %v, pass %+v; want it kept, nothing removed: an issue still in its repository keeps its card", c.forgeSays, ok, rp)
				}
			})
		})
	}
}

// TestSyncRemovesTheCardOfAnIssueGitHubAnswers404For pins that a full
// sync removes the card of an issue whose read GitHub answers 404, as it
// does when the issue went to a repository the token cannot see: it is
// gone from the board's repository, and failing the repository instead
// would fail every full sync and keep the card for ever.
func TestSyncRemovesTheCardOfAnIssueGitHubAnswers404For(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "moved out of sight", State: "open"})
		r.seed(t, "acme/app", forgesim.Issue{Number: 2, Title: "stays", State: "open"})
		r.oneTerm(t)
		if _, err := r.sim.TransferIssue("acme", "app", 1, "acme", "secret"); err != nil {
			t.Fatal(err)
		}
		r.net.after = func(resp *http.Response) error {
			if strings.HasPrefix(resp.Request.URL.Path, "/repos/acme/secret/") { // the token cannot see it
				resp.StatusCode, resp.Status = http.StatusNotFound, "404 Not Found"
				b := []byte(`{"message":"Not Found"}`)
				resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
			}
			return nil
		}
		r.start(t)
		rp := r.next(t).Repos[0]
		if _, ok := r.cards(t)[1]; ok || rp.Err != nil || rp.Removed != 1 {
			t.Errorf("full sync after the issue's read answered 404: card 1 kept %v, pass %+v; want it removed, the repository synced: a 404 is an issue gone", ok, rp)
		}
		if _, ok := r.cards(t)[2]; !ok {
			t.Errorf("card 2: gone, want kept: only the issue answered 404 is removed")
		}
	})
}

// TestSyncChecksEveryCardTheFullListDidNotShow pins that a full sync reads
// each stored card the list did not show, however many cards the
// repository has: the card of a deleted issue older than the newest
// hundred is removed too.
func TestSyncChecksEveryCardTheFullListDidNotShow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "the oldest", State: "open"})
		time.Sleep(time.Second)
		for n := 2; n <= 150; n++ {
			r.seed(t, "acme/app", forgesim.Issue{Number: n, Title: fmt.Sprint("issue ", n), State: "open"})
		}
		r.oneTerm(t)
		if err := r.sim.DeleteIssue("acme", "app", 1); err != nil {
			t.Fatal(err)
		}
		r.start(t)
		rp := r.next(t).Repos[0]
		if _, ok := r.cards(t)[1]; ok || rp.Removed != 1 || len(r.cards(t)) != 149 {
			t.Errorf("full sync after the oldest of 150 issues was deleted: card 1 kept %v, pass %+v, %d cards; want it removed and 149 left: every card the list did not show is checked", ok, rp, len(r.cards(t)))
		}
	})
}

// TestSyncRemovalBarsAReadFromBeforeTheForgeSaidTheIssueGone pins a full
// sync's tombstone when the card is stale: the issue was edited after the
// card was stored, then deleted, and another replica read the edit. The
// forge's answer says the issue is gone by now, so the removal is dated
// this replica's clock, not the card's older Updated, and that read,
// stored after the removal, does not put the card back.
func TestSyncRemovalBarsAReadFromBeforeTheForgeSaidTheIssueGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "first read", State: "open"})
		r.oneTerm(t)
		time.Sleep(time.Minute)
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "edited, then deleted", State: "open"})
		edit := board.Card{Host: "github.com", Repo: "acme/app", Number: 1, Title: "edited, then deleted", State: "open",
			URL: "https://github.com/acme/app/issues/1", Updated: r.sim.Now()}
		if err := r.sim.DeleteIssue("acme", "app", 1); err != nil {
			t.Fatal(err)
		}
		r.start(t)
		if rp := r.next(t).Repos[0]; rp.Removed != 1 {
			t.Fatalf("full sync after the deletion: got %+v, want card 1 removed", rp)
		}
		if changed, err := r.board.Put(context.Background(), edit); err != nil || changed {
			t.Errorf("Put of the issue's last read, from before its deletion, after the removal = %v, %v; want false, nil: a removal bars every read up to when the forge said the issue was gone", changed, err)
		}
	})
}

// TestSyncWatermarkNeverMovesBack pins that a pass whose list shows no
// issue (here the one updated at the watermark was deleted) keeps the
// repository's watermark: the next pass lists since it again rather than
// every issue of the repository.
func TestSyncWatermarkNeverMovesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "older", State: "open"})
		time.Sleep(time.Minute)
		r.seed(t, "acme/app", forgesim.Issue{Number: 2, Title: "newest", State: "open"})
		r.start(t)
		mark := r.next(t).Repos[0].Watermark
		if err := r.sim.DeleteIssue("acme", "app", 2); err != nil {
			t.Fatal(err)
		}
		if rp := r.next(t).Repos[0]; rp.Err != nil || rp.Listed != 0 || !rp.Watermark.Equal(mark) {
			t.Errorf("pass listing nothing: got %+v, want 0 listed and the watermark still %v: a watermark never moves back", rp, mark)
		}
		if rp := r.next(t).Repos[0]; !rp.Since.Equal(mark) {
			t.Errorf("next pass: got since %v, want %v: it lists since the watermark, not every issue", rp.Since, mark)
		}
	})
}

// TestSyncStepDownStopsThePass pins that a pass whose term ends (its
// context done: a step-down) reaches no further repository: it sends no
// more forge request and reports the pass incomplete.
func TestSyncStepDownStopsThePass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app", "acme/lib")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "app", State: "open"})
		r.seed(t, "acme/lib", forgesim.Issue{Number: 1, Title: "lib", State: "open"})
		ctx, stepDown := context.WithCancel(context.Background())
		r.net.before = func(req *http.Request) {
			if req.URL.Path == "/repos/acme/app/issues" {
				stepDown() // the lease is lost while the first repository is listed
			}
		}
		done := make(chan struct{})
		go func() { defer close(done); r.sync.Work(ctx) }()
		time.Sleep(boardInterval)
		<-done
		p := <-r.passes
		if p.Complete || len(p.Repos) != 1 {
			t.Errorf("pass cut by a step-down: complete %v, %d repositories reached; want incomplete, 1: a step-down stops the pass", p.Complete, len(p.Repos))
		}
		if got := r.net.sinces("acme/lib"); len(got) != 0 {
			t.Errorf("lists of acme/lib after the step-down: %v, want none: a replica no longer elected sends no board request", got)
		}
	})
}

// TestSyncEndsATermWhosePassesKeepFailing pins that a pass that did not
// sync every repository counts as failed for the watchdog, though it
// reached them all: StallAfter such passes in a row end the term, so that
// another replica may try.
func TestSyncEndsATermWhosePassesKeepFailing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stalled atomic.Int32
		r := newBoardRigWith(t, func(c *board.Config) {
			c.Watchdog = lease.Watchdog{Name: "forge-board-sync", StallAfter: 3, Stalled: func() { stalled.Add(1) }}
		}, "acme/app")
		r.net.fail.Store(true)
		done := make(chan struct{})
		go func() { defer close(done); r.sync.Work(context.Background()) }()
		time.Sleep(3*boardInterval + time.Second)
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatalf("term still running after 3 passes that synced no repository, want it ended: a net whose passes keep failing steps down")
		}
		if n := stalled.Load(); n != 1 {
			t.Errorf("Stalled called %d times, want 1", n)
		}
	})
}

// prunesHeld is a board.MemoryStore whose Prunes are counted and each
// held until release is closed (or its context is done).
type prunesHeld struct {
	*board.MemoryStore
	prunes  atomic.Int32
	release chan struct{}
}

func (s *prunesHeld) Prune(ctx context.Context, host string, repos []string) (int, error) {
	s.prunes.Add(1)
	select {
	case <-s.release:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return s.MemoryStore.Prune(ctx, host, repos)
}

// TestSyncsSharingAPrunerNeverPruneAtOnce pins that while one sync's
// prune is under way, another sync sharing its Pruner (App mode: another
// installation's) neither prunes too, which a claimed prune not yet done
// would let it, nor waits: its pass goes on to its repositories.
func TestSyncsSharingAPrunerNeverPruneAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &prunesHeld{MemoryStore: board.NewMemoryStore(), release: make(chan struct{})}
		pruner, err := board.NewPruner(store, "github.com", []string{"acme/app", "acme/lib"}, 10*boardInterval)
		if err != nil {
			t.Fatal(err)
		}
		var rigs []*boardRig
		for _, repo := range []string{"acme/app", "acme/lib"} {
			r := newBoardRigWith(t, func(c *board.Config) { c.Store, c.Pruner = store, pruner }, repo)
			r.seed(t, repo, forgesim.Issue{Number: 1, Title: "synced", State: "open"})
			rigs = append(rigs, r)
		}
		rigs[0].start(t)
		time.Sleep(boardInterval / 2)
		rigs[1].start(t)
		time.Sleep(boardInterval / 2)
		synctest.Wait() // the first sync's prune is under way, held
		p := rigs[1].next(t)
		if got := store.prunes.Load(); got != 1 {
			t.Errorf("prunes while the first is under way: %d, want 1: syncs sharing a Pruner never prune at once", got)
		}
		if p.Pruned != 0 || p.PruneErr != nil || len(p.Repos) != 1 || p.Repos[0].Err != nil {
			t.Errorf("second sync's pass: got %+v, want acme/lib synced and no prune: it does not wait for another's prune", p)
		}
		close(store.release)
	})
}

// removedMeanwhile is a board.MemoryStore whose Remove finds the card
// already removed, as when the issues webhook removed it between the
// sync's listing of the cards and its own removal.
type removedMeanwhile struct{ *board.MemoryStore }

func (s removedMeanwhile) Remove(ctx context.Context, host, repo string, number int, gone time.Time) (bool, error) {
	if _, err := s.MemoryStore.Remove(ctx, host, repo, number, gone); err != nil {
		return false, err
	}
	return s.MemoryStore.Remove(ctx, host, repo, number, gone)
}

// TestSyncCountsOnlyTheCardsItRemoved pins that a full sync counts and
// logs a card as removed only when its own Remove removed it: one the
// webhook removed meanwhile is not counted twice across the replicas.
func TestSyncCountsOnlyTheCardsItRemoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "deleted", State: "open"})
		r.seed(t, "acme/app", forgesim.Issue{Number: 2, Title: "stays", State: "open"})
		r.oneTerm(t)
		if err := r.sim.DeleteIssue("acme", "app", 1); err != nil {
			t.Fatal(err)
		}
		var err error
		r.sync, err = board.NewSync(board.Config{Store: removedMeanwhile{r.board}, Forge: r.client, Host: "github.com",
			Repos: []string{"acme/app"}, Interval: boardInterval, OnPass: func(p board.Pass) { r.passes <- p }})
		if err != nil {
			t.Fatal(err)
		}
		r.start(t)
		if rp := r.next(t).Repos[0]; rp.Err != nil || rp.Removed != 0 {
			t.Errorf("full sync whose removal found the card removed already: got %+v, want no error and 0 removed: only the cards it removed are counted", rp)
		}
		if _, ok := r.cards(t)[1]; ok {
			t.Errorf("card 1: back, want removed")
		}
	})
}

// TestSyncFullSyncChecksOnlyItsHostsCards pins that a full sync reads
// only its own host's cards the list did not show: a card of the same
// repository name on another forge host (an earlier --forge-url) costs
// no read and stays.
func TestSyncFullSyncChecksOnlyItsHostsCards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app")
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "synced", State: "open"})
		other := board.Card{Host: "ghe.example", Repo: "acme/app", Number: 7, Title: "of another host", State: "open", Updated: time.Now()}
		if _, err := r.board.Put(context.Background(), other); err != nil {
			t.Fatal(err)
		}
		r.start(t)
		if rp := r.next(t).Repos[0]; rp.Err != nil || rp.Removed != 0 {
			t.Errorf("full sync: got %+v, want nothing removed", rp)
		}
		if got := r.sim.Requests(forgesim.Filter{Route: issueReadsRoute}); got != 0 {
			t.Errorf("issue reads: got %d, want 0: another host's card is not this sync's to check", got)
		}
		if cards, err := r.board.Cards(context.Background(), board.Query{Host: "ghe.example", Limit: 10}); err != nil || len(cards) != 1 {
			t.Errorf("cards of ghe.example: %v, %v, want card 7 kept", cards, err)
		}
	})
}

// TestSyncLeavesOutAPassedOverIssueGitHubDescribedBadly pins that a full
// sync whose read of a card the list passed over describes the issue in
// a way no card can hold leaves that card as it was, with a warning, and
// syncs the repository: failing it would fail every full sync for one
// issue.
func TestSyncLeavesOutAPassedOverIssueGitHubDescribedBadly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBoardRig(t, "acme/app")
		for n := 1; n <= 2; n++ {
			r.seed(t, "acme/app", forgesim.Issue{Number: n, Title: fmt.Sprint("title ", n), State: "open"})
		}
		r.oneTerm(t)
		r.seed(t, "acme/app", forgesim.Issue{Number: 1, Title: "title 1, edited", State: "open"}) // the list answers 200, not 304
		editIssues(r, func(list bool, is map[string]any) bool {
			if is["number"] != float64(2) {
				return true
			}
			is["state"] = "reopened"
			return !list // passed over by the list, read with a state GitHub's schema does not allow
		})
		r.start(t)
		rp := r.next(t).Repos[0]
		if rp.Err != nil || rp.Removed != 0 || r.cards(t)[2].Title != "title 2" {
			t.Errorf("full sync: got %+v, card 2 %+v; want the repository synced and card 2 left as it was", rp, r.cards(t)[2])
		}
		if n := r.logs.Logged("board sync: issue left out"); n != 1 {
			t.Errorf("issue left out warnings: got %d, want 1", n)
		}
	})
}
