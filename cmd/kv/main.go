// Command kv recovers, inspects, verifies and repairs a kv data directory,
// and reads and writes its keys. Run "kv --help" for the commands.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
