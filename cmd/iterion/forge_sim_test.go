package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestForgeSimPrintsItsURLAndStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- serveForgeSim(ctx, []string{"--listen", "127.0.0.1:0", "--budget", "3"}, w, io.Discard)
		w.Close()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the URL line: %v", err)
	}
	url := strings.TrimSpace(line)
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("stdout: got %q, want the simulator's URL on one line", line)
	}

	seed, err := http.Post(url+"/_sim/repos/acme/app/pulls", "application/json", strings.NewReader(`{"number":12,"head_sha":"abc","state":"open"}`))
	if err != nil {
		t.Fatal(err)
	}
	seed.Body.Close()
	req, _ := http.NewRequest("GET", url+"/repos/acme/app/pulls/12", nil)
	req.Header.Set("Authorization", "token x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if seed.StatusCode != 204 || resp.StatusCode != 200 || resp.Header.Get("X-Ratelimit-Limit") != "3" {
		t.Fatalf("got seed %d, read %d with limit %q, want 204, 200 and limit 3: --budget sets each token's budget", seed.StatusCode, resp.StatusCode, resp.Header.Get("X-Ratelimit-Limit"))
	}
	st, err := http.Get(url + "/_sim/stats")
	if err != nil {
		t.Fatal(err)
	}
	var stats struct{ Requests []map[string]any }
	err = json.NewDecoder(st.Body).Decode(&stats)
	st.Body.Close()
	if err != nil || len(stats.Requests) != 2 {
		t.Fatalf("stats: got %v, %v, want the seed and the read", stats.Requests, err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("after cancel (SIGTERM): got %v, want a clean stop", err)
	}
}

// TestForgeSimShutdownEndsTheModelledWaits: at SIGTERM, a request the
// latency model holds for minutes ends at once, unanswered, and forge-sim
// stops cleanly (exit 0) rather than failing its shutdown's deadline.
func TestForgeSimShutdownEndsTheModelledWaits(t *testing.T) {
	// A REST answer of 5 s of GitHub's time, in a simulator whose minute is
	// an hour: a 5-minute wait.
	url, stop := startForgeSim(t, "--latency", "--latency-rest", "5s", "--latency-timeouts", "0", "--minute", "1h")
	answered := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest("GET", url+"/repos/acme/app/pulls/1", nil)
		req.Header.Set("Authorization", "token t")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	// The simulator counts a request before its wait: once counted, it is
	// in flight.
	for waiting := false; !waiting; {
		var stats struct{ Requests []struct{ Route string } }
		st, _ := http.NewRequest("GET", url+"/_sim/stats", nil)
		if err := doJSON(st, &stats); err != nil {
			t.Fatal(err)
		}
		for _, rc := range stats.Requests {
			waiting = waiting || rc.Route == "GET /repos/{owner}/{repo}/pulls/{number}"
		}
	}
	stop() // fails the test unless forge-sim stops cleanly
	if err := <-answered; err == nil {
		t.Errorf("the request in its wait: got an answer, want none: the shutdown ends it unanswered, never answered before its time")
	}
}

// TestForgeSimRejectsBadFlags pins that a bad setting exits 2 naming its
// flag, before the simulator listens: a --listen net.Listen cannot use
// (or a forgotten port), a --webhook-url or --app-id the simulator
// refuses, as much as a bad count or duration.
func TestForgeSimRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--budget", "-1"}, {"--token-ttl", "0s"}, {"--minute", "0s"}, {"--listen", "nonsense"},
		{"--listen", "127.0.0.1:99999"}, {"--listen", "127.0.0.1:"},
		{"--latency-timeouts", "0.7"}, {"--latency-rest", "-1s", "--latency"}, {"--latency-502-share", "2", "--latency"},
		{"--latency-rest", "-1s"}, {"--latency-graphql-node", "-1ms"}, {"--latency-502-share", "-0.5"}, // named with the model off too
		{"--graphql-limit-answer", "204"}, {"--installation-repos", "-1"}, {"--installations", "-1"},
		{"--repos-per-installation", "2"}, {"--webhook-url", "ftp://x"}, {"--app-id", "-1"}, {"--graphql-502-share", "1.5"},
		{"--latency-timeouts", "0.5"}, // TailFor makes no tail of 0.5: refused, not silently none
		{"--installation-users", "-1"}} {
		// A bad flag refuses at once; one taken would serve until ctx ends
		// and return nil, failing the test rather than hanging it.
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		if !slices.Contains(args, "--listen") {
			args = append(args, "--listen", "127.0.0.1:0")
		}
		err := serveForgeSim(ctx, args, io.Discard, io.Discard)
		cancel()
		if err == nil {
			t.Errorf("forge-sim %v: got no error, want one naming the flag", args)
		} else if !strings.Contains(err.Error(), strings.TrimPrefix(args[0], "--")) {
			t.Errorf("forge-sim %v: got %v, want it to name %s", args, err, args[0])
		} else if code := exitCode(io.Discard, "forge-sim", err); code != 2 {
			t.Errorf("forge-sim %v: exit %d (%v), want 2: a bad setting is a usage error", args, code, err)
		}
	}
}

