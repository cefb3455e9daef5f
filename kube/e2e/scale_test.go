package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/admission"
	"github.com/gpusched/gpusched/kube/internal/kubetest"
	"github.com/gpusched/gpusched/kube/internal/metricstest"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/kube/tenancy"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The scale tests run on kwok's nodes: EnvScaleNodes of them (1,000 by
// default, as CI runs them and as docs/operations.md measures them; 5,000
// for the largest size), 8 GPUs each, of
// five types in GPU feature discovery's labels (V100 DGX-1 with their
// hybrid cube-mesh, A100 and H100 NVSwitch nodes in NVLink cliques of 8
// nodes, T4 and L4 PCIe nodes), in racks of 32, with a taint that only
// the scale tests' pods tolerate (the other tests never land there).
// EnvScaleResults names a file for the figures, as JSON.
const (
	EnvScaleNodes   = "GPUSCHED_E2E_SCALE_NODES"
	EnvScaleResults = "GPUSCHED_E2E_SCALE_RESULTS"
	// EnvAdmissionBaseline names a gpusched-admission binary of an
	// earlier version to measure beside this one (its requests and bytes
	// per round through the same counting proxy): how the figures of
	// docs/operations.md compare the lists of old with the watches.
	EnvAdmissionBaseline = "GPUSCHED_E2E_ADMISSION_BASELINE"
	// EnvScaleRound sets the round of TestE2EScaleAdmission (10s up to
	// 1,000 nodes, 30s above).
	EnvScaleRound = "GPUSCHED_E2E_SCALE_ROUND"
	// EnvScalePhases picks the phases of TestE2EScalePlugin: "single",
	// "gangs" or both (the default), comma-separated.
	EnvScalePhases = "GPUSCHED_E2E_SCALE_PHASES"
	scaleLabel     = "gpusched.io/scale-test"
	// defaultScaleNodes is the scale tests' size without EnvScaleNodes.
	defaultScaleNodes = 1000
)

var scaleToleration = corev1.Toleration{Key: scaleLabel, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

var (
	scaleMu    sync.Mutex
	scaleCount int // the scale nodes that exist, 0 when none
)

// scaleNodes returns the number of scale nodes, creating them when they
// do not exist (dropScaleNodes, or TestMain at the end, deletes them).
func scaleNodes(ctx context.Context, t *testing.T, c *kubetest.ControlPlane) int {
	t.Helper()
	n := defaultScaleNodes
	if v := os.Getenv(EnvScaleNodes); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 10 || n > 20000 {
			t.Fatalf("%s=%q: want 10 to 20000 nodes", EnvScaleNodes, v)
		}
	}
	startKwok(t, c)
	scaleMu.Lock()
	defer scaleMu.Unlock()
	if scaleCount == 0 {
		start := time.Now()
		if err := kubetest.CreateKwokNodes(ctx, c.Client, scaleNodeList(n), 16); err != nil {
			deleteScaleNodes(c.Client)
			t.Fatalf("scale nodes: %v", err)
		}
		scaleCount = n
		t.Logf("%d kwok nodes created in %.1f s", n, time.Since(start).Seconds())
	}
	return scaleCount
}

// dropScaleNodes deletes the scale nodes once the scale tests are done
// (TestE2EScaleAdmission, the last of them in the file's order), so that
// the tests after them run without the kwok nodes' heartbeats on the API
// server.
func dropScaleNodes(cs kubernetes.Interface) {
	scaleMu.Lock()
	defer scaleMu.Unlock()
	if scaleCount > 0 {
		deleteScaleNodes(cs)
		scaleCount = 0
	}
}

