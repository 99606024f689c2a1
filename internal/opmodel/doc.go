// Package opmodel is what the crash checkers and the command line share
// about operations and maps: the one parser of op lines ("put KEY VALUE",
// "del KEY", "add KEY N"), which kv load reads and the checkers'
// workloads are written in; the one format of a map as text, the lines
// kv dump prints, and its parser; the map after each prefix of a list of
// operations (History), which a recovered map must be one of; the wording
// of how two maps differ ("c=110 instead of 55, d=14 instead of 7"); and
// the article's workload as op lines.
//
// It is internal: the crash checkers (crashsim, killdriver) and cmd/kv use
// it; no user of the store sees it.
//
// # Op lines
//
// One operation per line, fields separated by spaces or tabs. A KEY or
// VALUE that starts with a double quote is a Go-quoted string, for
// spaces, newlines and bytes that are not printable; N is a decimal
// int64. Blank lines and lines whose first non-blank byte is '#' are
// skipped. A dump line (below) is an op line too: "put KEY VALUE", so
// that kv load reads what kv dump prints. FuzzParseOp checks, seeded from testdata/load-lines.txt, that
// no line makes ParseLine panic and that what it accepts reads back the
// same when written out again.
//
// # Dump lines
//
// One KEY=VALUE line per key, in key order. A key or value is printed as
// it is unless that would be ambiguous (bytes that are not printable
// UTF-8, '=', a newline, a leading double quote, a leading or trailing
// space; for a key also any space and a leading '#', so that the line is
// neither an op line nor a comment): then it is Go-quoted. The checkers
// compare maps as their dumps: two maps are equal when their dumps are.
// FuzzDump checks that every key and value reads back, through ParseDump
// and as kv load reads it.
//
// # History
//
// A History applies records of operations to a map with the store's own
// rules (record.Map.Apply), revision by revision, and keeps the dump of
// the map after each: what the simulator's reference model and the kill
// driver hold a recovered map against. It does not go through the
// store's log, committer or recovery, which are what the checkers test.
//
// # Usage
//
//	op, ok, err := opmodel.ParseLine(`put "a key" v`) // kv.PutOp("a key", "v"), true, nil
//	ops := opmodel.ArticleOps()                         // the article's 17 operations
//	got, err := opmodel.ParseDump(out)                  // the output of kv DIR dump
//	fmt.Println(opmodel.Describe(want, got))            // c=110 instead of 55, d=14 instead of 7
//	h, err := opmodel.Replay(ops)                       // one record per operation
//	ok := h.Dump(k) == opmodel.Dump(got)                // got is the map after the first k
package opmodel
