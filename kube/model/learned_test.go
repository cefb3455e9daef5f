package model_test

import (
	"testing"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
)

func TestLearnedMessage(t *testing.T) {
	est := []learn.Estimate{
		{Type: topology.K80, Mean: 1, Source: learn.SourceMeasured, Windows: 5},
		{Type: topology.P100, Mean: 2, Source: learn.SourcePrior},
		{Type: topology.V100, Mean: 3.04, Source: learn.SourceGroup, Windows: 0},
	}
	assert.Empty(t, model.LearnedMessage(est, learn.SourceMeasured), "one type measured")
	msg := model.LearnedMessage(est, learn.SourceMeasured, learn.SourceGroup)
	assert.Equal(t, "learned: 3.0x faster on v100 than k80 (measured on 2 types, 5 windows)", msg)
	assert.Equal(t, "learned: 3.0x faster on v100 than k80 (measured on 2 types", model.LearnedTopic(msg))
	assert.Empty(t, model.LearnedMessage(nil, learn.SourceMeasured))
}
