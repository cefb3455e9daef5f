package scheduler

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/topology"
)

// Difference is one way a snapshot's cluster or configuration differs
// from a scheduler's: a plain value, safe for concurrent reads.
type Difference struct {
	// What names what differs: "setting round_length", "server v100-1",
	// "server order", "GPU k80-0/3".
	What string `json:"what"`
	// Snapshot and Now are its value in the snapshot and now ("absent"
	// when there is none).
	Snapshot string `json:"snapshot"`
	Now      string `json:"now"`
}

// String says what differs: "What: Snapshot in the snapshot, Now now".
func (d Difference) String() string {
	return fmt.Sprintf("%s: %s in the snapshot, %s now", d.What, d.Snapshot, d.Now)
}

// MismatchError is Restore's error for a snapshot taken on another
// cluster or configuration: it lists what differs, and wraps ErrInvalid.
// It is a plain value, safe for concurrent reads.
type MismatchError struct {
	Differences []Difference
}

// Error lists the first differences.
func (e *MismatchError) Error() string {
	var b strings.Builder
	b.WriteString("scheduler: invalid argument: the snapshot was taken on another cluster or configuration (Adopt loads it, dropping what no longer fits): ")
	for i, d := range e.Differences {
		if i == 8 {
			fmt.Fprintf(&b, "; and %d more", len(e.Differences)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(d.String())
	}
	return b.String()
}

// Unwrap returns ErrInvalid.
func (e *MismatchError) Unwrap() error { return ErrInvalid }

// maxDifferences bounds the differences listed.
const maxDifferences = 256

// settings records every setting that changes the scheduler's decisions,
// by name, as text.
func (s *Scheduler) settings() map[string]string {
	c := &s.cfg
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	m := map[string]string{
		"policy":             describe(c.Policy, 0),
		"round_length":       f(s.roundLength()),
		"min_reset_interval": f(c.MinResetInterval),
		"global_queue":       strconv.FormatBool(c.GlobalQueue),
		"type_order":         describe(c.TypeOrder, 0),
		"shuffle_types":      strconv.FormatBool(c.ShuffleTypes),
		"seed":               strconv.FormatUint(c.Seed, 10),
		"leave_idle":         strconv.FormatBool(c.LeaveIdle),
		"compat":             c.Compat.String(),
		"types":              describe(c.Types, 0),
		"placer":             describe(s.placer, 0),
		"migration_cost":     f(s.migrationCost()),
		"spread_penalty":     f(s.spreadPenalty()),
		"tenant_weights":     describe(c.TenantWeights, 0),
		"tenant_quotas":      describe(c.TenantQuotas, 0),
		"throughput_model":   typeName(c.Throughput),
		"colocation_model":   typeName(c.Colocation),
	}
	if c.Estimator != nil { // only then: older snapshots have none
		m["estimator"] = typeName(c.Estimator)
		m["explore"] = fmt.Sprintf("budget %s, sigmas %s, resolve %s, refit %s, normalise %t", f(c.Explore.budget()), f(c.Explore.sigmas()), f(c.Explore.resolve()), f(c.Explore.refit()), c.Explore.Normalise)
		if a := c.Explore.audit(); a != DefaultExploreAudit { // only then: older snapshots have none
			m["explore"] += ", audit " + f(a)
		}
		if c.Explore.Probe {
			m["explore"] += ", probe"
		}
	}
	return m
}

func typeName(v any) string {
	if v == nil {
		return "none"
	}
	return fmt.Sprintf("%T", v)
}

// servers records the cluster's servers in the state's order.
func (s *Scheduler) servers() []snapServer {
	out := make([]snapServer, s.st.NumServers())
	for p := range out {
		srv := s.st.Server(p)
		out[p] = snapServer{ID: srv.ID, GPUs: gpuCounts(srv), Digest: digest(srv)}
	}
	return out
}

// gpuCounts says how many GPUs of each type a server has: "8 v100".
func gpuCounts(srv *topology.Server) string {
	var types []topology.GPUType
	n := map[topology.GPUType]int{}
	for _, g := range srv.GPUs {
		if n[g.Type] == 0 {
			types = append(types, g.Type)
		}
		n[g.Type]++
	}
	slices.Sort(types)
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = fmt.Sprintf("%d %s", n[t], t)
	}
	return strings.Join(parts, ", ")
}

// digest is a hash of a server's whole description.
func digest(srv *topology.Server) string {
	b, err := json.Marshal(srv)
	if err != nil {
		return "unencodable"
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// settingsDiffer tells whether a snapshot's settings differ from the
// scheduler's (a version 1 snapshot has none: they may).
func (s *Scheduler) settingsDiffer(snap *snapshot) bool {
	if snap.Version == 1 {
		return true
	}
	now := s.settings()
	for k, v := range now {
		if then, ok := snap.Settings[k]; !ok || !sameSetting(then, v) {
			return true
		}
	}
	return len(snap.Settings) != len(now)
}

// zeroField matches a struct field at its zero value in a description
// (describe): nil, false, 0, "", [] or {}, followed by a space or the
// struct's end.
var zeroField = regexp.MustCompile(`([{ ])[A-Z][A-Za-z0-9_]*=(?:\(nil\)|false|0|""|\[\]|\{\})([ }])`)

// sameSetting reports whether two descriptions of a setting say the same,
// fields at their zero value aside: a field added to a policy in a later
// version (allocation.MaxMinFairness.Extension, issue #43) keeps the
// snapshots of earlier versions restorable while it is unset.
func sameSetting(a, b string) bool {
	return a == b || normaliseSetting(a) == normaliseSetting(b)
}

// normaliseSetting drops a description's fields at their zero value.
func normaliseSetting(s string) string {
	for range 64 { // each pass drops at least one field, or stops
		t := zeroField.ReplaceAllString(s, "$1$2")
		for _, r := range [][2]string{{"{ ", "{"}, {" }", "}"}, {"  ", " "}} {
			for strings.Contains(t, r[0]) {
				t = strings.ReplaceAll(t, r[0], r[1])
			}
		}
		if t == s {
			break
		}
		s = t
	}
	return s
}

// differences lists how a snapshot's settings, servers and failed GPUs
// differ from the scheduler's now (a version 1 snapshot records none).
func (s *Scheduler) differences(snap *snapshot) []Difference {
	if snap.Version == 1 {
		return nil
	}
	var out []Difference
	add := func(what, then, now string) {
		if len(out) < maxDifferences {
			out = append(out, Difference{What: what, Snapshot: then, Now: now})
		}
	}
	now := s.settings()
	for _, k := range sortedKeys(now) {
		if v, ok := snap.Settings[k]; !ok {
			add("setting "+k, "absent", now[k])
		} else if !sameSetting(v, now[k]) {
			add("setting "+k, v, now[k])
		}
	}
	for _, k := range sortedKeys(snap.Settings) {
		if _, ok := now[k]; !ok {
			add("setting "+k, snap.Settings[k], "absent")
		}
	}
	here := s.servers()
	byID := make(map[string]snapServer, len(here))
	for _, sv := range here {
		byID[sv.ID] = sv
	}
	was := make(map[string]bool, len(snap.Cluster))
	for _, sv := range snap.Cluster {
		was[sv.ID] = true
		cur, ok := byID[sv.ID]
		switch {
		case !ok:
			add("server "+sv.ID, sv.GPUs, "absent")
		case cur.Digest != sv.Digest:
			add("server "+sv.ID, fmt.Sprintf("%s (description %s)", sv.GPUs, sv.Digest), fmt.Sprintf("%s (description %s)", cur.GPUs, cur.Digest))
		}
	}
	for _, sv := range here {
		if !was[sv.ID] {
			add("server "+sv.ID, "absent", sv.GPUs)
		}
	}
	if len(out) == 0 && !slices.EqualFunc(snap.Cluster, here, func(a, b snapServer) bool { return a.ID == b.ID }) {
		ids := func(svs []snapServer) string {
			var parts []string
			for i, sv := range svs {
				if i == 16 {
					parts = append(parts, "...")
					break
				}
				parts = append(parts, sv.ID)
			}
			return strings.Join(parts, " ")
		}
		add("server order", ids(snap.Cluster), ids(here))
	}
	failed := make(map[Device]bool, len(snap.Failed))
	for _, d := range snap.Failed {
		failed[Device{Server: d.Server, Index: d.Index}] = true
	}
	for p := range s.st.NumServers() {
		srv := s.st.Server(p)
		for i, g := range srv.GPUs {
			d := Device{Server: srv.ID, Index: g.Index}
			if s.st.Failed(cluster.GPURef{Server: p, GPU: i}) && !failed[d] {
				add(fmt.Sprintf("GPU %s/%d", d.Server, d.Index), "healthy", "failed")
			}
		}
	}
	return out
}

// describe renders a setting for the record: its type and, for structs
// (and pointers to them), its exported fields, for maps their entries by
// key, for slices their elements; interfaces, pointers and functions
// inside are rendered by type beyond a depth of 3. It is deterministic
// for equal settings.
func describe(v any, depth int) string {
	var b strings.Builder
	describeValue(&b, reflect.ValueOf(v), depth, true)
	return b.String()
}

func describeValue(b *strings.Builder, v reflect.Value, depth int, typed bool) {
	if !v.IsValid() {
		b.WriteString("none")
		return
	}
	if depth > 8 {
		b.WriteString("...")
		return
	}
	if typed {
		b.WriteString(v.Type().String())
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("(nil)")
			return
		}
		if depth >= 3 {
			return
		}
		b.WriteByte('(')
		describeValue(b, v.Elem(), depth+1, v.Kind() == reflect.Interface)
		b.WriteByte(')')
	case reflect.Struct:
		b.WriteByte('{')
		first := true
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if !first {
				b.WriteByte(' ')
			}
			first = false
			b.WriteString(f.Name)
			b.WriteByte('=')
			if depth >= 3 {
				b.WriteString(f.Type.String())
				continue
			}
			describeValue(b, v.Field(i), depth+1, false)
		}
		b.WriteByte('}')
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			b.WriteString("[]")
			return
		}
		b.WriteByte('[')
		for i := range min(v.Len(), 1024) {
			if i > 0 {
				b.WriteByte(' ')
			}
			describeValue(b, v.Index(i), depth+1, false)
		}
		b.WriteByte(']')
	case reflect.Map:
		keys := v.MapKeys()
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			var kb, vb strings.Builder
			describeValue(&kb, k, depth+1, false)
			describeValue(&vb, v.MapIndex(k), depth+1, false)
			parts = append(parts, kb.String()+":"+vb.String())
		}
		slices.Sort(parts)
		b.WriteString("{" + strings.Join(parts, " ") + "}")
	case reflect.Float32, reflect.Float64:
		b.WriteString(strconv.FormatFloat(v.Float(), 'g', -1, 64))
	case reflect.Bool:
		b.WriteString(strconv.FormatBool(v.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case reflect.String:
		b.WriteString(strconv.Quote(v.String()))
	default: // functions, channels: their type only
		if v.Kind() == reflect.Func && v.IsNil() {
			b.WriteString("(nil)")
		}
	}
}
