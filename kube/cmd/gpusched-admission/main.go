// Command gpusched-admission runs gpusched's round-based admission
// controller (package admission) against a cluster: workloads created with
// the scheduling gate gpusched.io/admission are admitted, every round, on
// the GPU type the allocation policy gives them, and preempted when their
// lease ends. deploy/admission-rbac.yaml and deploy/admission-deployment.yaml
// run it in a cluster; outside one, give --kubeconfig.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/gpusched/gpusched/kube/admission"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gpusched-admission:", err)
		os.Exit(1)
	}
}

type options struct {
	kubeconfig, namespace, policy, tenantLabel, nodeSelector string
	stateNamespace, stateName                                string
	round, grace                                             time.Duration
	noPreemption, leaderElect, debug                         bool
	defaultRate                                              float64
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("gpusched-admission", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config)")
	fs.StringVar(&o.namespace, "namespace", "", "namespace of the workloads (default: all)")
	fs.StringVar(&o.policy, "policy", "max-min-fairness", "allocation policy: "+strings.Join(admission.Policies(), ", "))
	fs.DurationVar(&o.round, "round", 6*time.Minute, "round length")
	fs.BoolVar(&o.noPreemption, "no-preemption", false, "admit only: an admitted job runs to its end")
	fs.DurationVar(&o.grace, "grace", 30*time.Second, "how long a preempted pod runs, annotated, before it is deleted")
	fs.StringVar(&o.tenantLabel, "tenant-label", "", "label naming a job's tenant (e.g. "+admission.LabelQueue+"); default: its namespace")
	fs.StringVar(&o.nodeSelector, "node-selector", "", "nodes whose GPUs are handed out, as key=value,...")
	fs.Float64Var(&o.defaultRate, "default-throughput", 1, "steps/s on every type of a job whose rates are unknown")
	fs.StringVar(&o.stateNamespace, "state-namespace", "", "namespace of the state ConfigMap and the leader lease (default: the pod's, or default)")
	fs.StringVar(&o.stateName, "state-name", admission.DefaultStateName, "name of the state ConfigMap and the leader lease")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "run only while holding the leader lease")
	fs.BoolVar(&o.debug, "debug", false, "log at debug level")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.round <= 0 || o.grace < 0 {
		return o, fmt.Errorf("--round %v must be positive and --grace %v not negative", o.round, o.grace)
	}
	if _, err := admission.PolicyByName(o.policy); err != nil {
		return o, err
	}
	if o.stateNamespace == "" {
		o.stateNamespace = os.Getenv("POD_NAMESPACE")
	}
	return o, nil
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
	level := slog.LevelInfo
	if o.debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	var rc *rest.Config
	if o.kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	cs, err := kubernetes.NewForConfig(rc)
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
	cfg := admission.Config{
		Client: cs, Namespace: o.namespace, NodeSelector: sel, Policy: pol,
		RoundSeconds: o.round.Seconds(), Interval: o.round, NoPreemption: o.noPreemption, Grace: o.grace,
		TenantLabel: o.tenantLabel, DefaultThroughput: o.defaultRate,
		StateNamespace: o.stateNamespace, StateName: o.stateName, Logger: log,
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := func(ctx context.Context) error {
		// The state is read when leading, so a new leader continues from
		// the last one's.
		c, err := admission.New(ctx, cfg)
		if err != nil {
			return err
		}
		log.Info("admission controller running", "policy", o.policy, "round", o.round, "preemption", !o.noPreemption)
		return c.Run(ctx)
	}
	if !o.leaderElect {
		if err := start(ctx); err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	}
	id, err := os.Hostname()
	if err != nil {
		return err
	}
	ns := o.stateNamespace
	if ns == "" {
		ns = "default"
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, o.stateName, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return err
	}
	var runErr error
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		ReleaseOnCancel: true, Name: o.stateName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				if err := start(ctx); err != nil && !errors.Is(err, context.Canceled) {
					runErr = err
					stop()
				}
			},
			OnStoppedLeading: func() { log.Info("leader lease lost", "identity", id) },
		},
	})
	return runErr
}
