package pipeline

import "github.com/prometheus/client_golang/prometheus"

// newReadyGauge exports ready as flakestream_ready (1 ready, 0 not), the
// same answer /readyz gives, so that Prometheus can alert on a process that
// stays unready (FlakestreamNotReady in deploy/prometheus): a probe only
// restarts it, nobody is told.
func newReadyGauge(ready func() error) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "flakestream", Name: "ready",
		Help: "1 when the process is ready (in its consumer group, no pending error: what /readyz answers), else 0."},
		func() float64 {
			if ready() != nil {
				return 0
			}
			return 1
		})
}
