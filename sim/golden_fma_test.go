//go:build amd64.v3

package sim

// goldenFMA: with GOAMD64=v3 or higher the compiler fuses x*y + z into
// one multiply-add (cmd/compile's AMD64 rules), which moves the last bits
// of the golden results.
const goldenFMA = true
