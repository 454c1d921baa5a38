package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"iterion.dev/iterion/internal/testing/doctable"
	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/lease/mongolease"
	"iterion.dev/iterion/pkg/server"
)

// env is a fake environment for serve's and leases' variable twins.
func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestServeValidatesConfigNamingTheFlag(t *testing.T) {
	base := []string{"--forge-token", "t", "--api-token", "a"}
	for _, c := range []struct {
		name string
		args []string
		env  func(string) string
		want string
	}{
		{"api token missing", []string{"--forge-token", "t"}, env(), "--api-token"},
		{"no forge credential", []string{"--api-token", "a"}, env(), "--forge-token"},
		{"token and app", append(base, "--github-app-id", "1"), env(), "--github-app-*"},
		{"app installation negative", []string{"--api-token", "a", "--github-app-id", "1", "--github-installation-id", "-2", "--github-private-key-file", "k.pem"}, env(), "--github-installation-id -2"},
		{"sweep shards zero", append(base, "--sweep-shards", "0"), env(), "--sweep-shards 0"},
		{"installation concurrency zero", append(base, "--installation-concurrency", "0"), env(), "--installation-concurrency 0"},
		{"sweep time share zero", append(base, "--sweep-time-share", "0"), env(), "--sweep-time-share 0"},
		{"sweep time share over 1", append(base, "--sweep-time-share", "1.5"), env(), "--sweep-time-share 1.5"},
		{"sweep concurrency zero", append(base, "--sweep-concurrency", "0"), env(), "--sweep-concurrency 0"},
		{"sweep concurrency over the bound", append(base, "--sweep-concurrency", "5"), env(), "--sweep-concurrency 5: want 1 to 4"},
		{"sweep reserve negative", append(base, "--sweep-reserve", "-1"), env(), "--sweep-reserve -1: want 0 (none) or more"},
		{"forge minute zero", append(base, "--forge-minute", "0"), env(), "--forge-minute 0s: want a positive duration"},
		{"app without key", []string{"--api-token", "a", "--github-app-id", "1", "--github-installation-id", "2"}, env(), "--github-private-key-file"},
		{"sweep interval zero", append(base, "--sweep-interval", "0s"), env(), "--sweep-interval"},
		{"sweep interval not a duration", append(base, "--sweep-interval", "often"), env(), "sweep-interval"},
		{"forge url relative", append(base, "--forge-url", "api.example"), env(), "--forge-url"},
		{"mongo uri not mongodb", append(base, "--mongo-uri", "http://db"), env(), "--mongo-uri"},
		{"mongo uri without a host", append(base, "--mongo-uri", "mongodb://"), env(), `--mongo-uri "mongodb://": error parsing uri: must have at least 1 host`},
		{"mongo uri port out of range", append(base, "--mongo-uri", "mongodb://db:99999/"), env(), `--mongo-uri "mongodb://db:99999/": error parsing uri`},
		{"mongo uri option not a number", append(base, "--mongo-uri", "mongodb://db/?serverSelectionTimeoutMS=soon"), env(), `--mongo-uri "mongodb://db/?serverSelectionTimeoutMS=soon": error parsing uri: invalid value for "serverSelectionTimeoutMS"`},
		{"mongo uri direct to two hosts", append(base, "--mongo-uri", "mongodb://db1,db2/?directConnection=true"), env(), `--mongo-uri "mongodb://db1,db2/?directConnection=true": error validating uri`},
		{"mongo uri twin without a host", base, env("ITERION_MONGO_URI", "mongodb://"), `--mongo-uri "mongodb://"`},
		{"mongo db with a dot", append(base, "--mongo-uri", "mongodb://db", "--mongo-db", "prod.iterion"), env(), `--mongo-db "prod.iterion"`},
		{"mongo db with a slash", append(base, "--mongo-uri", "mongodb://db", "--mongo-db", "a/b"), env(), `--mongo-db "a/b"`},
		{"mongo db with a space", append(base, "--mongo-uri", "mongodb://db", "--mongo-db", "a b"), env(), `--mongo-db "a b"`},
		{"mongo db with a dollar", append(base, "--mongo-uri", "mongodb://db", "--mongo-db", "a$b"), env(), `--mongo-db "a$b"`},
		{"mongo db of 64 bytes", append(base, "--mongo-uri", "mongodb://db", "--mongo-db", strings.Repeat("d", 64)), env(), "--mongo-db"},
		{"webhook secret blank", append(base, "--webhook-secret", "  "), env(), "--webhook-secret (ITERION_WEBHOOK_SECRET) is blank"},
		{"webhook secret twin blank", base, env("ITERION_WEBHOOK_SECRET", " "), "--webhook-secret (ITERION_WEBHOOK_SECRET) is blank"},
		{"forge token blank", []string{"--forge-token", "  ", "--api-token", "a"}, env(), "--forge-token (ITERION_FORGE_TOKEN) is blank"},
		{"pages token blank", append(base, "--pages-token", " "), env(), "--pages-token (ITERION_PAGES_TOKEN) is blank"},
		{"log format", append(base, "--log-format", "xml"), env(), "--log-format"},
		{"sweep mode unknown", append(base, "--sweep-mode", "graphql"), env(), `--sweep-mode "graphql"`},
		{"measure group shards negative", append(base, "--measure-group-shards", "-1"), env(), "--measure-group-shards -1"},
		{"env twin bad", base, env("ITERION_SWEEP_INTERVAL", "soon"), "ITERION_SWEEP_INTERVAL"},
		{"env twin bad bool", base, env("ITERION_NO_LEASE", "maybe"), "ITERION_NO_LEASE"},
		{"stray argument", append(base, "extra"), env(), `"extra"`},
		{"store timeout zero", append(base, "--store-timeout", "0s"), env(), "--store-timeout"},
		{"pages token and public pages", append(base, "--pages-token", "p", "--public-pages"), env(), "--public-pages"},
		{"allowed host with a scheme", append(base, "--allowed-hosts", "iterion.example.com,https://iterion.example.com"), env(), `--allowed-hosts entry "https://iterion.example.com"`},
		{"allowed host a wildcard", append(base, "--allowed-hosts", "*.example.com"), env(), `--allowed-hosts entry "*.example.com"`},
		{"allowed host twin with port 0", base, env("ITERION_ALLOWED_HOSTS", "iterion.example.com:0"), `--allowed-hosts entry "iterion.example.com:0"`},
		{"listen without a colon", append(base, "--listen", "8080"), env(), `--listen "8080": want HOST:PORT or :PORT`},
		{"listen port out of range", append(base, "--listen", ":99999"), env(), `--listen ":99999": want a port from 0 to 65535`},
		{"listen port negative", append(base, "--listen", "127.0.0.1:-1"), env(), `--listen "127.0.0.1:-1": want a port from 0 to 65535`},
		{"listen with a part too many", append(base, "--listen", "host:8080:extra"), env(), `--listen "host:8080:extra": want HOST:PORT or :PORT`},
		{"listen without a port", append(base, "--listen", ":"), env(), `--listen ":": want HOST:PORT or :PORT: no port`},
		{"listen host without a port", append(base, "--listen", "localhost:"), env(), `--listen "localhost:": want HOST:PORT or :PORT: no port`},
		{"listen an unknown service name", append(base, "--listen", ":no-such-service"), env(), `--listen ":no-such-service": want a port from 0 to 65535 or a service name`},
		{"listen twin without a colon", base, env("ITERION_LISTEN", "8080"), `--listen "8080"`},
		{"listen bad, probe address too", append(base, "--listen", "8080", "--probe-addr", "8081"), env(), `--probe-addr "8081"`},
		{"probe address without a port", append(base, "--probe-addr", "8081"), env(), `--probe-addr "8081"`},
		{"probe address port out of range", append(base, "--probe-addr", ":70000"), env(), `--probe-addr ":70000": want a port from 0 to 65535`},
		{"probe address without a port after the colon", append(base, "--probe-addr", ":"), env(), `--probe-addr ":": want HOST:PORT or :PORT: no port`},
		{"probe address the listen port as a service name", append(base, "--listen", ":http", "--probe-addr", ":80"), env(), `--probe-addr ":80": want another address than --listen ":http": both bind port 80`},
		{"probe address a service name of the listen port", append(base, "--listen", "127.0.0.1:443", "--probe-addr", "localhost:https"), env(), `--probe-addr "localhost:https": want another address than --listen "127.0.0.1:443": both bind port 443`},
		{"probe address the listen address", append(base, "--listen", ":8080", "--probe-addr", ":8080"), env(), `--probe-addr ":8080": want another address than --listen ":8080"`},
		{"probe address the listen address as 0.0.0.0", append(base, "--listen", ":8080", "--probe-addr", "0.0.0.0:8080"), env(), `--probe-addr "0.0.0.0:8080": want another address than --listen ":8080"`},
		{"probe address the listen address as [::]", append(base, "--listen", ":8080", "--probe-addr", "[::]:8080"), env(), `--probe-addr "[::]:8080": want another address than --listen ":8080"`},
		{"probe address the default listen address as 0.0.0.0", append(base, "--probe-addr", "0.0.0.0:8080"), env(), `--probe-addr "0.0.0.0:8080": want another address than --listen ":8080"`},
		{"probe address on the port listen binds everywhere", append(base, "--listen", "[::]:8080", "--probe-addr", "127.0.0.1:8080"), env(), `--probe-addr "127.0.0.1:8080": want another address than --listen "[::]:8080"`},
		{"probe address everywhere on the listen port", append(base, "--listen", "10.0.0.5:8080", "--probe-addr", ":8080"), env(), `--probe-addr ":8080": want another address than --listen "10.0.0.5:8080"`},
		{"probe address localhost, listen 127.0.0.1", append(base, "--listen", "127.0.0.1:8080", "--probe-addr", "localhost:8080"), env(), `--probe-addr "localhost:8080": want another address than --listen "127.0.0.1:8080"`},
		{"probe address 127.0.0.1, listen localhost", append(base, "--listen", "localhost:8080", "--probe-addr", "127.0.0.1:8080"), env(), `--probe-addr "127.0.0.1:8080": want another address than --listen "localhost:8080"`},
		{"probe address the IPv4-mapped unspecified address on the listen port", append(base, "--listen", "127.0.0.1:8080", "--probe-addr", "[::ffff:0.0.0.0]:8080"), env(), `--probe-addr "[::ffff:0.0.0.0]:8080": want another address than --listen "127.0.0.1:8080"`},
		{"probe address localhost in capitals, listen 127.0.0.1", append(base, "--listen", "127.0.0.1:8080", "--probe-addr", "LocalHost:8080"), env(), `--probe-addr "LocalHost:8080": want another address than --listen "127.0.0.1:8080"`},
		{"probe address twin an IPv4-mapped listen address", base, env("ITERION_LISTEN", "127.0.0.1:8080", "ITERION_PROBE_ADDR", "[::ffff:127.0.0.1]:8080"), `--probe-addr "[::ffff:127.0.0.1]:8080": want another address than --listen "127.0.0.1:8080"`},
		{"forge timeout negative", append(base, "--forge-timeout", "-1s"), env(), "--forge-timeout"},
		{"forge timeout leaves the sweep no room", append(base, "--sweep-interval", "5s", "--forge-timeout", "6s"), env(), "--forge-timeout 6s: want it under --sweep-interval 5s"},
		{"delivery window zero", append(base, "--delivery-window", "0s"), env(), "--delivery-window"},
		{"max connections zero", append(base, "--max-connections", "0"), env(), "--max-connections 0: want a positive value"},
		{"max connections negative twin", base, env("ITERION_MAX_CONNECTIONS", "-1"), "--max-connections -1: want a positive value"},
		{"read timeout zero", append(base, "--read-timeout", "0s"), env(), "--read-timeout"},
		{"read header timeout negative", append(base, "--read-header-timeout", "-1s"), env(), "--read-header-timeout"},
		{"idle timeout zero", append(base, "--idle-timeout", "0s"), env(), "--idle-timeout"},
		{"max header bytes zero", append(base, "--max-header-bytes", "0"), env(), "--max-header-bytes"},
		{"run body zero", append(base, "--max-run-body-bytes", "0"), env(), "--max-run-body-bytes"},
		{"min webhook body rate zero", append(base, "--min-webhook-body-rate", "0"), env(), "--min-webhook-body-rate"},
		{"slow body grace negative", append(base, "--slow-body-grace", "-1s"), env(), "--slow-body-grace"},
		{"large webhook reads zero", append(base, "--large-webhook-reads", "0"), env(), "--large-webhook-reads"},
		{"large webhook reads per address zero", append(base, "--large-webhook-reads-per-address", "0"), env(), "--large-webhook-reads-per-address 0"},
		{"large webhook reads per address over the reads", append(base, "--large-webhook-reads", "2", "--large-webhook-reads-per-address", "3"), env(), "--large-webhook-reads-per-address 3: want at most --large-webhook-reads 2"},
		{"webhook answer within zero", append(base, "--webhook-answer-within", "0s"), env(), "--webhook-answer-within 0s"},
		{"webhook answer within GitHub's timeout", append(base, "--webhook-answer-within", "10s"), env(), "--webhook-answer-within 10s"},
		{"webhook answer within twin past GitHub's timeout", base, env("ITERION_WEBHOOK_ANSWER_WITHIN", "12s"), "--webhook-answer-within 12s"},
		{"write timeout under store timeout", append(base, "--write-timeout", "2s", "--store-timeout", "3s"), env(), "--write-timeout"},
		{"env twin of a limit bad", base, env("ITERION_STORE_TIMEOUT", "soon"), "ITERION_STORE_TIMEOUT"},
		{"api token and its file", append(base, "--api-token-file", "x"), env(), "--api-token (ITERION_API_TOKEN) and --api-token-file"},
		{"forge token and its file twin", base, env("ITERION_FORGE_TOKEN_FILE", "x"), "--forge-token (ITERION_FORGE_TOKEN) and --forge-token-file"},
		{"secret file missing", []string{"--forge-token", "t", "--api-token-file", "/nonexistent/api-token"}, env(), "--api-token-file"},
		{"token sharing without App mode", append(base, "--share-installation-tokens=false"), env(), "--share-installation-tokens is set without App mode"},
		{"token sharing twin with one installation", []string{"--api-token", "a", "--github-app-id", "1", "--github-installation-id", "2", "--github-private-key-file", "k.pem"}, env("ITERION_SHARE_INSTALLATION_TOKENS", "true"), "--share-installation-tokens"},
		{"token sharing twin not a bool", []string{"--api-token", "a", "--github-app-id", "1", "--github-private-key-file", "k.pem"}, env("ITERION_SHARE_INSTALLATION_TOKENS", "sometimes"), "ITERION_SHARE_INSTALLATION_TOKENS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseServe(c.args, c.env, io.Discard)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("parseServe(%q) = %v, want an error naming %s: config is validated at start", c.args, err, c.want)
			}
		})
	}
}

