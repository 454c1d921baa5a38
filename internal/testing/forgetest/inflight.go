package forgetest

import (
	"net/http"
	"sync"
	"time"
)

// InFlight is a transport that counts the requests Match picks (nil:
// every one) while they are in flight through it to Next, holding each
// Hold more (virtual time in a synctest bubble) whatever its context, and
// keeps the most at once and when each began. Safe for concurrent use.
type InFlight struct {
	Next  http.RoundTripper
	Match func(*http.Request) bool
	Hold  time.Duration

	mu        sync.Mutex
	now, most int
	began     []time.Time
}

// RoundTrip implements http.RoundTripper.
func (t *InFlight) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.Match != nil && !t.Match(req) {
		return t.Next.RoundTrip(req)
	}
	t.mu.Lock()
	t.now++
	t.most = max(t.most, t.now)
	t.began = append(t.began, time.Now())
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.now--
		t.mu.Unlock()
	}()
	time.Sleep(t.Hold)
	return t.Next.RoundTrip(req)
}

// Most is the most requests that were in flight at once.
func (t *InFlight) Most() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.most
}

// Began is when each request began, in order.
func (t *InFlight) Began() []time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]time.Time(nil), t.began...)
}
