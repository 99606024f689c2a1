//go:build race

package kv_test

// raceEnabled reports a build with the race detector, whose shadow
// memory and checks cost several times the plain build's: the tests of
// records at the log's 64 MiB limit skip there (see skipUnderRace).
const raceEnabled = true
