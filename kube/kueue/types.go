package kueue

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The parts of Kueue's API (kueue.x-k8s.io/v1beta2, Kueue v0.17) the
// controller reads, as small structs of its own: the informers decode
// each object into them once, when it arrives, and keep only these
// fields. The controller never writes these structs back: its writes are
// JSON patches of the fields it owns, so fields it does not know survive.
// Importing sigs.k8s.io/kueue's API package instead would bring
// controller-runtime and Kueue's module graph (built against k8s.io
// v0.35) into this module for a few field names.

// Group and Version of Kueue's API.
const (
	Group   = "kueue.x-k8s.io"
	Version = "v1beta2"
)

// The resources the controller watches.
var (
	WorkloadsGVR      = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "workloads"}
	ClusterQueuesGVR  = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "clusterqueues"}
	LocalQueuesGVR    = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "localqueues"}
	ResourceFlavorGVR = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "resourceflavors"}
)

// Names Kueue defines.
const (
	// AnnotationAdmissionGatedBy holds the controllers that hold a
	// workload back (Kueue's AdmissionGatedBy feature gate, alpha in
	// v0.17): comma-separated names; it can be set at creation only, and
	// afterwards only shortened. Kueue copies it from the job to its
	// Workload.
	AnnotationAdmissionGatedBy = "kueue.x-k8s.io/admission-gated-by"
	// LabelQueueName names a job's LocalQueue.
	LabelQueueName = "kueue.x-k8s.io/queue-name"
	// Workload conditions.
	ConditionQuotaReserved = "QuotaReserved"
	ConditionAdmitted      = "Admitted"
	ConditionFinished      = "Finished"
	// Flavor fungibility and queueing strategy values.
	TryNextFlavor = "TryNextFlavor"
	MayStopSearch = "MayStopSearch"
	StrictFIFO    = "StrictFIFO"
)

// Workload is a kueue.x-k8s.io Workload: a plain value, safe for
// concurrent reads, not for concurrent writes.
type Workload struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	decodeErr         error          `json:"-"`
	Spec              WorkloadSpec   `json:"spec"`
	Status            WorkloadStatus `json:"status,omitempty"`
}

// WorkloadSpec is a Workload's spec (the fields read). A plain value,
// safe for concurrent reads, not for concurrent writes.
type WorkloadSpec struct {
	PodSets   []PodSet `json:"podSets"`
	QueueName string   `json:"queueName,omitempty"`
	Priority  *int32   `json:"priority,omitempty"`
	Active    *bool    `json:"active,omitempty"`
}

// PodSet is a group of identical pods of a Workload. A plain value,
// safe for concurrent reads, not for concurrent writes.
type PodSet struct {
	Name     string                 `json:"name"`
	Template corev1.PodTemplateSpec `json:"template"`
	Count    int32                  `json:"count"`
}

// WorkloadStatus is a Workload's status (the fields read). A plain value,
// safe for concurrent reads, not for concurrent writes.
type WorkloadStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	Admission  *Admission         `json:"admission,omitempty"`
}

// Admission is where Kueue reserved a Workload's quota. A plain value,
// safe for concurrent reads, not for concurrent writes.
type Admission struct {
	ClusterQueue      string             `json:"clusterQueue"`
	PodSetAssignments []PodSetAssignment `json:"podSetAssignments"`
}

// PodSetAssignment is the flavor of each resource of a pod set, and what
// it uses. A plain value,
// safe for concurrent reads, not for concurrent writes.
type PodSetAssignment struct {
	Name          string                         `json:"name"`
	Flavors       map[corev1.ResourceName]string `json:"flavors,omitempty"`
	ResourceUsage corev1.ResourceList            `json:"resourceUsage,omitempty"`
	Count         *int32                         `json:"count,omitempty"`
}

// ClusterQueue is a kueue.x-k8s.io ClusterQueue (the fields read): a
// plain value, safe for concurrent reads, not for concurrent writes.
type ClusterQueue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	decodeErr         error            `json:"-"`
	Spec              ClusterQueueSpec `json:"spec,omitempty"`
}