// scaleNodeList describes n nodes of 8 GPUs of five types.
func scaleNodeList(n int) []kubetest.GPUNode {
	kinds := []struct {
		product, links string
		clique         bool
	}{
		{kubetest.ProductV100, `{"interconnect":"hybrid-cube-mesh"}`, false},
		{kubetest.ProductA100, `{"interconnect":"nvswitch"}`, true},
		{"NVIDIA-H100-80GB-HBM3", `{"interconnect":"nvswitch"}`, true},
		{"Tesla-T4", `{"interconnect":"pcie-dual-socket"}`, false},
		{"NVIDIA-L4", `{"interconnect":"pcie-dual-socket"}`, false},
	}
	out := make([]kubetest.GPUNode, n)
	for i := range n {
		k := kinds[i%len(kinds)]
		labels := map[string]string{scaleLabel: "true", model.LabelRack: fmt.Sprintf("rack-%d", i/32)}
		if k.clique {
			labels["nvidia.com/gpu.clique"] = fmt.Sprintf("clique-%d", i/(8*len(kinds)))
		}
		out[i] = kubetest.GPUNode{Name: fmt.Sprintf("scale-%05d", i), Product: k.product, GPUs: 8, Links: k.links, Labels: labels,
			Taints: []corev1.Taint{{Key: scaleLabel, Value: "true", Effect: corev1.TaintEffectNoSchedule}}}
	}
	return out
}

// deleteScaleNodes deletes the scale nodes (at the end of the run).
func deleteScaleNodes(cs kubernetes.Interface) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_ = cs.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: scaleLabel + "=true"})
}

// load returns the 1-minute load average (Linux), -1 if unknown.
func load() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// scaleResults collects the figures of the scale tests into
// EnvScaleResults, by test.
var scaleResults = struct {
	sync.Mutex
	m map[string]any
}{m: map[string]any{}}

func recordScale(t *testing.T, v any) {
	t.Helper()
	path := os.Getenv(EnvScaleResults)
	if path == "" {
		return
	}
	scaleResults.Lock()
	defer scaleResults.Unlock()
	scaleResults.m[t.Name()] = v
	b, err := json.MarshalIndent(scaleResults.m, "", "  ")
	must(t, err, "results")
	must(t, os.WriteFile(path, b, 0o644), "write %s", path)
}

