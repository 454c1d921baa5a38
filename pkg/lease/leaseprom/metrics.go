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
//   - lease_store_call_duration_seconds{op}: store call latency, op acquire,
//     renew or release, answered or not.
//   - lease_store_call_errors_total{op}: store calls that did not answer
//     (ErrLost is an answer and does not count). Calls cut because Run's
//     context was done or the term ended count in neither.
type Metrics struct {
	held         *prometheus.GaugeVec
	terms        *prometheus.CounterVec
	stepDowns    *prometheus.CounterVec
	callDuration *prometheus.HistogramVec
	callErrors   *prometheus.CounterVec
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
		callDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lease_store_call_duration_seconds",
			Help:    "Lease store call latency, by operation.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 8), // 1ms to 16s
		}, []string{"op"}),
		callErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lease_store_call_errors_total",
			Help: "Lease store calls that got no answer, by operation.",
		}, []string{"op"}),
	}
	if reg != nil {
		reg.MustRegister(m.held, m.terms, m.stepDowns, m.callDuration, m.callErrors)
	}
	return m
}

// Observe counts one event of a Run: Campaigning makes the lease's series
// visible at 0 before its first term; Elected counts a term and marks the
// lease held; SteppedDown counts the end of a term by reason and marks it no
// longer held; StoreCalled times the call by op, and counts it as an error
// when it failed (the lease name is not a label: the store is shared by
// every lease). Other events count nothing.
func (m *Metrics) Observe(e lease.Event) {
	if m == nil {
		return
	}
	switch e.Kind {
	case lease.Campaigning:
		m.held.WithLabelValues(e.Name).Add(0)
		m.terms.WithLabelValues(e.Name).Add(0)
	case lease.Elected:
		m.held.WithLabelValues(e.Name).Inc()
		m.terms.WithLabelValues(e.Name).Inc()
	case lease.SteppedDown:
		m.held.WithLabelValues(e.Name).Dec()
		m.stepDowns.WithLabelValues(e.Name, e.Reason).Inc()
	case lease.StoreCalled:
		m.callDuration.WithLabelValues(e.Op).Observe(e.Took.Seconds())
		if e.Failed {
			m.callErrors.WithLabelValues(e.Op).Inc()
		}
	}
}
