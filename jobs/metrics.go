package jobs

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts what workers and the janitor do. Create it with NewMetrics
// and share it between the workers of one process.
type Metrics struct {
	claimed     *prometheus.CounterVec   // kind
	completed   *prometheus.CounterVec   // kind
	failed      *prometheus.CounterVec   // kind, outcome: retried, failed
	leasesLost  *prometheus.CounterVec   // kind
	rowsDeleted *prometheus.CounterVec   // kind (storage.Cleanup*)
	batchTime   *prometheus.HistogramVec // kind (storage.Cleanup*)
}

// NewMetrics creates the metrics and registers them on reg (for the server,
// oauth.Server.Registry()); a nil reg registers nothing. It panics if reg
// already holds them, like prometheus.MustRegister: that is a wiring
// mistake.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		claimed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authd_jobs_claimed_total",
			Help: "Jobs claimed by this process's workers, by kind (including takeovers of expired leases).",
		}, []string{"kind"}),
		completed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authd_jobs_completed_total",
			Help: "Jobs completed by this process's workers, by kind.",
		}, []string{"kind"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authd_jobs_failed_total",
			Help: "Failed job attempts by kind and outcome: retried (queued again with backoff) or failed (no attempts left).",
		}, []string{"kind", "outcome"}),
		leasesLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authd_jobs_leases_lost_total",
			Help: "Jobs this process's workers stopped because their lease was lost (expired or taken over); their results were not committed.",
		}, []string{"kind"}),
		rowsDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authd_janitor_rows_deleted_total",
			Help: "Expired rows deleted by the janitor, by kind (table).",
		}, []string{"kind"}),
		batchTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "authd_janitor_batch_seconds",
			Help:    "Duration of one janitor delete batch (one transaction), by kind (table).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"kind"}),
	}
	if reg != nil {
		reg.MustRegister(m.claimed, m.completed, m.failed, m.leasesLost, m.rowsDeleted, m.batchTime)
	}
	return m
}
