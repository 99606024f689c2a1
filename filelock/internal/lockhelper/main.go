// Command lockhelper drives package filelock from the tests, as a real
// process: it reads commands from stdin, one a line, and prints one
// result line for each.
//
//	acquire NAME [TIMEOUT]   "token T slot S" | "locked ..." | "error ..."
//	try NAME                 as acquire, failing fast
//	release                  "released" | "lost" | "error ..."
//	extend                   "extended" | "lost" | "error ..."
//	put KEY VALUE            a fenced put: "put REV" | "fenced" | "error ..."
//	sweep                    "swept N"
//	cycle NAME N HOLD LOG    N acquire/release cycles holding HOLD each,
//	                         appending "start T" and "end T" to LOG in the
//	                         critical section; "cycle T WAIT" per cycle
//	autoextend EVERY         extend the held lock every EVERY in the background
//	exit
//
// Flags: -dir DIR, -strategy, -stale, -slots, -store (keep the store
// open in this process: New instead of Open), -checkpoint-bytes.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kvstore/kv/filelock"
	"github.com/kvstore/kv/kv"
)

func main() {
	dir := flag.String("dir", "", "data directory")
	strategy := flag.String("strategy", "kernel-first", "strategy")
	stale := flag.Duration("stale", 0, "stale-after")
	slots := flag.Int("slots", 1, "slots")
	keep := flag.Bool("store", false, "keep the store open (New)")
	ckpt := flag.Int64("checkpoint-bytes", 0, "store checkpoint threshold")
	seg := flag.Int64("segment-size", 0, "store segment size")
	flag.Parse()
	st, err := filelock.ParseStrategy(*strategy)
	if err != nil {
		fail(err)
	}
	so := filelock.DefaultStoreOptions
	so.SegmentSize = *seg
	if *ckpt != 0 {
		so.CheckpointBytes = *ckpt
	}
	opts := []filelock.Option{filelock.WithStrategy(st), filelock.WithStaleAfter(*stale), filelock.WithSlots(*slots), filelock.WithStoreOptions(so)}
	var l *filelock.Locker
	if *keep {
		s, err := kv.Open(*dir, &so)
		if err != nil {
			fail(err)
		}
		defer s.Close()
		l, err = filelock.New(s, opts...)
		if err != nil {
			fail(err)
		}
	} else if l, err = filelock.Open(*dir, opts...); err != nil {
		fail(err)
	}
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, a ...any) {
		fmt.Fprintf(out, format+"\n", a...)
		out.Flush()
	}
	say("ready %d", os.Getpid())
	var h *filelock.Holder
	in := bufio.NewScanner(os.Stdin)
	ctx := context.Background()
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "acquire", "try":
			var err error
			if f[0] == "try" {
				h, err = l.TryAcquire(f[1])
			} else {
				c, cancel := context.WithTimeout(ctx, arg(f, 2, time.Minute))
				h, err = l.Acquire(c, f[1])
				cancel()
			}
			switch {
			case err == nil:
				say("token %d slot %d", h.Token(), h.Slot())
			case errors.Is(err, filelock.ErrLocked):
				say("locked %v", err)
			case errors.Is(err, filelock.ErrSlotsMismatch):
				say("slots %v", err)
			default:
				say("error %v", err)
			}
		case "release":
			say("%s", result(h.Release(), "released"))
		case "extend":
			say("%s", result(h.Extend(ctx), "extended"))
		case "autoextend":
			every := arg(f, 1, 50*time.Millisecond)
			go func(h *filelock.Holder) {
				for {
					time.Sleep(every)
					if h.Extend(ctx) != nil {
						return
					}
				}
			}(h)
			say("ok")
		case "put":
			rev, err := h.Put(ctx, f[1], []byte(f[2]))
			switch {
			case err == nil:
				say("put %d", rev)
			case errors.Is(err, kv.ErrFenced):
				say("fenced %v", err)
			default:
				say("error %v", err)
			}
		case "sweep":
			rm, err := l.Sweep(ctx)
			if err != nil {
				say("error %v", err)
			} else {
				say("swept %d", len(rm))
			}
		case "cycle":
			n, _ := strconv.Atoi(f[2])
			hold := arg(f, 3, 0)
			for range n {
				t0 := time.Now()
				h, err := l.Acquire(ctx, f[1])
				if err != nil {
					say("error %v", err)
					break
				}
				wait := time.Since(t0)
				appendLine(f[4], fmt.Sprintf("start %d", h.Token()))
				time.Sleep(hold)
				appendLine(f[4], fmt.Sprintf("end %d", h.Token()))
				if err := h.Release(); err != nil {
					say("error %v", err)
					break
				}
				say("cycle %d %d", h.Token(), wait.Microseconds())
			}
			say("done")
		case "exit":
			return
		default:
			say("error unknown command %q", f[0])
		}
	}
}

func result(err error, ok string) string {
	switch {
	case err == nil:
		return ok
	case errors.Is(err, filelock.ErrLockLost):
		return "lost"
	}
	return "error " + err.Error()
}

func arg(f []string, i int, def time.Duration) time.Duration {
	if i >= len(f) {
		return def
	}
	d, err := time.ParseDuration(f[i])
	if err != nil {
		fail(err)
	}
	return d
}

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fail(err)
	}
	f.WriteString(line + "\n")
	f.Close()
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "lockhelper:", err)
	os.Exit(1)
}
