package forge

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// headerAnswer answers every request with its status and headers.
type headerAnswer struct {
	status int
	h      http.Header
}

func (a headerAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: a.status, Header: a.h, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
}

// FuzzRateLimitHeaders pins what the client reads from an answer's
// rate-limit headers, whatever they hold: retry-after is a wait from 0 to
// rateWindow, the seconds it says when they fit; the x-ratelimit-*
// figures it takes are not negative; and the request after the answer is
// sent, or held back until an instant after now and at most rateWindow
// ahead. A header never makes the client wait for ever, nor ignore a
// back-off because a wait overflowed to a negative one.
func FuzzRateLimitHeaders(f *testing.F) {
	now := time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC)
	reset := strconv.FormatInt(now.Add(20*time.Minute).Unix(), 10)
	for _, c := range []struct {
		status                            int
		retry, limit, remaining, resetsAt string
	}{
		{200, "", "5000", "4999", reset},
		{403, "", "5000", "0", reset},
		{429, "30", "5000", "12", reset},
		{403, now.Add(90 * time.Second).Format(http.TimeFormat), "", "", ""},
		{429, "0", "5000", "1", reset},
		{403, "-5", "x", "", "1"},
		{200, "", "60", "59", strconv.FormatInt(now.Unix(), 10)},
	} {
		f.Add(c.status, c.retry, c.limit, c.remaining, c.resetsAt)
	}
	f.Fuzz(func(t *testing.T, status int, retry, limit, remaining, resetsAt string) {
		h := http.Header{}
		for k, v := range map[string]string{"Retry-After": retry, "X-Ratelimit-Limit": limit, "X-Ratelimit-Remaining": remaining, "X-Ratelimit-Reset": resetsAt} {
			if v != "" {
				h.Set(k, v)
			}
		}
		if wait, ok := retryAfter(h, now); ok {
			if wait < 0 || wait > rateWindow {
				t.Fatalf("retry-after %q: got a wait of %v, want 0 to %v", retry, wait, rateWindow)
			}
			if s, err := strconv.Atoi(retry); err == nil && s >= 0 {
				want := rateWindow
				if s < int(rateWindow/time.Second) {
					want = time.Duration(s) * time.Second
				}
				if wait != want {
					t.Fatalf("retry-after %q: got %v, want %v: its seconds, at most %v", retry, wait, want, rateWindow)
				}
			}
		}
		if rl, ok := parseRateLimit(h); ok && (rl.Limit < 0 || rl.Remaining < 0) {
			t.Fatalf("x-ratelimit-limit %q, -remaining %q: got %+v, want no negative figure taken", limit, remaining, rl)
		}
		g := newRateGate(headerAnswer{status: status, h: h}, "/graphql", func() time.Time { return now },
			map[string]int{LaneMergeGateSweeper: 100}, nil)
		for range 2 {
			req, _ := http.NewRequestWithContext(WithLane(context.Background(), LaneMergeGateSweeper), "GET", "https://api.github.com/repos/a/b/pulls/1", nil)
			resp, err := g.RoundTrip(req)
			var rle *RateLimitError
			switch {
			case err == nil:
				resp.Body.Close()
			case !errors.As(err, &rle):
				t.Fatalf("got %v, want an answer or a *RateLimitError", err)
			case !rle.Reset.After(now) || rle.Reset.After(now.Add(rateWindow)):
				t.Fatalf("%d with %v: held back until %v, want after now (%v) and at most %v later", status, h, rle.Reset, now, rateWindow)
			}
		}
	})
}
