package kvcli

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/kvstore/kv/filelock"
)

// PrintLocks prints one line per lock holder, under a header, or "no
// locks held".
func PrintLocks(w io.Writer, infos []filelock.Info) error {
	if len(infos) == 0 {
		_, err := fmt.Fprintln(w, "no locks held")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSLOT\tTOKEN\tPID\tHOST\tAGE\tSTATE\tWHY")
	now := time.Now()
	for _, h := range infos {
		state := "alive"
		if !h.Alive {
			state = "dead"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", h.Name, h.Slot, h.Token, h.PID, h.Host, age(now, h.Acquired), state, h.Reason)
	}
	return tw.Flush()
}

// PrintSwept prints what "locks sweep" removed.
func PrintSwept(w io.Writer, removed []filelock.Info) error {
	for _, h := range removed {
		fmt.Fprintf(w, "swept %s slot %d: token %d, pid %d on %s: %s\n", h.Name, h.Slot, h.Token, h.PID, h.Host, h.Reason)
	}
	_, err := fmt.Fprintf(w, "%s removed\n", Plural(int64(len(removed)), "dead holder"))
	return err
}

func age(now, t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// LockJSON is one holder in "locks --json".
type LockJSON struct {
	Name       string    `json:"name"`
	Slot       int       `json:"slot"`
	Token      int64     `json:"token"`
	PID        int       `json:"pid"`
	PIDStart   uint64    `json:"pid_start"`
	BootID     string    `json:"boot_id"`
	Host       string    `json:"host"`
	Nonce      string    `json:"nonce"`
	HolderFile string    `json:"holder_file,omitempty"`
	Acquired   time.Time `json:"acquired"`
	Renewed    time.Time `json:"renewed"`
	AgeSeconds float64   `json:"age_seconds"`
	Strategy   string    `json:"strategy"`
	Alive      bool      `json:"alive"`
	Reason     string    `json:"reason"`
}

// PrintLocksJSON prints one LockJSON object per holder.
func PrintLocksJSON(w io.Writer, infos []filelock.Info) error {
	enc := json.NewEncoder(w)
	now := time.Now()
	for _, h := range infos {
		if err := enc.Encode(LockJSON{
			Name: h.Name, Slot: h.Slot, Token: h.Token, PID: h.PID, PIDStart: h.PIDStart, BootID: h.BootID,
			Host: h.Host, Nonce: h.Nonce, HolderFile: h.HolderFile, Acquired: h.Acquired, Renewed: h.Renewed,
			AgeSeconds: now.Sub(h.Acquired).Seconds(), Strategy: h.Strategy, Alive: h.Alive, Reason: h.Reason,
		}); err != nil {
			return err
		}
	}
	return nil
}
