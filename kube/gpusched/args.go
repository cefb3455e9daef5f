package gpusched

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpusched/gpusched/gang"
	"github.com/gpusched/gpusched/kube/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Orders of the queue (Args.Order).
const (
	OrderFIFO    = "fifo"
	OrderSRTF    = "srtf"
	OrderLAS     = "las"
	OrderGittins = "gittins"
)

// Args configure the plugin (pluginConfig args in the
// KubeSchedulerConfiguration). The zero value takes every default. Args
// is a plain value: safe for concurrent reads, not for concurrent writes.
type Args struct {
	// Order of the queue: "fifo" (default), "srtf", "las" (Tiresias's
	// 2D-LAS) or "gittins" (Tiresias's 2D-Gittins). The inputs each
	// trusts (SECURITY.md): fifo the pod's (or its group's first pod's)
	// creation time, set by the API server; srtf ExpectedSeconds less the
	// service the plugin measured; las and gittins that measured service
	// (bound GPUs x time since PodScheduled, kept per job). All order by
	// the pod's priority first (from its PriorityClass, resolved by the
	// API server). No annotation a tenant writes is read.
	Order string `json:"order,omitempty"`
	// LASThresholds are 2D-LAS's queue limits in GPU-seconds, ascending;
	// empty means gang.DefaultThresholds.
	LASThresholds []float64 `json:"lasThresholds,omitempty"`
	// GittinsSamples are GPU-seconds of past jobs, the distribution
	// 2D-Gittins's index is taken over; needed for "gittins".
	GittinsSamples []float64 `json:"gittinsSamples,omitempty"`
	// GittinsQuantum is 2D-Gittins's quantum in GPU-seconds; 0 means 3250.
	GittinsQuantum float64 `json:"gittinsQuantum,omitempty"`
	// PermitTimeoutSeconds is how long a pod group waits for its members
	// at Permit; 0 means 60.
	PermitTimeoutSeconds int `json:"permitTimeoutSeconds,omitempty"`
	// BackoffSeconds is how long a rejected pod group's members are turned
	// away at once; 0 means 10, negative none.
	BackoffSeconds int `json:"backoffSeconds,omitempty"`
	// Resource is the extended resource of whole GPUs; "" means
	// nvidia.com/gpu.
	Resource string `json:"resource,omitempty"`
	// RackLabel and DomainLabel name the node labels of the rack and of the
	// NVLink domain; "" means gpusched.io/rack and nvidia.com/gpu.clique.
	RackLabel   string `json:"rackLabel,omitempty"`
	DomainLabel string `json:"domainLabel,omitempty"`
	// LinkWeight, PackWeight, GangWeight and HostWeight weigh the parts
	// of a node's score: the links of the best GPU set, best fit,
	// closeness to the pod group's members, and how well the node's CPUs
	// and memory keep up with its GPUs once the pod is there (1 while
	// every GPU left free keeps at least its proportional share of the
	// CPUs and memory left free; less as a pod that asks for more than its
	// share would strand GPUs without CPUs: Synergy, OSDI 2022). All zero
	// means 2, 1, 2 and 1.
	LinkWeight float64 `json:"linkWeight,omitempty"`
	PackWeight float64 `json:"packWeight,omitempty"`
	GangWeight float64 `json:"gangWeight,omitempty"`
	HostWeight float64 `json:"hostWeight,omitempty"`
	// StatsFile, if set, is where the plugin writes its per-pod latency
	// statistics as JSON, every second while they change and at exit.
	StatsFile string `json:"statsFile,omitempty"`
	// ExpectedSeconds is the admin's model of a job's run time, from
	// which SRTF's remaining time is counted down by the service the
	// plugin measured (the job's attained GPU-seconds over its GPUs); 0
	// means unknown, which makes SRTF first come, first served. A pod's
	// own claims of its remaining or attained time are never read.
	ExpectedSeconds float64 `json:"expectedSeconds,omitempty"`
	// RecordKeySecret ("namespace/name") is the Secret holding the key
	// that signs the device records written at binding, in its data key
	// "key" (at least 16 bytes); the admin makes it at install
	// (RecordKeyCommand) and the plugin fails at start while it is missing
	// (ErrNoRecordKey). RecordKeyFile, if set instead, is a file holding
	// it (a mounted Secret). With neither the key is random per process:
	// after a restart every bound pod is booked as a stand-in.
	RecordKeySecret string `json:"recordKeySecret,omitempty"`
	RecordKeyFile   string `json:"recordKeyFile,omitempty"`
}

// maxSamples bounds GittinsSamples and LASThresholds.
const maxSamples = 1 << 20

