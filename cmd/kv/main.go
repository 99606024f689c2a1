// Command kv recovers, inspects, verifies and repairs a kv data directory,
// and reads and writes its keys. Run "kv --help" for the commands.
//
// Its demo, its crash checkers and its spelling "kv DIR VERB" come from
// the article "Recovery Code Must Survive a Crash Too" (Mehdi Akiki),
// called the article in this command's comments and help.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
