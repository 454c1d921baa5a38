// Package leaseprom holds lease.Run's Prometheus metrics: [Metrics.Observe]
// counts the events Run reports (terms, step-downs and store calls) on the
// caller's registerer. It lives apart from pkg/lease so that a user of the
// election seam compiles no metrics library.
package leaseprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/pkg/lease"
)

// Metrics are lease.Run's Prometheus metrics; set a Run's Spec.OnEvent to
// its Observe method. One Metrics may be shared by every Run of a process,
// for the same lease or different ones; it is safe for concurrent use. A nil
// *Metrics counts nothing.
//
//   - lease_held{lease}: how many Runs of this process hold the lease (a
//     term started and has not stepped down); 0 or 1 unless several
//     candidates for one lease share the process.
//   - lease_terms_started_total{lease}: terms won.
//   - lease_step_downs_total{lease,reason}: terms ended, by lease's Reason
//     constants.
//   - lease_step_down_margin_seconds{lease,reason}: how long before the
//     store's expiry of its last proven call each term stopped its work
//     (Event.Margin); the bucket le="0" counts the step-downs that came at
//     or after it, when a successor may have overlapped the term.
//   - lease_step_downs_late_total{lease}: the step-downs of that bucket,
//     at or after the store's expiry, visible at 0 from the first
//     campaign so that an alert sees the first one.
//   - lease_store_call_duration_seconds{op}: store call latency, op acquire,
//     renew, release or list (a group member's survey), answered or not.
//   - lease_store_call_errors_total{op}: store calls that did not answer
//     (ErrLost is an answer and does not count). Calls cut because Run's
//     context was done or the term ended count in neither.
//
// A lease group's events (lease.RunGroup) count in the store call series
// and in their own, by group, not per shard lease:
//
//   - lease_group_shards_held{group}: shard terms this process serves.
//   - lease_group_shards_unheld{group}: shards this member's last list
//     showed unheld.
//   - lease_group_shards_overdue{group}: shards this member has seen
//     unheld for longer than TTL + Retry (a stuck hand-over).
//   - lease_group_members{group}: live members in this member's last list.
//   - lease_group_other_members{group}: owners serving the group with
//     another shard count in this member's last list (GroupView.Others:
//     live members, and holders of unexpired shard leases); above 0 while
//     a change of the shard count is under way.
//   - lease_group_handovers_total{group,reason}: shard terms this process
//     ended, by lease's Reason constants (rebalanced: given up to even the
//     share).
//   - lease_group_step_down_margin_seconds{group,reason}: how long before
//     the store's expiry of its shard lease's last proven call each shard
//     term stopped its work, as lease_step_down_margin_seconds is for a
//     lease's terms.
//   - lease_group_step_downs_late_total{group}: the shard step-downs at
//     or after their shard lease's expiry (its bucket le="0"), visible at
//     0 from the first campaign.
//
// A shard's step-downs are counted by group, not in the lease series: the
// label lease names one lease, and a group's name is the lease's of the
// same net in another mode (merge-gate-sweeper), so the two would mix.
type Metrics struct {
	held         *prometheus.GaugeVec
	terms        *prometheus.CounterVec
	stepDowns    *prometheus.CounterVec
	margins      *prometheus.HistogramVec
	late         *prometheus.CounterVec
	callDuration *prometheus.HistogramVec
	callErrors   *prometheus.CounterVec

	groupHeld, groupUnheld, groupOverdue, groupMembers, groupOthers *prometheus.GaugeVec
	groupHandovers, groupLate                                       *prometheus.CounterVec
	groupMargins                                                    *prometheus.HistogramVec
}