// decodeArgs reads the plugin's args strictly: an unknown field is an
// error, so that a typo does not go unnoticed.
func decodeArgs(obj runtime.Object) (Args, error) {
	var a Args
	switch o := obj.(type) {
	case nil:
	case *Args:
		a = *o
	case *runtime.Unknown:
		if len(o.Raw) == 0 {
			break
		}
		raw := o.Raw
		if o.ContentType == runtime.ContentTypeYAML {
			j, err := yaml.YAMLToJSON(raw)
			if err != nil {
				return a, fmt.Errorf("%w: %w", ErrArgs, err)
			}
			raw = j
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			return a, fmt.Errorf("%w: %w", ErrArgs, err)
		}
	default:
		return a, fmt.Errorf("%w: args of type %T", ErrArgs, obj)
	}
	return a, a.validate()
}

func (a *Args) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrArgs, fmt.Sprintf(format, args...))
	}
	switch a.Order {
	case "", OrderFIFO, OrderSRTF, OrderLAS, OrderGittins:
	default:
		return bad("order %q (want fifo, srtf, las or gittins)", a.Order)
	}
	if len(a.LASThresholds) > maxSamples || len(a.GittinsSamples) > maxSamples {
		return bad("more than %d thresholds or samples", maxSamples)
	}
	for i, v := range a.LASThresholds {
		if !(v > 0) || math.IsInf(v, 0) || (i > 0 && v <= a.LASThresholds[i-1]) {
			return bad("lasThresholds must be positive, finite and ascending (at %d: %g)", i, v)
		}
	}
	for i, v := range a.GittinsSamples {
		if !(v > 0) || math.IsInf(v, 0) {
			return bad("gittinsSamples[%d] = %g (want positive GPU-seconds)", i, v)
		}
	}
	if a.Order == OrderGittins && len(a.GittinsSamples) == 0 {
		return bad("order gittins needs gittinsSamples (GPU-seconds of past jobs)")
	}
	if !(a.GittinsQuantum >= 0) || math.IsInf(a.GittinsQuantum, 0) {
		return bad("gittinsQuantum %g", a.GittinsQuantum)
	}
	if a.PermitTimeoutSeconds < 0 || a.PermitTimeoutSeconds > 86400 {
		return bad("permitTimeoutSeconds %d (want 0 to 86400)", a.PermitTimeoutSeconds)
	}
	if a.BackoffSeconds > 86400 {
		return bad("backoffSeconds %d (at most 86400)", a.BackoffSeconds)
	}
	if !(a.ExpectedSeconds >= 0 && a.ExpectedSeconds <= 1e15) {
		return bad("expectedSeconds %g (want 0 to 1e15)", a.ExpectedSeconds)
	}
	if a.RecordKeySecret != "" {
		ns, name, ok := strings.Cut(a.RecordKeySecret, "/")
		if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			return bad("recordKeySecret %q (want namespace/name)", a.RecordKeySecret)
		}
		if a.RecordKeyFile != "" {
			return bad("recordKeySecret and recordKeyFile both set (give one)")
		}
	}
	for _, w := range []float64{a.LinkWeight, a.PackWeight, a.GangWeight, a.HostWeight} {
		if !(w >= 0) || math.IsInf(w, 0) {
			return bad("score weights must be finite and non-negative")
		}
	}
	return nil
}

// order returns the queue order the args name (validated args give no
// error; NewGittins2D checks its samples again).
func (a *Args) order() (gang.Order, error) {
	switch a.Order {
	case OrderSRTF:
		return gang.ShortestRemaining{}, nil
	case OrderLAS:
		// No starvation guard: a key that moves with the clock would break
		// the queue's heap. (The measured service of a waiting pod's job
		// moves only while other pods of its job run.)
		return gang.LAS2D{Thresholds: a.LASThresholds}, nil
	case OrderGittins:
		g, err := gang.NewGittins2D(a.GittinsSamples, a.GittinsQuantum)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrArgs, err)
		}
		return g, nil
	}
	return gang.ByArrival{}, nil
}

func (a *Args) permitTimeout() time.Duration {
	if a.PermitTimeoutSeconds == 0 {
		return 60 * time.Second
	}
	return time.Duration(a.PermitTimeoutSeconds) * time.Second
}

func (a *Args) backoff() time.Duration {
	switch {
	case a.BackoffSeconds == 0:
		return 10 * time.Second
	case a.BackoffSeconds < 0:
		return -1
	}
	return time.Duration(a.BackoffSeconds) * time.Second
}

func (a *Args) resource() corev1.ResourceName {
	if a.Resource == "" {
		return model.ResourceGPU
	}
	return corev1.ResourceName(a.Resource)
}

func (a *Args) weights() (link, pack, gangW, host float64) {
	if a.LinkWeight == 0 && a.PackWeight == 0 && a.GangWeight == 0 && a.HostWeight == 0 {
		return 2, 1, 2, 1
	}
	return a.LinkWeight, a.PackWeight, a.GangWeight, a.HostWeight
}

// GetObjectKind implements runtime.Object, so that embedders and tests can
// hand an *Args to New directly.
func (a *Args) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (a *Args) DeepCopyObject() runtime.Object {
	c := *a
	c.LASThresholds = slices.Clone(a.LASThresholds)
	c.GittinsSamples = slices.Clone(a.GittinsSamples)
	return &c
}
