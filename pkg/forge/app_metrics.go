// The App client's budgets per installation, and its metrics: the
// installation count and the lowest budgets.

package forge

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// installationBudget is one installation's latest core budget figure.
type installationBudget struct {
	id int64
	rl RateLimit
}

// Budgets is installation id's latest budget figures, one per resource
// ("core", "graphql", ...) sorted by resource, as the answers to its own
// requests through this AppClient said (the figures its rate gate holds
// requests back by). It is empty for an installation not known or that has
// made no request through this AppClient yet. It sends no request and
// makes no client.
func (a *AppClient) Budgets(id int64) []RateLimit {
	var c *Client
	a.mu.Lock()
	if in := a.known[id]; in != nil {
		c = in.client
	}
	a.mu.Unlock()
	if c == nil {
		return nil
	}
	out := c.RateLimits()
	slices.SortFunc(out, func(x, y RateLimit) int { return cmp.Compare(x.Resource, y.Resource) })
	return out
}

// lowestBudgets is the k known installations with the least core budget
// remaining, least first (ties by ID); installations that have not made a
// request yet have no figure and are left out.
func (a *AppClient) lowestBudgets(k int) []installationBudget {
	a.mu.Lock()
	clients := make(map[int64]*Client, len(a.known))
	for id, in := range a.known {
		if in.client != nil {
			clients[id] = in.client
		}
	}
	a.mu.Unlock()
	var out []installationBudget
	for id, c := range clients {
		for _, rl := range c.RateLimits() {
			if rl.Resource == "core" {
				out = append(out, installationBudget{id: id, rl: rl})
			}
		}
	}
	slices.SortFunc(out, func(x, y installationBudget) int {
		return cmp.Or(cmp.Compare(x.rl.Remaining, y.rl.Remaining), cmp.Compare(x.id, y.id))
	})
	return out[:min(k, len(out))]
}

// appCollector exports an AppClient's installations. Per-installation
// series are bounded: only the LowestBudgets installations with the least
// core budget left get one, computed at each scrape, because those are the
// ones an operator acts on (an installation about to be held back), and a
// series per installation of a 1,000-installation App would be 1,000
// series per figure. The requests each installation sent are in the
// hourly line instead, which names the busiest.
type appCollector struct{ a *AppClient }

var (
	installationsDesc = prometheus.NewDesc("forge_installations",
		"Installations of the GitHub App the forge client knows.", nil, nil)
	installationRemainingDesc = prometheus.NewDesc("forge_installation_rate_limit_remaining",
		"Core budget left to an installation, as its latest answer said; only for the installations with the least left (the App client's LowestBudgets).",
		[]string{"installation"}, nil)
)

// Describe implements prometheus.Collector.
func (c appCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- installationsDesc
	ch <- installationRemainingDesc
}

// Collect implements prometheus.Collector.
func (c appCollector) Collect(ch chan<- prometheus.Metric) {
	c.a.mu.Lock()
	n := len(c.a.known)
	c.a.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(installationsDesc, prometheus.GaugeValue, float64(n))
	for _, b := range c.a.lowestBudgets(c.a.lowest) {
		ch <- prometheus.MustNewConstMetric(installationRemainingDesc, prometheus.GaugeValue, float64(b.rl.Remaining), strconv.FormatInt(b.id, 10))
	}
}
