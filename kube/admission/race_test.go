//go:build race

package admission

// raceEnabled: the tests run under -race, where the long single-goroutine
// attack tables (which prove nothing about races) are skipped.
const raceEnabled = true
