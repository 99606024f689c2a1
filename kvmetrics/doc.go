// Package kvmetrics names a store's Stats as metrics, for monitoring
// systems, and serves them to expvar without registering anything.
//
// A library that publishes its metrics globally at init or open breaks
// the program that imports it: expvar.Publish panics on a name used
// twice (two stores), and a process-wide registry mixes in names the
// program never chose (tailscale/tailscale#11505 was broken that way by
// an embedded store's expvars). This package publishes nothing and does
// not import expvar: Var returns a value the program publishes under a
// name of its choosing, if it wants it:
//
//	expvar.Publish("kv_orders", kvmetrics.Var(store.Stats))
//
// The Prometheus collector, in the module github.com/kvstore/kv/kvprom so
// that the store's users do not download the Prometheus client, names
// the same metrics, from Metrics.
package kvmetrics
