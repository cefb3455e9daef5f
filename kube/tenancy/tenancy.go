package tenancy

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/topology"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Names shared by the controllers and the admission policies of kube/deploy.
const (
	// ConfigKey is the key of the tenancy in its ConfigMap.
	ConfigKey = "tenancy.yaml"
	// DefaultConfigMap is the default name of the tenancy ConfigMap, in the
	// controller's own namespace.
	DefaultConfigMap = "gpusched-tenancy"
	// LabelQueue is the workload label that picks one of the queues its
	// namespace may use.
	LabelQueue = "gpusched.io/queue"
	// LabelManaged marks, with the value "true", the namespaces whose GPU
	// pods and Jobs the admission policies of kube/deploy gate. Only the
	// admin can label a namespace; the tenancy's namespaces should carry it.
	LabelManaged = "gpusched.io/managed"
	// APIVersion and Kind head a tenancy document.
	APIVersion = "gpusched.io/v1alpha1"
	Kind       = "Tenancy"
)

// Limits on a tenancy document.
const (
	// MaxConfigBytes bounds the document (a ConfigMap holds at most 1 MiB).
	MaxConfigBytes = 1 << 20
	// MaxTenants, MaxQueues and MaxNamespaces bound its lists.
	MaxTenants    = 1000
	MaxQueues     = 4000
	MaxNamespaces = 10000
	// MaxJobsLimit bounds a tenant's MaxJobs and the document's.
	MaxJobsLimit = 100000
	// DefaultTenantMaxJobs is a tenant's MaxJobs when not given, and
	// DefaultMaxJobs the document's.
	DefaultTenantMaxJobs = 256
	DefaultMaxJobs       = 2048
	// MaxRatioLimit bounds RateRules.MaxRatio.
	MaxRatioLimit = 1e6
	// DefaultMaxRatio is RateRules.MaxRatio when not given: Gavel's
	// measured table spans about 10x between a K80 and a V100.
	DefaultMaxRatio = 10
)

// Errors of this package; test them with errors.Is.
var (
	// ErrConfig: a tenancy document that cannot be used (bad YAML, an
	// unknown field, a value out of range, a namespace of two tenants).
	ErrConfig = errors.New("tenancy: invalid configuration")
	// ErrNotManaged: a namespace no tenant owns.
	ErrNotManaged = errors.New("tenancy: namespace not managed")
	// ErrQueue: a workload's queue label names a queue that does not
	// exist or that its namespace may not use.
	ErrQueue = errors.New("tenancy: queue not allowed")
)

// Config is the tenancy document as the admin writes it (YAML or JSON). It
// is a plain value, safe for concurrent reads; Parse and Compile validate
// it.
type Config struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	// Rates bound how tenants' claimed rates are used.
	Rates RateRules `json:"rates,omitzero"`
	// MaxJobs bounds the jobs of all tenants that the controller considers
	// at once: it bounds the saved state and a round's work. The admission
	// controller shares it among the tenants with work, water-filled by
	// their weights (the others wait, each tenant's oldest first). 0 means
	// DefaultMaxJobs.
	MaxJobs int `json:"maxJobs,omitempty"`
	// Tenants are the cluster's tenants.
	Tenants []Tenant `json:"tenants"`
}

// Tenant is one team sharing the cluster: a plain value, safe for
// concurrent reads, not for concurrent writes.
type Tenant struct {
	// Name is a DNS label (lower-case letters, digits, '-'; at most 63).
	Name string `json:"name"`
	// Weight is the tenant's weight for the weighted and hierarchical
	// policies, in [allocation.MinWeight, allocation.MaxWeight]; 0 means 1.
	Weight float64 `json:"weight,omitempty"`
	// Namespaces are the namespaces the tenant owns (each in one tenant).
	Namespaces []string `json:"namespaces"`
	// Queues are the tenant's queues; none means one queue named after the
	// tenant, open to all its namespaces.
	Queues []Queue `json:"queues,omitempty"`
	// DefaultQueue is the queue of a workload without LabelQueue, where its
	// namespace may use it; "" means the first queue the namespace may use.
	DefaultQueue string `json:"defaultQueue,omitempty"`
	// MaxJobs bounds the tenant's jobs the controller considers at once
	// (the others wait, oldest first); 0 means DefaultTenantMaxJobs.
	MaxJobs int `json:"maxJobs,omitempty"`
	// Quota is the tenant's guaranteed share and limit.
	Quota Quota `json:"quota,omitzero"`
}

