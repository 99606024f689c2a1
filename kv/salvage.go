package kv

import "github.com/kvstore/kv/recovery"

// Salvage reads what survives in the data directory dir, whatever damage
// it holds, without changing anything: no lock, no write, no checkpoint.
// Its report holds every readable snapshot entry and log record, applied
// in revision order (Map), and what could not be read: damaged byte
// ranges, the keys a damaged snapshot range may have held, the revisions
// no readable record holds, missing segments. It is the read to run
// before a repair, which drops what the damage makes unrecoverable by
// the ordinary path; kv DIR dump --salvage prints it. Only opts.FS is
// used; opts may be nil.
func Salvage(dir string, opts *Options) (*recovery.SalvageReport, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	return recovery.Salvage(o.fs(), dir)
}
