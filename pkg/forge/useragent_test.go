package forge_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/forge"
)

func TestUserAgentNamesTheSenderAndTheLaneOfEveryRequest(t *testing.T) {
	sim, srv := startSim(t)
	mustSim(t, sim.SeedInstallations(1, 1))
	mustSim(t, sim.SeedPull("org-1", "repo-1", 1, "a", "open"))
	a := newApp(t, srv, forge.AppConfig{UserAgent: "iterion (replica-a)"})
	mustSim(t, a.Relist(context.Background()))
	one, err := a.Installation(1)
	mustSim(t, err)
	if _, err := one.GetPull(laneCtx(forge.LaneMergeGateSweeper), "org-1", "repo-1", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := one.PullStates(laneCtx(forge.LaneAPI), []forge.PullRef{{Owner: "org-1", Repo: "repo-1", Number: 1}}); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sr := range sim.RequestLog(time.Time{}, 1).Series {
		for _, b := range sr.Buckets {
			got[sr.Sender] += b.Requests
		}
	}
	want := map[string]int64{"iterion (replica-a) lane/merge-gate-sweeper": 1, "iterion (replica-a) lane/api": 1}
	if len(got) != len(want) || got["iterion (replica-a) lane/merge-gate-sweeper"] != 1 || got["iterion (replica-a) lane/api"] != 1 {
		t.Fatalf("the simulator's request log by User-Agent: got %v, want %v: REST and GraphQL requests name the sender and their lane", got, want)
	}
}

func TestUserAgentMustBePrintableASCII(t *testing.T) {
	_, srv := startSim(t)
	_, err := forge.New(forge.Config{BaseURL: srv.URL + "/", UserAgent: "iterion\r\nX-Evil: 1"})
	if !errors.Is(err, forge.ErrInvalidConfig) || !strings.Contains(err.Error(), "UserAgent") {
		t.Fatalf("a User-Agent with a line break: got %v, want ErrInvalidConfig naming UserAgent", err)
	}
}
