// Package page is the one layout every HTML page of iterion shares: the
// document head (lang, charset, viewport), the stylesheet with its colours,
// the navigation, and the way a page shows an instant (relative to now, the
// absolute time in a tooltip) or a duration.
//
// A page supplies only its content, as a template that defines "content";
// New parses it into a copy of the layout. Pages fit a 400 px wide viewport:
// wide tables scroll inside their own box, never the document.
package page

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"math"
	"net/http"
	"strings"
	"time"
)

// The stylesheet's colours. Every text colour meets WCAG 2.x AA (a contrast
// ratio of at least 4.5:1) on every background it is drawn on; Pairs lists
// them and a test computes each ratio.
const (
	Text       = "#1b1b1b" // body text
	Muted      = "#555555" // secondary text: expired rows, notes (7.5:1 on white)
	LinkColor  = "#0645ad" // links
	Background = "#ffffff" // the page
	Header     = "#eef0f3" // table headers and the navigation bar
	Bad        = "#a4262c" // a failure or an unhealthy state
)

// Pairs lists every (text, background) colour pair the stylesheet draws.
var Pairs = [][2]string{
	{Text, Background}, {Muted, Background}, {LinkColor, Background}, {Bad, Background},
	{Text, Header}, {Muted, Header}, {LinkColor, Header},
}

var css = template.CSS(strings.NewReplacer(
	"TEXT", Text, "MUTED", Muted, "LINK", LinkColor, "BG", Background, "HEADER", Header, "BAD", Bad,
).Replace(`
*{box-sizing:border-box}
body{font-family:system-ui,sans-serif;margin:0;color:TEXT;background:BG;line-height:1.4}
nav{background:HEADER;padding:.5em 1em;display:flex;flex-wrap:wrap;gap:.3em 1em}
nav a,a{color:LINK}
main{padding:0 1em 1em;max-width:100%}
h1{font-size:1.4em}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #c8ccd2;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:HEADER}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
code{overflow-wrap:anywhere}
time,.nowrap{white-space:nowrap}
.muted,.expired,.closed{color:MUTED}
.self{font-weight:bold}
.bad{color:BAD}
footer{padding:0 1em 1em;color:MUTED}
`))

// ContentSecurityPolicy is the policy of every page: nothing may load or
// run but the layout's own stylesheet, named by its hash, so markup that
// reached a page from GitHub or an API caller past the template's escaping
// runs no script, loads nothing and sends nothing; no other site may frame
// a page; no form posts anywhere. Pages have no script, image or form.
var ContentSecurityPolicy = "default-src 'none'; style-src 'sha256-" + cssHash() + "'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// cssHash is the base64 SHA-256 of the stylesheet as the layout writes it
// inside <style>, the hash-source of ContentSecurityPolicy
// (https://www.w3.org/TR/CSP3/#grammardef-hash-source).
func cssHash() string {
	sum := sha256.Sum256([]byte(css))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// SetHeaders sets the headers of an HTML page on h: its content type,
// ContentSecurityPolicy, X-Frame-Options DENY for browsers without CSP's
// frame-ancestors, nosniff, and no Referer to the sites a page links to
// (a page's address may carry its filters).
func SetHeaders(h http.Header) {
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
}

var layout = template.Must(template.New("layout").Funcs(template.FuncMap{
	"when": func(time.Time) template.HTML { panic("page: when is bound per execution") },
	"dur":  Duration,
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} · iterion</title>
<style>{{.CSS}}</style>
</head><body>
<nav aria-label="pages">{{range .Nav}}<a href="{{.Href}}">{{.Text}}</a>{{end}}</nav>
<main>
<h1>{{.Title}}</h1>
{{template "content" .}}
</main>
<footer>owner <code>{{.Owner}}</code> · page built {{when .Now}}</footer>
</body></html>
`))

// Link is one entry of the navigation bar or of a list of links.
type Link struct{ Href, Text string }

// Data is what the layout renders. The content template sees all of it;
// its own fields are under Body.
type Data struct {
	Title string
	// Owner is the replica that served the page.
	Owner string
	// Now is the instant every relative time on the page is measured from.
	Now time.Time
	// Nav is the navigation bar.
	Nav []Link
	// Body is the page's own data.
	Body any
}

// Template is a page: the layout with one page's content. Safe for
// concurrent use.
type Template struct{ t *template.Template }

// New returns the page whose content template, content, defines
// {{define "content"}}…{{end}}; funcs adds functions to the layout's own:
// "when" (an instant as a <time> relative to Data.Now, the absolute UTC time
// in its datetime and title) and "dur" (Duration). It panics when content
// does not parse, as template.Must does: pages are parsed at init.
func New(content string, funcs template.FuncMap) *Template {
	t := template.Must(layout.Clone()).Funcs(funcs)
	return &Template{template.Must(t.Parse(content))}
}

// Execute writes the page for d to w.
func (p *Template) Execute(w io.Writer, d Data) error {
	t, err := p.t.Clone()
	if err != nil {
		return fmt.Errorf("page: %w", err)
	}
	t.Funcs(template.FuncMap{"when": func(at time.Time) template.HTML { return When(at, d.Now) }})
	return t.Execute(w, struct {
		Data
		CSS template.CSS
	}{d, css})
}

// Stamp is t in UTC with milliseconds at a fixed width
// ("2026-09-30T15:04:05.120Z"), an RFC 3339 instant whose columns line up.
func Stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// When is at as a <time> element: the text relative to now (Relative), the
// absolute instant (Stamp) in its datetime and title. The zero time is "never".
func When(at, now time.Time) template.HTML {
	if at.IsZero() {
		return `<span class="muted">never</span>`
	}
	s := template.HTMLEscapeString(Stamp(at))
	return template.HTML(`<time datetime="` + s + `" title="` + s + `">` + template.HTMLEscapeString(Relative(at, now)) + `</time>`)
}

// Relative is at relative to now: "in 1.2 s", "3 m ago", or "now" within
// 50 ms.
func Relative(at, now time.Time) string {
	d := at.Sub(now)
	switch {
	case d.Abs() < 50*time.Millisecond:
		return "now"
	case d > 0:
		return "in " + Duration(d)
	}
	return Duration(-d) + " ago"
}

// Duration is d to two significant figures at most, in the largest unit
// that keeps it at 1 or more: "350 ms", "1.2 s", "45 s", "3 m", "2.5 h", "3 d".
func Duration(d time.Duration) string {
	d = d.Abs()
	units := []struct {
		size time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}}
	for _, u := range units {
		if d >= u.size {
			return figures(float64(d)/float64(u.size)) + " " + u.name
		}
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

// figures is v with one decimal under 10 and none from 10 on.
func figures(v float64) string {
	if v < 10 {
		if s := fmt.Sprintf("%.1f", math.Floor(v*10)/10); !strings.HasSuffix(s, ".0") {
			return s
		}
		return fmt.Sprintf("%.0f", math.Floor(v))
	}
	return fmt.Sprintf("%.0f", math.Floor(v))
}

// Ranges is a sorted list of shard indices with runs joined: "0-3, 7,
// 9-10"; "none" for an empty list.
func Ranges(ns []int) string {
	if len(ns) == 0 {
		return "none"
	}
	var b strings.Builder
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1] == ns[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", ns[i], ns[j])
		} else {
			fmt.Fprintf(&b, "%d", ns[i])
		}
		i = j + 1
	}
	return b.String()
}
