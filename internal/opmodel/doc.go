// Package opmodel is what the crash checkers and the command line share
// about operations: the one parser of op lines ("put KEY VALUE",
// "del KEY", "add KEY N"), which kv load reads and the checkers' workloads
// are written in, and the article's workload as op lines.
//
// It is internal: the crash checkers and cmd/kv use it; no user of the
// store sees it.
//
// # Op lines
//
// One operation per line, fields separated by spaces or tabs. A KEY or
// VALUE that starts with a double quote is a Go-quoted string, for
// spaces, newlines and bytes that are not printable; N is a decimal
// int64. Blank lines and lines whose first non-blank byte is '#' are
// skipped. FuzzParseOp checks, seeded from testdata/load-lines.txt, that
// no line makes ParseLine panic and that what it accepts reads back the
// same when written out again.
//
// # Usage
//
//	op, ok, err := opmodel.ParseLine(`put "a key" v`) // kv.PutOp("a key", "v"), true, nil
//	ops := opmodel.ArticleOps()                         // the article's 17 operations
package opmodel
