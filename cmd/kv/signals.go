package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

// interrupts are the signals after which a command tells the user what
// happened to the store before it ends: Ctrl-C and kill's default.
var interrupts = []os.Signal{syscall.SIGINT, syscall.SIGTERM}

// interruptExit is the exit status after signal sig, as a shell reports
// a command that the signal ended.
func interruptExit(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return exitSignaled + int(s)
	}
	return exitSignaled + int(syscall.SIGINT)
}

// onInterrupt makes SIGINT and SIGTERM end the command at once: it
// prints "kv: interrupted: " and what state() says about the store (what
// is committed, what is not, what to do), and exits 128+N. Ending at
// once is safe: a store survives the death of its process at any point
// (that is what it is for), and state says what the user needs to know.
// It returns the function that restores the default handling.
func onInterrupt(stderr io.Writer, state func() string) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, interrupts...)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			fmt.Fprintf(stderr, "%skv: interrupted: %s\n", clearLine(stderr), state())
			os.Exit(interruptExit(sig))
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}

// interruptContext is a context that SIGINT or SIGTERM cancels, for a
// command that stops by itself when interrupted (load); Signal reports
// which one came.
type interruptContext struct {
	context.Context
	sig atomic.Value
}

// Signal returns the signal that cancelled the context, or nil.
func (c *interruptContext) Signal() os.Signal {
	if s, ok := c.sig.Load().(os.Signal); ok {
		return s
	}
	return nil
}

// withInterrupt returns a context cancelled at the first SIGINT or
// SIGTERM, and the function that releases it. A second signal ends the
// process at once, with the exit status of the first.
func withInterrupt(parent context.Context, stderr io.Writer) (*interruptContext, func()) {
	ctx, cancel := context.WithCancel(parent)
	ic := &interruptContext{Context: ctx}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, interrupts...)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			ic.sig.Store(sig)
			cancel()
		case <-done:
			return
		}
		select {
		case sig := <-sigs:
			fmt.Fprintf(stderr, "%skv: interrupted again (%v): stopping at once; what was acknowledged is committed\n", clearLine(stderr), sig)
			os.Exit(interruptExit(sig))
		case <-done:
		}
	}()
	return ic, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}

// clearLine is what clears a progress line on w: nothing unless w is a
// terminal.
func clearLine(w io.Writer) string {
	if isTerminal(w) {
		return "\r\x1b[K"
	}
	return ""
}