// TestE2EScalePlugin measures scheduling throughput on the scale nodes,
// the stock kube-scheduler and gpusched-scheduler in the same run:
// 2 single-GPU pods per node (10,000 on 5,000 nodes), then as many pods
// of which a fifth in pod groups of 4; each scheduler twice per phase in
// the order stock, gpusched, gpusched, stock. The pods are created first,
// then the scheduler started; throughput is the pods bound after the
// first over the time from the first binding to the last (pods/s), and
// the ratio is of the medians. gpusched-scheduler serves its /metrics,
// from which the plugin's latency per extension point (p50, p99) and the
// pod groups' waits at Permit are read; each scheduler's peak memory is
// its VmHWM. It asserts nothing about wall-clock time: the figures go to
// the log and to EnvScaleResults, and into docs/operations.md.
func TestE2EScalePlugin(t *testing.T) {
	c, bin := controlPlane(t)
	bins := kubetest.RequireBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	n := scaleNodes(ctx, t, c)
	dir := testDir(t)
	total := 2 * n
	type phaseResult struct {
		Stock, GPUSched, Ratio float64
	}
	results := map[string]any{"nodes": n, "pods": total}
	var runs []throughputRun
	phases := []string{"single", "gangs"}
	if v := os.Getenv(EnvScalePhases); v != "" {
		phases = strings.Split(v, ",")
	}
	for _, phase := range phases {
		if phase != "single" && phase != "gangs" {
			t.Fatalf("%s=%q: want single, gangs or single,gangs (unset: both)", EnvScalePhases, os.Getenv(EnvScalePhases))
		}
		rate := map[string][]float64{}
		for i := range 4 {
			sched := []string{"stock", "gpusched", "gpusched", "stock"}[i]
			l := load()
			r := measureRun(ctx, t, c, c.Client, dir, runSpec{phase: phase, sched: sched, round: i / 2, total: total, gangPods: total / 5, groupSize: 4,
				tolerate: true, serve: sched == "gpusched", workers: 16, timeout: 30 * time.Minute}, bin, bins.Scheduler)
			t.Logf("%-6s %-8s %5d pods in %6.1f s: %6.1f pods/s; CPU scheduler %.0f s, API server %.0f s; scheduler peak %.0f MiB; load %.1f",
				r.Phase, r.Scheduler, r.Pods, r.Seconds, r.PodsPerS, r.SchedulerCPU, r.APIServerCPU, r.SchedulerPeakMiB, l)
			if r.Points != nil {
				var parts []string
				for _, pt := range []string{"PreFilter", "Filter", "PreScore", "Score", "Reserve", "Permit", "Bind"} {
					parts = append(parts, fmt.Sprintf("%s %.0f/%.0f", pt, r.Points[pt][0], r.Points[pt][1]))
				}
				t.Logf("        plugin p50/p99 us: %s; pod group wait p50/p99 %.0f/%.0f ms", strings.Join(parts, ", "), r.GroupWaitMs[0], r.GroupWaitMs[1])
			}
			if r.Attempts != nil {
				t.Logf("        Bind p50/p99 %.0f/%.0f ms; attempts %v; batching %v; pod group permits %v", r.BindMs[0], r.BindMs[1], r.Attempts, r.Batch, r.GroupPermits)
			}
			runs = append(runs, r)
			rate[sched] = append(rate[sched], r.PodsPerS)
		}
		pr := phaseResult{Stock: median(rate["stock"]), GPUSched: median(rate["gpusched"])}
		pr.Ratio = pr.GPUSched / pr.Stock
		results[phase] = pr
		t.Logf("%s on %d nodes: median pods/s stock %.1f, gpusched %.1f: gpusched / stock = %.2f", phase, n, pr.Stock, pr.GPUSched, pr.Ratio)
	}
	results["runs"] = runs
	recordScale(t, results)
}

// countingProxy forwards to the API server, as the holder of token (a
// client sends no token over plain HTTP), and counts the requests and
// the bytes of the answers, by verb (LIST and WATCH told from GET by
// their path and query). Of the LIST and WATCH requests it also counts,
// by resource, what a re-list is made of (streams): "LIST pods 200",
// "WATCHLIST pods 200" (a watch with sendInitialEvents, client-go's
// streaming list), "WATCH pods 200", with the answer's status, and the
// ERROR events in watch streams ("ERROR pods 410": a watch the server
// ended, with its code), so that a run tells why its informers listed.
type countingProxy struct {
	srv      *http.Server
	url      string
	mu       sync.Mutex
	requests map[string]int
	streams  map[string]int
	bytes    atomic.Int64
}

func startCountingProxy(t *testing.T, target, token string) *countingProxy {
	t.Helper()
	u, err := url.Parse(target)
	must(t, err, "proxy target")
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Host = u.Host
		r.Out.Header.Set("Authorization", "Bearer "+token)
	}}
	rp.Transport = &http.Transport{TLSClientConfig: insecureTLS(), MaxIdleConnsPerHost: 64, ForceAttemptHTTP2: true}
	rp.ErrorLog = log.New(io.Discard, "", 0) // watches cut when the controller stops
	rp.FlushInterval = -1                    // watches stream
	cp := &countingProxy{requests: map[string]int{}, streams: map[string]int{}}
	rp.ModifyResponse = func(r *http.Response) error {
		body := &countingBody{ReadCloser: r.Body, n: &cp.bytes}
		if kind := streamKind(r.Request); kind != "" {
			res := resourceOf(r.Request.URL.Path)
			cp.count(fmt.Sprintf("%s %s %d", kind, res, r.StatusCode))
			if kind != "LIST" {
				body.errors = func(code string) { cp.count("ERROR " + res + " " + code) }
			}
		}
		r.Body = body
		return nil
	}
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	must(t, err, "proxy listen")
	cp.url = "http://" + l.Addr().String()
	cp.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		verb := r.Method
		q := r.URL.Query()
		switch {
		case r.Method == http.MethodGet && q.Get("watch") == "true":
			verb = "WATCH"
		case r.Method == http.MethodGet && isList(r.URL.Path):
			verb = "LIST"
		}
		cp.mu.Lock()
		cp.requests[verb]++
		cp.mu.Unlock()
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = cp.srv.Serve(l) }()
	t.Cleanup(func() { _ = cp.srv.Close() })
	return cp
}

