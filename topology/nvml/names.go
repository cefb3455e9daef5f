package nvml

import (
	"strings"

	"github.com/gpusched/gpusched/topology"
)

// TypeOf maps an NVML product name ("NVIDIA A100-SXM4-40GB", "Tesla
// V100-SXM2-16GB") to a GPU type: a well-known one when the name holds its
// model, else a custom type made of the name.
func TypeOf(name string) topology.GPUType {
	u := strings.ToUpper(name)
	// Longer names first: A100 before A10, L40S before L4.
	for _, m := range []struct {
		token string
		t     topology.GPUType
	}{
		{"B200", topology.B200}, {"H200", topology.H200}, {"H100", topology.H100}, {"A100", topology.A100}, {"A10", topology.A10},
		{"L40S", topology.L40S}, {"L4", topology.L4}, {"V100", topology.V100}, {"P100", topology.P100}, {"T4", topology.T4}, {"K80", topology.K80},
	} {
		if containsToken(u, m.token) {
			return m.t
		}
	}
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	t := strings.TrimPrefix(strings.TrimPrefix(b.String(), "nvidia-"), "tesla-")
	if len(t) > 64 {
		t = t[:64]
	}
	if t == "" {
		t = "unknown"
	}
	return topology.GPUType(t)
}

// containsToken reports whether tok appears in s not followed by another
// letter or digit (so "A10" does not match "A100", nor "L4" "L40S").
func containsToken(s, tok string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], tok)
		if j < 0 {
			return false
		}
		end := i + j + len(tok)
		if end == len(s) || !isAlnum(s[end]) {
			if start := i + j; start == 0 || !isAlnum(s[start-1]) {
				return true
			}
		}
		i += j + 1
	}
}

func isAlnum(c byte) bool { return c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