// ClusterQueueSpec is a ClusterQueue's spec (the fields read). A plain value,
// safe for concurrent reads, not for concurrent writes.
type ClusterQueueSpec struct {
	ResourceGroups    []ResourceGroup    `json:"resourceGroups,omitempty"`
	CohortName        string             `json:"cohortName,omitempty"`
	QueueingStrategy  string             `json:"queueingStrategy,omitempty"`
	FlavorFungibility *FlavorFungibility `json:"flavorFungibility,omitempty"`
	FairSharing       *FairSharing       `json:"fairSharing,omitempty"`
	StopPolicy        *string            `json:"stopPolicy,omitempty"`
	Preemption        *Preemption        `json:"preemption,omitempty"`
	// NamespaceSelector says which namespaces may submit workloads to
	// the ClusterQueue. As in Kueue v0.17 (the ClusterQueueSpec of its
	// package apis/kueue/v1beta2: "Defaults to null which is a nothing
	// selector (no namespaces eligible). If set to an empty selector
	// `{}`, then all namespaces are eligible"; Kueue's ClusterQueue
	// webhook defaults nothing, and its cache reads the field with
	// metav1.LabelSelectorAsSelector), nil matches no namespace and an
	// empty selector every one.
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// Preemption is a ClusterQueue's spec.preemption (absent fields are
// Kueue's defaults: Never). A plain value, safe for concurrent reads, not
// for concurrent writes.
type Preemption struct {
	ReclaimWithinCohort string              `json:"reclaimWithinCohort,omitempty"`
	WithinClusterQueue  string              `json:"withinClusterQueue,omitempty"`
	BorrowWithinCohort  *BorrowWithinCohort `json:"borrowWithinCohort,omitempty"`
}

// BorrowWithinCohort is spec.preemption.borrowWithinCohort. A plain
// value, safe for concurrent reads, not for concurrent writes.
type BorrowWithinCohort struct {
	Policy               string `json:"policy,omitempty"`
	MaxPriorityThreshold *int32 `json:"maxPriorityThreshold,omitempty"`
}

// ResourceGroup is a set of resources with the flavors that cover them,
// in order. A plain value,
// safe for concurrent reads, not for concurrent writes.
type ResourceGroup struct {
	CoveredResources []corev1.ResourceName `json:"coveredResources,omitempty"`
	Flavors          []FlavorQuotas        `json:"flavors,omitempty"`
}

// FlavorQuotas are a flavor's quotas in a resource group. A plain value,
// safe for concurrent reads, not for concurrent writes.
type FlavorQuotas struct {
	Name      string          `json:"name"`
	Resources []ResourceQuota `json:"resources,omitempty"`
}

// ResourceQuota is the quota of one resource of a flavor. A plain value,
// safe for concurrent reads, not for concurrent writes.
type ResourceQuota struct {
	Name           corev1.ResourceName `json:"name,omitempty"`
	NominalQuota   resource.Quantity   `json:"nominalQuota,omitempty"`
	BorrowingLimit *resource.Quantity  `json:"borrowingLimit,omitempty"`
	LendingLimit   *resource.Quantity  `json:"lendingLimit,omitempty"`
}

// FlavorFungibility is a ClusterQueue's spec.flavorFungibility. A plain value,
// safe for concurrent reads, not for concurrent writes.
type FlavorFungibility struct {
	WhenCanBorrow  string `json:"whenCanBorrow,omitempty"`
	WhenCanPreempt string `json:"whenCanPreempt,omitempty"`
}

// FairSharing holds a ClusterQueue's fair-sharing weight. A plain value,
// safe for concurrent reads, not for concurrent writes.
type FairSharing struct {
	Weight *resource.Quantity `json:"weight,omitempty"`
}

// LocalQueue is a kueue.x-k8s.io LocalQueue: a plain value, safe for
// concurrent reads, not for concurrent writes.
type LocalQueue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	decodeErr         error          `json:"-"`
	Spec              LocalQueueSpec `json:"spec,omitempty"`
}

// LocalQueueSpec names the LocalQueue's ClusterQueue. A plain value,
// safe for concurrent reads, not for concurrent writes.
type LocalQueueSpec struct {
	ClusterQueue string `json:"clusterQueue,omitempty"`
}

// ResourceFlavor is a kueue.x-k8s.io ResourceFlavor: a plain value, safe
// for concurrent reads, not for concurrent writes.
type ResourceFlavor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	decodeErr         error              `json:"-"`
	Spec              ResourceFlavorSpec `json:"spec,omitempty"`
}

// ResourceFlavorSpec holds the labels of a flavor's nodes, and its taints. A plain value,
// safe for concurrent reads, not for concurrent writes.
type ResourceFlavorSpec struct {
	NodeLabels  map[string]string   `json:"nodeLabels,omitempty"`
	NodeTaints  []corev1.Taint      `json:"nodeTaints,omitempty"`
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// DeepCopyObject implements runtime.Object (the informers' stores hold
// these types).
func (w *Workload) DeepCopyObject() runtime.Object { return deepCopy(w) }

// DeepCopyObject implements runtime.Object.
func (q *ClusterQueue) DeepCopyObject() runtime.Object { return deepCopy(q) }

// DeepCopyObject implements runtime.Object.
func (q *LocalQueue) DeepCopyObject() runtime.Object { return deepCopy(q) }

// DeepCopyObject implements runtime.Object.
func (f *ResourceFlavor) DeepCopyObject() runtime.Object { return deepCopy(f) }

// condition reports whether the Workload's condition t is True.
func (w *Workload) condition(t string) bool {
	for _, c := range w.Status.Conditions {
		if c.Type == t {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// HasQuotaReservation reports whether Kueue has reserved quota for the
// Workload (its condition QuotaReserved is True): then its pod sets can
// no longer change.
func (w *Workload) HasQuotaReservation() bool {
	return w.condition(ConditionQuotaReserved) && w.Status.Admission != nil
}

// Finished reports whether the Workload has ended (condition Finished).
func (w *Workload) Finished() bool { return w.condition(ConditionFinished) }

func (w *Workload) setReadErr(err error)       { w.decodeErr = err }
func (q *ClusterQueue) setReadErr(err error)   { q.decodeErr = err }
func (q *LocalQueue) setReadErr(err error)     { q.decodeErr = err }
func (f *ResourceFlavor) setReadErr(err error) { f.decodeErr = err }
