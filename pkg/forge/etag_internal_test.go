package forge

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// etagStub answers every GET 200 with a 1,000-byte body and an ETag.
type etagStub struct{}

func (etagStub) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{"Etag": {`W/"x"`}}, Body: io.NopCloser(strings.NewReader(strings.Repeat("x", 1000))), Request: req}, nil
}

func TestETagCacheEvictsLeastRecentlyUsedPastItsBytes(t *testing.T) {
	c := newETagCache(etagStub{}, 2500, nil)
	for n := 1; n <= 3; n++ {
		req, _ := http.NewRequestWithContext(context.Background(), "GET", "https://api.github.com/pulls/"+strconv.Itoa(n), nil)
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if c.lru.Len() != 2 || c.used > 2500 {
		t.Fatalf("got %d entries, %d bytes, want 2 entries within 2500 bytes: three 1 KB answers exceed the bound, the oldest goes", c.lru.Len(), c.used)
	}
	for el := c.lru.Front(); el != nil; el = el.Next() {
		if strings.HasSuffix(el.Value.(*etagEntry).key, "/pulls/1") {
			t.Fatalf("got pull 1 still cached, want it evicted: least recently used first")
		}
	}
}

// stubAnswer is what a stubForge answers a GET of one path with.
type stubAnswer struct {
	status int
	etag   string // "": none
	body   string
	header http.Header // sent with the answer and with its 304s
}

// stubForge answers each GET from its answer for the path: a 304 when
// If-None-Match names the answer's ETag, the answer otherwise. It records
// each request's If-None-Match by path. before, when set, runs before a
// conditional request is answered.
type stubForge struct {
	mu      sync.Mutex
	answers map[string]stubAnswer
	sent    map[string][]string
	before  func(*http.Request)
}

func newStubForge(answers map[string]stubAnswer) *stubForge {
	return &stubForge{answers: answers, sent: make(map[string][]string)}
}

func (f *stubForge) set(path string, a stubAnswer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[path] = a
}

// inm is the If-None-Match each request for path was sent with, in order.
func (f *stubForge) inm(path string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sent[path])
}

func (f *stubForge) RoundTrip(req *http.Request) (*http.Response, error) {
	inm := req.Header.Get("If-None-Match")
	f.mu.Lock()
	f.sent[req.URL.Path] = append(f.sent[req.URL.Path], inm)
	a := f.answers[req.URL.Path]
	before := f.before
	f.mu.Unlock()
	if inm != "" && before != nil {
		before(req)
	}
	h := a.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if a.etag != "" {
		h.Set("ETag", a.etag)
	}
	if inm != "" && inm == a.etag {
		return &http.Response{StatusCode: http.StatusNotModified, Header: h, Body: http.NoBody, Request: req}, nil
	}
	h.Set("Content-Length", strconv.Itoa(len(a.body)))
	return &http.Response{StatusCode: a.status, Header: h, Body: io.NopCloser(strings.NewReader(a.body)), ContentLength: int64(len(a.body)), Request: req}, nil
}

// get sends a GET of path through c and returns the answer and its body,
// read whole.
func get(t *testing.T, c *etagCache, path string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://api.github.test"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", path, err)
	}
	return resp, string(b)
}

// ok200 is a 200 answer of body with etag.
func ok200(etag, body string) stubAnswer {
	return stubAnswer{status: http.StatusOK, etag: etag, body: body}
}

// TestETagCacheKeepsOnlyA200WithAnETag pins what the cache keeps: a 200
// with an ETag, the one answer a later 304 can confirm. Any other answer
// takes no room, and the next read of its URL goes out unconditional.
func TestETagCacheKeepsOnlyA200WithAnETag(t *testing.T) {
	f := newStubForge(map[string]stubAnswer{
		"/gone":  {status: http.StatusNotFound, etag: `W/"404"`, body: `{"message":"Not Found"}`},
		"/plain": ok200("", `{}`),
	})
	c := newETagCache(f, 1<<20, nil)
	for _, path := range []string{"/gone", "/plain"} {
		get(t, c, path)
		get(t, c, path)
		if got := f.inm(path); len(got) != 2 || got[1] != "" {
			t.Errorf("GET %s twice: sent If-None-Match %q, want none the second time: only a 200 with an ETag is kept", path, got)
		}
	}
	if c.lru.Len() != 0 || c.used != 0 {
		t.Errorf("cache: got %d entries, %d bytes, want none: only a 200 with an ETag is kept", c.lru.Len(), c.used)
	}
}

