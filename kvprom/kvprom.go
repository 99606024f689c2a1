// Package kvprom is a Prometheus collector of a kv store's metrics
// (kvmetrics.Metrics), named kv_ followed by the metric's name. It
// registers nothing: register it on the registry of your choice, with
// the labels that tell your stores apart.
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(kvprom.NewCollector(store.Stats, prometheus.Labels{"store": "orders"}))
//
// It lives in a module of its own so that the store's users who do not
// use Prometheus never download its client.
package kvprom

import (
	"math"

	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/kvmetrics"
	"github.com/prometheus/client_golang/prometheus"
)

// Namespace prefixes every metric's name.
const Namespace = "kv"

// Collector collects a store's metrics when Prometheus scrapes.
type Collector struct {
	stats func() kv.Stats
	descs []*prometheus.Desc // in the order of kvmetrics.Metrics
}

// NewCollector returns a collector of stats (a store's Stats method, or
// any function returning kv.Stats), whose metrics carry constLabels.
func NewCollector(stats func() kv.Stats, constLabels prometheus.Labels) *Collector {
	c := &Collector{stats: stats}
	for _, m := range kvmetrics.Metrics(kv.Stats{}) {
		c.descs = append(c.descs, prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", m.Name), m.Help, nil, constLabels))
	}
	return c
}

// Describe sends the descriptions of every metric.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect sends the metrics of one call to Stats.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for i, m := range kvmetrics.Metrics(c.stats()) {
		d := c.descs[i]
		switch m.Kind {
		case kvmetrics.Counter:
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, m.Value)
		case kvmetrics.Gauge:
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, m.Value)
		case kvmetrics.Histogram:
			// Prometheus's buckets are cumulative, and +Inf is implied.
			buckets := make(map[float64]uint64, len(m.Histogram.Buckets))
			var n uint64
			for _, b := range m.Histogram.Buckets {
				n += uint64(b.Count)
				if !math.IsInf(b.UpperBound, 1) {
					buckets[b.UpperBound] = n
				}
			}
			ch <- prometheus.MustNewConstHistogram(d, uint64(m.Histogram.Count), m.Histogram.Sum, buckets)
		}
	}
}
