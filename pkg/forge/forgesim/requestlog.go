// The per-installation request log: who spent each installation's
// budget, and when, on the simulator's own clock.

package forgesim

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultRequestLogKeep is how many intervals of the request log the
// simulator keeps unless WithRequestLog says otherwise: a day of minutes.
const DefaultRequestLogKeep = 24 * 60

// maxSenderLen bounds the User-Agent the request log keeps per sender, so
// that no client can make one series large.
const maxSenderLen = 200

// WithRequestLog sets the request log's interval, the width of its
// buckets (default the simulator's minute, WithMinute), and how many
// intervals back from the latest request it keeps (default
// DefaultRequestLogKeep). d <= 0 or keep <= 0 keeps that default. Its
// memory is bounded by installations × senders × keep buckets.
func WithRequestLog(d time.Duration, keep int) Option {
	return func(s *Sim) {
		if d > 0 {
			s.reqLog.interval = d
		}
		if keep > 0 {
			s.reqLog.keep = keep
		}
	}
}

// RequestBucket is what one sender sent with one installation's tokens in
// one interval of the request log. Every request is counted once, whatever
// its route and status.
type RequestBucket struct {
	// Start is the interval's start on the simulator's clock (Now).
	Start    time.Time `json:"start"`
	Requests int64     `json:"requests"`
	// Limited is the requests a rate limit refused, primary or secondary
	// (concurrency, points per minute, CPU time, content creation, or one
	// injected with SecondaryLimit).
	Limited int64 `json:"limited"`
	// Failed is the other requests answered 4xx or 5xx: a revoked or
	// expired token's 401, a repository its installation does not cover
	// (404), a timeout.
	Failed int64 `json:"failed"`
	// First and Last are when the first and the last of them arrived, on
	// the simulator's clock.
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
}

// SenderRequests is one sender's requests with one installation's tokens,
// by interval, oldest first; intervals with no request are left out.
type SenderRequests struct {
	Installation int64 `json:"installation"`
	// Sender is the requests' User-Agent header (GitHub requires one),
	// "" when they had none, cut to 200 bytes.
	Sender string `json:"sender"`
	// Tokens is how many installation tokens it sent with, in turn: a
	// token counts again when it comes back after another.
	Tokens  int             `json:"tokens"`
	Buckets []RequestBucket `json:"buckets"`
}

// RequestLog is what GET /_sim/installations/requests returns: every
// request made with an installation token (not the App's JWT, not a plain
// token), by installation, sender and interval.
type RequestLog struct {
	// Interval is the width of a bucket, in the simulator's time.
	Interval time.Duration `json:"interval"`
	// Now is the simulator's clock when the log was read: the latest
	// bucket may still be filling.
	Now time.Time `json:"now"`
	// Series are sorted by installation, then sender.
	Series []SenderRequests `json:"series"`
}

// requestLog is the simulator's request log; its fields are guarded by
// Sim.mu.
type requestLog struct {
	interval time.Duration // 0: the simulator's minute
	keep     int           // 0: DefaultRequestLogKeep
	latest   int64         // the newest bucket index recorded
	series   map[seriesKey]*series
}

type seriesKey struct {
	installation int64
	sender       string
}

// series is one installation's requests from one sender; its buckets
// are in index order.
type series struct {
	tokens  int
	token   string // the last token it sent with
	buckets []logBucket
}

// logBucket is one interval's counts; times are Unix nanoseconds.
type logBucket struct {
	index                    int64 // the interval's start / interval
	requests, limited, fails int64
	first, last              int64
}

// width is the log's interval; s.mu is held.
func (s *Sim) logWidth() time.Duration { return cmp.Or(s.reqLog.interval, s.minute) }

