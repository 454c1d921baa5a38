package demo

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"time"
)

// Sample is the simulator's sweeper request count per replica at one
// instant, cumulative since the demo started.
type Sample struct {
	At     time.Time
	Counts []int64 // by replica index
}

// Span is an interval of the demo: a phase, or a replica's term as leader.
type Span struct {
	Name     string
	Replica  int // the leader's index, for terms; -1 for phases
	From, To time.Time
}

// chart is what the HTML report's SVG is drawn from.
type chart struct {
	Width, Height  float64 // of the plot area
	Left, Top      float64 // margins
	TakeoverY      float64 // the row of the takeover marks
	BandY, BandH   float64 // the sweeper leader timeline's band
	BoardBandY     float64 // the board sync leader timeline's band, as high
	Lines          []chartLine
	Terms          []chartRect
	BoardTerms     []chartRect
	Phases         []chartPhase
	Takeovers      []chartTakeover
	YTicks, XTicks []chartTick
	YLabel         string
}

type chartLine struct {
	Name, Color, Points string
}

type chartRect struct {
	X, W         float64
	Color, Title string
	// Label is the holder's name, drawn on the bar when it fits ("" when not).
	Label string
}

// takeover is a stop and the delay to the successor's first request,
// against the ADR's bound.
type takeover struct {
	At           time.Time
	Delay, Bound time.Duration
}

// chartTakeover is a takeover on the chart: a bar from the stop (X) to the
// successor's first request (X+W), a mark at the bound (BoundX), and its
// label at TextY.
type chartTakeover struct {
	X, W, BoundX, TextY float64
	Delay, Bound, Over  string
}

// label is the takeover's text on the chart.
func (t chartTakeover) label() string { return t.Delay + " (bound " + t.Bound + ")" + t.Over }

// placeTakeoverLabels gives each takeover label of ts a row, above the bars
// or below them: the first whose labels so far end left of it, so two
// takeovers close in time do not write over each other; when neither row
// is free, the one whose last label ends first.
func placeTakeoverLabels(ts []chartTakeover, barY float64) {
	rows := []float64{barY - 4, barY + 21} // baselines: above the 8 px bar, below it
	end := make([]float64, len(rows))      // where each row's last label ends
	for i := range ts {
		best := 0
		for r := range rows {
			if end[r] <= ts[i].X {
				best = r
				break
			}
			if end[r] < end[best] {
				best = r
			}
		}
		ts[i].TextY = rows[best]
		end[best] = ts[i].X + labelWidth(ts[i].label())
	}
}

type chartPhase struct {
	X    float64
	Name string
}

type chartTick struct {
	Pos   float64
	Label string
}

// palette colours replicas, in order: Okabe and Ito's colour-blind-safe
// palette (blue, orange, bluish green, reddish purple, sky blue,
// vermillion, yellow, black), so no two replicas differ by red and green
// alone.
const palette = "#0072B2 #E69F00 #009E73 #CC79A7 #56B4E9 #D55E00 #F0E442 #000000"

// colour is replica i's colour; the palette repeats after eight.
func colour(i int) string {
	cs := strings.Fields(palette)
	return cs[i%len(cs)]
}

