package kueue

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A saved document that is wrong in any way is an error naming the
// fault, never a panic or a partial restore.
func TestReadLearnedRefusesBadDocuments(t *testing.T) {
	for doc, want := range map[string]string{
		`{`:                                    "saved document",
		`{"version":2,"learner":{}}`:           "version 2",
		`{"version":1}`:                        "no estimator's snapshot",
		`{"version":1,"learner":null}`:         "no estimator's snapshot",
		`{"version":1,"learner":{},"extra":1}`: "unknown field",
		`{"version":1,"learner":{},"workloads":{"noslash":"u"}}`:                            "workload",
		`{"version":1,"learner":{},"workloads":{"a/b":""}}`:                                 "workload",
		`{"version":1,"learner":{},"restarts":{"a/b":{"segment":1,"restarts":1024}}}`:       "restarts",
		`{"version":1,"learner":{},"workloads":{"a/` + strings.Repeat("x", 400) + `":"u"}}`: "workload",
	} {
		_, err := readLearned([]byte(doc))
		require.Error(t, err, doc)
		assert.Contains(t, err.Error(), want, doc)
	}
	d, err := readLearned([]byte(`{"version":1,"learner":{},"workloads":{"a/b":"u"},"restarts":{"a/b":{"segment":5,"restarts":2}}}`))
	require.NoError(t, err)
	assert.Equal(t, savedRestarts{Segment: 5, Restarts: 2}, d.Restarts["a/b"])
}