// isList tells a collection's path (…/pods, …/namespaces/x/pods) from an
// object's (…/pods/name).
func isList(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// /api/v1/RES, /api/v1/namespaces/NS/RES, /apis/G/V/RES, /apis/G/V/namespaces/NS/RES
	rest := parts
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:]
	}
	if len(rest) >= 2 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	return len(rest) == 1
}

// streamKind names a LIST or WATCH request as streams counts it, and
// returns "" for any other.
func streamKind(r *http.Request) string {
	q := r.URL.Query()
	switch {
	case r.Method != http.MethodGet:
		return ""
	case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
		return "WATCHLIST"
	case q.Get("watch") == "true":
		return "WATCH"
	case isList(r.URL.Path):
		return "LIST"
	}
	return ""
}

// resourceOf returns the resource of a collection's path (…/pods → pods).
func resourceOf(path string) string {
	path = strings.TrimRight(path, "/")
	return path[strings.LastIndex(path, "/")+1:]
}

func (cp *countingProxy) count(key string) {
	cp.mu.Lock()
	cp.streams[key]++
	cp.mu.Unlock()
}

func (cp *countingProxy) snapshot() (map[string]int, int64) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	out := make(map[string]int, len(cp.requests))
	for k, v := range cp.requests {
		out[k] = v
	}
	return out, cp.bytes.Load()
}

// streamSnapshot copies streams.
func (cp *countingProxy) streamSnapshot() map[string]int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return maps.Clone(cp.streams)
}

// countingBody counts the bytes read; with errors set, it also reports
// each ERROR event of a JSON watch stream with its status code (an event
// split across two reads is missed, or counted with code "?" when the
// split falls after its type: the count is a lower bound).
type countingBody struct {
	io.ReadCloser
	n      *atomic.Int64
	errors func(code string)
}

var watchError = []byte(`{"type":"ERROR"`)

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	if b.errors != nil {
		for rest := p[:n]; ; {
			i := bytes.Index(rest, watchError)
			if i < 0 {
				break
			}
			rest = rest[i+len(watchError):]
			code := "?"
			event := rest
			if e := bytes.IndexByte(rest, '\n'); e >= 0 {
				event = rest[:e]
			}
			if j := bytes.Index(event, []byte(`"code":`)); j >= 0 {
				c := event[j+len(`"code":`):]
				k := 0
				for k < len(c) && k < 3 && c[k] >= '0' && c[k] <= '9' {
					k++
				}
				if k > 0 {
					code = string(c[:k])
				}
			}
			b.errors(code)
		}
	}
	return n, err
}

