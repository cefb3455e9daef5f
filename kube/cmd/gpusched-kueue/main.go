// Command gpusched-kueue runs gpusched's Kueue controller (package
// kube/kueue): it chooses the GPU type of Kueue's pending workloads with a
// gpusched allocation policy and steers Kueue to it (the Workloads' node
// selectors; with Kueue's AdmissionGatedBy feature gate, the
// kueue.x-k8s.io/admission-gated-by annotation holds workloads until they
// start). Kueue admits, accounts quota, preempts and places as usual.
// deploy/kueue-rbac.yaml and kueue-deployment.yaml run it in a cluster;
// outside one, give --kubeconfig. Its metrics are served on
// --metrics-bind-address (/metrics; --metrics-address is its former name).
// See docs/kueue.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gpusched/gpusched/flavor"
	"github.com/gpusched/gpusched/kube/admission"
	"github.com/gpusched/gpusched/kube/internal/leader"
	"github.com/gpusched/gpusched/kube/internal/startup"
	"github.com/gpusched/gpusched/kube/kueue"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/kube/progress"
	"github.com/gpusched/gpusched/kube/tenancy"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics"
)

// DefaultPolicy is --policy's default (admission.DefaultPolicy, as the
// admission controller's): water filling between ClusterQueues by their
// fair-sharing weights, their nominal quotas as guarantees
// (allocation.QuotaFairness), heterogeneity-aware within each.
const DefaultPolicy = admission.DefaultPolicy

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gpusched-kueue:", err)
		os.Exit(1)
	}
}

type options struct {
	startup.Flags
	namespace, policy, typeLabel, gate string
	resources                          []corev1.ResourceName
	leaseNamespace, leaseName          string
	stateNamespace, stateName          string
	minInterval, interval              time.Duration
	maxRatio                           float64
	maxJobs                            int
	patience                           float64
	jobDuration                        time.Duration
	qps                                float64
	learning                           progress.Flags
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("gpusched-kueue", flag.ContinueOnError)
	o.Register(fs)
	fs.StringVar(&o.namespace, "namespace", "", "namespace of the Workloads (default: all)")
	fs.StringVar(&o.policy, "policy", DefaultPolicy, "allocation policy: "+strings.Join(admission.Policies(), ", ")+
		" (quota-water-filling: fair between ClusterQueues by their fair-sharing weights, nominal quotas guaranteed; max-min-fairness is fair between workloads, so a ClusterQueue with more of them gets more)")
	gpuResources := fs.String("gpu-resources", string(model.ResourceGPU), "comma-separated extended resources counted as GPUs (e.g. nvidia.com/gpu,nvidia.com/mig-1g.5gb); a workload asking for another GPU-like resource (nvidia.com/mig-*, .../gpu) is refused with a Warning and, if gated, stays gated")
	fs.StringVar(&o.typeLabel, "type-label", "nvidia.com/gpu.product", "node label whose value, in a ResourceFlavor's nodeLabels, names its GPU")
	fs.StringVar(&o.gate, "gate", kueue.DefaultGate, "the controller's name in kueue.x-k8s.io/admission-gated-by")
	fs.DurationVar(&o.minInterval, "min-interval", time.Second, "least time between two rounds (a change triggers one)")
	fs.DurationVar(&o.interval, "interval", 30*time.Second, "most time between two rounds")
	fs.Float64Var(&o.maxRatio, "max-ratio", tenancy.DefaultMaxRatio, "most a job's claimed rate on one type may exceed its rate on another")
	fs.IntVar(&o.maxJobs, "max-jobs", 0, "workloads in a round's problem at most (0: 2048)")
	fs.Float64Var(&o.patience, "patience", 1, "how long a workload waits for a faster GPU type before it starts on a slower one, in multiples of what the slower one would cost it (1: the break-even; 0: never waits)")
	fs.DurationVar(&o.jobDuration, "job-duration", time.Hour, "how long a workload is taken to run on its fastest GPU type (Kueue does not say): for --patience, and the remaining work of the policies that use it")
	fs.StringVar(&o.MetricsAddr, "metrics-address", ":8080", "deprecated name of --metrics-bind-address (gpusched-admission's)")
	fs.StringVar(&o.leaseNamespace, "lease-namespace", "", "namespace of the leader lease (default: $POD_NAMESPACE)")
	fs.StringVar(&o.leaseName, "lease-name", "gpusched-kueue", "name of the leader lease")
	fs.Float64Var(&o.qps, "kube-api-qps", 50, "queries per second to the API server")
	fs.StringVar(&o.stateNamespace, "state-namespace", "", "with --learn, the namespace of the ConfigMap that keeps what was learned across restarts (default: $POD_NAMESPACE; --state-namespace= keeps nothing)")
	fs.StringVar(&o.stateName, "state-name", kueue.DefaultStateName, "name of the ConfigMap that keeps what was learned")
	o.learning.Register(fs, "learn every workload's rates from its progress (its annotations' rates are claims); runs of one program (namespace, job-kind or images and commands, GPU count) share what they measured; what was learned is kept in --state-name across restarts")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.resources, err = parseResources(*gpuResources); err != nil {
		return o, err
	}
	switch {
	case o.minInterval <= 0 || o.interval < o.minInterval:
		return o, fmt.Errorf("--min-interval %v must be positive and at most --interval %v", o.minInterval, o.interval)
	case !(o.maxRatio >= 1 && o.maxRatio <= tenancy.MaxRatioLimit):
		return o, fmt.Errorf("--max-ratio %v: want 1 to %g", o.maxRatio, float64(tenancy.MaxRatioLimit))
	case o.maxJobs < 0 || o.maxJobs > tenancy.MaxJobsLimit:
		return o, fmt.Errorf("--max-jobs %d: want 0 to %d", o.maxJobs, tenancy.MaxJobsLimit)
	case !(o.patience >= 0 && o.patience <= flavor.MaxPatience):
		return o, fmt.Errorf("--patience %v: want 0 to %d", o.patience, flavor.MaxPatience)
	case o.jobDuration <= 0 || o.jobDuration > kueue.MaxJobDuration:
		return o, fmt.Errorf("--job-duration %v: want above 0, at most a year", o.jobDuration)
	case !(o.qps > 0 && o.qps <= 1e5):
		return o, fmt.Errorf("--kube-api-qps %v: want above 0, at most 1e5", o.qps)
	}
	if _, err := admission.PolicyByName(o.policy); err != nil {
		return o, fmt.Errorf("--policy: %w", err)
	}
	if err := o.learning.Check(); err != nil {
		return o, err
	}
	stateSet := false
	fs.Visit(func(f *flag.Flag) { stateSet = stateSet || f.Name == "state-namespace" })
	if !stateSet {
		o.stateNamespace = os.Getenv("POD_NAMESPACE")
	}
	if o.LeaderElect && o.leaseNamespace == "" {
		o.leaseNamespace = os.Getenv("POD_NAMESPACE")
		if o.leaseNamespace == "" {
			return o, errors.New("no --lease-namespace and no $POD_NAMESPACE (or give --leader-elect=false)")
		}
	}
	return o, nil
}

