// Command gpusched-admission runs gpusched's round-based admission
// controller (package admission) against a cluster: workloads created with
// the scheduling gate gpusched.io/admission are admitted, every round, on
// the GPU type the allocation policy gives them, and preempted when their
// lease ends. Tenants, their weights, queues and quotas come from the
// admin's tenancy ConfigMap (--tenancy-configmap, in the controller's own
// namespace; see kube/docs/shared-cluster.md), which it reads every round.
// deploy/admission-rbac.yaml, admission-deployment.yaml, tenancy.yaml and
// admission-policies.yaml run it in a cluster; outside one, give
// --kubeconfig and --state-namespace.
//
// It serves its metrics (gpusched_admission_*, and client-go's
// rest_client_*, Go's and the process's) on /metrics and a liveness check
// on /healthz at --metrics-bind-address (docs/operations.md lists them).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/multires"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gpusched/gpusched/kube/admission"
	"github.com/gpusched/gpusched/kube/internal/leader"
	"github.com/gpusched/gpusched/kube/internal/startup"
	"github.com/gpusched/gpusched/kube/progress"
	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go's rest_client_* metrics, in legacyregistry
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gpusched-admission:", err)
		os.Exit(1)
	}
}

type options struct {
	startup.Flags
	namespace, policy, nodeSelector             string
	stateNamespace, stateName, tenancyConfigMap string
	round, grace                                time.Duration
	noPreemption, noDRA                         bool
	checkTenancy                                string
	hostProfiles                                string
	apiQPS, eventQPS                            float64
	apiBurst, eventBurst                        int
	removal                                     removalOptions
	learning                                    progress.Flags
}

// removalOptions are the flags of preemption's deletions, the requeued
// pods' copies and the retries of their writes.
type removalOptions struct {
	maxDeletionGrace           time.Duration
	copyKeySecret, copyKeyFile string
	tenantBudget               int
}

func (r *removalOptions) flags(fs *flag.FlagSet) {
	fs.DurationVar(&r.maxDeletionGrace, "max-deletion-grace", admission.DefaultMaxDeletionGrace,
		"the most a managed GPU pod may take to go once deleted: a preempted pod is deleted with min(its terminationGracePeriodSeconds, this); a longer deletion is cut to it, and a pod still there past it is force-deleted (at most 1h)")
	fs.StringVar(&r.copyKeySecret, "copy-key-secret", "",
		"Secret in the state namespace (data key \""+admission.CopyKeySecretKey+"\", created at install) whose key signs the copies of preempted pods kept to create them again; the controller only reads it")
	fs.StringVar(&r.copyKeyFile, "copy-key-file", "", "file holding the copy key (a mounted Secret), instead of --copy-key-secret")
	fs.IntVar(&r.tenantBudget, "tenant-budget", admission.DefaultTenantBudget,
		"requests each tenant's workloads may cost a sweep (one a second): preempted pods deleted, requeued pods created again, deletions cut short; failed writes are retried with a capped exponential backoff")
}

func (r *removalOptions) check() error {
	switch {
	case r.maxDeletionGrace <= 0 || r.maxDeletionGrace > time.Hour:
		return fmt.Errorf("--max-deletion-grace %v: want more than 0, at most 1h", r.maxDeletionGrace)
	case r.copyKeySecret != "" && r.copyKeyFile != "":
		return errors.New("--copy-key-secret and --copy-key-file: give one")
	case r.tenantBudget < 1 || r.tenantBudget > 1e6:
		return fmt.Errorf("--tenant-budget %d: want 1 to 1e6", r.tenantBudget)
	}
	return nil
}

