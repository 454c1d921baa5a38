package forge

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
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