// TestETagCacheKeepsAnswersUpToMaxCachedBodyAndPassesBiggerOnesWhole pins
// maxCachedBody: an answer of that many bytes is kept, a bigger one is
// not, and either reaches the caller whole.
func TestETagCacheKeepsAnswersUpToMaxCachedBodyAndPassesBiggerOnesWhole(t *testing.T) {
	for _, tc := range []struct {
		size int
		kept bool
	}{
		{maxCachedBody, true},
		{maxCachedBody + 1, false},
	} {
		body := strings.Repeat("x", tc.size-1) + "y" // a cut shows at the end
		f := newStubForge(map[string]stubAnswer{"/big": ok200(`"b"`, body)})
		c := newETagCache(f, 4*maxCachedBody, nil)
		for i := range 2 {
			if _, got := get(t, c, "/big"); got != body {
				t.Fatalf("%d-byte answer, read %d: got %d bytes, want it whole", tc.size, i+1, len(got))
			}
		}
		if kept := f.inm("/big")[1] != ""; kept != tc.kept {
			t.Errorf("%d-byte answer: kept %v, want %v: answers of up to maxCachedBody (%d) bytes are kept", tc.size, kept, tc.kept, maxCachedBody)
		}
	}
}

// TestETagCacheHoldsAtMostItsBytes pins the bound's accounting: an answer
// of exactly the bound is kept; an answer read again replaces its entry,
// counted once; an answer bigger than the whole bound is not kept and
// evicts nothing; and the bytes held are those of the entries held.
func TestETagCacheHoldsAtMostItsBytes(t *testing.T) {
	// Versions 0 to 9: every answer takes the same room.
	answer := func(v int) stubAnswer { return ok200(`"v`+strconv.Itoa(v)+`"`, strings.Repeat("x", 1000)) }
	f := newStubForge(map[string]stubAnswer{"/a": answer(0), "/b": answer(0)})
	probe := newETagCache(f, 1<<20, nil)
	get(t, probe, "/a")
	one := probe.used // the room one answer takes
	kept := func(c *etagCache, path string) bool {
		t.Helper()
		get(t, c, path)
		inm := f.inm(path)
		return inm[len(inm)-1] != ""
	}

	exact := newETagCache(f, one, nil)
	get(t, exact, "/b")
	if !kept(exact, "/b") {
		t.Errorf("an answer of exactly the bound (%d bytes): not kept, want kept: the cache holds up to its bound", one)
	}

	c := newETagCache(f, 2*one, nil)
	for v := 1; v <= 3; v++ {
		f.set("/a", answer(v))
		get(t, c, "/a") // a 200: the new version replaces the entry
	}
	get(t, c, "/b")
	if !kept(c, "/a") || !kept(c, "/b") {
		t.Errorf("after /a changed thrice, then /b: /a and /b not both kept in a bound of two answers: an answer read again replaces its entry, counted once")
	}
	f.set("/huge", ok200(`"h"`, strings.Repeat("x", 3*one)))
	get(t, c, "/huge")
	if kept(c, "/huge") {
		t.Errorf("an answer bigger than the whole bound: kept, want not")
	}
	if !kept(c, "/a") || !kept(c, "/b") {
		t.Errorf("after an answer bigger than the bound: /a and /b not both kept, want them: an answer not kept evicts nothing")
	}
	if c.used != 2*one || c.lru.Len() != 2 {
		t.Errorf("cache: got %d entries, %d bytes, want 2 entries, %d bytes: the bytes held are the entries'", c.lru.Len(), c.used, 2*one)
	}
}