// buildChart turns the samples into per-replica request rates over buckets
// of width bucket, stacked so the top edge is the total, the terms and
// boardTerms into the two leader bands (sweeper, board sync), and the
// phases into phase markers.
func buildChart(names []string, samples []Sample, terms, boardTerms, phases []Span, takeovers []takeover, bucket time.Duration) chart {
	c := chart{Width: 860, Height: 260, Left: 60, Top: 20, BandH: 26, YLabel: "sweeper requests/s (stacked)"}
	c.TakeoverY = c.Top + c.Height + 40
	c.BandY = c.TakeoverY + 46
	c.BoardBandY = c.BandY + c.BandH + 24
	if len(samples) < 2 {
		return c
	}
	start, end := samples[0].At, samples[len(samples)-1].At
	total := end.Sub(start)
	x := func(t time.Time) float64 { return c.Left + c.Width*float64(t.Sub(start))/float64(total) }
	nb := int(math.Ceil(float64(total) / float64(bucket)))
	// rates[r][b]: requests of replica r in bucket b, per second.
	rates := make([][]float64, len(names))
	for r := range rates {
		rates[r] = make([]float64, nb)
	}
	for i := 1; i < len(samples); i++ {
		b := min(int(samples[i].At.Sub(start)/bucket), nb-1)
		for r := range names {
			rates[r][b] += float64(samples[i].Counts[r]-samples[i-1].Counts[r]) / bucket.Seconds()
		}
	}
	// Stack the replicas' rates: the top edge is the total, each band one
	// replica's share.
	top := 1.0
	for b := range nb {
		var sum float64
		for r := range names {
			sum += rates[r][b]
		}
		top = max(top, sum)
	}
	top = niceCeil(top)
	y := func(v float64) float64 { return c.Top + c.Height - c.Height*v/top }
	base := make([]float64, nb)
	for r, name := range names {
		var upper, lower []string
		for b := range nb {
			t0, t1 := start.Add(time.Duration(b)*bucket), start.Add(time.Duration(b+1)*bucket)
			if b == nb-1 {
				t1 = end
			}
			hi := base[b] + rates[r][b]
			upper = append(upper, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x(t0), y(hi), x(t1), y(hi)))
			lower = append([]string{fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x(t1), y(base[b]), x(t0), y(base[b]))}, lower...)
			base[b] = hi
		}
		c.Lines = append(c.Lines, chartLine{Name: name, Color: colour(r), Points: strings.Join(append(upper, lower...), " ")})
	}
	rect := func(t Span) chartRect {
		r := chartRect{X: x(t.From), W: max(1, x(t.To)-x(t.From)), Color: colour(t.Replica),
			Title: fmt.Sprintf("%s leads %.2fs–%.2fs", names[t.Replica], t.From.Sub(start).Seconds(), t.To.Sub(start).Seconds())}
		if r.W >= labelWidth(names[t.Replica]) {
			r.Label = names[t.Replica]
		}
		return r
	}
	for _, tk := range takeovers {
		ct := chartTakeover{X: x(tk.At), W: max(1, x(tk.At.Add(tk.Delay))-x(tk.At)), BoundX: x(tk.At.Add(tk.Bound)),
			Delay: tk.Delay.Round(time.Millisecond).String(), Bound: tk.Bound.String()}
		if tk.Delay > tk.Bound {
			ct.Over = " (over)"
		}
		c.Takeovers = append(c.Takeovers, ct)
	}
	placeTakeoverLabels(c.Takeovers, c.TakeoverY)
	for _, t := range terms {
		c.Terms = append(c.Terms, rect(t))
	}
	for _, t := range boardTerms {
		c.BoardTerms = append(c.BoardTerms, rect(t))
	}
	for _, p := range phases {
		c.Phases = append(c.Phases, chartPhase{X: x(p.From), Name: p.Name})
	}
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		c.YTicks = append(c.YTicks, chartTick{Pos: y(v), Label: fmt.Sprintf("%.0f", v)})
	}
	step := niceCeil(total.Seconds() / 8)
	for s := 0.0; s <= total.Seconds(); s += step {
		c.XTicks = append(c.XTicks, chartTick{Pos: x(start.Add(time.Duration(s * float64(time.Second)))), Label: fmt.Sprintf("%gs", s)})
	}
	return c
}

// labelWidth is about how wide name is at the chart's 11 px font, with a
// margin: a bar narrower than this carries its name in its tooltip only.
func labelWidth(name string) float64 { return 6.5*float64(len(name)) + 8 }

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// nobreak is cell, HTML-escaped, with each word that holds a hyphen kept
// on one line: a narrow column wraps between words, never inside a flag
// such as --no-lease or a lease name such as merge-gate-sweeper.
func nobreak(cell string) template.HTML {
	words := strings.Split(cell, " ")
	for i, w := range words {
		words[i] = template.HTMLEscapeString(w)
		if strings.Contains(w, "-") {
			words[i] = `<span class="nw">` + words[i] + `</span>`
		}
	}
	return template.HTML(strings.Join(words, " "))
}