// New creates Run's metrics and registers them on reg, never on the global
// registerer. It panics, as prometheus.MustRegister does, when reg already
// has metrics of these names, so call it once per registry. A nil reg
// registers them nowhere.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lease_held",
			Help: "Runs of this process that hold the lease.",
		}, []string{"lease"}),
		terms: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lease_terms_started_total",
			Help: "Terms won by this process.",
		}, []string{"lease"}),
		stepDowns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lease_step_downs_total",
			Help: "Terms ended, by reason.",
		}, []string{"lease", "reason"}),
		margins: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lease_step_down_margin_seconds",
			Help:    "How long before the store's expiry of its last proven call each term stopped its work, by reason; le=\"0\": at or after it.",
			Buckets: marginBuckets(),
		}, []string{"lease", "reason"}),
		late: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lease_step_downs_late_total",
			Help: "Terms that stopped their work at or after the lease's expiry in the store.",
		}, []string{"lease"}),
		callDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lease_store_call_duration_seconds",
			Help:    "Lease store call latency, by operation.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 8), // 1ms to 16s
		}, []string{"op"}),
		callErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lease_store_call_errors_total",
			Help: "Lease store calls that got no answer, by operation.",
		}, []string{"op"}),
		groupHeld: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lease_group_shards_held",
			Help: "Shard terms of the lease group this process serves.",
		}, []string{"group"}),
		groupUnheld: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lease_group_shards_unheld",
			Help: "Shards of the lease group unheld in this member's last list.",
		}, []string{"group"}),
		groupOverdue: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lease_group_shards_overdue",
			Help: "Shards of the lease group this member has seen unheld for longer than TTL + Retry.",
		}, []string{"group"}),
		groupMembers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lease_group_members",
			Help: "Live members of the lease group in this member's last list.",
		}, []string{"group"}),
		groupOthers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lease_group_other_members",
			Help: "Owners serving the lease group with another shard count (live members or shard holders) in this member's last list: above 0 while a change of the shard count is under way.",
		}, []string{"group"}),
		groupHandovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lease_group_handovers_total",
			Help: "Shard terms of the lease group this process ended, by reason.",
		}, []string{"group", "reason"}),
		groupMargins: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lease_group_step_down_margin_seconds",
			Help:    "How long before the store's expiry of its shard lease's last proven call each shard term of the lease group stopped its work, by reason; le=\"0\": at or after it.",
			Buckets: marginBuckets(),
		}, []string{"group", "reason"}),
		groupLate: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lease_group_step_downs_late_total",
			Help: "Shard terms of the lease group that stopped their work at or after their shard lease's expiry in the store.",
		}, []string{"group"}),
	}
	if reg != nil {
		reg.MustRegister(m.held, m.terms, m.stepDowns, m.margins, m.late, m.callDuration, m.callErrors,
			m.groupHeld, m.groupUnheld, m.groupOverdue, m.groupMembers, m.groupOthers, m.groupHandovers, m.groupMargins, m.groupLate)
	}
	return m
}

// marginBuckets are the step-down margin histograms' buckets: 0 first, so
// that a late step-down has a bucket of its own; then 1ms to 262s.
func marginBuckets() []float64 {
	return append([]float64{0}, prometheus.ExponentialBuckets(0.001, 4, 10)...)
}

// Observe counts one event of a Run: Campaigning makes the lease's
// counters visible at 0 before its first term; Elected counts a term and marks the
// lease held; SteppedDown counts the end of a term by reason, observes its
// margin (counting it late when zero or less) and marks it no longer held; StoreCalled times the call by op,
// and counts it as an error when it failed (the lease name is not a label:
// the store is shared by every lease). A group's events count in the group
// series (see Metrics), a shard's step-down and its margin among them.
// Other events count nothing.
func (m *Metrics) Observe(e lease.Event) {
	if m == nil {
		return
	}
	if e.Group != "" && e.Kind != lease.StoreCalled {
		m.observeGroup(e)
		return
	}
	switch e.Kind {
	case lease.Campaigning:
		m.held.WithLabelValues(e.Name).Add(0)
		m.terms.WithLabelValues(e.Name).Add(0)
		m.late.WithLabelValues(e.Name).Add(0)
	case lease.Elected:
		m.held.WithLabelValues(e.Name).Inc()
		m.terms.WithLabelValues(e.Name).Inc()
	case lease.SteppedDown:
		m.held.WithLabelValues(e.Name).Dec()
		m.stepDowns.WithLabelValues(e.Name, e.Reason).Inc()
		m.margins.WithLabelValues(e.Name, e.Reason).Observe(e.Margin.Seconds())
		if e.Margin <= 0 {
			m.late.WithLabelValues(e.Name).Inc()
		}
	case lease.StoreCalled:
		m.callDuration.WithLabelValues(e.Op).Observe(e.Took.Seconds())
		if e.Failed {
			m.callErrors.WithLabelValues(e.Op).Inc()
		}
	}
}

// observeGroup counts an event of a lease group other than a store call.
func (m *Metrics) observeGroup(e lease.Event) {
	switch e.Kind {
	case lease.Campaigning:
		m.groupHeld.WithLabelValues(e.Group).Add(0)
		m.groupLate.WithLabelValues(e.Group).Add(0)
	case lease.Elected:
		m.groupHeld.WithLabelValues(e.Group).Inc()
	case lease.SteppedDown:
		m.groupHeld.WithLabelValues(e.Group).Dec()
		m.groupHandovers.WithLabelValues(e.Group, e.Reason).Inc()
		m.groupMargins.WithLabelValues(e.Group, e.Reason).Observe(e.Margin.Seconds())
		if e.Margin <= 0 {
			m.groupLate.WithLabelValues(e.Group).Inc()
		}
	case lease.Surveyed:
		m.groupUnheld.WithLabelValues(e.Group).Set(float64(len(e.View.Unheld())))
		m.groupOverdue.WithLabelValues(e.Group).Set(float64(len(e.View.Overdue)))
		m.groupMembers.WithLabelValues(e.Group).Set(float64(len(e.View.Members)))
		m.groupOthers.WithLabelValues(e.Group).Set(float64(len(e.View.OtherOwners())))
	}
}
