package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// TestMeasureGroupSpreadsItsShardsAndReportsThem pins what the harness's
// group scenario relies on: with Comparison.MeasureGroupShards, two
// replicas on one store hold every shard of MeasureGroup() between them,
// neither above its fair share; each logs every shard term it starts as a
// "measure group: shard term" line naming the shard; each counts its store
// calls; and a stopped replica releases its shards.
func TestMeasureGroupSpreadsItsShardsAndReportsThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shards = 8
		c, next := newCluster(t, 0)
		c.cmp = server.Comparison{MeasureGroupShards: shards}
		logs := &forgetest.LogBuffer{}
		startReplicas(t, c, next, 2, time.Second, func(cfg *server.Config) {
			cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
			cfg.ForgeMinute = time.Second // GitHub's minute compressed to the interval, as the harness runs it
		})
		time.Sleep(20 * time.Second)
		synctest.Wait()

		ctx := context.Background()
		hs, err := c.leases.Holders(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var view *lease.GroupView
		for _, v := range lease.Groups(hs, time.Now()) {
			if v.Name == server.MeasureGroup().Name {
				view = &v
			}
		}
		if view == nil || view.Shards != shards {
			t.Fatalf("groups in the store: %+v; want %s of %d shards", lease.Groups(hs, time.Now()), server.MeasureGroup().Name, shards)
		}
		if u := view.Unheld(); len(u) > 0 {
			t.Errorf("unheld shards %v after 20 intervals, want none", u)
		}
		for _, h := range view.Holdings() {
			if len(h.Shards) > view.Fair() {
				t.Errorf("%s holds %v, over the fair share %d", h.Owner, h.Shards, view.Fair())
			}
		}

		elected := map[float64]bool{}
		for line := range strings.Lines(logs.String()) {
			var l struct {
				Msg, Event string
				Shard      *float64
			}
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			if l.Msg == "measure group: shard term" && l.Event == lease.Elected.String() && l.Shard != nil {
				elected[*l.Shard] = true
			}
		}
		if len(elected) != shards {
			t.Errorf("shards with a logged election: %v, want all %d", elected, shards)
		}
		for _, r := range c.replicas {
			if n := metricValue(t, r.handler, "measure_group_store_calls_total"); n < 20 {
				t.Errorf("%s: measure_group_store_calls_total = %v after 20 intervals, want at least one list per interval", r.owner, n)
			}
		}

		for _, r := range c.replicas {
			r.stop()
		}
		hs, err = c.leases.Holders(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range lease.Groups(hs, time.Now()) {
			if v.Name == server.MeasureGroup().Name && len(v.Unheld()) != shards {
				t.Errorf("after every replica stopped, shards held: %+v; want every shard released", v.Holders)
			}
		}
	})
}

// TestMeasureGroupShardsIsValidated pins that a negative shard count is
// refused, naming the field.
func TestMeasureGroupShardsIsValidated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newCluster(t, 0)
		_, err := server.NewForComparison(server.Config{Runs: c.runs, Leases: c.leases, Forge: newForge(t, "http://sim/", next, "t", nil, nil), APIToken: "a"},
			server.Comparison{MeasureGroupShards: -1})
		if !errors.Is(err, server.ErrConfig) || !strings.Contains(err.Error(), "Comparison.MeasureGroupShards -1") {
			t.Errorf("MeasureGroupShards -1: got %v, want server.ErrConfig naming Comparison.MeasureGroupShards and its value", err)
		}
	})
}
