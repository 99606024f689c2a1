package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kvstore/kv/filelock"
	"github.com/kvstore/kv/internal/kvcli"
	"github.com/kvstore/kv/internal/opmodel"
	"github.com/kvstore/kv/kv"
	"github.com/kvstore/kv/record"
	"github.com/spf13/cobra"
)

// leaseExit is what every lease command says about a process that ends:
// the deadline stays, and the next writer commits the expiry.
const leaseExit = `A lease's deadline is an absolute time, logged: it does not end with
the process that granted or renewed it, and a restart moves it neither
way. From the deadline on, no command shows the lease's keys (get, scan,
dump, lease list, in any process), and the next process to open DIR for
writing (put, del, add, dump, lease ...) deletes them, in the log, where
watchers see the deletes: one that is open at the deadline does it then.`

type leaseOpts struct {
	json  bool
	every time.Duration
}

func newLeaseCmd(g *globalOpts) *cobra.Command {
	o := &leaseOpts{}
	c := &cobra.Command{
		Use:   "lease DIR list|grant TTL|keepalive ID...|revoke ID",
		Short: "List, grant, renew or revoke the leases keys are bound to",
		Long: `lease works on the leases of DIR: deadlines that keys are bound to
(put --ttl, put --lease), which the store deletes when the lease ends.

  list            every live lease: its id, TTL, deadline, time left, keys
                  (reads without the writer's lock)
  grant TTL       grant a lease (TTL such as 30s or 5m) and print its id and
                  deadline; bind keys with "put KEY VALUE --lease ID"
  keepalive ID... renew each lease: its deadline becomes now plus its TTL,
                  printed once durable; with --every D, again every D until
                  killed, opening DIR for each renewal only (other writers
                  get their turn between), and exiting 1 once one ends
  revoke ID       end a lease now: its keys are deleted at the revision
                  printed

With --json, list, grant and keepalive print one object per lease (id,
ttl, ttl_ns, deadline, deadline_unix_ns, keys), revoke {"id": ID,
"revision": N}.

` + leaseExit,
		Example: `  kv data lease grant 30s
  kv data lease grant 30s --json | jq .id
  kv data put lock/job me --lease 7          # bound to lease 7
  kv data lease keepalive 7 --every 10s &    # keeps it while this runs
  kv data lease list
  kv data lease list --json
  kv data lease revoke 7`,
		Args: args(2, -1),
		RunE: func(cmd *cobra.Command, a []string) error {
			dir, action, rest := a[0], a[1], a[2:]
			w := cmd.OutOrStdout()
			switch action {
			case "list":
				if len(rest) != 0 {
					return usagef("lease list takes no argument")
				}
				s, err := g.openRead(dir, false)
				if err != nil {
					return err
				}
				defer s.Close()
				ls, err := s.Leases()
				if err != nil {
					return err
				}
				if o.json {
					return printLeasesJSON(w, ls)
				}
				return printLeases(w, ls, time.Now())
			case "grant":
				if len(rest) != 1 {
					return usagef("lease grant takes a TTL, such as 30s")
				}
				ttl, err := parseTTL(rest[0])
				if err != nil {
					return err
				}
				s, err := g.openWrite(cmd.Context(), dir, false)
				if err != nil {
					return err
				}
				defer s.Close()
				id, err := s.Grant(ttl)
				if err != nil {
					return err
				}
				info, err := s.Lease(id)
				if err != nil {
					return err
				}
				if err := s.Close(); err != nil {
					return err
				}
				if o.json {
					return json.NewEncoder(w).Encode(leaseJSON(info))
				}
				_, err = fmt.Fprintf(w, "lease %d, deadline %s\n", id, formatDeadline(info.Deadline))
				return err
			case "keepalive":
				ids, err := parseLeaseIDs(rest)
				if err != nil {
					return err
				}
				if o.every < 0 {
					return usagef("--every: %v is negative", o.every)
				}
				return keepAlive(cmd.Context(), g, dir, ids, o.every, w, o.json)
			case "revoke":
				ids, err := parseLeaseIDs(rest)
				if err != nil {
					return err
				}
				if len(ids) != 1 {
					return usagef("lease revoke takes one lease id")
				}
				s, err := g.openWrite(cmd.Context(), dir, false)
				if err != nil {
					return err
				}
				defer s.Close()
				rev, err := s.Revoke(ids[0])
				if err != nil {
					return err
				}
				if err := s.Close(); err != nil {
					return err
				}
				if o.json {
					return json.NewEncoder(w).Encode(jsonRevoke{ID: uint64(ids[0]), Revision: rev})
				}
				_, err = fmt.Fprintf(w, "revision %d\n", rev)
				return err
			}
			return usagef("lease: %q is not list, grant, keepalive or revoke\nUsage: kv %s", action, cmd.Use)
		},
	}
	jsonFlag(c, &o.json, "list, grant, keepalive: one JSON object per lease; revoke: {\"id\", \"revision\"}")
	c.Flags().DurationVar(&o.every, "every", 0, "keepalive: renew again every D until killed (0: once)")
	g.waitFlag(c)
	g.storeFlags(c)
	return c
}