// Queue is a tenant's queue: the policy knobs of the jobs that use it. A
// plain value, safe for concurrent reads, not for concurrent writes.
type Queue struct {
	// Name is a DNS label, unique over all tenants.
	Name string `json:"name"`
	// Namespaces are those of the tenant's namespaces that may use the
	// queue; none means all of them.
	Namespaces []string `json:"namespaces,omitempty"`
	// JobWeight is the weight of each job of the queue for the weighted
	// policies (within its tenant's share for the hierarchical ones), in
	// [allocation.MinWeight, allocation.MaxWeight]; 0 means 1.
	JobWeight float64 `json:"jobWeight,omitempty"`
	// MaxPriority caps the priority tier of the queue's jobs: a job's
	// tier is its PriorityClass's value, at most this. nil means 0, so
	// that no tenant outranks the others unless the admin says so.
	MaxPriority *int32 `json:"maxPriority,omitempty"`
	// ExpectedSeconds is the admin's model of a job's run time on its
	// fastest type, from which its remaining work is counted down (for
	// finish-time fairness and makespan); 0 means unknown.
	ExpectedSeconds float64 `json:"expectedSeconds,omitempty"`
}

// Quota is a tenant's guaranteed share of the cluster (met whenever the
// tenant has demand for it; idle, it is lent to others and reclaimed at
// the next round) and its limit (never exceeded, even on an idle
// cluster). Either may be nil. A plain value, safe for concurrent reads,
// not for concurrent writes.
type Quota struct {
	Guaranteed *Share `json:"guaranteed,omitempty"`
	Limit      *Share `json:"limit,omitempty"`
}

// Share is an amount of the cluster: GPUs of given types (GPU type or
// product names, each at least 0; a type not listed is not bounded), or a
// fraction, in [0, 1], of the cluster's normalized throughput (each
// type's GPUs weighted by how fast the tenant's jobs run there relative
// to their fastest type), or both. A plain value, safe for concurrent
// reads, not for concurrent writes.
type Share struct {
	GPUs       map[string]float64 `json:"gpus,omitempty"`
	Throughput float64            `json:"throughput,omitempty"`
}

// RateRules say how much of a tenant's claimed rates the policies use. A
// plain value, safe for concurrent use.
type RateRules struct {
	// MaxRatio is the most a job's rate on its fastest type may exceed its
	// rate on another type it can run on, in [1, MaxRatioLimit]; 0 means
	// DefaultMaxRatio. 1 makes every policy heterogeneity-agnostic.
	MaxRatio float64 `json:"maxRatio,omitempty"`
	// Reference is the rate, in steps per second, of every job on its
	// fastest type after normalization, in [allocation.MinRate,
	// allocation.MaxRate]; 0 means 1.
	Reference float64 `json:"reference,omitempty"`
}

// Parse reads and validates a tenancy document (YAML or JSON), strictly:
// unknown fields are errors.
func Parse(data []byte) (*Tenancy, error) {
	if len(data) > MaxConfigBytes {
		return nil, fmt.Errorf("%w: %d bytes (at most %d)", ErrConfig, len(data), MaxConfigBytes)
	}
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return Compile(c)
}

// Tenancy is a validated tenancy, indexed. It is immutable: safe for
// concurrent use.
type Tenancy struct {
	cfg     Config
	tenants map[string]*TenantInfo
	order   []string // tenant names as written
	byNS    map[string]*TenantInfo
	queues  map[string]*QueueInfo
	open    bool // PerNamespace: every namespace is a tenant of its own
	rates   RateRules
	maxJobs int
}

// TenantInfo is a compiled tenant, read only: safe for concurrent use.
type TenantInfo struct {
	Name    string
	Weight  float64
	MaxJobs int
	// Guaranteed and Limit are the quota, types parsed (nil: none).
	Guaranteed, Limit *TypeShare
	namespaces        []string
	queues            []*QueueInfo
	defaultQueue      string
}

// Namespaces returns the tenant's namespaces, sorted.
func (t *TenantInfo) Namespaces() []string { return slices.Clone(t.namespaces) }