// admissionRun is what one run of the admission binary measured.
type admissionRun struct {
	Binary    string  `json:"binary"`
	Workloads int     `json:"workloads"`
	Nodes     int     `json:"nodes"`
	Rounds    int     `json:"rounds"`
	Load      float64 `json:"load"`
	// RoundP50/RoundMax are the rounds' wall times after the first, in
	// seconds (FirstRound the first's, which admits the most).
	FirstRound, RoundP50, RoundMax float64
	// RequestsPerRound counts, by verb, the requests the controller sent
	// per round after the first (the proxy's count over the rounds);
	// BytesPerRound the bytes of the answers.
	RequestsPerRound map[string]float64 `json:"requests_per_round"`
	BytesPerRound    float64            `json:"bytes_per_round"`
	// Streams counts the controller's LIST and WATCH requests and the
	// ERROR events of its watches over the same rounds (countingProxy's
	// streams; not per round). Terminated and CacheInits are what the
	// API server counted meanwhile, by resource, for every client:
	// watchers it closed for falling behind
	// (apiserver_terminated_watchers_total) and reloads of its watch
	// cache (apiserver_watch_cache_initializations_total), the two
	// causes of a re-list on the server's side.
	Streams    map[string]int     `json:"streams"`
	Terminated map[string]float64 `json:"apiserver_terminated_watchers"`
	CacheInits map[string]float64 `json:"apiserver_watch_cache_initializations"`
	// PeakMiB is the controller's peak resident memory (VmHWM).
	PeakMiB float64 `json:"peak_mib"`
	// Admitted and Completed count the workloads at the end.
	Admitted, Completed int
}

// TestE2EScaleAdmission runs the gpusched-admission binary on the scale
// nodes with 2 workloads per node (10,000 on 5,000 nodes; 1 to 8 GPUs,
// a tenth of them pod groups of 2, in 10 tenants) and gpusched-scheduler
// binding what it admits, through a proxy that counts its requests and
// the bytes of the answers: first 6 rounds with every workload present
// (round wall time, requests and bytes per round, peak memory), then a
// trace of arrivals and completions (the workloads arrive over 8 rounds,
// kwok completes each after its duration, 1 to 4 rounds). With
// EnvAdmissionBaseline, an earlier binary is measured the same way
// beside it. It asserts that the rounds run and the workloads complete,
// not wall-clock figures: those go to the log and EnvScaleResults.
func TestE2EScaleAdmission(t *testing.T) {
	c, schedBin := controlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	n := scaleNodes(ctx, t, c)
	t.Cleanup(func() { dropScaleNodes(c.Client) })
	dir := testDir(t)
	cs := c.Client
	sched := startScheduler(t, dir, "gpusched-scale-adm", schedBin, schedulerConfig(t, c, nil))
	bins := map[string]string{"watches": admissionBinary(ctx, t)}
	if b := os.Getenv(EnvAdmissionBaseline); b != "" {
		bins["baseline"] = b
	}
	results := map[string]any{}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range bins {
			if !yield(k) {
				return
			}
		}
	}) {
		r := runScaleAdmission(ctx, t, c, cs, dir, bins[name], name, n, 2*n, false, sched)
		results["static-"+name] = r
		t.Logf("%s, %d workloads on %d nodes, all present: first round %.1f s, then p50 %.2f s, max %.2f s; per round %v requests, %.1f MB; peak %.0f MiB; load %.1f",
			name, r.Workloads, n, r.FirstRound, r.RoundP50, r.RoundMax, r.RequestsPerRound, r.BytesPerRound/1e6, r.PeakMiB, r.Load)
		logStreams(t, name, r)
	}
	r := runScaleAdmission(ctx, t, c, cs, dir, bins["watches"], "trace", n, 2*n, true, sched)
	results["trace"] = r
	t.Logf("trace, %d workloads on %d nodes arriving over 8 rounds: rounds p50 %.2f s, max %.2f s; per round %v requests, %.1f MB; peak %.0f MiB; %d completed; load %.1f",
		r.Workloads, n, r.RoundP50, r.RoundMax, r.RequestsPerRound, r.BytesPerRound/1e6, r.PeakMiB, r.Completed, r.Load)
	logStreams(t, "trace", r)
	if r.Completed == 0 {
		t.Errorf("no workload completed in the trace")
	}
	recordScale(t, results)
}

