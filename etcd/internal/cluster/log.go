package cluster

import "go.uber.org/zap"

// nopLogger keeps the etcd client's log out of the tests' output.
func nopLogger() *zap.Logger { return zap.NewNop() }
