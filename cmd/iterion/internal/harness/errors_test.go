package harness

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestErrorsWrapTheirCauses: an error of the harness is of its kind
// (errors.Is with the sentinel) and wraps its cause, so that a caller can
// tell a refused connection, a missing binary or a garbled answer apart.
func TestErrorsWrapTheirCauses(t *testing.T) {
	ctx := context.Background()
	garbled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("not json"))
	}))
	defer garbled.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close() // nothing listens on its address any more
	var syntax *json.SyntaxError
	for _, c := range []struct {
		rule  string
		err   error
		kind  error
		cause func(error) bool
	}{
		{
			"a request to a closed port is a request error that wraps the refusal",
			doJSON(ctx, newHTTPClient(), http.MethodGet, closed.URL, "", nil, nil),
			ErrRequest, func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) },
		},
		{
			"an answer that is not JSON is a request error that wraps the decoder's",
			doJSON(ctx, newHTTPClient(), http.MethodGet, garbled.URL, "", nil, &struct{}{}),
			ErrRequest, func(err error) bool { return errors.As(err, &syntax) },
		},
		{
			"a binary that does not exist is a process error that wraps fs.ErrNotExist",
			func() error {
				_, err := startProc(t.TempDir(), "missing", filepath.Join(t.TempDir(), "no-such-binary"))
				return err
			}(),
			ErrProcess, func(err error) bool { return errors.Is(err, fs.ErrNotExist) },
		},
		{
			"polling a simulator that does not answer is a measurement error that wraps the request's",
			func() error {
				_, err := pollUntil(ctx, sim{url: closed.URL, hc: newHTTPClient()}, time.Millisecond, 0, func(simStats) bool { return true })
				return err
			}(),
			ErrMeasure, func(err error) bool { return errors.Is(err, ErrRequest) && errors.Is(err, syscall.ECONNREFUSED) },
		},
	} {
		if !errors.Is(c.err, c.kind) || !c.cause(c.err) {
			t.Errorf("got %v, want an error of kind %v wrapping its cause: %s", c.err, c.kind, c.rule)
		}
	}
}

// TestOptionsNameTheBadField: Run refuses invalid options with an
// *OptionError (an ErrInvalid) that names the field, before it starts
// anything.
func TestOptionsNameTheBadField(t *testing.T) {
	for _, c := range []struct {
		field string
		o     Options
	}{
		{"Interval", Options{Interval: 10 * time.Millisecond}},
		{"Replicas", Options{Replicas: 1}},
		{"Ns", Options{Ns: []int{1, 0}}},
		{"ScaleRuns", Options{ScaleRuns: []int{100, 10}}},
		{"ClockConcurrency", Options{ClockConcurrency: []int{0}}},
		{"ClockTimeShare", Options{ClockTimeShare: 1.5}},
		{"Load.Concurrency", Options{Load: LoadOptions{Requests: 10, Concurrency: 11}}},
		{"Scenarios", Options{Scenarios: []string{"nope"}}},
	} {
		rep, err := Run(context.Background(), c.o)
		var oe *OptionError
		if rep != nil || !errors.Is(err, ErrInvalid) || !errors.As(err, &oe) || oe.Field != c.field {
			t.Errorf("%s: got report %v and error %v, want no report and an *OptionError naming %s: bad options are refused by name", c.field, rep, err, c.field)
		}
	}
}

// TestTenantsReplicaCountsMustIncrease pins that the tenants scenario's
// replica counts are refused unless each is larger than the one before:
// a count given twice would be measured twice, its churn and kill run
// twice, and its ratio to itself (1) reported as the ÷N goal met.
func TestTenantsReplicaCountsMustIncrease(t *testing.T) {
	for _, ns := range [][]int{{3, 3}, {1, 3, 3}, {3, 1}} {
		o := Options{TenantsReplicas: ns}
		err := o.defaults()
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Field != "TenantsReplicas" {
			t.Errorf("TenantsReplicas %v: got %v, want an *OptionError naming TenantsReplicas: the counts must increase", ns, err)
		}
	}
	o := Options{TenantsReplicas: []int{1, 3}}
	if err := o.defaults(); err != nil {
		t.Errorf("TenantsReplicas [1 3]: got %v, want none", err)
	}
}