// scaleRound is the round of the scale admission runs (EnvScaleRound
// sets another): 10 s up to 1,000 nodes, 30 s above.
func scaleRound(t *testing.T, nodes int) time.Duration {
	t.Helper()
	v := os.Getenv(EnvScaleRound)
	if v == "" && nodes <= 1000 {
		return 10 * time.Second
	}
	if v == "" {
		return 30 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second || d > time.Hour {
		t.Fatalf("%s=%q: want a duration from 1s to 1h", EnvScaleRound, v)
	}
	return d
}

func runScaleAdmission(ctx context.Context, t *testing.T, c *kubetest.ControlPlane, cs kubernetes.Interface, dir, bin, name string,
	nodes, workloads int, trace bool, sched *kubetest.Process) admissionRun {
	t.Helper()
	round := scaleRound(t, nodes)
	sysNS := "scale-adm-" + name
	must(t, kubetest.EnsureNamespace(ctx, cs, sysNS), "namespace")
	var tenants strings.Builder
	tenants.WriteString("maxJobs: 100000\ntenants:\n")
	var nss []string
	for i := range 10 {
		ns := fmt.Sprintf("scale-%s-t%d", name, i)
		nss = append(nss, ns)
		must(t, kubetest.EnsureNamespace(ctx, cs, ns), "namespace")
		fmt.Fprintf(&tenants, "- {name: t%d, weight: %d, maxJobs: 100000, namespaces: [%s]}\n", i, 1+i%3, ns)
	}
	_, err := cs.CoreV1().ConfigMaps(sysNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: sysNS, Name: tenancy.DefaultConfigMap},
		Data: map[string]string{tenancy.ConfigKey: tenants.String()}}, metav1.CreateOptions{})
	must(t, err, "tenancy")
	defer func() {
		for _, ns := range nss {
			admDeletePods(cs, ns)
		}
	}()

	// The workloads: 1, 2, 4 or 8 GPUs (half of them 1), a tenth pod
	// groups of two members; rates on the five types; in the trace, a
	// duration of 1 to 4 rounds (kwok completes them).
	rng := rand.New(rand.NewPCG(uint64(workloads), 28))
	var pods [][]*corev1.Pod // by arrival
	for i := range workloads {
		ns := nss[i%len(nss)]
		gpus := []int{1, 1, 1, 1, 2, 2, 4, 8}[rng.IntN(8)]
		ann := map[string]string{model.AnnotationThroughput: fmt.Sprintf("v100=%d,a100=%d,h100=%d,t4=1,l4=2", 2+rng.IntN(3), 4+rng.IntN(3), 6+rng.IntN(4))}
		if trace {
			ann[kubetest.AnnotationRunDuration] = (time.Duration(1+rng.IntN(4)) * round).String()
		}
		mk := func(pname string, labels map[string]string) *corev1.Pod {
			p := gpuPodSpec(ns, pname, gpus, "", labels, maps0(ann))
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: admission.GateName}}
			p.Spec.Tolerations = []corev1.Toleration{scaleToleration}
			return p
		}
		if i%10 == 9 {
			g := fmt.Sprintf("g%d", i)
			labels := map[string]string{model.LabelPodGroup: g}
			ann[model.AnnotationMinMember] = "2"
			pods = append(pods, []*corev1.Pod{mk(g+"-0", labels), mk(g+"-1", labels)})
		} else {
			pods = append(pods, []*corev1.Pod{mk(fmt.Sprintf("w%d", i), nil)})
		}
	}
	arrivals := 1
	if trace {
		arrivals = 8
	}
	per := (len(pods) + arrivals - 1) / arrivals
	create := func(k int) {
		var batch []*corev1.Pod
		for _, w := range pods[min(k*per, len(pods)):min((k+1)*per, len(pods))] {
			batch = append(batch, w...)
		}
		createAllWith(ctx, t, cs, batch, 16)
	}
	create(0)

	proxy := startCountingProxy(t, c.Config.Host, c.Config.BearerToken)
	kc := filepath.Join(dir, "proxy-kubeconfig-"+name)
	must(t, os.WriteFile(kc, []byte(strings.Join([]string{"apiVersion: v1", "kind: Config",
		"clusters:", "- name: p", "  cluster:", "    server: " + proxy.url,
		"users:", "- name: admin", "  user: {}",
		"contexts:", "- name: p", "  context:", "    cluster: p", "    user: admin", "current-context: p", ""}, "\n")), 0o600), "kubeconfig")
	ports, err := kubetest.FreePorts(1)
	must(t, err, "port")
	murl := fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0])
	args := []string{"--kubeconfig", kc, "--policy", "max-min-fairness", "--round", round.String(), "--grace", "0s",
		"--node-selector", scaleLabel + "=true", "--state-namespace", sysNS, "--leader-elect=false"}
	if name != "baseline" { // an earlier binary has neither flag
		args = append(args, "--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--kube-api-qps", "500", "--kube-api-burst", "1000")
	}
	p, err := kubetest.StartProcess(dir, "gpusched-admission-"+name, bin, args...)
	must(t, err, "start %s", bin)
	defer p.Stop(30 * time.Second)

	rounds := 6
	if trace {
		rounds = arrivals + 6
	}
	res := admissionRun{Binary: name, Workloads: workloads, Nodes: nodes, Rounds: rounds, Load: load()}
	var walls []float64
	var reqs0, streams0 map[string]int
	var nbytes0 int64
	var api0 metricstest.Families
	created := 1
	lastSeen := 0
	waitFor(ctx, t, fmt.Sprintf("%s: %d rounds", name, rounds), p, func() (bool, string) {
		if done, err := sched.Exited(); done {
			t.Fatalf("the scheduler exited (%v):\n%s", err, sched.LogTail(4000))
		}
		got := countRounds(p.LogTail(1 << 24))
		if got > lastSeen {
			lastSeen = got
			if got == 1 {
				reqs0, nbytes0 = proxy.snapshot()
				streams0 = proxy.streamSnapshot()
				api0, _ = scrape(ctx, c.Config.Host+"/metrics", c.Config.BearerToken)
			}
			if trace && created < arrivals && got >= created {
				create(created)
				created++
			}
		}
		return got >= rounds, fmt.Sprintf("%d rounds", got)
	})
	reqs, nbytes := proxy.snapshot()
	res.Streams = map[string]int{}
	for k, v := range proxy.streamSnapshot() {
		if d := v - streams0[k]; d > 0 {
			res.Streams[k] = d
		}
	}
	if api1, err := scrape(ctx, c.Config.Host+"/metrics", c.Config.BearerToken); err == nil && api0 != nil {
		res.Terminated = byResourceDelta(api0, api1, "apiserver_terminated_watchers_total")
		res.CacheInits = byResourceDelta(api0, api1, "apiserver_watch_cache_initializations_total")
	}
	_, peak, err := p.Memory()
	must(t, err, "memory")
	res.PeakMiB = float64(peak) / (1 << 20)
	res.RequestsPerRound = map[string]float64{}
	for k, v := range reqs {
		res.RequestsPerRound[k] = float64(v-reqs0[k]) / float64(rounds-1)
	}
	res.BytesPerRound = float64(nbytes-nbytes0) / float64(rounds-1)
	walls = roundWalls(p.LogTail(1 << 24))
	if name != "baseline" {
		if m, err := scrape(ctx, murl, ""); err == nil {
			res.Admitted = int(m.Sum("gpusched_admission_workloads", map[string]string{"state": admission.StateRunning}) +
				m.Sum("gpusched_admission_workloads", map[string]string{"state": admission.StateAdmitted}))
		}
	}
	if len(walls) > 0 {
		res.FirstRound = walls[0]
		rest := slices.Clone(walls[1:])
		slices.Sort(rest)
		if len(rest) > 0 {
			res.RoundP50, res.RoundMax = rest[len(rest)/2], rest[len(rest)-1]
		}
	}
	for _, ns := range nss {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		must(t, err, "pods")
		for _, pod := range l.Items {
			if pod.Status.Phase == corev1.PodSucceeded {
				res.Completed++
			}
		}
	}
	return res
}