// keepAlive renews ids once, or every d until the process is signalled
// (then it exits 0) or a renewal fails. Each renewal opens the store and
// closes it, so that other writers get the directory between renewals;
// it waits for the writer's lock at most until the earliest deadline.
// Each renewal prints a line per lease, or with asJSON an object as
// "lease list --json" prints it.
func keepAlive(ctx context.Context, g *globalOpts, dir string, ids []kv.LeaseID, d time.Duration, w io.Writer, asJSON bool) error {
	enc := json.NewEncoder(w)
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	deadline := time.Time{}
	for {
		opts, err := g.storeOptions(false)
		if err != nil {
			return err
		}
		if err := requireDir(dir); err != nil {
			return err
		}
		opts.WaitForLock = true
		octx, cancel := ctx, context.CancelFunc(func() {})
		if !deadline.IsZero() {
			octx, cancel = context.WithDeadline(ctx, deadline)
		}
		s, err := kv.OpenContext(octx, dir, opts)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		var infos []kv.LeaseInfo
		for _, id := range ids {
			info, err := s.KeepAlive(id)
			if err != nil {
				s.Close()
				return err
			}
			if full, err := s.Lease(id); err == nil && asJSON {
				info.Keys = full.Keys // KeepAlive's answer leaves them out
			}
			infos = append(infos, info)
		}
		if err := s.Close(); err != nil {
			return err
		}
		deadline = time.Time{}
		for _, info := range infos {
			// Printed once durable: a holder may count on it.
			var err error
			if asJSON {
				err = enc.Encode(leaseJSON(info))
			} else {
				_, err = fmt.Fprintf(w, "lease %d, deadline %s\n", info.ID, formatDeadline(info.Deadline))
			}
			if err != nil {
				return err
			}
			if deadline.IsZero() || info.Deadline.Before(deadline) {
				deadline = info.Deadline
			}
		}
		if d == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d):
		}
	}
}

// parseTTL reads a lease's TTL, a Go duration above 0.
func parseTTL(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 || d > kv.MaxLeaseTTL {
		return 0, usagef("%q is not a TTL: want a duration such as 30s or 5m, above 0 and at most %v", s, kv.MaxLeaseTTL)
	}
	return d, nil
}

func parseLeaseIDs(a []string) ([]kv.LeaseID, error) {
	if len(a) == 0 {
		return nil, usagef("lease id missing")
	}
	var ids []kv.LeaseID
	for _, s := range a {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 {
			return nil, usagef("%q is not a lease id (a number above 0)", s)
		}
		ids = append(ids, kv.LeaseID(n))
	}
	return ids, nil
}

// formatDeadline prints a deadline in RFC 3339, UTC, to the millisecond.
func formatDeadline(t time.Time) string { return kvcli.FormatDeadline(t) }