// Queues returns the names of the tenant's queues, as written.
func (t *TenantInfo) Queues() []string {
	out := make([]string, len(t.queues))
	for i, q := range t.queues {
		out[i] = q.Name
	}
	return out
}

// TypeShare is a Share with its types parsed, read only: safe for
// concurrent use.
type TypeShare struct {
	GPUs       map[topology.GPUType]float64
	Throughput float64
}

// QueueInfo is a compiled queue, read only: safe for concurrent use.
type QueueInfo struct {
	Name            string
	Tenant          string
	JobWeight       float64
	MaxPriority     int32
	ExpectedSeconds float64
	namespaces      map[string]bool
}

// Priority returns the tier of a job of the queue whose PriorityClass has
// value p: p, at most the queue's MaxPriority.
func (q *QueueInfo) Priority(p int32) int {
	return int(min(p, q.MaxPriority))
}

// RemainingSteps returns the admin's model of a new job's work in steps at
// reference rate ref (RateRules.Ref): ExpectedSeconds x ref, 0 when the
// queue does not say.
func (q *QueueInfo) RemainingSteps(ref float64) float64 {
	return min(q.ExpectedSeconds*ref, allocation.MaxSteps)
}

// Compile validates a Config and indexes it.
func Compile(c Config) (*Tenancy, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	if c.APIVersion != "" && c.APIVersion != APIVersion {
		return nil, bad("apiVersion %q (want %s)", cut(c.APIVersion), APIVersion)
	}
	if c.Kind != "" && c.Kind != Kind {
		return nil, bad("kind %q (want %s)", cut(c.Kind), Kind)
	}
	if err := c.Rates.validate(); err != nil {
		return nil, err
	}
	if c.MaxJobs < 0 || c.MaxJobs > MaxJobsLimit {
		return nil, bad("maxJobs %d (want 0 to %d)", c.MaxJobs, MaxJobsLimit)
	}
	if len(c.Tenants) > MaxTenants {
		return nil, bad("%d tenants (at most %d)", len(c.Tenants), MaxTenants)
	}
	t := &Tenancy{cfg: c, tenants: map[string]*TenantInfo{}, byNS: map[string]*TenantInfo{}, queues: map[string]*QueueInfo{},
		rates: c.Rates, maxJobs: c.MaxJobs}
	if t.maxJobs == 0 {
		t.maxJobs = DefaultMaxJobs
	}
	nq, nns := 0, 0
	var guaranteed float64
	for i := range c.Tenants {
		ct := &c.Tenants[i]
		where := fmt.Sprintf("tenants[%d]", i)
		if err := dnsLabel(ct.Name); err != nil {
			return nil, bad("%s.name %q: %v", where, cut(ct.Name), err)
		}
		where = fmt.Sprintf("tenant %s", ct.Name)
		if t.tenants[ct.Name] != nil {
			return nil, bad("%s given twice", where)
		}
		ti := &TenantInfo{Name: ct.Name, Weight: ct.Weight, MaxJobs: ct.MaxJobs, defaultQueue: ct.DefaultQueue}
		if ti.Weight == 0 {
			ti.Weight = 1
		}
		if !(ti.Weight >= allocation.MinWeight && ti.Weight <= allocation.MaxWeight) {
			return nil, bad("%s: weight %v (want %g to %g, or 0 for 1)", where, ct.Weight, allocation.MinWeight, allocation.MaxWeight)
		}
		if ct.MaxJobs < 0 || ct.MaxJobs > MaxJobsLimit {
			return nil, bad("%s: maxJobs %d (want 0 to %d)", where, ct.MaxJobs, MaxJobsLimit)
		}
		if ti.MaxJobs == 0 {
			ti.MaxJobs = DefaultTenantMaxJobs
		}
		if len(ct.Namespaces) == 0 {
			return nil, bad("%s owns no namespace", where)
		}
		nns += len(ct.Namespaces)
		if nns > MaxNamespaces {
			return nil, bad("more than %d namespaces", MaxNamespaces)
		}
		for _, ns := range ct.Namespaces {
			if err := dnsLabel(ns); err != nil {
				return nil, bad("%s: namespace %q: %v", where, cut(ns), err)
			}
			if o := t.byNS[ns]; o != nil {
				return nil, bad("namespace %s is in tenants %s and %s (a namespace belongs to one tenant)", ns, o.Name, ct.Name)
			}
			t.byNS[ns] = ti
			ti.namespaces = append(ti.namespaces, ns)
		}
		slices.Sort(ti.namespaces)
		var err error
		if ti.Guaranteed, err = ct.Quota.Guaranteed.compile(where + ": quota.guaranteed"); err != nil {
			return nil, err
		}
		if ti.Limit, err = ct.Quota.Limit.compile(where + ": quota.limit"); err != nil {
			return nil, err
		}
		if err := checkWithin(ti.Guaranteed, ti.Limit, where); err != nil {
			return nil, err
		}
		if ti.Guaranteed != nil {
			guaranteed += ti.Guaranteed.Throughput
		}
		queues := ct.Queues
		if len(queues) == 0 {
			queues = []Queue{{Name: ct.Name}}
		}
		nq += len(queues)
		if nq > MaxQueues {
			return nil, bad("more than %d queues", MaxQueues)
		}
		for k := range queues {
			q := &queues[k]
			qwhere := fmt.Sprintf("%s: queues[%d]", where, k)
			if err := dnsLabel(q.Name); err != nil {
				return nil, bad("%s.name %q: %v", qwhere, cut(q.Name), err)
			}
			qwhere = fmt.Sprintf("%s: queue %s", where, q.Name)
			if o := t.queues[q.Name]; o != nil {
				return nil, bad("%s: queue name already used by tenant %s (queue names are unique)", qwhere, o.Tenant)
			}
			qi := &QueueInfo{Name: q.Name, Tenant: ct.Name, JobWeight: q.JobWeight, ExpectedSeconds: q.ExpectedSeconds, namespaces: map[string]bool{}}
			if qi.JobWeight == 0 {
				qi.JobWeight = 1
			}
			if !(qi.JobWeight >= allocation.MinWeight && qi.JobWeight <= allocation.MaxWeight) {
				return nil, bad("%s: jobWeight %v (want %g to %g, or 0 for 1)", qwhere, q.JobWeight, allocation.MinWeight, allocation.MaxWeight)
			}
			if q.MaxPriority != nil {
				qi.MaxPriority = *q.MaxPriority
			}
			if !(q.ExpectedSeconds >= 0 && q.ExpectedSeconds <= allocation.MaxTime) {
				return nil, bad("%s: expectedSeconds %v (want 0 to %g)", qwhere, q.ExpectedSeconds, allocation.MaxTime)
			}
			nss := q.Namespaces
			if len(nss) == 0 {
				nss = ti.namespaces
			}
			for _, ns := range nss {
				if t.byNS[ns] != ti {
					return nil, bad("%s: namespace %q is not tenant %s's", qwhere, cut(ns), ct.Name)
				}
				qi.namespaces[ns] = true
			}
			t.queues[q.Name] = qi
			ti.queues = append(ti.queues, qi)
		}
		if ti.defaultQueue != "" {
			if q := t.queues[ti.defaultQueue]; q == nil || q.Tenant != ct.Name {
				return nil, bad("%s: defaultQueue %q is not one of its queues", where, cut(ti.defaultQueue))
			}
		}
		for _, ns := range ti.namespaces {
			if ti.queueFor(ns) == nil {
				return nil, bad("%s: namespace %s may use none of its queues", where, ns)
			}
		}
		t.tenants[ct.Name] = ti
		t.order = append(t.order, ct.Name)
	}
	if guaranteed > 1+1e-9 {
		return nil, bad("the tenants' guaranteed throughput shares add up to %.4g (at most 1)", guaranteed)
	}
	return t, nil
}

