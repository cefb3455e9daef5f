package learn

import (
	"math"
	"testing"
)

// mergeGroups makes the runs of one program one row: the means of its
// rows per type, the latest rank, the first row's id and place; rows of
// no group stay as they are; without a shared group the input is
// returned as it is.
func TestMergeGroups(t *testing.T) {
	nan := math.NaN()
	g := groupKey{"ns/prog", 1}
	in := &popInput{cols: 2, rows: 3,
		y:     []float64{1, nan, 5, 6, nan, 2},
		rank:  []uint64{3, 7, 5},
		group: []groupKey{g, {}, g},
		id:    []uint64{10, 11, 12},
	}
	out := mergeGroups(in, groupsOf(in))
	if out.rows != 2 {
		t.Fatalf("%d rows, want 2", out.rows)
	}
	if out.y[0] != 1 || out.y[1] != 2 || out.y[2] != 5 || out.y[3] != 6 {
		t.Errorf("rows %v, want [1 2 5 6] (the group's means, then the other row)", out.y)
	}
	if out.rank[0] != 5 || out.id[0] != 10 || out.group[0] != g {
		t.Errorf("merged row: rank %d id %d group %v, want 5, 10, %v", out.rank[0], out.id[0], out.group[0], g)
	}
	single := &popInput{cols: 2, rows: 2, y: []float64{1, 2, 3, 4}, rank: []uint64{1, 2}, group: []groupKey{g, {}}, id: []uint64{1, 2}}
	if mergeGroups(single, groupsOf(single)) != single {
		t.Error("no shared group: the input itself")
	}
}