// TestETagCacheEvictsTheLeastRecentlyRead pins the eviction order: a 304
// served from an entry makes it the most recently used, so the entry
// evicted is the one read longest ago, and the next read of an evicted URL
// goes out unconditional and is answered whole.
func TestETagCacheEvictsTheLeastRecentlyRead(t *testing.T) {
	body := strings.Repeat("x", 1000)
	f := newStubForge(map[string]stubAnswer{"/a": ok200(`"a"`, body), "/b": ok200(`"b"`, body), "/c": ok200(`"c"`, body)})
	probe := newETagCache(f, 1<<20, nil)
	get(t, probe, "/a")
	c := newETagCache(f, 2*probe.used, nil) // room for two answers
	for _, path := range []string{"/a", "/b", "/a", "/c"} {
		get(t, c, path)
	}
	if resp, got := get(t, c, "/b"); resp.StatusCode != http.StatusOK || got != body {
		t.Fatalf("GET /b after its eviction: got %d and %d bytes, want 200 and the whole body", resp.StatusCode, len(got))
	}
	if got := f.inm("/b"); got[len(got)-1] != "" {
		t.Errorf("GET /b after /a was read again and /c came: sent If-None-Match %q, want none: /b, read longest ago, is the one evicted, and is read again unconditionally", got[len(got)-1])
	}
}

// TestNotModifiedReplaysTheCachedAnswerWithThe304sHeaders pins what a
// served 304 looks like: the cached 200 and its body, with the 304's
// headers over the cached ones (its x-ratelimit-*, which the rate gate
// learns the budget from), X-From-Cache: 1, and a Content-Length that is
// the body's.
func TestNotModifiedReplaysTheCachedAnswerWithThe304sHeaders(t *testing.T) {
	const body = `{"number":1}`
	f := newStubForge(map[string]stubAnswer{"/pull": {status: http.StatusOK, etag: `W/"p"`, body: body,
		header: http.Header{"X-Ratelimit-Remaining": {"9"}, "Link": {`<https://api.github.test/pull?page=2>; rel="next"`}}}})
	c := newETagCache(f, 1<<20, nil)
	get(t, c, "/pull")
	f.set("/pull", stubAnswer{status: http.StatusOK, etag: `W/"p"`, body: body,
		header: http.Header{"X-Ratelimit-Remaining": {"7"}, "Content-Length": {"0"}}})
	resp, got := get(t, c, "/pull")
	h := resp.Header
	for _, bad := range []struct {
		what      string
		got, want any
	}{
		{"status", resp.StatusCode, http.StatusOK},
		{"body", got, body},
		{"X-Ratelimit-Remaining", h.Get("X-Ratelimit-Remaining"), "7"},
		{"Link", h.Get("Link"), `<https://api.github.test/pull?page=2>; rel="next"`},
		{"X-From-Cache", h.Get("X-From-Cache"), "1"},
		{"Content-Length", h.Get("Content-Length"), strconv.Itoa(len(body))},
		{"ContentLength", resp.ContentLength, int64(len(body))},
	} {
		if bad.got != bad.want {
			t.Errorf("served 304, %s: got %v, want %v", bad.what, bad.got, bad.want)
		}
	}
}

// TestNotModifiedIsServedFromTheEntryItsRequestWasMadeWith pins that a
// 304 is answered from the entry whose ETag the request sent, even when
// another read evicted that entry while the request was out: the 304
// confirms that entry, so it is never lost to the eviction.
func TestNotModifiedIsServedFromTheEntryItsRequestWasMadeWith(t *testing.T) {
	body := strings.Repeat("x", 1000)
	f := newStubForge(map[string]stubAnswer{"/a": ok200(`"a"`, body), "/b": ok200(`"b"`, body)})
	probe := newETagCache(f, 1<<20, nil)
	get(t, probe, "/a")
	c := newETagCache(f, probe.used, nil) // room for one answer
	get(t, c, "/a")
	f.before = func(req *http.Request) {
		if req.URL.Path == "/a" {
			get(t, c, "/b") // evicts /a
		}
	}
	resp, got := get(t, c, "/a")
	if resp.StatusCode != http.StatusOK || got != body {
		t.Errorf("GET /a answered 304 after its entry was evicted meanwhile: got %d and %d bytes, want 200 and the whole body", resp.StatusCode, len(got))
	}
	if inm := f.inm("/a"); inm[len(inm)-1] != `"a"` {
		t.Errorf("GET /a again: sent If-None-Match %q, want its entry's ETag", inm[len(inm)-1])
	}
}

