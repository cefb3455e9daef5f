package model

import (
	"errors"
	"testing"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ClaimedRates: the throughput annotation first, else the kind in the
// model on the allowed types, else nothing; a malformed annotation is a
// *FieldError naming it.
func TestClaimedRates(t *testing.T) {
	m := gavel.Simulation()
	both := []topology.GPUType{topology.V100, topology.K80}

	got, notes, err := ClaimedRates(map[string]string{AnnotationThroughput: "v100=3.2, Tesla-K80=1", AnnotationJobKind: "ResNet-18"}, 1, m, both)
	require.NoError(t, err)
	assert.Empty(t, notes)
	assert.Equal(t, map[topology.GPUType]float64{topology.V100: 3.2, topology.K80: 1}, got, "the rates win over the kind")

	got, notes, err = ClaimedRates(map[string]string{AnnotationJobKind: " ResNet-18 ", AnnotationBatchSize: "64"}, 1, m, []topology.GPUType{topology.V100})
	require.NoError(t, err)
	assert.Empty(t, notes)
	want, err := m.Throughput(perfmodel.JobKey{Model: "ResNet-18", BatchSize: 64, ScaleFactor: 1}, topology.V100)
	require.NoError(t, err)
	assert.Equal(t, map[topology.GPUType]float64{topology.V100: want}, got, "only the allowed types")

	for _, ann := range []map[string]string{nil, {AnnotationJobKind: "NoSuchNet"}} {
		got, notes, err = ClaimedRates(ann, 1, m, both)
		require.NoError(t, err)
		assert.Nil(t, got)
		assert.Len(t, notes, 1, "the same rate on every type, said so")
	}

	for ann, field := range map[string]string{AnnotationThroughput: "v100=fast", AnnotationBatchSize: "-1"} {
		a := map[string]string{AnnotationJobKind: "ResNet-18", ann: field}
		_, _, err = ClaimedRates(a, 1, m, both)
		var fe *FieldError
		require.True(t, errors.As(err, &fe), "%v", err)
		assert.Equal(t, "annotation "+ann, fe.Field)
		assert.ErrorIs(t, err, ErrInvalid)
	}
	_, _, err = ClaimedRates(map[string]string{AnnotationThroughput: "v100=1,k80"}, 1, m, both)
	assert.ErrorContains(t, err, `annotation gpusched.io/throughput "v100=1,k80": entry "k80": want type=rate`)
}
