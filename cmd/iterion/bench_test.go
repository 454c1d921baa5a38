package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"iterion.dev/iterion/pkg/server"
)

// TestBenchRefusalNamesTheFlag pins that every bench setting the harness
// refuses exits 2 before anything is built or started, with a message that
// names the flag as the user types it and the value given, never the
// harness's field. Every flag is either a row here or takes any value.
func TestBenchRefusalNamesTheFlag(t *testing.T) {
	anyValue := map[string]string{
		"dir":           "a path, created when it runs",
		"clock-shallow": "any count: negative means no such configuration",
	}
	tmp := t.TempDir()
	notExecutable := filepath.Join(tmp, "iterion")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	over := strconv.Itoa(server.MaxSweepConcurrency + 1)
	rows := []struct {
		flag string
		args []string
		want string
	}{
		{"n", []string{"-n", "1,0"}, "-n 1,0 has 0"},
		{"scenarios", []string{"--scenarios", "cost,nope"}, `--scenarios cost,nope has "nope"`},
		{"interval", []string{"--interval", "1ms"}, "--interval 1ms is under 50ms"},
		{"runs", []string{"--runs", "-1"}, "--runs -1 is under 1"},
		{"window", []string{"--window", "1s"}, "--window 1s is under 4 intervals (2s)"},
		{"replicas", []string{"--replicas", "1"}, "--replicas 1 is under 2"},
		{"takeovers", []string{"--takeovers", "-1"}, "--takeovers -1 is under 1"},
		{"budget-replicas", []string{"--budget-replicas", "-1"}, "--budget-replicas -1 is under 1"},
		{"hour", []string{"--hour", "1s"}, "--hour 1s is under 10 intervals (5s)"},
		{"load-requests", []string{"--load-requests", "1"}, "--load-requests 1 is under 2"},
		{"load-concurrency", []string{"--load-requests", "10", "--load-concurrency", "11"}, "--load-concurrency 11 is not within 1 to the requests (10)"},
		{"load-outage", []string{"--load-outage", "-1s"}, "--load-outage -1s is negative"},
		{"scale-runs", []string{"--scale-runs", "100,10"}, "--scale-runs 100,10 is not increasing"},
		{"scale-replicas", []string{"--scale-replicas", "1,0"}, "--scale-replicas 1,0 has 0"},
		{"scale-interval", []string{"--scale-interval", "100ms"}, "--scale-interval 100ms is under 500ms"},
		{"scale-passes", []string{"--scale-passes", "-1"}, "--scale-passes -1 is under 1"},
		{"clock-runs", []string{"--clock-runs", "5000,1000"}, "--clock-runs 5000,1000 is not increasing"},
		{"clock-replicas", []string{"--clock-replicas", "1,0"}, "--clock-replicas 1,0 has 0"},
		{"clock-interval", []string{"--clock-interval", "500ms"}, "--clock-interval 500ms is under 1s"},
		{"clock-sweep-minutes", []string{"--clock-sweep-minutes", "-1"}, "--clock-sweep-minutes -1 is under 1"},
		{"clock-passes", []string{"--clock-passes", "1"}, "--clock-passes 1 is under 2"},
		{"clock-deep-passes", []string{"--clock-deep-passes", "1"}, "--clock-deep-passes 1 is under 2"},
		{"clock-sweep-concurrency", []string{"--clock-sweep-concurrency", "1,0"}, "--clock-sweep-concurrency 1,0 has 0, under 1"},
		{"clock-sweep-concurrency", []string{"--clock-sweep-concurrency", over}, fmt.Sprintf("--clock-sweep-concurrency %s has %s, over %d", over, over, server.MaxSweepConcurrency)},
		{"clock-time-share", []string{"--clock-time-share", "1.5"}, "--clock-time-share 1.5 is not within 0"},
		{"group-shards", []string{"--group-shards", "-1"}, "--group-shards -1 is under 1"},
		{"group-replicas", []string{"--group-replicas", "1"}, "--group-replicas 1 is under 2"},
		{"group-interval", []string{"--group-interval", "10ms"}, "--group-interval 10ms is under 100ms"},
		{"tenants-installations", []string{"--tenants-installations", "-1"}, "--tenants-installations -1 is under 1"},
		{"tenants-runs", []string{"--tenants-runs", "-1"}, "--tenants-runs -1 is under 1"},
		{"tenants-replicas", []string{"--tenants-replicas", "1"}, "--tenants-replicas 1 is not increasing"},
		{"tenants-interval", []string{"--tenants-interval", "100ms"}, "--tenants-interval 100ms is under 500ms"},
		{"tenants-window", []string{"--tenants-window", "1"}, "--tenants-window 1 is under 2"},
		{"tenants-churn", []string{"--tenants-installations", "5", "--tenants-churn", "6"}, "--tenants-churn 6 is not within 1 to the installations (5)"},
		{"tenants-shards", []string{"--tenants-shards", "-1"}, "--tenants-shards -1 is negative"},
		{"out", []string{"--out", filepath.Join(tmp, "missing", "bench.md")}, `--out "` + filepath.Join(tmp, "missing", "bench.md") + `": want a file in an existing directory`},
		{"out", []string{"--out", tmp}, `--out "` + tmp + `": is a directory, want a file`},
		{"bin", []string{"--bin", filepath.Join(tmp, "missing")}, `--bin "` + filepath.Join(tmp, "missing") + `": stat `},
		{"bin", []string{"--bin", notExecutable}, `--bin "` + notExecutable + `": want an executable file: it has no execute permission`},
		{"dev-mongo-bin", []string{"--dev-mongo-bin", tmp}, `--dev-mongo-bin "` + tmp + `": want an executable file, not a directory`},
	}
	covered := map[string]bool{}
	// A setting the harness wrongly accepts fails at once on the done
	// context rather than running the benchmark.
	done, cancel := context.WithCancel(t.Context())
	cancel()
	for _, r := range rows {
		covered[r.flag] = true
		var msg strings.Builder
		err := runBench(done, append(r.args, "--dir", t.TempDir()), io.Discard, io.Discard)
		if code := exitCode(&msg, "bench", err); code != 2 || !strings.Contains(msg.String(), r.want) {
			t.Errorf("bench %s: got exit %d, %q; want exit 2 and %q: a refusal names the flag and its value", strings.Join(r.args, " "), code, msg.String(), r.want)
		}
	}
	fs, _, _ := benchFlags(io.Discard)
	fs.VisitAll(func(f *flag.Flag) {
		if !covered[f.Name] && anyValue[f.Name] == "" {
			t.Errorf("flag --%s: no row refuses a value of it and it is not listed as taking any value: every refusable flag is covered", f.Name)
		}
	})
}

// TestBenchTakesUsablePaths pins the other side of the path checks: an
// --out in an existing directory (the file itself not there yet) and an
// executable --bin and --dev-mongo-bin pass.
func TestBenchTakesUsablePaths(t *testing.T) {
	tmp := t.TempDir()
	program := filepath.Join(tmp, "iterion")
	if err := os.WriteFile(program, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	fs, o, out := benchFlags(io.Discard)
	if err := parseFlags(fs, []string{"--out", filepath.Join(tmp, "bench.md"), "--bin", program, "--dev-mongo-bin", program}); err != nil {
		t.Fatal(err)
	}
	if err := benchPathsProblem(o, *out); err != nil {
		t.Errorf("benchPathsProblem = %v, want nil: usable paths pass", err)
	}
}
