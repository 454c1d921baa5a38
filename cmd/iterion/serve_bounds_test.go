package main

import (
	"context"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// TestServeTakesEachSettingAtItsBound pins the accepting side of serve's
// bounds, as docs/operating.md and the flags' help state them: a value at
// a bound the rule includes is taken, not refused. TestServeValidates-
// ConfigNamingTheFlag pins the refusing side.
func TestServeTakesEachSettingAtItsBound(t *testing.T) {
	base := []string{"--forge-token", "t", "--api-token", "a"}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"sweep concurrency at its most: 1 to 4", append(base, "--sweep-concurrency", strconv.Itoa(server.MaxSweepConcurrency))},
		{"sweep time share of 1: at most 1", append(base, "--sweep-time-share", "1")},
		{"a full sync every board interval: at least --board-interval", append(base, "--board-interval", "10m", "--board-full-sync-every", "10m")},
		{"sweep interval at the lease's least TTL", append(base, "--sweep-interval", lease.MinTTL.String())},
		{"board interval at the lease's least TTL", append(base, "--board-interval", lease.MinTTL.String(), "--board-full-sync-every", lease.MinTTL.String())},
		{"large reads per address up to the large reads", append(base, "--large-webhook-reads", "3", "--large-webhook-reads-per-address", "3")},
		{"a forge timeout past the interval without the time budget: no interval stop to leave room for", append(base, "--sweep-no-time-budget", "--sweep-interval", "5s", "--forge-timeout", "6s")},
		{"webhook answer within just under GitHub's timeout", append(base, "--webhook-answer-within", (server.GitHubWebhookTimeout - time.Millisecond).String())},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := parseServe(c.args, env(), io.Discard); err != nil {
				t.Errorf("parseServe(%q) = %v, want it taken: a value at a bound the rule includes is a good setting", c.args, err)
			}
		})
	}
}

// TestServeRefusesEachSettingPastItsBound pins the refusing side of the
// bounds TestServeTakesEachSettingAtItsBound takes, where the bound
// itself is refused or the rule's limit is not the flag's zero.
func TestServeRefusesEachSettingPastItsBound(t *testing.T) {
	base := []string{"--forge-token", "t", "--api-token", "a"}
	// A sweep batch may keep its pass waiting this long, at a 6s deadline:
	// an interval of exactly that leaves the pass no room.
	wait := server.SweepBatchWait(time.Minute, 6*time.Second)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"write timeout equal to the store timeout: it must exceed it", append(base, "--write-timeout", "3s", "--store-timeout", "3s"), "--write-timeout 3s: want more than --store-timeout 3s"},
		{"a sweep interval of exactly one batch's wait", append(base, "--forge-timeout", "6s", "--sweep-interval", wait.String()), "--forge-timeout 6s: want it under --sweep-interval " + wait.String()},
		{"board interval under the lease's least TTL", append(base, "--board-interval", (lease.MinTTL - time.Microsecond).String()), "--board-interval"},
		{"App credentials without the App id", []string{"--api-token", "a", "--github-installation-id", "2", "--github-private-key-file", "k.pem"}, "--github-app-id 0: want a positive App id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := parseServe(c.args, env(), io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("parseServe(%q) = %v, want an error naming %s", c.args, err, c.want)
			}
		})
	}
}

// TestServeSweepReserveOfOneIsKept pins that every positive
// --sweep-reserve reaches the sweeper's lane: only 0 means none.
func TestServeSweepReserveOfOneIsKept(t *testing.T) {
	c, err := parseServe([]string{"--forge-token", "t", "--api-token", "a", "--sweep-reserve", "1"}, env(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{forge.LaneMergeGateSweeper: 1}
	if got := c.reserves(); !maps.Equal(got, want) {
		t.Errorf("reserves with --sweep-reserve 1: got %v, want %v: only 0 is no reserve", got, want)
	}
}

// TestServeSecretFilesAreTrimmedAndNeverBlank pins readSecretFile's two
// rules for every *-file flag: one trailing newline is trimmed, an
// editor's CRLF as well as LF, and a file holding only spaces is refused
// naming the file's flag; --api-token-file most of all, whose blank token
// no other check would catch (validate's blank check skips a secret read
// from a file).
func TestServeSecretFilesAreTrimmedAndNeverBlank(t *testing.T) {
	crlf := filepath.Join(t.TempDir(), "api-token")
	if err := os.WriteFile(crlf, []byte("api-s3cret\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := parseServe([]string{"--forge-token", "t", "--api-token-file", crlf}, env(), io.Discard)
	if err != nil || c.apiToken != "api-s3cret" {
		t.Errorf("--api-token-file holding %q: got %q (%v), want %q: a CRLF line end is trimmed as a LF is", "api-s3cret\r\n", c.apiToken, err, "api-s3cret")
	}
	_, err = parseServe([]string{"--forge-token", "t", "--api-token-file", writeSecret(t, "   ")}, env(), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--api-token-file") {
		t.Errorf("--api-token-file holding spaces: got %v, want an error naming --api-token-file: a blank secret is refused", err)
	}
}

// TestForgeSimTakesEachSettingAtItsBound pins the accepting side of
// forge-sim's checks: a budget of 0 (every request refused, as
// SetBudget and POST /_sim/budget take it), no tail, no installations.
// The context is done from the start, so a forge-sim that takes its
// settings stops at once and returns nil.
func TestForgeSimTakesEachSettingAtItsBound(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, args := range [][]string{{"--budget", "0"}, {"--latency-timeouts", "0"}, {"--installations", "0"}, {"--installation-users", "0"}} {
		if err := serveForgeSim(ctx, append(args, "--listen", "127.0.0.1:0"), io.Discard, io.Discard); err != nil {
			t.Errorf("forge-sim %v: got %v, want it taken: a value at a bound the rule includes is a good setting", args, err)
		}
	}
}

// TestForgeSimDefaultsAreTheDocumentedOnes pins two of the defaults
// docs/testing.md gives forge-sim: --listen 127.0.0.1:0, loopback only,
// since its control endpoints take any caller, and --budget 5000, GitHub's
// least hourly budget, which the published figures assume.
func TestForgeSimDefaultsAreTheDocumentedOnes(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // serve, print the URL and the settings, then stop
	var stdout, stderr strings.Builder
	if err := serveForgeSim(ctx, nil, &stdout, &stderr); err != nil {
		t.Fatalf("forge-sim: %v", err)
	}
	if !strings.HasPrefix(stdout.String(), "http://127.0.0.1:") {
		t.Errorf("forge-sim without --listen printed %q, want http://127.0.0.1:PORT: it listens on loopback by default", stdout.String())
	}
	if !strings.Contains(stderr.String(), " budget=5000 ") {
		t.Errorf("forge-sim without --budget logged %q, want budget=5000: the documented default", stderr.String())
	}
}
