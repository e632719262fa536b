package server

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/egress"
	"github.com/runtimectl/runtimectl/session"
)

// egressCollector counts, when scraped, what the egress proxy of every session with allowed
// hosts refused, by reason, from the proxies' logs (which carry the counts).
type egressCollector struct{ c *session.Client }

var egressRefusalsDesc = prometheus.NewDesc("runtimectl_egress_refusals_total",
	"Destinations a session's egress proxy refused (--allow-host), by session and reason (not_allowed, address, mismatch, protocol), since the proxy started.",
	[]string{"session", "reason"}, nil)

func (ec egressCollector) Describe(ch chan<- *prometheus.Desc) { ch <- egressRefusalsDesc }

func (ec egressCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := ec.c.Runtimes().List(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(egressRefusalsDesc, err)
		return
	}
	for _, ci := range list {
		if ci.Session == "" || ci.Labels[contract.LabelAllowHosts] == "" {
			continue
		}
		r, err := ec.c.EgressRefusals(ctx, ci.Session)
		if err != nil {
			continue
		}
		for _, reason := range egress.Reasons {
			ch <- prometheus.MustNewConstMetric(egressRefusalsDesc, prometheus.CounterValue, float64(r.ByReason[reason]), ci.Session, string(reason))
		}
	}
}
