package forge

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// memoryTransport answers every request with the same canned 200 without
// touching the network, so the benchmarks measure the wrappers' overhead.
type memoryTransport struct{ resp *http.Response }

func (m memoryTransport) RoundTrip(*http.Request) (*http.Response, error) { return m.resp, nil }

func newMemoryTransport() memoryTransport {
	return memoryTransport{resp: &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(""))}}
}

// BenchmarkCountingTransport compares, side by side, the bare in-memory
// transport, the counting transport (with its Prometheus counter and the
// hourly tally) and promhttp.InstrumentRoundTripperCounter over the same
// transport. RoundTrip is called directly: the figures are the wrappers' own
// cost per request, with no http.Client or network around them.
func BenchmarkCountingTransport(b *testing.B) {
	req, err := http.NewRequestWithContext(WithLane(context.Background(), LaneMergeGateSweeper), http.MethodGet, "https://api.github.com/repos/acme/app/pulls/12", nil)
	if err != nil {
		b.Fatal(err)
	}
	next := newMemoryTransport()
	counting := func() http.RoundTripper {
		vecs, err := newCountingVecs(prometheus.NewRegistry())
		if err != nil {
			b.Fatal(err)
		}
		return newCountingTransport(next, graphqlPath(DefaultBaseURL), time.Now, vecs, newHourly(slog.New(slog.DiscardHandler), time.Now()))
	}
	promhttpCounter := func() http.RoundTripper {
		vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "client_requests_total"}, []string{"code", "method"})
		prometheus.NewRegistry().MustRegister(vec)
		return promhttp.InstrumentRoundTripperCounter(vec, next)
	}
	cases := []struct {
		name string
		make func() http.RoundTripper
	}{
		{"bare", func() http.RoundTripper { return next }},
		{"counting", counting},
		{"promhttp", promhttpCounter},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			rt := tc.make()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rt.RoundTrip(req); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"-parallel", func(b *testing.B) {
			rt := tc.make()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := rt.RoundTrip(req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
