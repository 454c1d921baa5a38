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
	BandY, BandH   float64 // the sweeper leader timeline's band
	BoardBandY     float64 // the board sync leader timeline's band, as high
	Lines          []chartLine
	Terms          []chartRect
	BoardTerms     []chartRect
	Phases         []chartPhase
	YTicks, XTicks []chartTick
	YLabel         string
}

type chartLine struct {
	Name, Color, Points string
}

type chartRect struct {
	X, W         float64
	Color, Title string
}

type chartPhase struct {
	X    float64
	Name string
}

type chartTick struct {
	Pos   float64
	Label string
}

// palette colours replicas, in order.
const palette = "#1f77b4 #d62728 #2ca02c #ff7f0e #9467bd #8c564b #e377c2 #7f7f7f #bcbd22 #17becf"

// colour is replica i's colour; the palette repeats after ten.
func colour(i int) string {
	cs := strings.Fields(palette)
	return cs[i%len(cs)]
}

// buildChart turns the samples into per-replica request rates over buckets
// of width bucket, stacked so the top edge is the total, the terms and
// boardTerms into the two leader bands (sweeper, board sync), and the
// phases into phase markers.
func buildChart(names []string, samples []Sample, terms, boardTerms, phases []Span, bucket time.Duration) chart {
	c := chart{Width: 860, Height: 260, Left: 60, Top: 20, BandH: 26, YLabel: "sweeper requests/s (stacked)"}
	c.BandY = c.Top + c.Height + 46
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
		return chartRect{X: x(t.From), W: max(1, x(t.To)-x(t.From)), Color: colour(t.Replica),
			Title: fmt.Sprintf("%s leads %.2fs–%.2fs", names[t.Replica], t.From.Sub(start).Seconds(), t.To.Sub(start).Seconds())}
	}
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

var reportTmpl = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>iterion demo: one sweeper, whatever the replica count</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1000px; }
pre { background: #f6f6f6; padding: 1em; overflow-x: auto; }
.legend span { display: inline-block; margin-right: 1.2em; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: middle; }
</style>
</head>
<body>
<h1>iterion demo: one sweeper, whatever the replica count</h1>
<p>{{.Summary}}</p>
<svg xmlns="http://www.w3.org/2000/svg" width="{{.W}}" height="{{.H}}" viewBox="0 0 {{.W}} {{.H}}" role="img" aria-label="sweeper requests per second per replica, and each lease's holder over time">
{{with .Chart}}
<rect x="{{.Left}}" y="{{.Top}}" width="{{.Width}}" height="{{.Height}}" fill="none" stroke="#999"/>
{{range .YTicks}}<line x1="{{$.Chart.Left}}" x2="{{$.PlotRight}}" y1="{{.Pos}}" y2="{{.Pos}}" stroke="#eee"/><text x="{{$.YTickX}}" y="{{.Pos}}" font-size="11" text-anchor="end" dominant-baseline="middle">{{.Label}}</text>
{{end}}{{range .XTicks}}<text x="{{.Pos}}" y="{{$.XTickY}}" font-size="11" text-anchor="middle">{{.Label}}</text>
{{end}}<text x="14" y="{{$.MidY}}" font-size="12" transform="rotate(-90 14 {{$.MidY}})" text-anchor="middle">{{.YLabel}}</text>
{{range .Lines}}<polygon fill="{{.Color}}" fill-opacity="0.75" stroke="{{.Color}}" stroke-width="0.5" points="{{.Points}}"><title>{{.Name}}</title></polygon>
{{end}}{{range .Phases}}<line x1="{{.X}}" x2="{{.X}}" y1="{{$.Chart.Top}}" y2="{{$.BandBottom}}" stroke="#444" stroke-dasharray="4 3"/><text x="{{.X}}" y="{{$.PhaseLabelY}}" font-size="11" dx="3">{{.Name}}</text>
{{end}}<text x="{{.Left}}" y="{{$.BandLabelY}}" font-size="11">lease holder (merge-gate-sweeper)</text>
{{range .Terms}}<rect x="{{.X}}" y="{{$.Chart.BandY}}" width="{{.W}}" height="{{$.Chart.BandH}}" fill="{{.Color}}" opacity="0.8"><title>{{.Title}}</title></rect>
{{end}}<text x="{{.Left}}" y="{{$.BoardBandLabelY}}" font-size="11">lease holder (forge-board-sync)</text>
{{range .BoardTerms}}<rect x="{{.X}}" y="{{$.Chart.BoardBandY}}" width="{{.W}}" height="{{$.Chart.BandH}}" fill="{{.Color}}" opacity="0.8"><title>{{.Title}}</title></rect>
{{end}}{{end}}
</svg>
<p class="legend">{{range .Chart.Lines}}<span><i style="background:{{.Color}}"></i>{{.Name}}</span>{{end}}</p>
<h2>Figures (from the simulator's own counts)</h2>
<pre>{{.Table}}</pre>
</body>
</html>
`))

// writeHTML writes the self-contained report: the chart as inline SVG and
// the demo's table.
func writeHTML(w io.Writer, summary, table string, c chart) error {
	return reportTmpl.Execute(w, map[string]any{
		"Summary":         summary,
		"Table":           table,
		"Chart":           c,
		"W":               c.Left + c.Width + 20,
		"H":               c.BoardBandY + c.BandH + 20,
		"PlotRight":       c.Left + c.Width,
		"YTickX":          c.Left - 6,
		"XTickY":          c.Top + c.Height + 14,
		"MidY":            c.Top + c.Height/2,
		"BandBottom":      c.BoardBandY + c.BandH,
		"PhaseLabelY":     c.Top + 12,
		"BandLabelY":      c.BandY - 4,
		"BoardBandLabelY": c.BoardBandY - 4,
	})
}