// TestServeTakesAProbeAddrOnAnotherSocket pins the other side of the
// check against --listen: a --probe-addr that binds another socket is
// taken, with no DNS asked. Each row is a pair both of which net.Listen
// binds at once.
func TestServeTakesAProbeAddrOnAnotherSocket(t *testing.T) {
	base := []string{"--forge-token", "t", "--api-token", "a"}
	for _, c := range []struct{ listen, probe, why string }{
		{":8080", ":8081", "another port"},
		{":0", ":0", "port 0: each listener its own free port"},
		{"0.0.0.0:0", "127.0.0.1:0", "port 0 everywhere and on loopback"},
		{"127.0.0.1:8080", "[::1]:8080", "two loopback addresses, IPv4 and IPv6"},
		{"10.0.0.5:8080", "127.0.0.1:8080", "two addresses of the machine"},
		{"localhost:8080", "[::1]:8080", "localhost is taken as 127.0.0.1, the address net.Listen binds for it"},
		{"iterion.internal:8080", "10.0.0.5:8080", "a host name other than localhost is not resolved"},
		{":http", ":https", "two service names, two ports (80 and 443)"},
		{":http", ":8080", "a service name is its port, not another one"},
	} {
		t.Run(c.why, func(t *testing.T) {
			args := append(base, "--listen", c.listen, "--probe-addr", c.probe)
			if _, err := parseServe(args, env(), io.Discard); err != nil {
				t.Errorf("parseServe(--listen %s --probe-addr %s) = %v, want it taken: %s", c.listen, c.probe, err, c.why)
			}
		})
	}
}