func printLeases(w io.Writer, ls []kv.LeaseInfo, now time.Time) error {
	if len(ls) == 0 {
		_, err := fmt.Fprintln(w, "no lease")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LEASE\tTTL\tDEADLINE\tLEFT\tKEYS")
	for _, l := range ls {
		keys := make([]string, len(l.Keys))
		for i, k := range l.Keys {
			keys[i] = opmodel.Show(k)
		}
		left := l.Deadline.Sub(now).Round(time.Millisecond)
		fmt.Fprintf(tw, "%d\t%v\t%s\t%v\t%s\n", l.ID, l.TTL, formatDeadline(l.Deadline), left, strings.Join(keys, " "))
	}
	return tw.Flush()
}

type jsonLease struct {
	ID       uint64   `json:"id"`
	TTL      string   `json:"ttl"`
	TTLNanos int64    `json:"ttl_ns"`
	Deadline string   `json:"deadline"`
	Unix     int64    `json:"deadline_unix_ns"`
	Keys     []string `json:"keys"`
}

// leaseJSON is l as the lease commands print it with --json.
func leaseJSON(l kv.LeaseInfo) jsonLease {
	jl := jsonLease{ID: uint64(l.ID), TTL: l.TTL.String(), TTLNanos: int64(l.TTL),
		Deadline: formatDeadline(l.Deadline), Unix: l.Deadline.UnixNano(), Keys: []string{}}
	for _, k := range l.Keys {
		jl.Keys = append(jl.Keys, string(k))
	}
	return jl
}

// jsonRevoke is what "lease revoke --json" prints: the lease and the
// revision at which it ended, with its keys.
type jsonRevoke struct {
	ID       uint64      `json:"id"`
	Revision kv.Revision `json:"revision"`
}

func printLeasesJSON(w io.Writer, ls []kv.LeaseInfo) error {
	enc := json.NewEncoder(w)
	for _, l := range ls {
		if err := enc.Encode(leaseJSON(l)); err != nil {
			return err
		}
	}
	return nil
}

// leasePut is put's --ttl and --lease: it binds the key to a lease,
// granting one first for --ttl, and prints the lease after the
// revision.
type leasePut struct {
	ttl   string
	lease uint64
}

func (l *leasePut) add(c *cobra.Command) {
	c.Flags().StringVar(&l.ttl, "ttl", "", "bind the key to a new lease of this TTL (such as 30s): it is deleted at the lease's deadline, whether or not this process still runs (see kv lease --help)")
	c.Flags().Uint64Var(&l.lease, "lease", 0, "bind the key to lease ID (see kv lease): it is deleted when the lease ends")
}

// set reports whether put binds its key to a lease.
func (l *leasePut) set() bool { return l.ttl != "" || l.lease != 0 }

// put writes key=value bound to the lease, under fence when set, closes
// s, and returns the revision, the lease and its deadline.
func (l *leasePut) put(s *kv.Store, fence *fenceFlag, key, val []byte) (kv.Revision, kv.LeaseID, time.Time, error) {
	fail := func(err error) (kv.Revision, kv.LeaseID, time.Time, error) { return 0, 0, time.Time{}, err }
	if l.ttl != "" && l.lease != 0 {
		return fail(usagef("--ttl and --lease: give one"))
	}
	t := kv.Txn{}
	if fence.spec != "" {
		name, tok, ok := cutLast(fence.spec, ':')
		token, err := strconv.ParseInt(tok, 10, 64)
		if !ok || err != nil || token <= 0 {
			return fail(usagef("--fence %q: want NAME:TOKEN, TOKEN a decimal number above 0", fence.spec))
		}
		f, err := filelock.StoreFence(s, name, token)
		if err != nil {
			return fail(usageError{err})
		}
		t.Fence = &f
	}
	id := kv.LeaseID(l.lease)
	if l.ttl != "" {
		ttl, err := parseTTL(l.ttl)
		if err != nil {
			return fail(err)
		}
		if id, err = s.Grant(ttl); err != nil {
			return fail(err)
		}
	}
	// The lease, as the key is written: from Lease, after the put,
	// it could have ended already.
	info, err := s.Lease(id)
	if err != nil {
		return fail(err)
	}
	var rev kv.Revision
	if t.Fence == nil {
		rev, err = s.PutLease(key, val, id)
	} else {
		t.Then = []kv.Op{kv.PutOp(key, val).WithLease(id)}
		var res kv.TxnResult
		res, err = s.Txn(t)
		rev = res.Revision
	}
	if err != nil {
		if errors.Is(err, kv.ErrFenced) && l.ttl != "" {
			s.Revoke(id) // the lease granted for nothing
		}
		return fail(fencedError(err, fence.spec))
	}
	if err := s.Close(); err != nil {
		return fail(err)
	}
	return rev, id, info.Deadline, nil
}

// jsonLC is a lease record's change as "kv DIR log --json" prints it.
type jsonLC struct {
	Action   string `json:"action"`
	ID       uint64 `json:"id"`
	TTLNanos int64  `json:"ttl_ns,omitempty"`
	Deadline int64  `json:"deadline_unix_ns,omitempty"`
}

func jsonLeaseChange(lc *record.LeaseChange) *jsonLC {
	if lc.Action == 0 {
		return nil
	}
	return &jsonLC{Action: lc.Action.String(), ID: uint64(lc.ID), TTLNanos: lc.TTL, Deadline: lc.Deadline}
}

// describeLease is a lease record as "kv DIR log" prints it; dels are its
// deletes, as printed.
func describeLease(lc *record.LeaseChange, dels []string) string {
	s := fmt.Sprintf("lease %s %d", lc.Action, lc.ID)
	if lc.TTL != 0 {
		s += fmt.Sprintf(" ttl %v", time.Duration(lc.TTL))
	}
	if lc.Deadline != 0 {
		s += " deadline " + formatDeadline(time.Unix(0, lc.Deadline))
	}
	if len(dels) > 0 {
		s += ": " + strings.Join(dels, "; ")
	}
	return s
}