// PerNamespace is the tenancy of a cluster without a tenancy document
// (tests, a single team): every namespace is a tenant of its own name,
// weight 1, with one queue of the same name, no quota, the default rate
// rules and limits.
func PerNamespace() *Tenancy {
	return &Tenancy{open: true, tenants: map[string]*TenantInfo{}, byNS: map[string]*TenantInfo{}, queues: map[string]*QueueInfo{},
		maxJobs: DefaultMaxJobs}
}

// Config returns the document the tenancy was compiled from.
func (t *Tenancy) Config() Config { return t.cfg }

// Open reports whether the tenancy is PerNamespace's.
func (t *Tenancy) Open() bool { return t.open }

// Rates returns the rate rules.
func (t *Tenancy) Rates() RateRules { return t.rates }

// MaxJobs returns the bound on all tenants' jobs considered at once.
func (t *Tenancy) MaxJobs() int { return t.maxJobs }

// Tenants returns the tenants' names, as written (none for PerNamespace).
func (t *Tenancy) Tenants() []string { return slices.Clone(t.order) }

// Tenant returns a tenant by name.
func (t *Tenancy) Tenant(name string) (*TenantInfo, bool) {
	ti, ok := t.tenants[name]
	return ti, ok
}

// Managed reports whether a tenant owns the namespace (always, for
// PerNamespace).
func (t *Tenancy) Managed(ns string) bool {
	return t.open || t.byNS[ns] != nil
}

