package forge

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// maxCachedBody is the largest body the ETag cache keeps; bigger answers
// pass through uncached.
const maxCachedBody = 1 << 20

// etagCache makes GETs conditional: it sends If-None-Match with the ETag of
// the last 200 answer for the same URL, Authorization and Accept headers,
// and serves a 304 from the cached answer, so the caller sees that 200 again
// (with the 304's fresh headers and X-From-Cache: 1). It sits below the auth
// transport, so it sees each request's token: GitHub's answers vary by
// Authorization and by Accept (their Vary header says so; one URL answers
// JSON, a diff or a patch by the media type asked for: Media types,
// https://docs.github.com/rest/using-the-rest-api/media-types), so an ETag
// is only ever sent back with the token and media type it was issued to, and
// a rotated installation token starts cold. GitHub does not charge an
// authorised 304 to the primary budget ("Making a conditional request does
// not count against your primary rate limit if a 304 response is returned
// and the request was made while correctly authorized with an Authorization
// header": Best practices for using the REST API, Use conditional requests
// if appropriate,
// https://docs.github.com/rest/using-the-rest-api/best-practices-for-using-the-rest-api#use-conditional-requests-if-appropriate);
// the counting transport, below this one, still counts it, with code 304.
//
// A GET its caller made conditional itself passes through untouched, and
// a 304 the cache holds no answer for (one to a GET sent unconditional)
// reaches the caller as a 304. A 304 is served from the entry whose ETag
// its request sent, even if that entry was evicted meanwhile; a URL whose
// entry was evicted is read again unconditionally. The cache holds at
// most maxBytes of answers (body, headers, key and ETag), dropping the
// least recently used. Safe for concurrent use.
type etagCache struct {
	next     http.RoundTripper
	maxBytes int
	hits     *prometheus.CounterVec // by lane; nil: not exported

	mu    sync.Mutex
	used  int        // bytes held
	lru   *list.List // of *etagEntry, most recent first
	byKey map[string]*list.Element
}

type etagEntry struct {
	key    string
	etag   string
	status int
	header http.Header
	body   []byte
}

// size is what e holds, as the cache's bound counts it.
func (e *etagEntry) size() int {
	n := len(e.key) + len(e.etag) + len(e.body)
	for k, vs := range e.header {
		for _, v := range vs {
			n += len(k) + len(v)
		}
	}
	return n
}

// newETagHitsVec registers forge_etag_hits_total on reg (see
// registerShared).
func newETagHitsVec(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	return registerShared(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "forge_etag_hits_total",
		Help: "Forge GETs the forge answered 304 and the ETag cache served, by lane.",
	}, []string{"lane"}))
}

func newETagCache(next http.RoundTripper, maxBytes int, hits *prometheus.CounterVec) *etagCache {
	return &etagCache{next: next, maxBytes: maxBytes, hits: hits, lru: list.New(), byKey: make(map[string]*list.Element)}
}

// RoundTrip implements http.RoundTripper.
func (c *etagCache) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.Header.Get("If-None-Match") != "" {
		return c.next.RoundTrip(req)
	}
	// The token is hashed, so the cache's keys hold no credential.
	sum := sha256.Sum256([]byte(req.Header.Get("Authorization")))
	key := hex.EncodeToString(sum[:16]) + " " + req.Header.Get("Accept") + " " + req.URL.String()
	cached := c.get(key)
	if cached != nil {
		r := req.Clone(req.Context())
		r.Header.Set("If-None-Match", cached.etag)
		req = r
	}
	resp, err := c.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusNotModified && cached != nil:
		resp.Body.Close()
		if c.hits != nil {
			c.hits.WithLabelValues(laneOf(req.Context())).Inc()
		}
		return cached.response(req, resp.Header), nil
	case resp.StatusCode == http.StatusOK && resp.Header.Get("ETag") != "":
		return c.store(key, resp)
	}
	return resp, nil
}

func (c *etagCache) get(key string) *etagEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(el)
	return el.Value.(*etagEntry)
}

// store reads resp's body into the cache and hands back a response that
// replays it.
func (c *etagCache) store(key string, resp *http.Response) (*http.Response, error) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCachedBody+1))
	if err != nil {
		resp.Body.Close()
		return nil, err
	}
	if len(body) > maxCachedBody {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
		return resp, nil
	}
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	e := &etagEntry{key: key, etag: resp.Header.Get("ETag"), status: resp.StatusCode, header: resp.Header.Clone(), body: body}
	size := e.size()
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		c.used -= el.Value.(*etagEntry).size()
		c.lru.Remove(el)
		delete(c.byKey, key)
	}
	if size > c.maxBytes {
		return resp, nil
	}
	c.byKey[key] = c.lru.PushFront(e)
	c.used += size
	for c.used > c.maxBytes {
		old := c.lru.Remove(c.lru.Back()).(*etagEntry)
		delete(c.byKey, old.key)
		c.used -= old.size()
	}
	return resp, nil
}

// response is the cached answer replayed for req, its headers refreshed by
// those of the 304 that confirmed it.
func (e *etagEntry) response(req *http.Request, fresh http.Header) *http.Response {
	h := e.header.Clone()
	for k, v := range fresh {
		if k != "Content-Length" {
			h[k] = v
		}
	}
	h.Set("X-From-Cache", "1")
	return &http.Response{
		Status:        strconv.Itoa(e.status) + " " + http.StatusText(e.status),
		StatusCode:    e.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(e.body)),
		ContentLength: int64(len(e.body)),
		Request:       req,
	}
}
