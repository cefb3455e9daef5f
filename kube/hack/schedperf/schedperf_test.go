// Package schedperf runs the Kubernetes project's scheduler benchmark,
// test/integration/scheduler_perf of k8s.io/kubernetes v1.37.2 (its own
// etcd, API server and scheduler in one process), with gpusched's plugin
// registered out of tree (RunBenchmarkPerfScheduling), under two
// profiles in the same run: the stock one and one that enables GPUSched.
// The workloads are upstream's, read from the module cache and changed
// only where a run needs it: the scheduler configuration of the GPUSched
// profile, and, for the GPU variants, node and pod templates with GPUs
// (templates/). The thresholds are upstream's: a run below its CI's
// threshold fails, as it would there. See docs/operations.md.
//
//	cd kube/hack/schedperf
//	PATH=$GPUSCHED_KUBE_BIN:$PATH go test -run '^$' -bench . -benchtime 1x -timeout 4h
//
// SCHEDPERF_WORKLOADS picks workloads by name (comma-separated; default
// 5000Nodes_10000Pods for misc, 5000Nodes_1000Groups_3000Pods for
// podgroup and 5000Nodes_1000Gangs_3000Pods for its gangs; upstream's
// small workloads need -perf-scheduling-label-filter integration-test);
// -data-items-dir keeps the JSON of each run.
package schedperf

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/kube/gpusched"
	_ "k8s.io/component-base/logs/json/register"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"sigs.k8s.io/yaml"
)