// TestServeMalformedListenIsABadSetting pins that a --listen net.Listen
// cannot use is found with the other settings, before the stores are
// opened or anything binds, and exits 2 naming the flag, not 1 at the
// bind (or, for ":", a listener on a random port). The context is done
// from the start, so serve would return at once had it started.
func TestServeMalformedListenIsABadSetting(t *testing.T) {
	for _, listen := range []string{"8080", ":99999", "host:8080:extra", ":"} {
		t.Run(listen, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			var msg strings.Builder
			err := serve(ctx, []string{"--forge-token", "t", "--api-token", "a", "--listen", listen}, env(), io.Discard)
			if code := exitCode(&msg, "serve", err); code != 2 || !strings.Contains(msg.String(), "--listen "+strconv.Quote(listen)) {
				t.Errorf("serve --listen %q: exit %d, %q; want exit 2 naming --listen: a malformed address is a bad setting", listen, code, msg.String())
			}
		})
	}
}

// TestServeRefusesAPrivateKeyItCannotUse pins that the App's private key
// is a setting like the others: --github-private-key-file naming a file
// serve cannot read, or one holding no PEM RSA private key, is reported
// by parseServe with the other bad settings, naming the flag, and exits
// 2; it is not found only once the stores are open, alone, exiting 1.
func TestServeRefusesAPrivateKeyItCannotUse(t *testing.T) {
	notAKey := writeSecret(t, "-----BEGIN NOTHING-----")
	for _, c := range []struct {
		name, file, want string
	}{
		{"no such file", filepath.Join(t.TempDir(), "missing.pem"), "--github-private-key-file: open "},
		{"not a PEM RSA key", notAKey, "--github-private-key-file " + strconv.Quote(notAKey) + ": want the App's PEM-encoded RSA private key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseServe([]string{"--api-token", "a", "--github-app-id", "1", "--github-private-key-file", c.file, "--store-timeout", "0s"}, env(), io.Discard)
			for _, want := range []string{c.want, "--store-timeout", "2 settings"} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("parseServe = %v, want the bad settings reported together, %q among them", err, want)
				}
			}
			if code := exitCode(io.Discard, "serve", err); code != 2 {
				t.Errorf("exit code %d, want 2: a private key serve cannot use is a bad setting", code)
			}
		})
	}
	if _, err := parseServe([]string{"--api-token", "a", "--github-app-id", "1", "--github-private-key-file", writeSecret(t, string(forgetest.AppKey(t)))}, env(), io.Discard); err != nil {
		t.Errorf("parseServe with a PEM RSA key (and a trailing newline, as a Secret's file has) = %v, want nil", err)
	}
}

// TestServeAppModeIsAppCredentialsWithoutInstallation pins how serve tells
// its modes apart: App credentials without --github-installation-id serve
// every installation of the App; with one, that installation alone; a
// token, the token's repositories. The shard and concurrency settings
// default to the server's defaults.
func TestServeAppModeIsAppCredentialsWithoutInstallation(t *testing.T) {
	key := writeSecret(t, string(forgetest.AppKey(t)))
	for _, c := range []struct {
		name string
		args []string
		app  bool
	}{
		{"app without installation", []string{"--github-app-id", "1", "--github-private-key-file", key}, true},
		{"app with installation", []string{"--github-app-id", "1", "--github-installation-id", "2", "--github-private-key-file", key}, false},
		{"token", []string{"--forge-token", "t"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseServe(append([]string{"--api-token", "a"}, c.args...), env(), io.Discard)
			if err != nil {
				t.Fatalf("parseServe: %v", err)
			}
			if got.appMode() != c.app {
				t.Errorf("appMode() = %v, want %v", got.appMode(), c.app)
			}
			if got.sweepShards != server.DefaultSweepShards || got.instConc != server.DefaultInstallationConcurrency {
				t.Errorf("--sweep-shards %d, --installation-concurrency %d, want the defaults %d and %d",
					got.sweepShards, got.instConc, server.DefaultSweepShards, server.DefaultInstallationConcurrency)
			}
		})
	}
}