// TestETagCacheBoundCountsHeadersKeysAndETags pins what the bound counts
// besides bodies: an answer's headers, its key (the URL) and its ETag.
// Each answer below holds a 2,000-byte part and a tiny body, so two of
// them do not fit in 3,000 bytes: the second evicts the first.
func TestETagCacheBoundCountsHeadersKeysAndETags(t *testing.T) {
	big := strings.Repeat("x", 2000)
	for _, tc := range []struct {
		part   string
		answer stubAnswer
		query  string
	}{
		{"headers", stubAnswer{status: http.StatusOK, etag: `"e"`, body: "{}", header: http.Header{"X-Big": {big}}}, ""},
		{"key", ok200(`"e"`, "{}"), "?q=" + big},
		{"ETag", ok200(`"`+big+`"`, "{}"), ""},
	} {
		f := newStubForge(map[string]stubAnswer{"/a": tc.answer, "/b": tc.answer})
		c := newETagCache(f, 3000, nil)
		for _, path := range []string{"/a", "/b", "/a"} {
			get(t, c, path+tc.query)
		}
		if inm := f.inm("/a"); inm[len(inm)-1] != "" {
			t.Errorf("2,000 bytes of %s an answer, two answers in a 3,000-byte bound: /a was still kept after /b, want it evicted: the bound counts %s", tc.part, tc.part)
		}
	}
}

// closeCounter counts the Close calls of the bodies it wraps.
type closeCounter struct {
	next   http.RoundTripper
	mu     sync.Mutex
	bodies []*countedBody
}

type countedBody struct {
	io.Reader
	closed int
}

func (b *countedBody) Close() error { b.closed++; return nil }

func (cc *closeCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := cc.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b := &countedBody{Reader: resp.Body}
	cc.mu.Lock()
	cc.bodies = append(cc.bodies, b)
	cc.mu.Unlock()
	resp.Body = b
	return resp, nil
}

// TestETagCacheClosesTheForgesBodies pins that the cache closes every body
// of the forge's it consumes: the 200 it keeps (read whole) and the 304 it
// serves from the cache, whose bodies its caller never sees. A body left
// open is a connection net/http may not reuse.
func TestETagCacheClosesTheForgesBodies(t *testing.T) {
	f := newStubForge(map[string]stubAnswer{"/a": ok200(`"a"`, "{}")})
	cc := &closeCounter{next: f}
	c := newETagCache(cc, 1<<20, nil)
	get(t, c, "/a") // a 200, kept
	get(t, c, "/a") // a 304, served
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for i, b := range cc.bodies {
		if b.closed == 0 {
			t.Errorf("answer %d: the forge's body was not closed, want it closed: the cache consumed it", i+1)
		}
	}
}

// TestETagCacheLeavesACallersOwnConditionalGETAlone pins that a GET its
// caller made conditional itself (If-None-Match set) goes out as made, and
// its 304 comes back as a 304: the caller asked for it and handles it.
func TestETagCacheLeavesACallersOwnConditionalGETAlone(t *testing.T) {
	f := newStubForge(map[string]stubAnswer{"/a": ok200(`"a"`, "{}")})
	c := newETagCache(f, 1<<20, nil)
	get(t, c, "/a") // kept
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://api.github.test/a", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("If-None-Match", `"a"`)
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if inm := f.inm("/a"); resp.StatusCode != http.StatusNotModified || inm[len(inm)-1] != `"a"` {
		t.Errorf("the caller's own conditional GET: sent If-None-Match %q, answered %d to the caller, want %q sent and the 304 passed back", inm[len(inm)-1], resp.StatusCode, `"a"`)
	}
}
