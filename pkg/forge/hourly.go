package forge

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"
)

// hourKey is what the hourly line breaks its total down by.
type hourKey struct {
	host, api, lane string
}

func (k hourKey) String() string { return k.host + " " + k.api + " " + k.lane }

// hourly keeps the span of the UTC hour being counted and turns the counts
// of that hour (each countEntry's hour field) into the hourly log line. Its
// roll and close are guarded by the counting transport's mutex; write is
// called outside it.
type hourly struct {
	logger *slog.Logger
	since  time.Time // the first instant this hour's counts cover
	end    time.Time // the end of the hour being counted; zero: nothing counted yet
}

func newHourly(logger *slog.Logger, started time.Time) hourly {
	return hourly{logger: logger, since: started.UTC()}
}

// hourLine is one hour's tally, ready to be written.
type hourLine struct {
	end, from, to time.Time
	partial       bool
	total, n304   int64
	points        int64 // GraphQL points
	counts        []hourCount
	// byInstallation is the requests of the busiest App installations
	// (at most hourTopInstallations), busiest first; restInstallations
	// and restRequests sum up the others. Empty without installations.
	byInstallation                  []installationCount
	restInstallations, restRequests int64
}

// hourTopInstallations bounds the installations the hourly line names: an
// App with a thousand installations still writes one readable line.
const hourTopInstallations = 5

type installationCount struct {
	id, n int64
}

type hourCount struct {
	key       hourKey
	n, points int64
}

// roll starts counting the hour now falls in, returning the line of the hour
// that was being counted when now is past its end (nil otherwise). A clock
// that steps back is counted in the current hour.
func (h *hourly) roll(now time.Time, entries map[countKey]*countEntry) *hourLine {
	now = now.UTC()
	if !h.end.IsZero() && now.Before(h.end) {
		return nil
	}
	var line *hourLine
	if !h.end.IsZero() {
		line = h.take(h.end, entries)
	}
	h.end = hourEnd(now)
	if start := h.end.Add(-time.Hour); h.since.Before(start) {
		h.since = start
	}
	return line
}

// close returns the line of the hour being counted, up to now, or nil when
// nothing was counted since the last line. Requests counted after it start
// a new partial hour at now.
func (h *hourly) close(now time.Time, entries map[countKey]*countEntry) *hourLine {
	now = now.UTC()
	line := h.take(now, entries)
	h.since = now
	return line
}

// take empties the hour's counts into a line covering since..to, or
// returns nil when there are none.
func (h *hourly) take(to time.Time, entries map[countKey]*countEntry) *hourLine {
	var total, n304, points int64
	byKey := make(map[hourKey]hourCount)
	byInstallation := make(map[int64]int64)
	for k, e := range entries {
		if e.hour == 0 && e.hourPoints == 0 {
			continue
		}
		if k.installation != 0 {
			byInstallation[k.installation] += e.hour
		}
		hk := hourKey{host: k.host, api: k.api, lane: k.lane}
		c := byKey[hk]
		c.key, c.n, c.points = hk, c.n+e.hour, c.points+e.hourPoints
		byKey[hk] = c
		total += e.hour
		points += e.hourPoints
		if k.code == 304 {
			n304 += e.hour
		}
		e.hour, e.hourPoints = 0, 0
	}
	if total == 0 && points == 0 {
		return nil
	}
	if to.After(h.end) {
		to = h.end
	}
	start := h.end.Add(-time.Hour)
	line := &hourLine{
		end: h.end, from: h.since, to: to,
		partial: h.since.After(start) || to.Before(h.end),
		total:   total, n304: n304, points: points,
		counts: make([]hourCount, 0, len(byKey)),
	}
	for _, c := range byKey {
		line.counts = append(line.counts, c)
	}
	slices.SortFunc(line.counts, func(a, b hourCount) int {
		if c := cmp.Compare(b.n, a.n); c != 0 {
			return c
		}
		return strings.Compare(a.key.String(), b.key.String())
	})
	for id, n := range byInstallation {
		line.byInstallation = append(line.byInstallation, installationCount{id: id, n: n})
	}
	slices.SortFunc(line.byInstallation, func(a, b installationCount) int {
		return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.id, b.id))
	})
	if len(line.byInstallation) > hourTopInstallations {
		for _, c := range line.byInstallation[hourTopInstallations:] {
			line.restInstallations++
			line.restRequests += c.n
		}
		line.byInstallation = line.byInstallation[:hourTopInstallations]
	}
	return line
}

