package gpusched

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpusched/gpusched/kube/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// groups follows the pods of every pod group (bound or not, not finished):
// how many there are, what size each declares, and when the first arrived.
// It is safe for concurrent use.
type groups struct {
	mu    sync.Mutex
	m     map[string]*groupInfo
	byPod map[types.UID]string
	// onEmpty is called (without the lock) when a group's last pod goes.
	onEmpty func(group string)
}

type groupInfo struct {
	members map[types.UID]member
	arrival time.Time
}

type member struct {
	name string
	min  string // the min-member annotation as written
	gpus int
}

func newGroups(onEmpty func(string)) *groups {
	return &groups{m: map[string]*groupInfo{}, byPod: map[types.UID]string{}, onEmpty: onEmpty}
}

// onPod follows a pod added or updated.
func (g *groups) onPod(p *corev1.Pod, res corev1.ResourceName) {
	grp := model.PodGroup(p)
	if grp == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		g.onPodDelete(p)
		return
	}
	gpus, _ := model.PodGPUs(p, res)
	if old, ok := g.group(p.UID); ok && old != grp {
		g.onPodDelete(p) // relabelled into another group
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.byPod[p.UID] = grp
	gi := g.m[grp]
	if gi == nil {
		gi = &groupInfo{members: map[types.UID]member{}, arrival: p.CreationTimestamp.Time}
		g.m[grp] = gi
	}
	min, ok := p.Annotations[model.AnnotationMinMember]
	switch {
	case model.UpstreamPodGroup(p) != "":
		min = "(the PodGroup's)" // upstream's minCount; the annotation is not read
	case !ok:
		min = "(none)"
	}
	gi.members[p.UID] = member{name: p.Name, min: strings.TrimSpace(min), gpus: gpus}
	if t := p.CreationTimestamp.Time; t.Before(gi.arrival) {
		gi.arrival = t
	}
}

// onPodDelete follows a pod deleted or finished.
func (g *groups) onPodDelete(p *corev1.Pod) {
	g.mu.Lock()
	grp, ok := g.byPod[p.UID]
	empty := ""
	if ok {
		delete(g.byPod, p.UID)
		if gi := g.m[grp]; gi != nil {
			delete(gi.members, p.UID)
			if len(gi.members) == 0 {
				delete(g.m, grp)
				empty = grp
			}
		}
	}
	g.mu.Unlock()
	if empty != "" && g.onEmpty != nil {
		g.onEmpty(empty)
	}
}

func (g *groups) group(uid types.UID) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	grp, ok := g.byPod[uid]
	return grp, ok
}

// arrival returns when the group's first pod was created.
func (g *groups) arrival(grp string) (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gi := g.m[grp]; gi != nil {
		return gi.arrival, true
	}
	return time.Time{}, false
}

// check says whether the group's pods agree on its size and are at least
// that many; unresolvable is true for a disagreement.
func (g *groups) check(grp string, min int) (msg string, unresolvable bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gi := g.m[grp]
	if gi == nil {
		return fmt.Sprintf("pod group %s has no pods yet", grp), false
	}
	bySize := map[string][]string{}
	for _, m := range gi.members {
		bySize[m.min] = append(bySize[m.min], m.name)
	}
	if len(bySize) > 1 {
		parts := make([]string, 0, len(bySize))
		for size, names := range bySize {
			sort.Strings(names)
			if len(names) > 3 {
				names = append(names[:3], "...")
			}
			parts = append(parts, fmt.Sprintf("%s %s by %s", model.AnnotationMinMember, strconv.Quote(size), strings.Join(names, ", ")))
		}
		slices.Sort(parts)
		return fmt.Sprintf("members of pod group %s disagree on its size: %s", grp, strings.Join(parts, "; ")), true
	}
	if n := len(gi.members); n < min {
		return fmt.Sprintf("pod group %s has %d of the %d pods it needs", grp, n, min), false
	}
	return "", false
}

// members returns the UIDs of the group's pods and the GPUs each asks.
func (g *groups) members(grp string) map[types.UID]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	gi := g.m[grp]
	if gi == nil {
		return nil
	}
	out := make(map[types.UID]int, len(gi.members))
	for uid, m := range gi.members {
		out[uid] = m.gpus
	}
	return out
}
