package admission

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/topology"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// nodeInfo is what the controller last told the scheduler of a node.
type nodeInfo struct {
	server    topology.Server
	product   string
	ready     bool
	unhealthy []int
	// held counts the GPUs a NoSchedule device taint keeps new pods off
	// (DRA nodes), out of the capacity but not failed.
	held int
	// cpus and memGB are the node's allocatable CPUs and memory (GiB),
	// for the host split (Config.HostProfiles).
	cpus, memGB float64
}

func (n *nodeInfo) typ() topology.GPUType { return n.server.GPUs[0].Type }

// listNodes reads the selected nodes with GPUs from the cache, by name.
// Nodes that cannot be read are logged and left out.
func (c *Controller) listNodes() (map[string]nodeInfo, error) {
	list, err := c.caches.nodes.List(labels.SelectorFromSet(c.cfg.NodeSelector))
	if err != nil {
		return nil, fmt.Errorf("admission: reading the node cache: %w", err)
	}
	out := make(map[string]nodeInfo, len(list))
	res := cmp.Or(c.cfg.Resource, model.ResourceGPU)
	mapped := c.caches.mapsResource(res)
	for _, n := range list {
		opts := model.NodeOptions{Resource: c.cfg.Resource}
		nd, err := model.ParseNode(n, opts)
		var held int
		if rs := c.caches.nodeSlices(n.Name); errors.Is(err, model.ErrNoGPUs) && len(rs) > 0 && mapped {
			// The GPUs a DRA driver publishes: counted for workloads
			// asking the extended resource, which it serves where a
			// DeviceClass maps it (KEP-5004).
			nd, held, err = draNode(n, rs, opts)
		}
		if errors.Is(err, model.ErrNoGPUs) {
			continue
		}
		if err != nil {
			c.log.Warn("node left out", "node", n.Name, "err", err)
			continue
		}
		product := n.Labels[model.LabelProduct]
		if product == "" || len(nd.Server.GPUs) == 0 {
			c.log.Warn("node left out: no product label to steer pods to it (GPU feature discovery's "+model.LabelProduct+", on DRA nodes too)", "node", n.Name)
			continue
		}
		out[n.Name] = nodeInfo{server: nd.Server, product: product, ready: nd.Ready && !n.Spec.Unschedulable, unhealthy: nd.Unhealthy, held: held,
			cpus: n.Status.Allocatable.Cpu().AsApproximateFloat64(), memGB: n.Status.Allocatable.Memory().AsApproximateFloat64() / gib}
	}
	return out, nil
}

// draNode reads a DRA node: a NoExecute device taint fails the GPU (its
// jobs are evicted); a NoSchedule one keeps new pods off it (the scheduler
// plugin gives it to none) and leaves the jobs on it running, so it is
// held: out of the capacity, not failed.
func draNode(n *corev1.Node, rs []*resourcev1.ResourceSlice, opts model.NodeOptions) (model.Node, int, error) {
	nd, err := model.ParseDRANode(n, rs, opts)
	if err != nil {
		return nd, 0, err
	}
	held := len(nd.Unhealthy) - len(nd.DRA.Evict)
	nd.Unhealthy = nd.DRA.Evict
	return nd, held, nil
}

// syncNodes brings the scheduler's cluster to the nodes: new ones added,
// gone ones removed (their jobs lose their GPUs), a node not ready or
// cordoned has all its GPUs failed, GPUs the unhealthy annotation names
// fail. It refreshes the products and capacity per type.
func (c *Controller) syncNodes() error {
	now, err := c.listNodes()
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(c.nodes)) {
		old := c.nodes[name]
		n, ok := now[name]
		if ok && sameServer(old.server, n.server) {
			continue
		}
		if _, err := c.sched.RemoveServer(name); err != nil {
			c.log.Warn("remove server", "node", name, "err", err)
		}
		delete(c.nodes, name)
	}
	for _, name := range slices.Sorted(maps.Keys(now)) {
		n := now[name]
		old, had := c.nodes[name]
		if !had {
			if err := c.sched.AddServer(n.server); err != nil {
				c.log.Warn("add server", "node", name, "err", err)
				continue
			}
			old = nodeInfo{server: n.server, ready: true}
		}
		if old.ready != n.ready || !slices.Equal(old.unhealthy, n.unhealthy) {
			if err := c.sched.RecoverGPUs(name); err != nil {
				c.log.Warn("recover GPUs", "node", name, "err", err)
			}
			var fail []int
			if !n.ready {
				_, err = c.sched.FailGPUs(name)
			} else if len(n.unhealthy) > 0 {
				for _, p := range n.unhealthy {
					fail = append(fail, n.server.GPUs[p].Index)
				}
				_, err = c.sched.FailGPUs(name, fail...)
			}
			if err != nil {
				c.log.Warn("fail GPUs", "node", name, "err", err)
			}
		}
		c.nodes[name] = n
	}
	c.products = map[topology.GPUType][]string{}
	c.capacity = map[topology.GPUType]int{}
	for _, n := range c.nodes {
		t := n.typ()
		if !slices.Contains(c.products[t], n.product) {
			c.products[t] = append(c.products[t], n.product)
		}
		if n.ready {
			c.capacity[t] += len(n.server.GPUs) - len(n.unhealthy) - n.held
		}
	}
	for _, ps := range c.products {
		slices.Sort(ps)
	}
	return nil
}