// TestServeWebhookDefaultsAreTheServers pins serve's defaults of the
// webhook answer's deadline and the large reads one address may hold: the
// server's, 8 s (under GitHub's 10 s) and 1.
func TestServeWebhookDefaultsAreTheServers(t *testing.T) {
	got, err := parseServe([]string{"--api-token", "a", "--forge-token", "t"}, env(), io.Discard)
	if err != nil {
		t.Fatalf("parseServe: %v", err)
	}
	if got.answerWithin != server.DefaultWebhookAnswerWithin || got.limits.LargeWebhookReadsPerAddress != server.DefaultLimits.LargeWebhookReadsPerAddress {
		t.Errorf("--webhook-answer-within %v, --large-webhook-reads-per-address %d, want the server's defaults %v and %d",
			got.answerWithin, got.limits.LargeWebhookReadsPerAddress, server.DefaultWebhookAnswerWithin, server.DefaultLimits.LargeWebhookReadsPerAddress)
	}
}

// TestServeListsEveryBadSettingAtOnce pins that serve reports all its
// missing and invalid settings in one error, each naming its flag (or
// variable), rather than one per attempt; and that it is a usage error,
// which exits 2.
func TestServeListsEveryBadSettingAtOnce(t *testing.T) {
	_, err := parseServe([]string{"--log-format", "xml", "--store-timeout", "0s", "--board-repos", "nope"},
		env("ITERION_SWEEP_INTERVAL", "soon"), io.Discard)
	want := []string{"--api-token", "--forge-token", "--log-format", "--store-timeout", `--board-repos entry "nope"`, "ITERION_SWEEP_INTERVAL", "6 settings"}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("parseServe = %v, want one error naming every bad setting, %s among them", err, w)
		}
	}
	if code := exitCode(io.Discard, "serve", err); code != 2 {
		t.Errorf("exit code %d, want 2: bad settings are a usage error", code)
	}
}

func TestServeEnvironmentTwins(t *testing.T) {
	c, err := parseServe([]string{"--sweep-interval", "2m"}, env(
		"ITERION_API_TOKEN", "from-env", "ITERION_FORGE_TOKEN", "tok", "ITERION_SWEEP_INTERVAL", "5m",
		"ITERION_NO_LEASE", "true", "ITERION_LISTEN", "127.0.0.1:9999", "ITERION_WEBHOOK_SECRET", "s",
		"ITERION_MONGO_URI", "mongodb://db:27017/"), io.Discard)
	if err != nil {
		t.Fatalf("parseServe: %v", err)
	}
	if c.apiToken != "from-env" || c.forgeToken != "tok" || !c.noLease || c.listen != "127.0.0.1:9999" || c.webhookSecret != "s" || c.mongoURI != "mongodb://db:27017/" {
		t.Errorf("config %+v, want each value from its ITERION_* twin when the flag is absent", c)
	}
	if c.sweepInterval != 2*time.Minute {
		t.Errorf("sweep interval %v, want 2m: a flag given on the command line wins over its variable", c.sweepInterval)
	}
}

// TestServeFlagsTableMatchesTheFlags pins docs/operating.md's table of
// serve's flags to serve itself: every flag serve defines has a row, every
// flag a row names exists, each variable a row names is its flag's
// ITERION_* twin, in the same order, and each default the row gives is the
// flag's (see docDefaultIs).
func TestServeFlagsTableMatchesTheFlags(t *testing.T) {
	fs := newFlagSet("serve", serveHelp, io.Discard)
	envOf := serveFlags(fs, &serveConfig{})
	documented := map[string]bool{}
	for _, row := range doctable.Rows(t, "operating.md", "| flag | variable | default | meaning |") {
		var flags []string
		for _, f := range doctable.Ticked(row[0]) {
			flags = append(flags, strings.TrimPrefix(f, "--"))
		}
		vars := doctable.Ticked(row[1])
		defaults := []string{row[2]} // prose: "0: none", "true"
		if strings.HasPrefix(row[2], "`") {
			defaults = doctable.Ticked(row[2]) // `5s`, `20s`: one a flag
		}
		for i, name := range flags {
			documented[name] = true
			f := fs.Lookup(name)
			if f == nil {
				t.Errorf("docs/operating.md documents --%s, which serve does not define", name)
				continue
			}
			if i < len(vars) && vars[i] != envOf[name] {
				t.Errorf("docs/operating.md gives --%s the variable %s, want %s", name, vars[i], envOf[name])
			}
			def := defaults[0] // one default for every flag of the row
			if len(defaults) == len(flags) {
				def = defaults[i]
			}
			if !docDefaultIs(def, f) {
				t.Errorf("docs/operating.md gives --%s the default %q, want %q (serve -h): the table states each flag's default", name, def, f.DefValue)
			}
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !documented[f.Name] {
			t.Errorf("serve defines --%s, which docs/operating.md's table of flags does not list", f.Name)
		}
	})
}

// docDefaultIs reports whether the default cell of docs/operating.md's
// table of flags states f's default. A prose cell's value is its first
// word ("0: none" and "0 (64 MiB)" are 0); "none", "required" or an empty cell state the zero
// value (no default); durations compare as durations (`60s` is 1m0s)
// and names without case (`info` is INFO). A flag without a default
// whose usage says "absent: X" has the default X in the table.
func docDefaultIs(cell string, f *flag.Flag) bool {
	v, _, _ := strings.Cut(cell, ": ")
	v, _, _ = strings.Cut(strings.TrimSpace(v), " ")
	want := f.DefValue
	switch {
	case v == "none" || v == "required" || v == "":
		return want == "" || want == "0" || want == "false"
	case want == "" && strings.Contains(f.Usage, "absent: "+v):
		return true
	}
	if d, err := time.ParseDuration(v); err == nil {
		w, err := time.ParseDuration(want)
		return err == nil && d == w
	}
	return strings.EqualFold(v, want)
}

// logLines collects a serve's log lines and lets a test wait for one.
type logLines struct {
	mu    sync.Mutex
	lines []string
	more  chan struct{} // closed and replaced on each line
}

func captureLog(t *testing.T) (io.WriteCloser, *logLines) {
	r, w := io.Pipe()
	l := &logLines{more: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			l.mu.Lock()
			l.lines = append(l.lines, sc.Text())
			close(l.more)
			l.more = make(chan struct{})
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.Close() })
	return w, l
}