var reportTmpl = template.Must(template.New("report").Funcs(template.FuncMap{"nobreak": nobreak}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>iterion demo: one sweeper, whatever the replica count</title>
<style>
* { box-sizing: border-box; }
body { font-family: system-ui, sans-serif; margin: 0 auto; padding: 1em; color: #1b1b1b; max-width: 1100px; }
svg { width: 100%; height: auto; display: block; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: .5em 0 1.5em; }
th, td { border: 1px solid #c8ccd2; padding: .25em .6em; text-align: right; font-variant-numeric: tabular-nums; }
th:first-child, td:first-child { text-align: left; }
th { background: #eef0f3; }
.nw { white-space: nowrap; }
.legend span { display: inline-block; margin-right: 1.2em; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: middle; }
</style>
</head>
<body>
<h1>iterion demo: one sweeper, whatever the replica count</h1>
<p>{{.Summary}}</p>
<svg xmlns="http://www.w3.org/2000/svg" width="100%" viewBox="0 0 {{.W}} {{.H}}" role="img" aria-label="sweeper requests per second per replica, each takeover's delay against its bound, and each lease's holder over time">
{{with .Chart}}
<rect x="{{.Left}}" y="{{.Top}}" width="{{.Width}}" height="{{.Height}}" fill="none" stroke="#767676"/>
{{range .YTicks}}<line x1="{{$.Chart.Left}}" x2="{{$.PlotRight}}" y1="{{.Pos}}" y2="{{.Pos}}" stroke="#e4e4e4"/><text x="{{$.YTickX}}" y="{{.Pos}}" font-size="11" text-anchor="end" dominant-baseline="middle">{{.Label}}</text>
{{end}}{{range .XTicks}}<text x="{{.Pos}}" y="{{$.XTickY}}" font-size="11" text-anchor="middle">{{.Label}}</text>
{{end}}<text x="14" y="{{$.MidY}}" font-size="12" transform="rotate(-90 14 {{$.MidY}})" text-anchor="middle">{{.YLabel}}</text>
{{range .Lines}}<polygon fill="{{.Color}}" fill-opacity="0.8" stroke="{{.Color}}" stroke-width="0.5" points="{{.Points}}"><title>{{.Name}}</title></polygon>
{{end}}{{range .Phases}}<line x1="{{.X}}" x2="{{.X}}" y1="{{$.Chart.Top}}" y2="{{$.BandBottom}}" stroke="#444" stroke-dasharray="4 3"/><text x="{{.X}}" y="{{$.PhaseLabelY}}" font-size="11" dx="3">{{.Name}}</text>
{{end}}<text x="{{.Left}}" y="{{$.TakeoverLabelY}}" font-size="11">takeover: stop → successor's first request (bar), ADR bound (mark)</text>
{{range .Takeovers}}<g><title>takeover {{.Delay}}, bound {{.Bound}}{{.Over}}</title><rect x="{{.X}}" y="{{$.Chart.TakeoverY}}" width="{{.W}}" height="8" fill="#1b1b1b"/><line x1="{{.BoundX}}" x2="{{.BoundX}}" y1="{{$.TakeoverMarkTop}}" y2="{{$.TakeoverMarkBottom}}" stroke="#D55E00" stroke-width="2"/><text class="takeover-label" x="{{.X}}" y="{{.TextY}}" font-size="11">{{.Delay}} (bound {{.Bound}}){{.Over}}</text></g>
{{end}}<text x="{{.Left}}" y="{{$.BandLabelY}}" font-size="11">lease holder (merge-gate-sweeper)</text>
{{range .Terms}}<rect x="{{.X}}" y="{{$.Chart.BandY}}" width="{{.W}}" height="{{$.Chart.BandH}}" fill="{{.Color}}"><title>{{.Title}}</title></rect>{{if .Label}}<text x="{{.X}}" dx="4" y="{{$.TermLabelY}}" font-size="11" stroke="#fff" stroke-width="3" paint-order="stroke">{{.Label}}</text>{{end}}
{{end}}<text x="{{.Left}}" y="{{$.BoardBandLabelY}}" font-size="11">lease holder (forge-board-sync)</text>
{{range .BoardTerms}}<rect x="{{.X}}" y="{{$.Chart.BoardBandY}}" width="{{.W}}" height="{{$.Chart.BandH}}" fill="{{.Color}}"><title>{{.Title}}</title></rect>{{if .Label}}<text x="{{.X}}" dx="4" y="{{$.BoardTermLabelY}}" font-size="11" stroke="#fff" stroke-width="3" paint-order="stroke">{{.Label}}</text>{{end}}
{{end}}{{end}}
</svg>
<p class="legend">{{range .Chart.Lines}}<span><i style="background:{{.Color}}"></i>{{.Name}}</span>{{end}}</p>
<h2>Figures (from the simulator's own counts)</h2>
{{range .Tables}}<div class="scroll"><table><thead><tr>{{range .Header}}<th>{{nobreak .}}</th>{{end}}</tr></thead><tbody>
{{range .Rows}}<tr>{{range .}}<td>{{nobreak .}}</td>{{end}}</tr>
{{end}}</tbody></table></div>
{{end}}<ul>{{range .Findings}}<li>{{.}}</li>{{end}}</ul>
</body>
</html>
`))

// writeHTML writes the self-contained report: the chart as inline SVG and
// the demo's tables and findings.
func writeHTML(w io.Writer, summary string, tables []table, findings []string, c chart) error {
	return reportTmpl.Execute(w, map[string]any{
		"Summary":            summary,
		"Tables":             tables,
		"Findings":           findings,
		"Chart":              c,
		"W":                  c.Left + c.Width + 20,
		"H":                  c.BoardBandY + c.BandH + 20,
		"PlotRight":          c.Left + c.Width,
		"YTickX":             c.Left - 6,
		"XTickY":             c.Top + c.Height + 14,
		"MidY":               c.Top + c.Height/2,
		"BandBottom":         c.BoardBandY + c.BandH,
		"PhaseLabelY":        c.Top + 12,
		"BandLabelY":         c.BandY - 4,
		"BoardBandLabelY":    c.BoardBandY - 4,
		"TakeoverLabelY":     c.TakeoverY - 18,
		"TermLabelY":         c.BandY + c.BandH/2 + 4,
		"BoardTermLabelY":    c.BoardBandY + c.BandH/2 + 4,
		"TakeoverMarkTop":    c.TakeoverY - 2,
		"TakeoverMarkBottom": c.TakeoverY + 10,
	})
}