// copyKey reads the copy key: from --copy-key-file, else the Secret
// --copy-key-secret of the state namespace, else none (a random key of
// this process: a restarted controller drops the copies it finds).
func (r *removalOptions) copyKey(ctx context.Context, cs kubernetes.Interface, ns string, log *slog.Logger) ([]byte, error) {
	switch {
	case r.copyKeyFile != "":
		return admission.ReadCopyKeyFile(r.copyKeyFile)
	case r.copyKeySecret != "":
		return admission.LoadCopyKey(ctx, cs, ns, r.copyKeySecret)
	}
	log.Warn("no --copy-key-secret: the copies of preempted pods are signed with a key of this process only; after a restart, those not yet created again are dropped")
	return nil, nil
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("gpusched-admission", flag.ContinueOnError)
	o.Register(fs)
	fs.StringVar(&o.namespace, "namespace", "", "namespace of the workloads (default: all)")
	fs.StringVar(&o.policy, "policy", admission.DefaultPolicy, "allocation policy: "+strings.Join(admission.Policies(), ", ")+
		" (the default is fair per tenant, by the tenancy's weights and quotas; max-min-fairness is fair per job: a tenant's share grows with its jobs)")
	fs.DurationVar(&o.round, "round", 6*time.Minute, "round length")
	fs.BoolVar(&o.noPreemption, "no-preemption", false, "admit only: an admitted job runs to its end")
	fs.BoolVar(&o.noDRA, "no-dra", false, "leave out the GPUs a DRA driver publishes in ResourceSlices (by default they count, for workloads asking "+string(model.ResourceGPU)+", which the driver serves where its DeviceClass maps it); for clusters without resource.k8s.io/v1")
	fs.DurationVar(&o.grace, "grace", 30*time.Second, "how long a preempted pod runs, annotated, before it is deleted")
	fs.StringVar(&o.nodeSelector, "node-selector", "", "nodes whose GPUs are handed out, as key=value,...")
	fs.StringVar(&o.stateNamespace, "state-namespace", "", "the controller's own namespace: its state, tenancy ConfigMap and leader lease (default: $POD_NAMESPACE; required)")
	fs.StringVar(&o.tenancyConfigMap, "tenancy-configmap", tenancy.DefaultConfigMap, "ConfigMap in the state namespace holding the admin's tenancy (key "+tenancy.ConfigKey+")")
	fs.StringVar(&o.checkTenancy, "check-tenancy", "", "validate a tenancy document (file, - for stdin), print a summary and exit")
	fs.StringVar(&o.stateName, "state-name", admission.DefaultStateName, "name of the state ConfigMap and the leader lease")
	fs.StringVar(&o.hostProfiles, "host-profiles", "", "size the CPUs and memory of workloads that name a host profile (annotation "+model.AnnotationHostProfile+"), Synergy's split on each node: \"synergy\" for Synergy's model zoo, or a profile file (multires.ReadProfiles' layout, at most 8 MiB); empty leaves requests as written")
	fs.Float64Var(&o.apiQPS, "kube-api-qps", 100, "queries per second to the API server (admissions, preemptions, the state's save)")
	fs.IntVar(&o.apiBurst, "kube-api-burst", 200, "burst of queries to the API server")
	fs.Float64Var(&o.eventQPS, "event-qps", admission.DefaultEventQPS, "events and pod condition writes per second (a token bucket shared by both; the rest wait, and events past a queue of 1,000 are dropped)")
	fs.IntVar(&o.eventBurst, "event-burst", admission.DefaultEventBurst, "burst of events and pod condition writes")
	o.removal.flags(fs)
	o.learning.Register(fs, "learn every workload's rates from its progress (its claimed rates are claims, withdrawn where it runs without reporting; runs of one program share what they measured); what was learned is saved with the state and restored by the next leader")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := o.checkValues(); err != nil {
		return o, err
	}
	if o.checkTenancy != "" {
		return o, nil
	}
	if o.stateNamespace == "" {
		o.stateNamespace = os.Getenv("POD_NAMESPACE")
	}
	if o.stateNamespace == "" {
		return o, errors.New("no --state-namespace and no $POD_NAMESPACE: the controller's state and tenancy live in its own namespace, named explicitly")
	}
	if o.tenancyConfigMap == "" {
		return o, errors.New("--tenancy-configmap is empty: tenants come from the admin's ConfigMap")
	}
	return o, nil
}

// checkValues checks the flags' values: durations, rates, the policy and
// the removal flags.
func (o *options) checkValues() error {
	if o.round <= 0 || o.grace < 0 {
		return fmt.Errorf("--round %v must be positive and --grace %v not negative", o.round, o.grace)
	}
	if !(o.apiQPS > 0) || o.apiQPS > 1e5 || o.apiBurst < 1 || !(o.eventQPS > 0) || o.eventQPS > 1e5 || o.eventBurst < 1 {
		return fmt.Errorf("--kube-api-qps %v, --kube-api-burst %d, --event-qps %v, --event-burst %d: want positive rates up to 1e5 and bursts of at least 1",
			o.apiQPS, o.apiBurst, o.eventQPS, o.eventBurst)
	}
	if _, err := admission.PolicyByName(o.policy); err != nil {
		return err
	}
	if err := o.learning.Check(); err != nil {
		return err
	}
	return o.removal.check()
}