// Namespaces returns the managed namespaces, sorted (none for
// PerNamespace, which manages all).
func (t *Tenancy) Namespaces() []string {
	return slices.Sorted(maps.Keys(t.byNS))
}

// Weights returns the tenants' weights, by name, for
// scheduler.Config.TenantWeights.
func (t *Tenancy) Weights() map[string]float64 {
	out := make(map[string]float64, len(t.tenants))
	for n, ti := range t.tenants {
		out[n] = ti.Weight
	}
	return out
}

// Quotas returns the tenants' quotas, by name, for
// scheduler.Config.TenantQuotas (allocation.QuotaFairness enforces them):
// a guarantee's GPUs and throughput share are the quota's GuaranteedGPUs
// and GuaranteedShare, a limit's its MaxGPUs and MaxShare. Tenants without
// a quota are left out.
func (t *Tenancy) Quotas() map[string]allocation.Quota {
	out := map[string]allocation.Quota{}
	for n, ti := range t.tenants {
		if ti.Guaranteed == nil && ti.Limit == nil {
			continue
		}
		var q allocation.Quota
		if g := ti.Guaranteed; g != nil {
			q.GuaranteedGPUs, q.GuaranteedShare = maps.Clone(g.GPUs), g.Throughput
		}
		if l := ti.Limit; l != nil {
			q.MaxGPUs, q.MaxShare = maps.Clone(l.GPUs), l.Throughput
		}
		out[n] = q
	}
	return out
}

// Placement is where a workload belongs: its tenant and queue (read only,
// safe for concurrent use).
type Placement struct {
	Tenant *TenantInfo
	Queue  *QueueInfo
}

// Resolve places a workload of namespace ns with labels: its tenant is the
// namespace's, its queue the one LabelQueue names if the namespace may use
// it, else (no label) the namespace's default queue. A namespace no tenant
// owns is ErrNotManaged; a label naming a queue the namespace may not use
// is ErrQueue.
func (t *Tenancy) Resolve(ns string, labels map[string]string) (Placement, error) {
	if t.open {
		ti := &TenantInfo{Name: ns, Weight: 1, MaxJobs: DefaultTenantMaxJobs, namespaces: []string{ns}}
		q := &QueueInfo{Name: ns, Tenant: ns, JobWeight: 1, namespaces: map[string]bool{ns: true}}
		ti.queues = []*QueueInfo{q}
		if v, ok := labels[LabelQueue]; ok && v != ns {
			return Placement{Tenant: ti}, fmt.Errorf("%w: label %s=%q: namespace %s may use only queue %s", ErrQueue, LabelQueue, cut(v), ns, ns)
		}
		return Placement{Tenant: ti, Queue: q}, nil
	}
	ti := t.byNS[ns]
	if ti == nil {
		return Placement{}, fmt.Errorf("%w: no tenant owns namespace %s", ErrNotManaged, cut(ns))
	}
	v, ok := labels[LabelQueue]
	if !ok {
		return Placement{Tenant: ti, Queue: ti.queueFor(ns)}, nil
	}
	q := t.queues[v]
	if q == nil || q.Tenant != ti.Name || !q.namespaces[ns] {
		return Placement{Tenant: ti}, fmt.Errorf("%w: label %s=%q: namespace %s (tenant %s) may use queues %s", ErrQueue, LabelQueue, cut(v), ns, ti.Name,
			strings.Join(ti.queuesOf(ns), ", "))
	}
	return Placement{Tenant: ti, Queue: q}, nil
}

