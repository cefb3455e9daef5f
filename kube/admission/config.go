package admission

import (
	"fmt"
	"github.com/gpusched/gpusched/multires"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/perfmodel/learn"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// Names the controller reads and writes.
const (
	// GateName is the scheduling gate that holds a workload until it is
	// admitted.
	GateName = "gpusched.io/admission"
	// AnnotationSteps and AnnotationWeight were a job's work in steps and
	// its weight; they are ignored (with a Normal event): a job's weight
	// and remaining work come from its queue in the admin's tenancy.
	AnnotationSteps  = "gpusched.io/steps"
	AnnotationWeight = "gpusched.io/weight"
	// LabelQueue picks one of the queues a workload's namespace may use
	// (tenancy.LabelQueue).
	LabelQueue = tenancy.LabelQueue

	// The decision annotations: written by the controller for people to
	// read, never read back (the controller's records in its state say
	// what it admitted), and refused on tenants' writes by the
	// ValidatingAdmissionPolicy of kube/deploy.
	//
	// AnnotationAdmittedType is written at admission: the GPU type the job
	// runs on.
	AnnotationAdmittedType = "gpusched.io/admitted-type"
	// AnnotationAdmittedAt is the controller clock's time of the admission.
	AnnotationAdmittedAt = "gpusched.io/admitted-at"
	// AnnotationPreempted says why a pod or Job was preempted (its lease
	// ended and the round gave its GPUs to others).
	AnnotationPreempted = "gpusched.io/preempted"
	// AnnotationDeleteAfter is the RFC 3339 time after which a preempted
	// bare pod is deleted (Config.Grace after the preemption).
	AnnotationDeleteAfter = "gpusched.io/delete-after"
	// AnnotationPreemptions counts a workload's preemptions.
	AnnotationPreemptions = "gpusched.io/preemptions"

	// DefaultStateName is the default name of the state ConfigMap.
	DefaultStateName = "gpusched-admission-state"
)

// DecisionAnnotations lists the annotations only the controller writes.
var DecisionAnnotations = []string{AnnotationAdmittedType, AnnotationAdmittedAt, AnnotationPreempted, AnnotationDeleteAfter, AnnotationPreemptions}

// Event reasons.
const (
	ReasonMalformed = "GPUSchedMalformed"
	ReasonAdmitted  = "GPUSchedAdmitted"
	ReasonPreempted = "GPUSchedPreempted"
	// ReasonDefault: what the tenant wrote was not taken as written (rates
	// normalized or clamped, weight or steps ignored, priority capped).
	ReasonDefault = "GPUSchedDefaultThroughput"
	// ReasonWaiting: a workload waits outside the rounds (its tenant's
	// maxJobs, or its tenant's part of the tenancy's maxJobs).
	ReasonWaiting = "GPUSchedWaiting"
	// ReasonResized: what a workload asks for changed after it entered the
	// rounds (a Job's parallelism or its template's resources, a pod
	// group's members): it is re-admitted at its new size against its
	// share, preempted first if it ran with more GPUs than it was admitted
	// for.
	ReasonResized = "GPUSchedResized"
	// ReasonLearned (Normal) says what the core learned of a workload's
	// rates (Config.Estimator) once it is measured on two GPU types, and
	// again when that changes: "learned: 3.1x faster on v100 than k80".
	ReasonLearned = "GPUSchedLearned"
	// ReasonBypass: a workload ran without the controller's admission and
	// was preempted.
	ReasonBypass = "GPUSchedBypass"
	// ReasonAdopted: a workload found running at a clean start was taken
	// as admitted.
	ReasonAdopted = "GPUSchedAdopted"
	// ReasonBadState: the saved state could not be read; the controller
	// started clean.
	ReasonBadState = "GPUSchedBadState"
	// ReasonLearnerState (Warning, on the state ConfigMap): what the
	// estimator learned (Config.Estimator) could not be restored from
	// the saved state (corrupt, or beyond the estimator's Config), so it
	// learns afresh while the rest of the state is restored; or the state
	// is saved without it, too large for the state's caps.
	ReasonLearnerState = "GPUSchedLearnerState"
	// ReasonBadTenancy: the tenancy ConfigMap does not parse; the last
	// good tenancy stays in force.
	ReasonBadTenancy = "GPUSchedBadTenancy"
)

// Config configures a Controller. Client and Policy are required. New
// copies it, but its maps, Policy and functions are shared with the
// controller: do not change them while it runs. Reading a Config from
// several goroutines at once is safe; it is not safe for concurrent
// writes.
type Config struct {
	// Client talks to the API server.
	Client kubernetes.Interface
	// HostProfiles, if set, has the controller size the CPUs and memory
	// of the workloads that name one of its profiles
	// (model.AnnotationHostProfile; multires.Zoo() is Synergy's): each
	// round, on each node, Synergy's split (multires.Split) of the node's
	// allocatable CPUs and memory, less what the other workloads there
	// request, within each workload's bounds (model.AnnotationCPU,
	// model.AnnotationMemory); written with the admission (a Job's
	// template; a gated pod through pods/resize) and by resizing running
	// pods in place. Nil leaves requests as workloads write them.
	HostProfiles *multires.Profiles
	// Namespace limits the workloads to one namespace; "" watches all.
	Namespace string
	// NodeSelector selects the nodes whose GPUs the controller hands out
	// (label key = value, all must match); it is added to every admitted
	// workload's node affinity. Empty: every node with GPUs.
	NodeSelector map[string]string
	// TypeOnly steers an admitted workload to its GPU type only, leaving
	// the choice of nodes to the kube-scheduler. By default it is also
	// pinned to the nodes where the core placed it (a node affinity on
	// metadata.name), so that the core's placement, which keeps a
	// single-pod job on one node and packs jobs to avoid fragmentation,
	// is the one the kube-scheduler binds; with TypeOnly a job may find
	// its type's free GPUs split over nodes and wait.
	TypeOnly bool
	// Resource is the extended resource of whole GPUs; "" means
	// nvidia.com/gpu.
	Resource corev1.ResourceName
	// NoDRA leaves out the nodes whose GPUs a DRA driver publishes in
	// ResourceSlices (model.ParseDRANode; NVIDIA's gpu.nvidia.com): by
	// default their GPUs count, for workloads that ask for the extended
	// resource, while a DeviceClass maps it to DRA devices (KEP-5004), as
	// the driver's chart does; a GPU with a NoExecute device taint fails,
	// one with a NoSchedule taint is held out of the capacity. Set it on
	// clusters without the resource.k8s.io/v1 API.
	NoDRA bool

	// Policy allocates GPU time (PolicyByName gives the usual ones).
	Policy allocation.Policy
	// RoundSeconds is the round length on the controller's clock; 0 means
	// 360 s (Gavel's).
	RoundSeconds float64
	// MinResetInterval is the least time between two solves of the policy
	// when jobs come and go (scheduler.Config.MinResetInterval); 0 means
	// the core's default, negative solves at every change.
	MinResetInterval float64
	// Clock returns the controller's time in seconds (the scheduler's
	// clock: arrivals, rounds); nil means Unix time. Tests scale it.
	Clock func() float64
	// Interval is Run's wall time between two rounds; 0 means
	// RoundSeconds seconds.
	Interval time.Duration
	// Now gives wall time for preemption graces; nil means time.Now.
	Now func() time.Time

	// NoPreemption admits only: a job once admitted runs to its end and
	// new jobs are admitted into the GPUs left free.
	NoPreemption bool
	// Grace is how long a preempted bare pod keeps running, annotated with
	// AnnotationPreempted, before it is deleted (and created again, gated);
	// 0 deletes it at once.
	Grace time.Duration
	// PodDeletionGrace, when set, is the grace period in seconds of the
	// deletion of a preempted pod (DeleteOptions.GracePeriodSeconds); nil
	// takes the pod's terminationGracePeriodSeconds. Either way it is at
	// most MaxDeletionGrace. 0 removes the pod from the API at once, so
	// that it comes back gated in the same round (use it only where the
	// kubelet's grace is not needed, as in tests).
	PodDeletionGrace *int64
	// MaxDeletionGrace is the admin's bound on how long a managed GPU pod
	// may take to go once its deletion began (the pod's
	// terminationGracePeriodSeconds is the tenant's to write): a
	// preempted pod is deleted with the grace min(its own, this); a pod
	// deleted with a longer grace (the job controller's deletion of a
	// suspended Job's pods, a tenant's own) is deleted again with what is
	// left of this one; a pod still there past it is force-deleted
	// (grace 0). Until gone, a terminating pod holds its GPUs in the
	// core's plan. 0 means DefaultMaxDeletionGrace; at most one hour.
	MaxDeletionGrace time.Duration

	// Tenancy is the admin's tenancy: which namespaces are managed and
	// whose they are, the tenants' weights, queues and quotas, the rules
	// for claimed rates. nil means tenancy.PerNamespace() (every namespace
	// a tenant of its own, weight 1), unless TenancyConfigMap is set.
	Tenancy *tenancy.Tenancy
	// TenancyConfigMap names a ConfigMap in StateNamespace holding the
	// tenancy (key tenancy.ConfigKey), read at New and at every round: an
	// edit applies at the next round; one that does not parse gets a
	// Warning event and the tenancy in force stays. Until one has loaded,
	// Tenancy is used if set, else no round runs.
	TenancyConfigMap string

	// Throughput rates jobs by kind (model.AnnotationJobKind), as a claim: a
	// job's rates count only relative to each other (tenancy.RateRules);
	// nil means Gavel's table (perfmodel/gavel.Simulation).
	Throughput perfmodel.ThroughputModel

	// Estimator, when set, learns every workload's rates from its
	// progress (issue #41; scheduler.JobSpec.Learn): its claimed rates,
	// after the tenancy's rules, are claims (weak evidence, withdrawn on
	// a type it ran on without reporting), and the core normalises each
	// job's rates (scheduler.Explore.Normalise), so that a report's scale
	// buys nothing. Reports reach it through Progress (the progress
	// channel's sink; Workload is its resolver: kube/progress). Each
	// workload's group (scheduler.JobSpec.Group) is its program as the
	// cluster sees it (model.ProgramGroup: its namespace, its
	// gpusched.io/job-kind or else its containers' images, commands and
	// arguments, and its GPU count), so that a new run starts where the
	// last one of its program ended. nil: no learning, the claims are the
	// rates.
	//
	// What it learned is kept across restarts only if it can be saved:
	// if it has Snapshot() ([]byte, error) and Restore([]byte) error, as
	// *learn.Learner has, its snapshot is saved in the state with the
	// core's, and restored into it at New, before the core (it replaces
	// what the estimator held). A snapshot it refuses (corrupt, or beyond
	// its Config: fewer types or jobs allowed) is a Warning event
	// ReasonLearnerState, and it learns afresh; the admissions and the
	// core's state are restored all the same. Another Estimator learns
	// afresh at every start.
	Estimator learn.Estimator

	// StateNamespace (required unless NoState) and StateName locate the
	// ConfigMap that keeps the state across restarts, in the controller's
	// own namespace, where RBAC lets only the controller write;
	// StateName "" means DefaultStateName.
	StateNamespace, StateName string
	// NoState keeps no state (tests).
	NoState bool
	// CopyKey signs the copies of preempted bare pods kept in ConfigMaps
	// of StateNamespace to create them again (HMAC-SHA256 over the
	// pod's namespace, name, former UID and bytes): a copy whose
	// signature does not verify, or whose namespace the tenancy does not
	// manage, is dropped with a Warning event ([ReasonBadCopy]), never
	// created. At least 16 bytes (LoadCopyKey reads it from a Secret);
	// nil means a random key of this process, under which a restarted
	// controller drops the copies it finds.
	CopyKey []byte

	// Logger receives what the controller does; nil logs nothing.
	Logger *slog.Logger

	// Metrics, if not nil, receives the controller's metrics (NewMetrics;
	// register them where they are served).
	Metrics *Metrics
	// Requests, if not nil, returns how many API requests Client has sent
	// so far (CountRequests); each round's are then a metric.
	Requests func() uint64
	// EventClient writes the events and pod conditions; nil means Client.
	EventClient kubernetes.Interface
	// EventQPS and EventBurst bound the rate of event and pod condition
	// writes together (a token bucket); 0 means DefaultEventQPS and
	// DefaultEventBurst.
	EventQPS   float32
	EventBurst int
	// TenantBudget bounds the requests each tenant's workloads may cost
	// a sweep (Run sweeps every second; a round sweeps first): preempted
	// pods deleted after their grace, requeued pods created again,
	// deletions cut short, workloads that bypassed admission preempted.
	// A token bucket per tenant that each sweep refills by the budget, so
	// that one tenant's failing writes cannot use up the client; each
	// failed write is also retried with a capped exponential backoff of
	// its own. 0 means DefaultTenantBudget.
	TenantBudget int
}

func (c *Config) check() error {
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: no client", ErrConfig)
	case c.Policy == nil:
		return fmt.Errorf("%w: no policy", ErrConfig)
	case !(c.RoundSeconds >= 0) || c.RoundSeconds > 1e9:
		return fmt.Errorf("%w: round of %v s (want 0 to 1e9)", ErrConfig, c.RoundSeconds)
	case c.StateNamespace == "" && (!c.NoState || c.TenancyConfigMap != ""):
		return fmt.Errorf("%w: no state namespace (the controller's own: its state and tenancy live there)", ErrConfig)
	case c.EventQPS < 0 || c.EventBurst < 0 || math.IsNaN(float64(c.EventQPS)) || math.IsInf(float64(c.EventQPS), 0):
		return fmt.Errorf("%w: event QPS %v, burst %d (want >= 0)", ErrConfig, c.EventQPS, c.EventBurst)
	case c.Grace < 0 || c.Interval < 0:
		return fmt.Errorf("%w: grace %v, interval %v (want >= 0)", ErrConfig, c.Grace, c.Interval)
	case math.IsNaN(c.MinResetInterval):
		return fmt.Errorf("%w: min reset interval NaN", ErrConfig)
	}
	return c.checkRemoval()
}