func selector(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for kv := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--node-selector entry %q: want key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

func run(args []string) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	if o.checkTenancy != "" {
		return checkTenancy(o.checkTenancy, os.Stdout)
	}
	log := o.Logger()
	rc, err := o.RESTConfig()
	if err != nil {
		return err
	}
	// Events and pod conditions go through a client of their own, so that
	// their rate limit never delays an admission.
	erc := rest.CopyConfig(rc)
	rc.QPS, rc.Burst = float32(o.apiQPS), o.apiBurst
	requests := admission.CountRequests(rc)
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	erc.QPS, erc.Burst = float32(o.eventQPS), o.eventBurst
	ecs, err := kubernetes.NewForConfig(erc)
	if err != nil {
		return err
	}
	pol, err := admission.PolicyByName(o.policy)
	if err != nil {
		return err
	}
	sel, err := selector(o.nodeSelector)
	if err != nil {
		return err
	}
	m := admission.NewMetrics()
	reg := metrics.NewKubeRegistry()
	if err := m.Register(reg); err != nil {
		return err
	}
	cfg := admission.Config{
		Client: cs, Namespace: o.namespace, NodeSelector: sel, Policy: pol,
		RoundSeconds: o.round.Seconds(), Interval: o.round, NoPreemption: o.noPreemption, NoDRA: o.noDRA, Grace: o.grace,
		TenancyConfigMap: o.tenancyConfigMap,
		StateNamespace:   o.stateNamespace, StateName: o.stateName, Logger: log,
		Metrics: m, Requests: requests, EventClient: ecs, EventQPS: float32(o.eventQPS), EventBurst: o.eventBurst,
		MaxDeletionGrace: o.removal.maxDeletionGrace, TenantBudget: o.removal.tenantBudget,
	}
	if cfg.HostProfiles, err = hostProfiles(o.hostProfiles); err != nil {
		return err
	}
	ctx, stop := startup.Context()
	defer stop()
	if cfg.CopyKey, err = o.removal.copyKey(ctx, cs, o.stateNamespace, log); err != nil {
		return err
	}
	if addr, err := o.ServeMetrics(ctx, prometheus.Gatherers{reg, legacyregistry.DefaultGatherer}, log); err != nil {
		return err
	} else if addr != "" {
		log.Info("serving metrics", "address", addr)
	}
	start := func(ctx context.Context) error {
		// The state is read when leading, so a new leader continues from
		// the last one's; a leader learns afresh.
		cfg := cfg
		var err error
		if cfg.Estimator, err = o.learning.Estimator(); err != nil {
			return err
		}
		c, err := admission.New(ctx, cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := o.learning.Serve(ctx, cs, c, c, log); err != nil {
			return err
		}
		log.Info("admission controller running", "policy", o.policy, "round", o.round, "preemption", !o.noPreemption)
		return c.Run(ctx)
	}
	return leader.Run(ctx, stop, cs, log, o.LeaderElect, o.stateNamespace, o.stateName, start)
}

// checkTenancy validates a tenancy document, for an admin before applying
// it: the tenants with their namespaces, queues and quotas, or the error.
func checkTenancy(path string, out io.Writer) error {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(os.Stdin, tenancy.MaxConfigBytes+1))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return err
	}
	t, err := tenancy.Parse(b)
	if err != nil {
		return err
	}
	r := t.Rates()
	var sb strings.Builder
	fmt.Fprintf(&sb, "rates: at most %gx apart, %g steps/s on a job's fastest type; at most %d jobs in the rounds\n", r.Ratio(), r.Ref(), t.MaxJobs())
	for _, name := range t.Tenants() {
		ti, _ := t.Tenant(name)
		fmt.Fprintf(&sb, "tenant %s: weight %g, at most %d jobs, namespaces %s, queues %s", name, ti.Weight, ti.MaxJobs,
			strings.Join(ti.Namespaces(), ","), strings.Join(ti.Queues(), ","))
		if ti.Guaranteed != nil {
			fmt.Fprintf(&sb, ", guaranteed %s", share(ti.Guaranteed))
		}
		if ti.Limit != nil {
			fmt.Fprintf(&sb, ", limit %s", share(ti.Limit))
		}
		sb.WriteByte('\n')
	}
	_, err = io.WriteString(out, sb.String())
	return err
}

func share(s *tenancy.TypeShare) string {
	var parts []string
	if s.Throughput > 0 {
		parts = append(parts, fmt.Sprintf("%g of the throughput", s.Throughput))
	}
	for _, t := range slices.Sorted(maps.Keys(s.GPUs)) {
		parts = append(parts, fmt.Sprintf("%g %s", s.GPUs[t], t))
	}
	return strings.Join(parts, " and ")
}

// hostProfiles reads --host-profiles: "" none, "synergy" Synergy's zoo,
// else a profile file.
func hostProfiles(v string) (*multires.Profiles, error) {
	switch v {
	case "":
		return nil, nil
	case "synergy":
		return multires.Zoo(), nil
	}
	// An admin's file: a regular one, bounded (not a pipe or a device
	// that would block or never end).
	st, err := os.Stat(v)
	if err != nil {
		return nil, fmt.Errorf("--host-profiles: %w", err)
	}
	if !st.Mode().IsRegular() || st.Size() > multires.MaxProfilesBytes {
		return nil, fmt.Errorf("--host-profiles %s: want \"synergy\" or a regular file of at most 8 MiB", v)
	}
	f, err := os.Open(v)
	if err != nil {
		return nil, fmt.Errorf("--host-profiles: %w", err)
	}
	defer func() { _ = f.Close() }()
	ps, err := multires.ReadProfiles(f)
	if err != nil {
		return nil, fmt.Errorf("--host-profiles %s: %w", v, err)
	}
	return ps, nil
}
