package page

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// luminance is the WCAG 2.x relative luminance of a "#rrggbb" colour.
func luminance(t *testing.T, hex string) float64 {
	t.Helper()
	if len(hex) != 7 || hex[0] != '#' {
		t.Fatalf("colour %q is not #rrggbb", hex)
	}
	var l float64
	for i, w := range []float64{0.2126, 0.7152, 0.0722} {
		v, err := strconv.ParseUint(hex[1+2*i:3+2*i], 16, 8)
		if err != nil {
			t.Fatalf("colour %q: %v", hex, err)
		}
		c := float64(v) / 255
		if c <= 0.04045 {
			c /= 12.92
		} else {
			c = math.Pow((c+0.055)/1.055, 2.4)
		}
		l += w * c
	}
	return l
}

// contrast is the WCAG 2.x contrast ratio of two colours.
func contrast(t *testing.T, a, b string) float64 {
	la, lb := luminance(t, a), luminance(t, b)
	return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)
}

func TestContrastMeetsWCAGAA(t *testing.T) {
	// The formula's own check: #999 on white is the 2.85:1 the issue measured.
	if got := contrast(t, "#999999", "#ffffff"); math.Abs(got-2.85) > 0.01 {
		t.Fatalf("contrast(#999, #fff) = %.2f, want 2.85: the WCAG formula", got)
	}
	for _, p := range Pairs {
		if got := contrast(t, p[0], p[1]); got < 4.5 {
			t.Errorf("contrast(%s on %s) = %.2f, want ≥ 4.5: WCAG AA for normal text", p[0], p[1], got)
		}
	}
}

func TestRelativeAndDuration(t *testing.T) {
	now := time.Date(2026, 9, 30, 15, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{20 * time.Millisecond, "now"},
		{-20 * time.Millisecond, "now"},
		{350 * time.Millisecond, "in 350 ms"},
		{1234 * time.Millisecond, "in 1.2 s"},
		{-3 * time.Minute, "3 m ago"},
		{-45 * time.Second, "45 s ago"},
		{150 * time.Minute, "in 2.5 h"},
		{-72 * time.Hour, "3 d ago"},
		{2 * time.Second, "in 2 s"},
	} {
		if got := Relative(now.Add(c.d), now); got != c.want {
			t.Errorf("Relative(now%+v) = %q, want %q: relative to now, two figures at most", c.d, got, c.want)
		}
	}
}

func TestStampHasFixedWidthMilliseconds(t *testing.T) {
	a := Stamp(time.Date(2026, 9, 30, 15, 0, 0, 620e6, time.UTC))
	b := Stamp(time.Date(2026, 9, 30, 15, 0, 0, 637e6, time.FixedZone("x", 3600)))
	if a != "2026-09-30T15:00:00.620Z" || len(a) != len(b) {
		t.Errorf("Stamp = %q and %q, want 2026-09-30T15:00:00.620Z and one width: fixed-width milliseconds in UTC", a, b)
	}
}

func TestLayoutHasLangViewportAndTooltips(t *testing.T) {
	now := time.Date(2026, 9, 30, 15, 0, 0, 0, time.UTC)
	p := New(`{{define "content"}}<p>expires {{when .Body}}</p>{{end}}`, nil)
	var buf bytes.Buffer
	if err := p.Execute(&buf, Data{Title: "T", Owner: "web-1", Now: now, Nav: []Link{{"/", "index"}}, Body: now.Add(1200 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`<html lang="en">`, `name="viewport" content="width=device-width, initial-scale=1"`,
		`<time datetime="2026-09-30T15:00:01.200Z" title="2026-09-30T15:00:01.200Z">in 1.2 s</time>`,
		`<a href="/">index</a>`, `owner <code>web-1</code>`,
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("page lacks %q, want it: lang, viewport, relative times with the absolute one in a tooltip, nav, owner\n%s", want, buf.String())
		}
	}
}

func TestRangesJoinsRuns(t *testing.T) {
	for _, c := range []struct {
		ns   []int
		want string
	}{
		{nil, "none"},
		{[]int{7}, "7"},
		{[]int{0, 1, 2, 3, 7, 9, 10}, "0-3, 7, 9-10"},
		{[]int{1, 3, 5}, "1, 3, 5"},
	} {
		if got := Ranges(c.ns); got != c.want {
			t.Errorf("Ranges(%v) = %q, want %q: runs of consecutive shards joined", c.ns, got, c.want)
		}
	}
}

// TestPolicyAllowsTheLayoutsStyleAndNothingElse pins that the policy names
// the stylesheet as the layout writes it (a hash of other bytes would
// leave every page unstyled) and that the layout has nothing else a
// policy of default-src 'none' would block: no script, no style
// attribute.
func TestPolicyAllowsTheLayoutsStyleAndNothingElse(t *testing.T) {
	var buf bytes.Buffer
	if err := New(`{{define "content"}}<p>x</p>{{end}}`, nil).Execute(&buf, Data{Title: "T", Nav: []Link{{"/", "index"}}}); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	_, rest, ok := strings.Cut(html, "<style>")
	style, _, ok2 := strings.Cut(rest, "</style>")
	if !ok || !ok2 {
		t.Fatalf("page has no <style> element:\n%s", html)
	}
	sum := sha256.Sum256([]byte(style))
	if want := "style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(ContentSecurityPolicy, want) {
		t.Errorf("policy %q lacks %q, want it: the policy allows the stylesheet the page holds", ContentSecurityPolicy, want)
	}
	for _, banned := range []string{"<script", "style=", "<img", "<form", "<iframe"} {
		if strings.Contains(html, banned) {
			t.Errorf("layout holds %q, want none: the policy blocks it", banned)
		}
	}
	for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'none'"} {
		if !strings.Contains(ContentSecurityPolicy, want) {
			t.Errorf("policy %q lacks %q, want it: a page loads, runs, posts and is framed by nothing", ContentSecurityPolicy, want)
		}
	}
}