// queueFor is the namespace's default queue.
func (ti *TenantInfo) queueFor(ns string) *QueueInfo {
	for _, q := range ti.queues {
		if q.Name == ti.defaultQueue && q.namespaces[ns] {
			return q
		}
	}
	for _, q := range ti.queues {
		if q.namespaces[ns] {
			return q
		}
	}
	return nil
}

func (ti *TenantInfo) queuesOf(ns string) []string {
	var out []string
	for _, q := range ti.queues {
		if q.namespaces[ns] {
			out = append(out, q.Name)
		}
	}
	return out
}

func (s *Share) compile(where string) (*TypeShare, error) {
	if s == nil {
		return nil, nil
	}
	if !(s.Throughput >= 0 && s.Throughput <= 1) {
		return nil, fmt.Errorf("%w: %s.throughput %v (want a fraction from 0 to 1)", ErrConfig, where, s.Throughput)
	}
	if len(s.GPUs) > 1024 {
		return nil, fmt.Errorf("%w: %s.gpus: %d types (at most 1024)", ErrConfig, where, len(s.GPUs))
	}
	out := &TypeShare{Throughput: s.Throughput}
	for _, name := range slices.Sorted(maps.Keys(s.GPUs)) {
		v := s.GPUs[name]
		typ, err := ParseType(name)
		if err != nil {
			return nil, fmt.Errorf("%w: %s.gpus: %w", ErrConfig, where, err)
		}
		if !(v >= 0 && v <= allocation.MaxCapacity) {
			return nil, fmt.Errorf("%w: %s.gpus.%s %v (want 0 to %d GPUs)", ErrConfig, where, name, v, allocation.MaxCapacity)
		}
		if out.GPUs == nil {
			out.GPUs = map[topology.GPUType]float64{}
		}
		if _, dup := out.GPUs[typ]; dup {
			return nil, fmt.Errorf("%w: %s.gpus: type %s given twice", ErrConfig, where, typ)
		}
		out.GPUs[typ] = v
	}
	return out, nil
}

// checkWithin refuses a guarantee above the limit.
func checkWithin(g, l *TypeShare, where string) error {
	if g == nil || l == nil {
		return nil
	}
	if l.Throughput > 0 && g.Throughput > l.Throughput {
		return fmt.Errorf("%w: %s: guaranteed throughput %v above the limit %v", ErrConfig, where, g.Throughput, l.Throughput)
	}
	for typ, v := range g.GPUs {
		if lim, ok := l.GPUs[typ]; ok && v > lim {
			return fmt.Errorf("%w: %s: %v guaranteed %s GPUs above the limit %v", ErrConfig, where, v, typ, lim)
		}
	}
	return nil
}

// ParseType reads a GPU type or product name ("v100",
// "Tesla-V100-SXM2-16GB").
func ParseType(name string) (topology.GPUType, error) {
	if t, err := topology.ParseGPUType(name); err == nil && t.Known() {
		return t, nil
	}
	if p, err := topology.ParseProduct(name); err == nil && p.Type.Known() {
		return p.Type, nil
	}
	t, err := topology.ParseGPUType(name)
	if err != nil {
		return "", fmt.Errorf("%q is not a GPU type: %w", cut(name), err)
	}
	return t, nil
}

func (r *RateRules) validate() error {
	if r.MaxRatio != 0 && !(r.MaxRatio >= 1 && r.MaxRatio <= MaxRatioLimit) {
		return fmt.Errorf("%w: rates.maxRatio %v (want 1 to %g, or 0 for %d)", ErrConfig, r.MaxRatio, MaxRatioLimit, DefaultMaxRatio)
	}
	if r.Reference != 0 && !(r.Reference >= allocation.MinRate && r.Reference <= allocation.MaxRate) {
		return fmt.Errorf("%w: rates.reference %v (want %g to %g steps/s, or 0 for 1)", ErrConfig, r.Reference, allocation.MinRate, allocation.MaxRate)
	}
	return nil
}

func dnsLabel(s string) error {
	if errs := validation.IsDNS1123Label(s); len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func cut(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// finite reports whether v is a finite number.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