func TestForgeSimFlagsTurnTheLatencyModelAndInstallationScalingOn(t *testing.T) {
	url, stop := startForgeSim(t, "--latency", "--latency-rest", "300ms", "--latency-timeouts", "0",
		"--minute", "600ms", "--installation-repos", "30")
	claims := base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"1"}`))
	req, _ := http.NewRequest("POST", url+"/app/installations/7/access_tokens", nil)
	req.Header.Set("Authorization", "Bearer e30."+claims+".sig")
	var minted struct{ Token string }
	if err := doJSON(req, &minted); err != nil || minted.Token == "" {
		t.Fatalf("minting an installation token: got %+v, %v", minted, err)
	}
	req, _ = http.NewRequest("GET", url+"/repos/acme/app/pulls/1", nil)
	req.Header.Set("Authorization", "token "+minted.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Ratelimit-Limit"); got != "5500" {
		t.Errorf("an installation's budget: got %s, want 5500: --installation-repos 30 scales it by 50 a repository over 20", got)
	}
	var stats struct {
		Requests []struct {
			Route   string
			Seconds float64
		}
	}
	st, _ := http.NewRequest("GET", url+"/_sim/stats", nil)
	if err := doJSON(st, &stats); err != nil || len(stats.Requests) != 2 {
		t.Fatalf("stats: got %+v, %v, want the mint and the read", stats.Requests, err)
	}
	for _, rc := range stats.Requests {
		if rc.Seconds != 0.3 {
			t.Errorf("stats of %s: got %v s, want 0.3 s: --latency turns the model on, --latency-rest sets a REST answer's time", rc.Route, rc.Seconds)
		}
	}
	stop()
}

func TestForgeSimGraphQL502ShareInjectsBadGateways(t *testing.T) {
	url, stop := startForgeSim(t, "--graphql-502-share", "1")
	req, _ := http.NewRequest("POST", url+"/graphql", strings.NewReader(`{"query":"{ viewer { login } }"}`))
	req.Header.Set("Authorization", "token t")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("a query with --graphql-502-share 1: got %d, want 502", resp.StatusCode)
	}
	stop()
}

func TestForgeSimStartsWithTheInstallationsItIsGiven(t *testing.T) {
	url, stop := startForgeSim(t, "--installations", "3", "--repos-per-installation", "2")
	var got []struct {
		ID           int64
		Account      string
		Repositories []string
	}
	req, _ := http.NewRequest("GET", url+"/_sim/installations", nil)
	if err := doJSON(req, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[1].ID != 2 || got[1].Account != "org-2" || strings.Join(got[1].Repositories, ",") != "org-2/repo-1,org-2/repo-2" {
		t.Fatalf("installations: got %+v, want 1..3, installation i on org-<i> owning org-<i>/repo-1 and org-<i>/repo-2", got)
	}
	stop()
}

// startForgeSim runs forge-sim with args until stop, which fails the test
// unless it then stops cleanly, and returns the URL it printed.
func startForgeSim(t *testing.T, args ...string) (url string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- serveForgeSim(ctx, args, w, io.Discard)
		w.Close()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the URL line: %v", err)
	}
	return strings.TrimSpace(line), func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("after cancel: got %v, want a clean stop", err)
		}
	}
}

// doJSON sends req and decodes its JSON answer into v.
func doJSON(req *http.Request, v any) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// TestForgeSimLatencyPerQueryDrawsByTheQuery pins --latency-per-query: two
// installations sending the same GraphQL query once each meet the same
// draw of its time; without the flag, the second sending is the stream's
// next draw.
func TestForgeSimLatencyPerQueryDrawsByTheQuery(t *testing.T) {
	graphqlSeconds := func(flags ...string) map[string]float64 {
		url, stop := startForgeSim(t, append([]string{"--latency", "--latency-seed", "3", "--minute", "60ms"}, flags...)...)
		defer stop()
		for _, token := range []string{"a", "b"} {
			req, _ := http.NewRequest("POST", url+"/graphql", strings.NewReader(`{"query":"{ viewer { login } }"}`))
			req.Header.Set("Authorization", "token "+token)
			var answer map[string]any
			if err := doJSON(req, &answer); err != nil {
				t.Fatalf("query as %s: %v", token, err)
			}
		}
		var stats struct {
			CPUMinutes []struct {
				Principal, Resource string
				Seconds             float64
			} `json:"cpu_minutes"`
		}
		st, _ := http.NewRequest("GET", url+"/_sim/stats", nil)
		if err := doJSON(st, &stats); err != nil {
			t.Fatal(err)
		}
		secs := map[string]float64{}
		for _, m := range stats.CPUMinutes {
			if m.Resource == "graphql" {
				secs[m.Principal] += m.Seconds
			}
		}
		if len(secs) != 2 {
			t.Fatalf("GraphQL minutes %+v, want one for each of 2 principals", stats.CPUMinutes)
		}
		return secs
	}
	distinct := func(secs map[string]float64) int {
		seen := map[float64]bool{}
		for _, s := range secs {
			seen[s] = true
		}
		return len(seen)
	}
	if got := graphqlSeconds("--latency-per-query"); distinct(got) != 1 {
		t.Errorf("--latency-per-query: the same query's time by principal %v, want one time: each principal's first sending draws alike", got)
	}
	if got := graphqlSeconds(); distinct(got) != 2 {
		t.Errorf("without --latency-per-query: %v, want two times: one stream, two draws", got)
	}
}

// TestForgeSimRefusesWebPages pins that forge-sim, on 127.0.0.1, serves
// programs and not the web pages a developer's browser opens: a request
// carrying Origin (a page on another site posting a text/plain body the
// control API would read as JSON) and one naming a Host that is not an IP
// address or localhost (a page whose name was rebound to 127.0.0.1) are
// 403 and change nothing; a program's request, by IP or by localhost, is
// served.
func TestForgeSimRefusesWebPages(t *testing.T) {
	url, stop := startForgeSim(t, "--budget", "3")
	defer stop()
	budget := func(header map[string]string, host string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", url+"/_sim/budget", strings.NewReader(`{"limit":1}`))
		req.Header.Set("Content-Type", "text/plain")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	limit := func() string {
		t.Helper()
		req, _ := http.NewRequest("GET", url+"/repos/acme/app/pulls/1", nil)
		req.Header.Set("Authorization", "token x")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("X-Ratelimit-Limit")
	}
	for _, c := range []struct {
		why    string
		header map[string]string
		host   string
	}{
		{"a cross-site page's POST", map[string]string{"Origin": "https://evil.example"}, ""},
		{"a page rebound to 127.0.0.1", nil, "evil.example:8090"},
		{"a rebound page's same-origin POST", map[string]string{"Origin": "http://evil.example:8090"}, "evil.example:8090"},
	} {
		if code := budget(c.header, c.host); code != http.StatusForbidden {
			t.Errorf("%s: got %d, want 403", c.why, code)
		}
	}
	if got := limit(); got != "3" {
		t.Errorf("budget after the refused requests: got %q, want 3: a refused request changes nothing", got)
	}
	for _, host := range []string{"", "localhost:8090"} {
		if code := budget(nil, host); code != http.StatusNoContent {
			t.Errorf("a program's POST (Host %q): got %d, want 204", host, code)
		}
	}
}
