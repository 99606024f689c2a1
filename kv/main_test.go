package kv_test

import (
	"os"
	"testing"
)

// TestMain removes the benchmarks' fixtures (bench_test.go), which the
// first benchmark that needs them builds on disk.
func TestMain(m *testing.M) {
	code := m.Run()
	fixtures.cleanup()
	os.Exit(code)
}
