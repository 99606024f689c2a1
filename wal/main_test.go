package wal_test

import (
	"os"
	"testing"
)

// TestMain removes the log BenchmarkReplay builds on disk on its first
// run (bench_test.go).
func TestMain(m *testing.M) {
	code := m.Run()
	replayLog.cleanup()
	os.Exit(code)
}