// waitFor returns the first log line containing sub, failing the test if
// none comes within 30 seconds.
func (l *logLines) waitFor(t *testing.T, sub string) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for seen := 0; ; {
		l.mu.Lock()
		for ; seen < len(l.lines); seen++ {
			if strings.Contains(l.lines[seen], sub) {
				line := l.lines[seen]
				l.mu.Unlock()
				return line
			}
		}
		more := l.more
		l.mu.Unlock()
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("no log line with %q in 30s; log:\n%s", sub, l.String())
		}
	}
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// startServe runs serve with args until the returned stop is called; it
// returns the base URL once serve logs that it listens.
func startServe(t *testing.T, args []string) (url string, log *logLines, stop func() error) {
	t.Helper()
	w, log := captureLog(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, args, env(), w) }()
	var line struct{ Addr string }
	if err := json.Unmarshal([]byte(log.waitFor(t, `"msg":"listening"`)), &line); err != nil || line.Addr == "" {
		t.Fatalf("listening line without addr (%v); log:\n%s", err, log)
	}
	return "http://" + line.Addr, log, func() error { cancel(); return <-done }
}

// postRun posts a success run of repo's pull at sha to serve's API at url
// (token "api") and returns the answer's status and body.
func postRun(t *testing.T, url, repo string, pull int, sha string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/api/runs", strings.NewReader(fmt.Sprintf(`{"repo": %q, "pull": %d, "head_sha": %q, "verdict": "success"}`, repo, pull, sha)))
	req.Header.Set("Authorization", "Bearer api")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// getJSON decodes the answer of GET url, sent with the tests' API token
// ("api"), which opens the pages too.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer api")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// TestServeInMemoryServesAndStopsGracefully pins iterion serve without
// Mongo: it elects itself, records runs through the API, and on the stop
// signal (ctx cancelled, as SIGTERM does) releases its lease, writes the
// partial hourly forge line and returns nil (exit 0).
func TestServeInMemoryServesAndStopsGracefully(t *testing.T) {
	sim := forgesim.New()
	if err := sim.SeedPull("acme", "app", 12, "abc1230000000000000000000000000000000000", "open"); err != nil {
		t.Fatal(err)
	}
	simSrv := httptest.NewServer(sim)
	defer simSrv.Close()
	url, log, stop := startServe(t, []string{"--listen", "127.0.0.1:0", "--forge-url", simSrv.URL + "/",
		"--forge-token", "tok", "--api-token", "api", "--webhook-secret", "w", "--sweep-interval", "1h"})
	log.waitFor(t, `"msg":"lease: elected"`)

	if code, body := postRun(t, url, "acme/app", 12, "abc1230000000000000000000000000000000000"); code != http.StatusCreated {
		t.Errorf("POST /api/runs = %d %s, want 201", code, body)
	}
	var holders []leaseRow
	getJSON(t, url+"/leases?format=json", &holders)
	if len(holders) != 1 || holders[0].Name != "merge-gate-sweeper" || holders[0].Owner == "" {
		t.Errorf("leases %+v, want this process holding merge-gate-sweeper: without Mongo it elects itself", holders)
	}

	if err := stop(); err != nil {
		t.Errorf("serve after the stop signal = %v, want nil (exit 0)", err)
	}
	log.waitFor(t, `"msg":"lease: released"`)
	if line := log.waitFor(t, "forge HTTP:"); !strings.Contains(line, "partial hour") {
		t.Errorf("hourly line %s, want a partial hour: the stop flushes the hour being counted", line)
	}
}

// TestServeAppModeServesEveryInstallation pins serve in App mode, end to
// end: with the App's id and key and no installation id it serves every
// installation of the App: a run is stored with its repository's
// installation and offered with that installation's token, a repository no
// installation covers is 422 naming it, and the sweeper is the lease group
// merge-gate-sweeper of --sweep-shards shards, all held by this process.
func TestServeAppModeServesEveryInstallation(t *testing.T) {
	sim := forgesim.New()
	const sha = "abc1230000000000000000000000000000000000"
	if err := sim.SeedInstallations(2, 1); err != nil {
		t.Fatal(err)
	}
	if err := sim.SeedPull("org-2", "repo-1", 12, sha, "open"); err != nil {
		t.Fatal(err)
	}
	simSrv := httptest.NewServer(sim)
	defer simSrv.Close()
	key := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(key, forgetest.AppKey(t), 0o600); err != nil {
		t.Fatal(err)
	}
	url, log, stop := startServe(t, []string{"--listen", "127.0.0.1:0", "--forge-url", simSrv.URL + "/",
		"--github-app-id", "1", "--github-private-key-file", key, "--api-token", "api", "--sweep-interval", "1h", "--sweep-shards", "4"})
	log.waitFor(t, `"msg":"lease: elected"`)

	if code, body := postRun(t, url, "org-2/repo-1", 12, sha); code != http.StatusCreated {
		t.Fatalf("POST /api/runs for org-2/repo-1 = %d %s, want 201", code, body)
	}
	var runs struct {
		Runs []struct {
			Repo         string
			Installation int64
		}
	}
	getJSON(t, url+"/api/runs", &runs)
	if len(runs.Runs) != 1 || runs.Runs[0].Installation != 2 {
		t.Errorf("runs %+v, want org-2/repo-1's with installation 2", runs.Runs)
	}
	var written int64
	for _, rc := range sim.Stats().Requests {
		if strings.HasPrefix(rc.Token, "ghs_sim_2_") && rc.Route == "POST /repos/{owner}/{repo}/statuses/{sha}" && rc.Status == http.StatusCreated {
			written += rc.Count
		}
	}
	if written != 1 {
		t.Errorf("statuses written with installation 2's tokens: %d, want 1: the run is offered through its installation", written)
	}
	if code, body := postRun(t, url, "acme/none", 12, sha); code != http.StatusUnprocessableEntity || !strings.Contains(body, "acme/none") {
		t.Errorf("POST /api/runs for acme/none = %d %s, want 422 naming it", code, body)
	}
	var holders []leaseRow
	shards := 0
	for deadline := time.Now().Add(10 * time.Second); shards < 4 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		getJSON(t, url+"/leases?format=json", &holders) // the shards' campaigns run side by side
		shards = 0
		for _, h := range holders {
			if strings.HasPrefix(h.Name, "merge-gate-sweeper[4]/shard/") {
				shards++
			}
		}
	}
	if shards != 4 {
		t.Errorf("leases %+v, want the 4 shards of merge-gate-sweeper[4] held here", holders)
	}
	if err := stop(); err != nil {
		t.Errorf("serve after the stop signal = %v, want nil (exit 0)", err)
	}
}

