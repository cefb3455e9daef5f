//go:build !amd64.v3

package sim

// goldenFMA: see golden_fma_test.go.
const goldenFMA = false