func sameServer(a, b topology.Server) bool {
	if len(a.GPUs) != len(b.GPUs) || a.Rack != b.Rack || a.Domain != b.Domain {
		return false
	}
	for i := range a.GPUs {
		if a.GPUs[i].Type != b.GPUs[i].Type || a.GPUs[i].Index != b.GPUs[i].Index {
			return false
		}
	}
	return true
}

// types returns the cluster's types, sorted.
func (c *Controller) types() []topology.GPUType {
	return slices.Sorted(maps.Keys(c.products))
}

// affinity sets the pod spec's required node affinity to the products of
// type t, the node selector and (unless Config.TypeOnly) the node the
// core placed the job on when it is one, replacing what an earlier
// admission set.
func (c *Controller) affinity(spec *corev1.PodSpec, t topology.GPUType, nodes []string) {
	stripAffinity(spec, c.cfg.NodeSelector)
	reqs := []corev1.NodeSelectorRequirement{{Key: model.LabelProduct, Operator: corev1.NodeSelectorOpIn, Values: slices.Clone(c.products[t])}}
	for _, k := range slices.Sorted(maps.Keys(c.cfg.NodeSelector)) {
		reqs = append(reqs, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{c.cfg.NodeSelector[k]}})
	}
	var fields []corev1.NodeSelectorRequirement
	// The API server takes one value in a field selector's In: a workload
	// the core placed over several nodes (a pod group, a Job of several
	// pods) is steered to its type only, and the scheduler places its
	// pods (GPUSched keeps a group's members close).
	if len(nodes) == 1 && !c.cfg.TypeOnly {
		fields = []corev1.NodeSelectorRequirement{{Key: nodeNameField, Operator: corev1.NodeSelectorOpIn, Values: nodes}}
	}
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil || len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		terms[i].MatchExpressions = append(terms[i].MatchExpressions, reqs...)
		terms[i].MatchFields = append(terms[i].MatchFields, fields...)
	}
}

// nodeNameField is the node field that pins a pod to nodes by name.
const nodeNameField = "metadata.name"

// stripAffinity takes away the requirements an admission added (on the
// product label, on the node selector's keys and on node names, operator
// In).
func stripAffinity(spec *corev1.PodSpec, selector map[string]string) {
	a := spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return
	}
	ours := func(r corev1.NodeSelectorRequirement) bool {
		if r.Operator != corev1.NodeSelectorOpIn {
			return false
		}
		_, sel := selector[r.Key]
		return r.Key == model.LabelProduct || sel
	}
	ns := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	var terms []corev1.NodeSelectorTerm
	for _, t := range ns.NodeSelectorTerms {
		t.MatchExpressions = slices.DeleteFunc(slices.Clone(t.MatchExpressions), ours)
		t.MatchFields = slices.DeleteFunc(slices.Clone(t.MatchFields), func(r corev1.NodeSelectorRequirement) bool {
			return r.Key == nodeNameField && r.Operator == corev1.NodeSelectorOpIn
		})
		if len(t.MatchExpressions) > 0 || len(t.MatchFields) > 0 {
			terms = append(terms, t)
		}
	}
	if len(terms) == 0 {
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = nil
		if a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution == nil {
			a.NodeAffinity = nil
		}
	} else {
		ns.NodeSelectorTerms = terms
	}
	if a.NodeAffinity == nil && a.PodAffinity == nil && a.PodAntiAffinity == nil {
		spec.Affinity = nil
	}
}