// logRequest records one request made with tok, if tok is an installation
// token, arriving at now and answered status; limited says a rate limit
// refused it, whatever the status of the refusal's shape (a GraphQL
// RATE_LIMITED answer is a 200). s.mu is held.
func (s *Sim) logRequest(r *http.Request, tok string, status int, limited bool, now time.Time) {
	m, ok := s.installations[tok]
	if !ok {
		return
	}
	id := m.installation
	l := &s.reqLog
	if l.series == nil {
		l.series = make(map[seriesKey]*series)
	}
	sender := r.Header.Get("User-Agent")
	if len(sender) > maxSenderLen {
		sender = sender[:maxSenderLen]
	}
	k := seriesKey{installation: id, sender: sender}
	sr := l.series[k]
	if sr == nil {
		sr = &series{}
		l.series[k] = sr
	}
	if sr.token != tok {
		sr.tokens++
		sr.token = tok
	}
	width := s.logWidth()
	idx := now.UnixNano() / int64(width)
	keep := int64(cmp.Or(l.keep, DefaultRequestLogKeep))
	if idx > l.latest {
		l.latest = idx
		// Age the whole log out at most once a bucket: a sender that
		// stopped sending is dropped with its last bucket.
		for k, other := range l.series {
			other.trim(idx - keep + 1)
			if len(other.buckets) == 0 && other != sr {
				delete(l.series, k)
			}
		}
	}
	if idx <= l.latest-keep {
		return // older than the log keeps (a clock set back)
	}
	b := sr.bucket(idx)
	b.requests++
	t := now.UnixNano()
	if b.requests == 1 || t < b.first {
		b.first = t
	}
	b.last = max(b.last, t)
	switch {
	case limited:
		b.limited++
	case status >= 400:
		b.fails++
	}
}

// bucket returns the series' bucket of index idx, adding it in order.
func (sr *series) bucket(idx int64) *logBucket {
	n := len(sr.buckets)
	if n > 0 && sr.buckets[n-1].index == idx {
		return &sr.buckets[n-1]
	}
	i, found := slices.BinarySearchFunc(sr.buckets, idx, func(b logBucket, idx int64) int { return cmp.Compare(b.index, idx) })
	if !found {
		sr.buckets = slices.Insert(sr.buckets, i, logBucket{index: idx})
	}
	return &sr.buckets[i]
}

// trim drops the buckets before index oldest.
func (sr *series) trim(oldest int64) {
	i := 0
	for i < len(sr.buckets) && sr.buckets[i].index < oldest {
		i++
	}
	if i > 0 {
		sr.buckets = slices.Delete(sr.buckets, 0, i)
	}
}

// RequestLog returns the request log's buckets that start at or after
// since's interval (all it keeps when since is zero), of installation id
// only when id > 0.
func (s *Sim) RequestLog(since time.Time, id int64) RequestLog {
	s.mu.Lock()
	defer s.mu.Unlock()
	width := s.logWidth()
	out := RequestLog{Interval: width, Now: s.clock(), Series: []SenderRequests{}}
	from := int64(0)
	if !since.IsZero() {
		from = since.UnixNano() / int64(width)
	}
	for k, sr := range s.reqLog.series {
		if id > 0 && k.installation != id {
			continue
		}
		x := SenderRequests{Installation: k.installation, Sender: k.sender, Tokens: sr.tokens, Buckets: []RequestBucket{}}
		for _, b := range sr.buckets {
			if b.index < from {
				continue
			}
			x.Buckets = append(x.Buckets, RequestBucket{
				Start: time.Unix(0, b.index*int64(width)).UTC(), Requests: b.requests, Limited: b.limited, Failed: b.fails,
				First: time.Unix(0, b.first).UTC(), Last: time.Unix(0, b.last).UTC(),
			})
		}
		if len(x.Buckets) > 0 {
			out.Series = append(out.Series, x)
		}
	}
	slices.SortFunc(out.Series, func(a, b SenderRequests) int {
		return cmp.Or(cmp.Compare(a.Installation, b.Installation), strings.Compare(a.Sender, b.Sender))
	})
	return out
}

// ctlRequestLog is GET /_sim/installations/requests?since=…&installation=….
func (s *Sim) ctlRequestLog(r *http.Request) reply {
	q := r.URL.Query()
	var since time.Time
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return ctlReply(badField("since", v, "want an RFC 3339 time"))
		}
		since = t
	}
	var id int64
	if v := q.Get("installation"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return ctlReply(badField("installation", v, "want a positive integer"))
		}
		id = n
	}
	return jsonReply(http.StatusOK, s.RequestLog(since, id))
}
