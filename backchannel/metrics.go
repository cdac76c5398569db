package backchannel

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts deliveries. Create it with NewMetrics and share it between
// the Deliverers of one process.
type Metrics struct {
	deliveries *prometheus.CounterVec // result: delivered, retry, given_up
	pending    prometheus.Gauge
	leasesLost prometheus.Counter
	seconds    prometheus.Histogram
}

// NewMetrics creates the metrics and registers them on reg; a nil reg
// registers nothing. It panics if reg already holds them.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authd_backchannel_deliveries_total",
			Help: "Back-channel logout attempts by result: delivered (2xx), retry (queued again with back-off), given_up (older than AUTHD_BACKCHANNEL_GIVE_UP).",
		}, []string{"result"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "authd_backchannel_pending",
			Help: "Back-channel logout deliveries not yet delivered or given up (all processes; refreshed every few seconds).",
		}),
		leasesLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "authd_backchannel_leases_lost_total",
			Help: "Back-channel logout attempts whose lease was lost before the outcome was written; another worker sends them again.",
		}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "authd_backchannel_post_seconds",
			Help:    "Duration of one back-channel logout POST.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
	}
	for _, r := range []string{resultDelivered, resultRetry, resultGivenUp} {
		m.deliveries.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.deliveries, m.pending, m.leasesLost, m.seconds)
	}
	return m
}

// The result label values.
const (
	resultDelivered = "delivered"
	resultRetry     = "retry"
	resultGivenUp   = "given_up"
)
