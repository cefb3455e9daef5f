package model

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/gpusched/gpusched/perfmodel/learn"
)

// LearnedMessage says what was learned of a workload's rates, the text of
// both controllers' GPUSchedLearned events, once the estimates of the
// given sources cover two types or more: how much faster it runs on the
// fastest of them than on the slowest, the types counted, and its own
// windows ("learned: 3.0x faster on v100 than k80 (measured on 2 types,
// 14 windows)"); "" before. The admission controller counts the types the
// workload was measured on (learn.SourceMeasured); the Kueue controller,
// whose workloads run on one type for their lives, those its program's
// runs measured too (learn.SourceGroup).
func LearnedMessage(est []learn.Estimate, from ...learn.Source) string {
	var m []learn.Estimate
	windows := 0
	for _, e := range est {
		if slices.Contains(from, e.Source) {
			m = append(m, e)
			windows += e.Windows
		}
	}
	if len(m) < 2 {
		return ""
	}
	slices.SortFunc(m, func(a, b learn.Estimate) int { return cmp.Compare(b.Mean, a.Mean) })
	fast, slow := m[0], m[len(m)-1]
	return fmt.Sprintf("learned: %.1fx faster on %s than %s (measured on %d types, %d windows)", fast.Mean/slow.Mean, fast.Type, slow.Type, len(m), windows)
}

// LearnedTopic is a LearnedMessage without its count of windows, which
// moves at every report: a controller says a workload's message again
// only when its topic changes.
func LearnedTopic(msg string) string {
	if i := strings.LastIndex(msg, ", "); i >= 0 {
		return msg[:i]
	}
	return msg
}
