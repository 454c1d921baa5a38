package pagetest

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"iterion.dev/iterion/cmd/iterion/internal/demo"
	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// findChromium is the browser's path on PATH, or "" when there is none.
func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestMain says when the browser test does not run, without -v: with
// -short (it starts a browser and a demo: about 18 s), or outside CI with
// no Chromium on PATH, it runs no test at all, so go test reports
// "ok ... [no tests to run]" for this package rather than a bare "ok", and
// says why on stderr (shown with -v). In CI (CI=true) the test runs and
// fails without Chromium, since .ci/run installs it.
func TestMain(m *testing.M) {
	flag.Parse()
	why := ""
	switch {
	case testing.Short():
		why = "-short"
	case findChromium() == "" && os.Getenv("CI") != "true":
		why = "no chromium on PATH (apt-get install -y chromium)"
	}
	if why != "" {
		fmt.Fprintf(os.Stderr, "pagetest: %s: the browser test of the pages and the demo report does not run\n", why)
		if err := flag.Set("test.run", "^$"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

// chromium is the browser's path; in CI (CI=true) a missing one fails the
// test, since .ci/run installs it. (Outside CI, TestMain has not run the
// test without one.)
func chromium(t *testing.T) string {
	t.Helper()
	p := findChromium()
	if p == "" {
		t.Fatal("got no chromium on PATH, want one in CI: .ci/run installs Debian's chromium package")
	}
	return p
}

// startServer serves one replica of pkg/server, elected for its nets, over
// a forge simulator, with an unsettled run whose offer failed and a long
// owner name, as an operator would see it.
func startServer(t *testing.T) string {
	t.Helper()
	sim := forgesim.New()
	simSrv := httptest.NewServer(sim)
	t.Cleanup(simSrv.Close)
	fc, err := forge.New(forge.Config{BaseURL: simSrv.URL + "/", Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	elected := make(chan struct{}, 2)
	srv, err := server.New(server.Config{
		Runs: gaterun.NewMemoryStore(), Leases: lease.NewMemoryStore(), Forge: fc, APIToken: "api", PublicPages: true, // the browser sends no token
		Owner: "web-7f9c8d6b5a-replica-with-a-long-host-name-3a1b2c4d", SweepInterval: time.Hour,
		BoardRepos: []string{"acme/app"}, BoardInterval: time.Hour,
		OnLeaseEvent: func(ev lease.Event) {
			if ev.Kind == lease.Elected {
				elected <- struct{}{}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, nil) }()
	t.Cleanup(func() { cancel(); <-done })
	<-elected
	<-elected
	req, _ := http.NewRequest("POST", hs.URL+"/api/runs", strings.NewReader(
		`{"repo": "acme/app", "pull": 77, "head_sha": "abcdef0123456789abcdef0123456789abcdef01", "verdict": "success"}`))
	req.Header.Set("Authorization", "Bearer api")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /api/runs = %v, %v, want 201", resp, err)
	}
	resp.Body.Close()
	return hs.URL
}

// longAccount is an installation's account name longer than any GitHub
// login, with no space to break at: the page must still fit 400 px.
const longAccount = "an-organisation-with-a-login-far-longer-than-github-allows-0123456789abcdef"

// startAppServer serves one replica of pkg/server in App mode, not
// elected (its nets do not run), over a forge simulator with three
// installations, one on longAccount, and one of them swept.
func startAppServer(t *testing.T) string {
	t.Helper()
	sim := forgesim.New()
	simSrv := httptest.NewServer(sim)
	t.Cleanup(simSrv.Close)
	for id, account := range []string{"acme", longAccount, "org-3"} {
		if err := sim.AddInstallation(int64(id+1), account, account+"/app"); err != nil {
			t.Fatal(err)
		}
	}
	app, err := forge.NewApp(forge.AppConfig{BaseURL: simSrv.URL + "/", AppID: 42, PrivateKey: forgetest.AppKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	runs, leases := gaterun.NewMemoryStore(), lease.NewMemoryStore()
	owner := "web-7f9c8d6b5a-replica-with-a-long-host-name-3a1b2c4d"
	srv, err := server.New(server.Config{Runs: runs, Leases: leases, App: app, APIToken: "api", PublicPages: true, Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	shard := server.InstallationShard(2, server.DefaultSweepShards)
	if ok, err := leases.Acquire(context.Background(), lease.ShardName(server.MergeGateSweeper().Name, server.DefaultSweepShards, shard), owner, time.Now(), time.Hour); !ok || err != nil {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	if err := runs.RecordSweeps(context.Background(), []gaterun.InstallationSweep{{Installation: 2, At: time.Now().Add(-time.Minute), Owner: owner,
		Budgets: []forge.RateLimit{{Resource: "core", Limit: 5000, Remaining: 12, Reset: time.Now().Add(time.Hour)}}}}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

// writeReport runs a short demo and writes its report to a file.
func writeReport(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := demo.Run(ctx, demo.Config{Replicas: 3, Interval: 250 * time.Millisecond, Phase: 2 * time.Second, Runs: 2, Issues: 3, Out: &bytes.Buffer{}})
	if err != nil {
		t.Fatalf("demo.Run: %v", err)
	}
	path := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.WriteReport(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return "file://" + path
}

func TestPagesFitAndSayWhatTheyShow(t *testing.T) {
	exe := chromium(t)
	base := startServer(t)
	appBase := startAppServer(t)
	if resp, err := http.Get(base + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz = %v, %v, want 200: it is JSON, checked by status", resp, err)
	} else {
		resp.Body.Close()
	}
	pages := []struct {
		url  string
		want []string // key text, as the page renders it
		// wholeWords: the page's table cells keep each word with a hyphen
		// (a flag, a lease name) on one line. The server's pages do not
		// promise it: an owner is a host name of any length.
		wholeWords bool
	}{
		{base + "/", []string{"This replica is", "Its terms", "merge-gate-sweeper", "/metrics", "/healthz"}, false},
		{base + "/leases", []string{"owner", "held by this replica", "forge-board-sync", "TTL"}, false},
		{base + "/runs", []string{"1 unsettled run", "acme/app#77", "unreadable", "backoff"}, false},
		{base + "/board", []string{"Forge board"}, false},
		{appBase + "/installations", []string{"3 installations of the App", "Lowest budget: installation 2", longAccount, "this replica", "none"}, false},
		{appBase + "/leases", []string{"Lease groups", "merge-gate-sweeper: 64 shards"}, false},
		{appBase + "/", []string{"Lease group merge-gate-sweeper: 1 of its 64 shards", "/installations"}, false},
		{writeReport(t), []string{"one sweeper, whatever the replica count", "sweeper requests", "takeover"}, true},
	}

	alloc, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU)...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, width := range []int64{400, 1400} {
		for _, p := range pages {
			name := fmt.Sprintf("%s at %d px", strings.TrimPrefix(strings.TrimPrefix(p.url, base), appBase), width)
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 900), chromedp.Navigate(p.url)); err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			got, err := chromedp.Run(ctx, chromedp.Evaluate[struct {
				Scroll, Client   int
				Text             string
				Overlaps, Broken []string
			}](`({Scroll: document.documentElement.scrollWidth, Client: document.documentElement.clientWidth, Text: document.body.innerText,
				Overlaps: overlaps(), Broken: broken()});
			`+layoutChecks))
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			scroll, client, text := got.Scroll, got.Client, got.Text
			if scroll > client {
				t.Errorf("%s: got scrollWidth %d > clientWidth %d, want no horizontal overflow: pages fit 400 px", name, scroll, client)
			}
			if len(got.Overlaps) > 0 {
				t.Errorf("%s: got chart labels drawn over each other %q, want each readable", name, got.Overlaps)
			}
			if p.wholeWords && len(got.Broken) > 0 {
				t.Errorf("%s: got table words broken across lines at their hyphens %q, want each flag or name on one line", name, got.Broken)
			}
			for _, w := range p.want {
				if !strings.Contains(text, w) {
					t.Errorf("%s: got text without %q, want it: the page's key text\n%s", name, w, text)
				}
			}
		}
	}
}

// layoutChecks defines the page-side checks TestPagesFitAndSayWhatTheyShow
// runs at each width (function declarations, hoisted above its expression):
// overlaps lists the pairs of the chart's takeover labels whose boxes
// intersect; broken lists the words with a hyphen in a table cell that the
// browser laid out on more than one line.
const layoutChecks = `
function overlaps() {
	const ls = [...document.querySelectorAll(".takeover-label")].map(e => [e.textContent, e.getBoundingClientRect()]);
	const out = [];
	for (let i = 0; i < ls.length; i++) for (let j = i + 1; j < ls.length; j++) {
		const [a, ra] = ls[i], [b, rb] = ls[j];
		if (ra.left < rb.right && rb.left < ra.right && ra.top < rb.bottom && rb.top < ra.bottom) out.push(a + " / " + b);
	}
	return out;
}
function broken() {
	const out = [];
	for (const cell of document.querySelectorAll("td, th")) {
		const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
		for (let n = walk.nextNode(); n; n = walk.nextNode()) {
			for (const m of n.data.matchAll(/\S*-\S*/g)) {
				const r = document.createRange();
				r.setStart(n, m.index);
				r.setEnd(n, m.index + m[0].length);
				const tops = new Set([...r.getClientRects()].map(q => Math.round(q.top)));
				if (tops.size > 1) out.push(m[0]);
			}
		}
	}
	return out;
}
`
