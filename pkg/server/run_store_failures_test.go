package server_test

import (
	"net/http"
	"strings"
	"testing"

	"iterion.dev/iterion/pkg/gaterun"
)

// TestRunStoreFailuresAreCounted pins run_store_calls_failed_total: a run
// store call that does not answer within its deadline counts under its
// call (POST /api/runs's put, against gate_runs frozen at the MongoDB
// wire), so an operator sees the store failing without reading the logs,
// while an answer that finds no run counts nothing; every call's series
// is there from the start.
func TestRunStoreFailuresAreCounted(t *testing.T) {
	frozen := frozenMongo(t, gaterun.Collection)
	if code, body := frozen.postRun(t, `{"repo": "acme/app", "pull": 12, "head_sha": "`+headSHA+`", "verdict": "success"}`); code != http.StatusServiceUnavailable {
		t.Fatalf("POST /api/runs with gate_runs frozen = %d %s, want 503", code, body)
	}
	_, metrics := frozen.do(t, "GET", "/metrics", nil, "")
	if want := `run_store_calls_failed_total{call="put"} 1`; !strings.Contains(metrics, want) {
		t.Errorf("after a put the store did not answer, /metrics lacks %q: a failed run store call is counted under its call", want)
	}

	answering := newHTTPFixture(t)
	if code, body := answering.do(t, "GET", "/api/runs/nope", map[string]string{"Authorization": "Bearer " + apiToken}, ""); code != http.StatusNotFound {
		t.Fatalf("GET /api/runs/nope = %d %s, want 404", code, body)
	}
	_, metrics = answering.do(t, "GET", "/metrics", nil, "")
	for _, want := range []string{`run_store_calls_failed_total{call="get"} 0`, `run_store_calls_failed_total{call="put"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("after a get of an unknown run, /metrics lacks %q: not found is an answer, not a failure, and every call's series is there from the start", want)
		}
	}
}