func (c *Config) roundSeconds() float64 {
	if c.RoundSeconds > 0 {
		return c.RoundSeconds
	}
	return 360
}

func (c *Config) model() perfmodel.ThroughputModel {
	if c.Throughput != nil {
		return c.Throughput
	}
	return gavel.Simulation()
}

func (c *Config) stateLocation() (ns, name string) {
	ns, name = c.StateNamespace, c.StateName
	if name == "" {
		name = DefaultStateName
	}
	return ns, name
}

// DefaultPolicy is the policy of a shared cluster, the default of
// gpusched-admission and gpusched-kueue (per ClusterQueue there): water
// filling over the tenants by the tenancy's weights, subject to their
// quotas where the tenancy sets them (without quotas it is the
// hierarchical policy), heterogeneity-aware within each tenant's share. Its unit of fairness is the tenant: a tenant that splits its
// work into more jobs gets no more (issue #40, TestSplitWinsNothing).
// "max-min-fairness" (Gavel's heterogeneity-aware max-min fairness) is
// fair per job: there a tenant's share grows with its number of jobs.
const DefaultPolicy = "quota-water-filling"

// Policies lists the names PolicyByName knows.
func Policies() []string {
	names := make([]string, 0, len(policies))
	for n := range policies {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// policies are the policies PolicyByName knows. Each says which inputs it
// reads; every one of them is trusted (SECURITY.md): rates are the job's
// claim normalized by the tenancy's rate rules (relative to its fastest
// type, within rates.maxRatio, at rates.reference), weights the queue's
// jobWeight and the tenant's weight, remaining work the queue's
// expectedSeconds counted down by the rounds run, tenants the namespace's,
// attained time what the core measured, priority tiers the PriorityClass
// capped by the queue, arrival the object's creation time.
var policies = map[string]func() allocation.Policy{
	// Gavel's heterogeneity-aware max-min fairness (section 4.1). Reads:
	// rates (invariant to their scale), GPUs. Fair per job, as are las,
	// water-filling and quota-fairness above the guarantees: a tenant's
	// share grows with its number of jobs (DefaultPolicy is fair per
	// tenant).
	"max-min-fairness": func() allocation.Policy { return &allocation.MaxMinFairness{} },
	// Its heterogeneity-agnostic version (LAS). Reads: GPUs.
	"las": func() allocation.Policy { return &allocation.MaxMinFairness{Agnostic: true} },
	// Weighted water-filling (section 4.1, hierarchical policies). Reads:
	// rates, GPUs, the queue's jobWeight.
	"water-filling": func() allocation.Policy { return &allocation.WaterFilling{} },
	// Hierarchical water-filling over tenants: the tenants' totals are
	// water-filled by their weights, then each tenant's is shared among
	// its jobs by their queues' jobWeight (allocation.WaterFilling with
	// PerEntity, which solves one LP per distinct tenant level, not per
	// job level). A tenant gains nothing by splitting its work into more
	// jobs. Reads: rates, GPUs, the tenant's weight, the queue's jobWeight
	// within it.
	"hierarchical": func() allocation.Policy {
		return &allocation.WaterFilling{Hierarchical: true, PerEntity: true}
	},
	// Finish-time fairness (Themis; section 4.1). Reads: rates (invariant
	// to their scale), GPUs, remaining work (the queue's model), arrival.
	"finish-time-fairness": func() allocation.Policy { return &allocation.FinishTimeFairness{} },
	// Max-min fairness subject to the tenants' quotas of the tenancy
	// (allocation.QuotaFairness): each tenant with jobs gets what its
	// guaranteed slice alone would give them, in normalized throughput,
	// never more than its limits; idle guarantees are lent and reclaimed
	// at the next round. Reads: rates, GPUs, the tenants' quotas.
	"quota-fairness": func() allocation.Policy { return &allocation.QuotaFairness{} },
	// The same, water filling over tenants by the tenancy's weights
	// (hierarchical, PerEntity) instead of one max-min level: the default
	// of both controllers, fair per tenant (splitting work into more jobs
	// wins a tenant nothing), heterogeneity-aware within, and without
	// quotas in the tenancy the same as "hierarchical". Reads: rates, GPUs,
	// quotas, the tenants' weights and the queues' jobWeight.
	"quota-water-filling": func() allocation.Policy {
		return &allocation.QuotaFairness{WaterFilling: true, Hierarchical: true, PerEntity: true}
	},
	// Minimal makespan (section 4.2). Reads: rates, GPUs, remaining work.
	"makespan": func() allocation.Policy { return &allocation.MinMakespan{} },
	// Total throughput, and throughput per dollar (section 4.2). Reads:
	// rates (normalized: jobs compare in normalized throughput), GPUs.
	"max-throughput": func() allocation.Policy { return &allocation.MaxThroughput{} },
	"cost":           func() allocation.Policy { return &allocation.MaxThroughput{Cost: true} },
	// First come, first served, heterogeneity-aware (section 4.2). Reads:
	// arrival, rates, GPUs.
	"fifo": func() allocation.Policy { return &allocation.FIFO{Perf: true} },
}

// PolicyByName returns a new policy by name (Policies lists them); an
// unknown name is an error wrapping ErrConfig.
func PolicyByName(name string) (allocation.Policy, error) {
	f, ok := policies[strings.ToLower(strings.TrimSpace(name))]
	if !ok {
		return nil, fmt.Errorf("%w: unknown policy %q (want one of %s)", ErrConfig, name, strings.Join(Policies(), ", "))
	}
	return f(), nil
}