// TestServeWithMongoAndTheLeasesCommand pins serve on a shared MongoDB and
// the operator's view of it: `iterion leases` lists the holder, a forced
// release naming the wrong owner is refused with a clear error, and after
// the replica stops no lease is held.
func TestServeWithMongoAndTheLeasesCommand(t *testing.T) {
	db := mongotest.DB(t)
	uri := mongotest.URI(t)
	simSrv := httptest.NewServer(forgesim.New())
	defer simSrv.Close()
	_, log, stop := startServe(t, []string{"--listen", "127.0.0.1:0", "--mongo-uri", uri, "--mongo-db", db.Name(),
		"--forge-url", simSrv.URL + "/", "--forge-token", "tok", "--api-token", "api", "--sweep-interval", "1h"})
	elected := log.waitFor(t, `"msg":"lease: elected"`)
	var ev struct{ Owner string }
	if err := json.Unmarshal([]byte(elected), &ev); err != nil || ev.Owner == "" {
		t.Fatalf("elected line %s without owner", elected)
	}

	var out strings.Builder
	if err := leases(context.Background(), []string{"--mongo-uri", uri, "--mongo-db", db.Name(), "--json"}, env(), &out, io.Discard, time.Now); err != nil {
		t.Fatalf("leases --json: %v", err)
	}
	var rows []leaseRow
	if err := json.Unmarshal([]byte(out.String()), &rows); err != nil || len(rows) != 1 || rows[0].Name != "merge-gate-sweeper" || rows[0].Owner != ev.Owner || rows[0].Expired {
		t.Errorf("leases --json = %s (%v), want merge-gate-sweeper held by %s, unexpired", out.String(), err, ev.Owner)
	}
	out.Reset()
	if err := leases(context.Background(), []string{"--mongo-uri", uri, "--mongo-db", db.Name()}, env(), &out, io.Discard, time.Now); err != nil || !strings.Contains(out.String(), ev.Owner) || !strings.Contains(out.String(), "held") {
		t.Errorf("leases = %q, %v, want a table naming the holder", out.String(), err)
	}
	err := leases(context.Background(), []string{"release", "merge-gate-sweeper", "--owner", "someone-else", "--mongo-uri", uri, "--mongo-db", db.Name()}, env(), io.Discard, io.Discard, time.Now)
	if want := "release merge-gate-sweeper: held by " + ev.Owner + ", not someone-else"; err == nil || err.Error() != want {
		t.Errorf("release from the wrong owner = %v, want %q: a refusal naming the owner, once", err, want)
	}

	if err := stop(); err != nil {
		t.Errorf("serve after the stop signal = %v, want nil", err)
	}
	holders, err := mongolease.NewStore(db).Holders(context.Background())
	if err != nil || len(holders) != 0 {
		t.Errorf("holders after the stop = %v, %v, want none: the lease is released", holders, err)
	}
}

// TestLeasesReleaseForcesAHandOver pins the operator's forced hand-over:
// releasing from the holder removes the lease.
func TestLeasesReleaseForcesAHandOver(t *testing.T) {
	db := mongotest.DB(t)
	st := mongolease.NewStore(db)
	if ok, err := st.Acquire(context.Background(), "merge-gate-sweeper", "stuck-replica", time.Now(), time.Hour); !ok || err != nil {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	var out strings.Builder
	err := leases(context.Background(), []string{"release", "merge-gate-sweeper", "--owner", "stuck-replica"}, env("ITERION_MONGO_URI", mongotest.URI(t), "ITERION_MONGO_DB", db.Name()), &out, io.Discard, time.Now)
	if err != nil || !strings.Contains(out.String(), "released merge-gate-sweeper from stuck-replica") {
		t.Fatalf("release = %q, %v, want it released", out.String(), err)
	}
	if hs, _ := st.Holders(context.Background()); len(hs) != 0 {
		t.Errorf("holders %v, want none after a forced release", hs)
	}
	for _, args := range [][]string{{"release", "--owner", "x", "--mongo-uri", "mongodb://h/"}, {"release", "n", "--mongo-uri", "mongodb://h/"}, {}} {
		if err := leases(context.Background(), args, env(), io.Discard, io.Discard, time.Now); err == nil {
			t.Errorf("leases %q = nil, want an error naming what is missing", args)
		}
	}
}

// writeSecret writes a secret file as Kubernetes mounts one: the value and
// a trailing newline.
func writeSecret(t *testing.T, value string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestServeReadsSecretsFromFiles(t *testing.T) {
	c, err := parseServe([]string{"--api-token-file", writeSecret(t, "api-s3cret"), "--forge-token-file", writeSecret(t, "forge-s3cret")},
		env("ITERION_WEBHOOK_SECRET_FILE", writeSecret(t, "hook-s3cret")), io.Discard)
	if err != nil {
		t.Fatalf("parseServe: %v", err)
	}
	if c.apiToken != "api-s3cret" || c.forgeToken != "forge-s3cret" || c.webhookSecret != "hook-s3cret" {
		t.Errorf("secrets: got %q, %q, %q, want each file's value without its trailing newline (flag or ITERION_*_FILE twin)",
			c.apiToken, c.forgeToken, c.webhookSecret)
	}
}

func TestServeErrorsHideTheMongoPassword(t *testing.T) {
	const pw = "hunter2-pw"
	_, err := parseServe([]string{"--forge-token", "t", "--api-token", "a", "--mongo-uri", "mongo://admin:" + pw + "@db:27017/"}, env(), io.Discard)
	if err == nil || strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), "--mongo-uri") {
		t.Errorf("bad scheme: got %v, want an error naming --mongo-uri without the password: no secret in any output", err)
	}
	cause := errors.New("connection refused")
	wrapped := redactErr(fmt.Errorf("dial mongodb://admin:%s@db: %w", pw, cause), "mongodb://admin:"+pw+"@db/")
	if strings.Contains(wrapped.Error(), pw) || !errors.Is(wrapped, cause) {
		t.Errorf("redactErr: got %q (wraps cause %v), want the password hidden and the cause kept", wrapped, errors.Is(wrapped, cause))
	}
}

// TestServeForgeTimeout pins that every forge request has a deadline:
// --forge-timeout when given, else GitHub's 10 s request limit plus 5 s,
// at most a quarter of the shortest net interval.
func TestServeForgeTimeout(t *testing.T) {
	base := []string{"--forge-token", "t", "--api-token", "a"}
	for _, c := range []struct {
		name string
		args []string
		want time.Duration
	}{
		{"default at a one-minute interval", base, 15 * time.Second},
		{"a short interval bounds it", append(base, "--sweep-interval", "20s"), 5 * time.Second},
		{"the board's interval counts when it runs", append(base, "--board-repos", "acme/app", "--board-interval", "8s"), 2 * time.Second},
		{"the flag overrides", append(base, "--forge-timeout", "40s"), 40 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := parseServe(c.args, env(), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.forgeRequestTimeout(); got != c.want {
				t.Errorf("forge request timeout: got %v, want %v", got, c.want)
			}
		})
	}
}