// parseResources reads --gpu-resources: resource names, each valid as a
// Kubernetes resource name, at most kueue.MaxResources.
func parseResources(v string) ([]corev1.ResourceName, error) {
	var out []corev1.ResourceName
	for f := range strings.SplitSeq(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if errs := validation.IsQualifiedName(f); len(errs) > 0 {
			return nil, fmt.Errorf("--gpu-resources: %q: %s", f, strings.Join(errs, "; "))
		}
		if !slices.Contains(out, corev1.ResourceName(f)) {
			out = append(out, corev1.ResourceName(f))
		}
	}
	if len(out) == 0 || len(out) > kueue.MaxResources {
		return nil, fmt.Errorf("--gpu-resources %q: want 1 to %d names", v, kueue.MaxResources)
	}
	return out, nil
}

func run(args []string) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	log := o.Logger()
	rc, err := o.RESTConfig()
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = float32(o.qps), int(2*o.qps)
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	pol, err := admission.PolicyByName(o.policy)
	if err != nil {
		return err
	}
	m := kueue.NewMetrics()
	reg := metrics.NewKubeRegistry()
	if err := m.Register(reg); err != nil {
		return err
	}
	ctx, stop := startup.Context()
	defer stop()
	if addr, err := o.ServeMetrics(ctx, reg, log); err != nil {
		return err
	} else if addr != "" {
		log.Info("metrics", "address", addr)
	}
	cfg := kueue.Config{
		Client: cs, Dynamic: dyn, Namespace: o.namespace, Policy: pol, PolicyName: o.policy,
		Rates: tenancy.RateRules{MaxRatio: o.maxRatio}, TypeLabel: o.typeLabel, Gate: o.gate, MaxJobs: o.maxJobs, Patience: o.patience, JobDuration: o.jobDuration,
		Resources:   o.resources,
		MinInterval: o.minInterval, Interval: o.interval, Metrics: m, Logger: log,
		StateNamespace: o.stateNamespace, StateName: o.stateName,
	}
	start := func(ctx context.Context) error {
		cfg := cfg
		var err error
		if cfg.Estimator, err = o.learning.Estimator(); err != nil {
			return err
		}
		c, err := kueue.New(cfg)
		if err != nil {
			return err
		}
		if err := o.learning.Serve(ctx, cs, c, c, log); err != nil {
			return err
		}
		log.Info("gpusched-kueue running", "policy", o.policy, "type-label", o.typeLabel, "gate", o.gate)
		return c.Run(ctx)
	}
	return leader.Run(ctx, stop, cs, log, o.LeaderElect, o.leaseNamespace, o.leaseName, start)
}