// hourEnd is the end of the UTC hour t falls in.
func hourEnd(t time.Time) time.Time {
	return t.UTC().Truncate(time.Hour).Add(time.Hour)
}

// text is the line itself, e.g.
//
//	forge HTTP: 909 requests in the hour ending 2026-09-30T15:00Z — api.github.com REST merge-gate-sweeper 812, api.github.com REST review 97
//
// and for a partial hour
//
//	forge HTTP: 12 requests in the partial hour 14:23:05Z–15:00Z ending 2026-09-30T15:00Z — api.github.com REST api 12
//
// An hour with GraphQL queries also gives their points, after the total and
// after each GraphQL entry (REST entries read as before):
//
//	forge HTTP: 110 requests (10 GraphQL points) in the hour ending 2026-09-30T15:00Z — api.github.com REST webhook 100, api.github.com GraphQL merge-gate-sweeper 10 (10 points)
func (l *hourLine) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "forge HTTP: %d requests ", l.total)
	if l.points > 0 {
		fmt.Fprintf(&b, "(%d GraphQL points) ", l.points)
	}
	b.WriteString("in the ")
	if l.partial {
		fmt.Fprintf(&b, "partial hour %s–%s ending ", l.from.Format("15:04:05Z"), l.to.Format("15:04:05Z"))
	} else {
		b.WriteString("hour ending ")
	}
	b.WriteString(l.end.Format("2006-01-02T15:04Z"))
	for i, c := range l.counts {
		if i == 0 {
			b.WriteString(" — ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", c.key, c.n)
		if c.key.api == APIGraphQL {
			fmt.Fprintf(&b, " (%d points)", c.points)
		}
	}
	for i, c := range l.byInstallation {
		if i == 0 {
			b.WriteString("; by installation: ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d %d", c.id, c.n)
	}
	if l.restInstallations > 0 {
		fmt.Fprintf(&b, ", %d others %d", l.restInstallations, l.restRequests)
	}
	return b.String()
}

// write logs l at Info, with the same figures as structured attributes:
// hour_end, requests, not_modified (the 304s among them), graphql_points,
// partial, from, to, a group "counts" keyed "host API lane" (requests),
// and for an AppClient's installations a group "installations" keyed by
// installation ID (the busiest, requests) with "others" (the rest's sum).
func (h *hourly) write(l *hourLine) {
	if l == nil {
		return
	}
	counts := make([]any, 0, len(l.counts))
	for _, c := range l.counts {
		counts = append(counts, slog.Int64(c.key.String(), c.n))
	}
	attrs := []slog.Attr{
		slog.Time("hour_end", l.end),
		slog.Int64("requests", l.total),
		slog.Int64("not_modified", l.n304),
		slog.Int64("graphql_points", l.points),
		slog.Bool("partial", l.partial),
		slog.Time("from", l.from),
		slog.Time("to", l.to),
		slog.Group("counts", counts...),
	}
	if len(l.byInstallation) > 0 {
		inst := make([]any, 0, len(l.byInstallation)+1)
		for _, c := range l.byInstallation {
			inst = append(inst, slog.Int64(strconv.FormatInt(c.id, 10), c.n))
		}
		if l.restInstallations > 0 {
			inst = append(inst, slog.Int64("others", l.restRequests))
		}
		attrs = append(attrs, slog.Group("installations", inst...))
	}
	h.logger.LogAttrs(context.Background(), slog.LevelInfo, l.text(), attrs...)
}