// TestServeErrorsHideABadlyEscapedMongoPassword pins that no fragment of a
// Mongo URI's password reaches an error, even when a bad escape makes the
// URI unparsable and the driver quotes the escape.
func TestServeErrorsHideABadlyEscapedMongoPassword(t *testing.T) {
	const pw = "hunter2%zzpw"
	err := serve(t.Context(), []string{"--forge-token", "t", "--api-token", "a", "--listen", "127.0.0.1:0",
		"--mongo-uri", "mongodb://admin:" + pw + "@127.0.0.1:1/"}, env(), io.Discard)
	hidesThePassword(t, err)
}

// hidesThePassword fails t unless err is an error that shows no fragment
// of the password "hunter2%zzpw".
func hidesThePassword(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("an unparsable Mongo URI: got nil, want an error")
	}
	for _, frag := range []string{"hunter2", "%zz", "zzpw", "2%z"} {
		if strings.Contains(err.Error(), frag) {
			t.Errorf("error %q shows %q, a fragment of the password: no secret in any output", err, frag)
		}
	}
}

// TestServeTakesAMongoDBNameOf63Bytes pins the edge of the --mongo-db
// rule: a name under 64 bytes, with MongoDB's allowed punctuation, passes.
func TestServeTakesAMongoDBNameOf63Bytes(t *testing.T) {
	for _, name := range []string{strings.Repeat("d", 63), "iterion-prod_2"} {
		args := []string{"--forge-token", "t", "--api-token", "a", "--mongo-uri", "mongodb://db", "--mongo-db", name}
		if _, err := parseServe(args, env(), io.Discard); err != nil {
			t.Errorf("--mongo-db %q: %v, want it taken", name, err)
		}
	}
}

// TestServeStoppedWhileStartingExitsCleanly pins that a stop (SIGTERM)
// which comes while the replica starts, here before MongoDB answered, is a
// clean stop: serve returns nil (exit 0), not the step's cancelled error.
func TestServeStoppedWhileStartingExitsCleanly(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var log strings.Builder
	err := serve(ctx, []string{"--forge-token", "t", "--api-token", "a", "--listen", "127.0.0.1:0",
		"--mongo-uri", mongotest.URI(t), "--mongo-db", "stopped_starting"}, env(), &log)
	if code := exitCode(io.Discard, "serve", err); code != 0 || err != nil {
		t.Errorf("serve stopped while starting: %v (exit %d), want nil and exit 0", err, code)
	}
	if !strings.Contains(log.String(), "stopped while starting") {
		t.Errorf("log %q: want the line saying it stopped while starting", log.String())
	}
}

// TestServeForgeHostIgnoresCaseAndTheDefaultPort pins the host runs are
// recorded under: one forge written two ways keys its runs alike.
func TestServeForgeHostIgnoresCaseAndTheDefaultPort(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"", "github.com"},
		{"https://api.github.com/", "github.com"},
		{"https://API.GitHub.com:443/", "github.com"},
		{"https://GHE.example.com/api/v3/", "ghe.example.com"},
		{"https://ghe.example.com:443/api/v3/", "ghe.example.com"},
		{"https://ghe.example.com:8443/api/v3/", "ghe.example.com:8443"},
		{"http://127.0.0.1:80/", "127.0.0.1"},
	} {
		if got := (serveConfig{forgeURL: c.url}).forgeHost(); got != c.want {
			t.Errorf("forgeHost of %q = %q, want %q", c.url, got, c.want)
		}
	}
}

// TestServeSweepReserveLeavesTheBudgetToTheEventPath pins --sweep-reserve,
// end to end: once less than the reserve is left of the hour's budget, the
// merge-gate sweeper sends nothing more (its pass stops as at a rate
// limit, cause reserve) while a run posted to the API is still offered and
// its status written; the reserve is exported as forge_rate_limit_reserve
// on the sweeper's lane, which the alert IterionForgeBudgetBelowReserve
// reads.
func TestServeSweepReserveLeavesTheBudgetToTheEventPath(t *testing.T) {
	const budget = 10
	sim := forgesim.New(forgesim.WithBudget(budget))
	sha := func(pull int) string { return fmt.Sprintf("%040x", pull) }
	for _, pull := range []int{1, 2} {
		if err := sim.SeedPull("acme", "app", pull, sha(pull), "open"); err != nil {
			t.Fatal(err)
		}
	}
	simSrv := httptest.NewServer(sim)
	defer simSrv.Close()
	url, log, stop := startServe(t, []string{"--listen", "127.0.0.1:0", "--forge-url", simSrv.URL + "/",
		"--forge-token", "tok", "--api-token", "api", "--sweep-interval", "200ms", "--sweep-reserve", fmt.Sprint(budget)})
	log.waitFor(t, `"msg":"lease: elected"`)
	post := func(pull int) {
		t.Helper()
		if code, body := postRun(t, url, "acme/app", pull, sha(pull)); code != http.StatusCreated {
			t.Fatalf("POST /api/runs for pull %d = %d %s, want 201", pull, code, body)
		}
	}
	post(1)
	// The sweeper's first query learns that less than the reserve is left
	// of its points; its next pass holds back.
	line := log.waitFor(t, `"msg":"sweep stopped: rate limited"`)
	if !strings.Contains(line, "(reserve)") || !strings.Contains(line, "held back") {
		t.Errorf("sweep stop %s, want the reserve holding the sweeper back", line)
	}
	if got := sim.Requests(forgesim.Filter{Route: "POST /graphql"}); got != 1 {
		t.Errorf("sweeper queries: %d, want 1: below its reserve the sweeper sends nothing until the reset", got)
	}
	post(2) // the event path: offered on lane api, which has no reserve
	if got := sim.Requests(forgesim.Filter{Route: "POST /repos/{owner}/{repo}/statuses/{sha}", Status: http.StatusCreated}); got != 2 {
		t.Errorf("statuses written: %d, want 2: the reserve is left to the API's offers", got)
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf(`forge_rate_limit_reserve{lane="merge-gate-sweeper"} %d`, budget); !strings.Contains(string(body), want) {
		t.Errorf("/metrics lacks %s", want)
	}
	if err := stop(); err != nil {
		t.Errorf("serve after the stop signal = %v, want nil (exit 0)", err)
	}
}

// TestServeProbeAddrAndAllowedHosts pins --probe-addr and --allowed-hosts
// end to end: with both, /healthz, /readyz and /metrics answer on the
// probe address whatever the Host (a kubelet and Prometheus name the
// pod's address); on --listen a listed host is served and another,
// however it reached the replica, answers 421 naming it.
func TestServeProbeAddrAndAllowedHosts(t *testing.T) {
	sim := forgesim.New()
	simSrv := httptest.NewServer(sim)
	defer simSrv.Close()
	url, log, stop := startServe(t, []string{"--listen", "127.0.0.1:0", "--probe-addr", "127.0.0.1:0", "--forge-url", simSrv.URL + "/",
		"--forge-token", "tok", "--api-token", "api", "--sweep-interval", "1h", "--public-pages", "--allowed-hosts", "iterion.example.com, localhost:8443"})
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("serve after the stop signal = %v, want nil", err)
		}
	}()
	var line struct{ Addr string }
	if err := json.Unmarshal([]byte(log.waitFor(t, `"msg":"listening for probes"`)), &line); err != nil || line.Addr == "" {
		t.Fatalf("no probe listening line with addr (%v); log:\n%s", err, log)
	}
	get := func(base, path, host string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s%s: %v", base, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, body := get("http://"+line.Addr, path, ""); code != http.StatusOK {
			t.Errorf("GET %s on --probe-addr by its address = %d %s, want 200", path, code, body)
		}
	}
	if code, _ := get(url, "/leases", "iterion.example.com"); code != http.StatusOK {
		t.Errorf("GET /leases on --listen with a listed Host = %d, want 200", code)
	}
	if code, body := get(url, "/leases", "attacker.example"); code != http.StatusMisdirectedRequest || !strings.Contains(body, "attacker.example") {
		t.Errorf("GET /leases on --listen with Host attacker.example = %d %s, want 421 naming the host: --allowed-hosts", code, body)
	}
	if code, _ := get(url, "/healthz", ""); code != http.StatusOK {
		t.Errorf("GET /healthz on --listen by its address = %d, want 200: the probes answer any host", code)
	}
}

