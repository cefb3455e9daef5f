package model_test

import (
	"strings"
	"testing"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

// Runs of one program (same namespace, images, commands, arguments and
// GPU count) share a group; anything else that the cluster sees of the
// program splits them; what does not name the program (environment,
// resources, labels) does not; a kind names the group within the
// namespace, and a kind that is not a plain name is hashed.
func TestProgramGroup(t *testing.T) {
	kind := func(k, b string) map[string]string {
		return map[string]string{model.AnnotationJobKind: k, model.AnnotationBatchSize: b}
	}
	spec := func(mod func(*corev1.PodSpec)) *corev1.PodSpec {
		s := &corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "fetch", Image: "busybox:1.36", Command: []string{"sh", "-c", "fetch data"}}},
			Containers: []corev1.Container{{Name: "train", Image: "registry.example/train:v3", Command: []string{"python", "train.py"},
				Args: []string{"--lr", "0.1"}, Env: []corev1.EnvVar{{Name: "RUN", Value: "1"}}}},
		}
		if mod != nil {
			mod(s)
		}
		return s
	}
	base := model.ProgramGroup("team-a", spec(nil), 4, nil)
	assert.Regexp(t, `^team-a/sha256/[0-9a-f]{32}/x4$`, base)
	same := []func(*corev1.PodSpec){
		func(s *corev1.PodSpec) { s.Containers[0].Env[0].Value = "2" },
		func(s *corev1.PodSpec) { s.Containers[0].Name = "other" },
		func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"a": "b"} },
	}
	for i, m := range same {
		assert.Equal(t, base, model.ProgramGroup("team-a", spec(m), 4, nil), "change %d does not name another program", i)
	}
	differ := []func(*corev1.PodSpec){
		func(s *corev1.PodSpec) { s.Containers[0].Image = "registry.example/train:v4" },
		func(s *corev1.PodSpec) { s.Containers[0].Args[1] = "0.2" },
		func(s *corev1.PodSpec) { s.Containers[0].Command = []string{"python", "eval.py"} },
		// A boundary moved between command and arguments, or between
		// two arguments, is another program.
		func(s *corev1.PodSpec) {
			s.Containers[0].Command = []string{"python", "train.py", "--lr"}
			s.Containers[0].Args = []string{"0.1"}
		},
		func(s *corev1.PodSpec) { s.Containers[0].Args = []string{"--lr0", ".1"} },
		func(s *corev1.PodSpec) { s.InitContainers = nil },
		func(s *corev1.PodSpec) {
			s.InitContainers, s.Containers = nil, append(s.InitContainers, s.Containers...)
		},
	}
	for i, m := range differ {
		assert.NotEqual(t, base, model.ProgramGroup("team-a", spec(m), 4, nil), "change %d names another program", i)
	}
	assert.NotEqual(t, base, model.ProgramGroup("team-b", spec(nil), 4, nil), "another namespace")
	assert.NotEqual(t, base, model.ProgramGroup("team-a", spec(nil), 8, nil), "another GPU count")
	assert.Equal(t, "team-a/kind/resnet50@/x4", model.ProgramGroup("team-a", spec(nil), 4, kind(" resnet50 ", "")))
	assert.Equal(t, "team-a/kind/resnet50@64/x4", model.ProgramGroup("team-a", spec(nil), 4, kind("resnet50", "64")), "the batch size is part of the kind")
	assert.Equal(t, "team-a/kind/resnet50@/x4", model.ProgramGroup("team-a", spec(func(s *corev1.PodSpec) { s.Containers[0].Image = "x" }), 4, kind("resnet50", "")),
		"a kind names the program whatever the containers")
	for _, k := range []string{"a/b", strings.Repeat("k", 129), "../team-b/kind/x", "x@y"} {
		g := model.ProgramGroup("team-a", spec(nil), 4, kind(k, ""))
		assert.Regexp(t, `^team-a/sha256/[0-9a-f]{32}/x4$`, g, "kind %q is hashed", k)
		assert.NotEqual(t, base, g)
	}
	long := spec(func(s *corev1.PodSpec) { s.Containers[0].Args = []string{strings.Repeat("x", 1<<20)} })
	assert.LessOrEqual(t, len(model.ProgramGroup(strings.Repeat("n", 63), long, 1<<20, nil)), 256)
}