func TestMain(m *testing.M) {
	if err := perf.InitTests(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// registry holds gpusched's plugin, out of tree.
var registry = frameworkruntime.Registry{gpusched.Name: gpusched.New}

// upstream returns the folder of scheduler_perf in the module cache.
func upstream(b *testing.B) string {
	b.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes").Output()
	if err != nil {
		b.Fatalf("go list -m k8s.io/kubernetes: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "test", "integration", "scheduler_perf")
}

// variant is how a run changes upstream's test cases.
type variant struct {
	profile string // "stock" or "gpusched"
	gpus    bool   // GPU node and pod templates
	// podTemplate, if not empty, is the file in templates/ that replaces
	// the pod template of every createPods step (with gpus; the default
	// pod-gpu.yaml replaces only the test case's default template).
	podTemplate string
}

// config writes upstream's config of topic (its file rel) with only the
// test case named testCase and the workloads named, paths made absolute,
// and the variant's changes, into a folder of the benchmark's; it returns
// the file.
func config(b *testing.B, rel, testCase string, workloads []string, v variant) string {
	b.Helper()
	dir := upstream(b)
	src := filepath.Join(dir, rel)
	raw, err := os.ReadFile(src)
	if err != nil {
		b.Fatal(err)
	}
	var cases []map[string]any
	if err := yaml.Unmarshal(raw, &cases); err != nil {
		b.Fatalf("%s: %v", src, err)
	}
	here, err := os.Getwd()
	if err != nil {
		b.Fatal(err)
	}
	var out []map[string]any
	for _, tc := range cases {
		if tc["name"] != testCase {
			continue
		}
		absPaths(tc, filepath.Dir(src))
		var keep []any
		for _, w := range tc["workloads"].([]any) {
			if slices.Contains(workloads, w.(map[string]any)["name"].(string)) {
				keep = append(keep, w)
			}
		}
		if len(keep) == 0 {
			b.Fatalf("%s: no workload of %s named %v", src, testCase, workloads)
		}
		tc["workloads"] = keep
		if v.profile == "gpusched" {
			tc["schedulerConfigPath"] = filepath.Join(here, "templates", "gpusched-scheduler-config.yaml")
		}
		if v.gpus {
			tc["defaultPodTemplatePath"] = filepath.Join(here, "templates", "pod-gpu.yaml")
			for _, op := range tc["workloadTemplate"].([]any) {
				m := op.(map[string]any)
				switch {
				case m["opcode"] == "createNodes":
					m["nodeTemplatePath"] = filepath.Join(here, "templates", "node-gpu.yaml")
				case m["opcode"] == "createPods" && v.podTemplate != "":
					m["podTemplatePath"] = filepath.Join(here, "templates", v.podTemplate)
				}
			}
		}
		out = append(out, tc)
	}
	if len(out) == 0 {
		b.Fatalf("%s: no test case %s", src, testCase)
	}
	data, err := yaml.Marshal(out)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "performance-config.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// absPaths makes every relative "...Path" of a test case absolute.
func absPaths(v any, base string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && strings.HasSuffix(k, "Path") && s != "" && !filepath.IsAbs(s) {
				x[k] = filepath.Join(base, s)
				continue
			}
			absPaths(e, base)
		}
	case []any:
		for _, e := range x {
			absPaths(e, base)
		}
	}
}

func workloads(def string) []string {
	if v := os.Getenv("SCHEDPERF_WORKLOADS"); v != "" {
		return strings.Split(v, ",")
	}
	return []string{def}
}

// run runs one test case under both profiles, stock first.
func run(b *testing.B, rel, testCase, topic, def string, gpus bool) {
	runWith(b, rel, testCase, topic, def, variant{gpus: gpus})
}

// runWith runs one test case under both profiles, stock first, changed
// as v says (its profile is set for each run).
func runWith(b *testing.B, rel, testCase, topic, def string, v variant) {
	for _, profile := range []string{"stock", "gpusched"} {
		b.Run(profile, func(b *testing.B) {
			v.profile = profile
			cfg := config(b, rel, testCase, workloads(def), v)
			perf.RunBenchmarkPerfScheduling(b, cfg, topic, registry)
		})
	}
}

// BenchmarkMisc: misc's SchedulingBasic as upstream runs it (pods ask
// for CPU and memory: GPUSched's PreFilter skips them, so the GPUSched
// profile measures its queue order and its presence).
func BenchmarkMisc(b *testing.B) {
	run(b, "misc/performance-config.yaml", "SchedulingBasic", "misc", "5000Nodes_10000Pods", false)
}

// BenchmarkMiscGPU: SchedulingBasic on nodes of 8 GPUs with pods of one
// GPU, where GPUSched filters, scores, books and binds every pod.
func BenchmarkMiscGPU(b *testing.B) {
	run(b, "misc/performance-config.yaml", "SchedulingBasic", "misc-gpu", "5000Nodes_10000Pods", true)
}

// BenchmarkPodGroup: podgroup's BasicScheduling (upstream's PodGroup API
// and gang plugins; pods without GPUs, which GPUSched skips).
func BenchmarkPodGroup(b *testing.B) {
	run(b, "podgroup/basicscheduling/performance-config.yaml", "BasicScheduling", "podgroup", "5000Nodes_1000Groups_3000Pods", false)
}

// BenchmarkGangScheduling: podgroup's GangScheduling likewise.
func BenchmarkGangScheduling(b *testing.B) {
	run(b, "podgroup/gangscheduling/performance-config.yaml", "GangScheduling", "podgroup-gang", "5000Nodes_1000Gangs_3000Pods", false)
}

// BenchmarkGangSchedulingGPU: GangScheduling on nodes of 8 GPUs with pods
// of one GPU in upstream's gangs (PodGroup objects, minCount 3): upstream's
// gang plugins hold each gang together, while GPUSched (which does not
// read PodGroup objects: its own groups are labelled pods) filters,
// scores, books and binds every pod as a single one.
func BenchmarkGangSchedulingGPU(b *testing.B) {
	runWith(b, "podgroup/gangscheduling/performance-config.yaml", "GangScheduling", "podgroup-gang-gpu", "5000Nodes_1000Gangs_3000Pods",
		variant{gpus: true, podTemplate: "gang-pod-gpu.yaml"})
}