// TestServeRefusesAMongoSettingWithoutMongoURI pins that a setting which
// only means something with --mongo-uri is a bad setting without it (exit
// 2, naming both flags), not silently ignored: without --mongo-uri the
// stores are in memory, so --mongo-db names no database and
// --share-installation-tokens shares with no other replica. Set through
// either the flag or its twin; the most likely cause is a --mongo-uri
// that went missing (an empty secret), and a replica that starts in
// memory anyway elects itself beside every other one.
func TestServeRefusesAMongoSettingWithoutMongoURI(t *testing.T) {
	base := []string{"--forge-token", "t", "--api-token", "a"}
	app := []string{"--api-token", "a", "--github-app-id", "1", "--github-private-key-file", writeSecret(t, string(forgetest.AppKey(t)))}
	for _, c := range []struct {
		why  string
		args []string
		env  func(string) string
		want string
	}{
		{"--mongo-db without --mongo-uri", append(slices.Clone(base), "--mongo-db", "prod"), env(),
			`--mongo-db "prod" (ITERION_MONGO_DB) is set without --mongo-uri (ITERION_MONGO_URI)`},
		{"its twin, with the URI's twin empty, as from an empty secret", base, env("ITERION_MONGO_DB", "iterion", "ITERION_MONGO_URI", ""),
			`--mongo-db "iterion" (ITERION_MONGO_DB) is set without --mongo-uri (ITERION_MONGO_URI)`},
		{"token sharing on in App mode without --mongo-uri", append(slices.Clone(app), "--share-installation-tokens"), env(),
			"--share-installation-tokens (ITERION_SHARE_INSTALLATION_TOKENS) is set without --mongo-uri (ITERION_MONGO_URI)"},
		{"token sharing off in App mode without --mongo-uri", append(slices.Clone(app), "--share-installation-tokens=false"), env(),
			"--share-installation-tokens (ITERION_SHARE_INSTALLATION_TOKENS) is set without --mongo-uri (ITERION_MONGO_URI)"},
		{"token sharing's twin in App mode without --mongo-uri", app, env("ITERION_SHARE_INSTALLATION_TOKENS", "true"),
			"--share-installation-tokens (ITERION_SHARE_INSTALLATION_TOKENS) is set without --mongo-uri (ITERION_MONGO_URI)"},
	} {
		t.Run(c.why, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			var msg strings.Builder
			err := serve(ctx, c.args, c.env, io.Discard)
			if code := exitCode(&msg, "serve", err); code != 2 || !strings.Contains(msg.String(), c.want) {
				t.Errorf("serve %q: exit %d, %q; want exit 2 saying %q: a setting that does nothing without --mongo-uri is a bad setting", c.args, code, msg.String(), c.want)
			}
		})
	}
	for _, c := range []struct {
		why  string
		args []string
	}{
		{"--mongo-db with --mongo-uri", append(slices.Clone(base), "--mongo-uri", "mongodb://db", "--mongo-db", "prod")},
		{"App mode without --mongo-uri, sharing left at its default", app},
		{"token sharing in App mode with --mongo-uri", append(slices.Clone(app), "--mongo-uri", "mongodb://db", "--share-installation-tokens=false")},
	} {
		if _, err := parseServe(c.args, env(), io.Discard); err != nil {
			t.Errorf("%s: parseServe = %v, want it taken", c.why, err)
		}
	}
}

// TestServeForgeTimeoutIsUnderTheBoardInterval pins the board's side of
// --forge-timeout: with --board-repos, a board pass is cut one
// --board-interval after it began (the watchdog), and a repository whose
// list fails is left for the next pass while the pass goes on to the
// next one. A forge timeout at or over the interval never ends a board
// request before the watchdog ends the whole pass, so one request that
// never answers costs every repository after it its pass: a bad setting,
// naming both flags. Without --board-repos there is no board pass.
func TestServeForgeTimeoutIsUnderTheBoardInterval(t *testing.T) {
	base := []string{"--forge-token", "t", "--api-token", "a"}
	board := append(slices.Clone(base), "--board-repos", "acme/app,acme/web", "--board-interval", "10s")
	for _, c := range []struct {
		why     string
		timeout string
		want    string
	}{
		{"equal to the interval: the pass is cut as the request's deadline comes", "10s", "--forge-timeout 10s: want it under --board-interval 10s"},
		{"over the interval", "20s", "--forge-timeout 20s: want it under --board-interval 10s"},
	} {
		_, err := parseServe(append(slices.Clone(board), "--forge-timeout", c.timeout), env(), io.Discard)
		var msg strings.Builder
		if code := exitCode(&msg, "serve", err); code != 2 || !strings.Contains(msg.String(), c.want) {
			t.Errorf("%s: exit %d, %q; want exit 2 saying %q", c.why, code, msg.String(), c.want)
		}
	}
	for _, c := range []struct {
		why  string
		args []string
	}{
		{"under the interval: a hung request ends before the pass does", append(slices.Clone(board), "--forge-timeout", "9s")},
		{"the default: a quarter of the shortest interval", board},
		{"no --board-repos: no board pass to cut", append(slices.Clone(base), "--board-interval", "10s", "--forge-timeout", "20s")},
	} {
		if _, err := parseServe(c.args, env(), io.Discard); err != nil {
			t.Errorf("%s: parseServe = %v, want it taken", c.why, err)
		}
	}
}