// logStreams logs what a run's re-lists were made of (admissionRun's
// Streams, Terminated and CacheInits).
func logStreams(t *testing.T, name string, r admissionRun) {
	t.Helper()
	t.Logf("%s, over rounds 2 to %d: the controller's lists and watches %v; the API server's terminated watchers %v, watch cache initializations %v",
		name, r.Rounds, r.Streams, r.Terminated, r.CacheInits)
}

// byResourceDelta returns, by its resource label, how much a counter of
// the API server grew from before to after (only those that grew).
func byResourceDelta(before, after metricstest.Families, name string) map[string]float64 {
	b := before.SumBy(name, "resource")
	out := map[string]float64{}
	for res, a := range after.SumBy(name, "resource") {
		if d := a - b[res]; d > 0 {
			out[res] = d
		}
	}
	return out
}

func maps0(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// countRounds counts the rounds a controller's log reports.
func countRounds(log string) int { return strings.Count(log, "msg=round ") }

// roundWalls reads the wall time of each round from the controller's log
// (the "round" lines carry took=...).
func roundWalls(log string) []float64 {
	var out []float64
	for line := range strings.SplitSeq(log, "\n") {
		if !strings.Contains(line, "msg=round ") {
			continue
		}
		_, rest, ok := strings.Cut(line, " took=")
		if !ok {
			continue
		}
		v, _, _ := strings.Cut(rest, " ")
		if d, err := time.ParseDuration(v); err == nil {
			out = append(out, d.Seconds())
		}
	}
	return out
}

// TestCountingProxyStreams checks how the proxy names LIST and WATCH
// requests and finds the ERROR events of a watch stream, also when a
// read holds several (no control plane needed).
func TestCountingProxyStreams(t *testing.T) {
	for _, tc := range []struct{ method, url, want string }{
		{"GET", "/api/v1/namespaces/a/pods?limit=500", "LIST"},
		{"GET", "/api/v1/pods?watch=true&resourceVersion=7", "WATCH"},
		{"GET", "/apis/batch/v1/jobs?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", "WATCHLIST"},
		{"GET", "/api/v1/namespaces/a/pods/p", ""},
		{"POST", "/api/v1/namespaces/a/pods", ""},
	} {
		r, err := http.NewRequest(tc.method, "http://x"+tc.url, nil)
		must(t, err, "request")
		if got := streamKind(r); got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.method, tc.url, got, tc.want)
		}
	}
	if got := resourceOf("/apis/batch/v1/namespaces/a/jobs"); got != "jobs" {
		t.Errorf("resourceOf: %q, want jobs", got)
	}
	stream := `{"type":"ADDED","object":{}}` + "\n" +
		`{"type":"ERROR","object":{"kind":"Status","status":"Failure","reason":"Expired","code":410}}` + "\n" +
		`{"type":"ERROR","object":{"kind":"Status","code":500}}` + "\n" +
		`{"type":"ERROR","object":{"kind":"Status"}}` + "\n" + `{"type":"MODIFIED","object":{"code":200}}` + "\n"
	var codes []string
	var n atomic.Int64
	b := &countingBody{ReadCloser: io.NopCloser(strings.NewReader(stream)), n: &n, errors: func(c string) { codes = append(codes, c) }}
	if _, err := io.ReadAll(b); err != nil {
		t.Fatal(err)
	}
	if want := []string{"410", "500", "?"}; !slices.Equal(codes, want) {
		t.Errorf("ERROR codes %v, want %v", codes, want)
	}
	if n.Load() != int64(len(stream)) {
		t.Errorf("counted %d bytes, want %d", n.Load(), len(stream))
	}
}
