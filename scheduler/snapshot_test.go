package scheduler

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var updateHostile = flag.Bool("update-hostile", false, "write testdata/hostile's snapshots again from the current format")

// hostileBase is the scheduler the hostile snapshots start from (newSched:
// 2 x 4 V100, 1 x 4 K80): three jobs, two rounds reported, a K80 failed,
// and its snapshot.
func hostileBase(t testing.TB) (*Scheduler, []byte) {
	c, err := topology.ParseCompact("v100:8:4,k80:4:4", 4)
	require.NoError(t, err)
	s, err := New(Config{Policy: &allocation.MaxMinFairness{}, Cluster: c})
	require.NoError(t, err)
	require.NoError(t, s.Submit("a", JobSpec{GPUs: 2, Throughput: rates(3, 1), RemainingSteps: 1000}, 0))
	require.NoError(t, s.Submit("b", JobSpec{GPUs: 1, MaxGPUs: 2, Throughput: rates(1, 1), Priority: 1}, 0))
	require.NoError(t, s.Submit("c", JobSpec{GPUs: 4, Throughput: rates(2, 1), Gang: "g"}, 0))
	for i := range 2 {
		r, err := s.Round(ctx, float64(i)*360)
		require.NoError(t, err)
		rep := RoundReport{Start: r.Start}
		for _, as := range r.Assignments {
			rep.Ran = append(rep.Ran, Ran{Job: as.Jobs[0], Seconds: 300, Steps: 10})
		}
		require.NoError(t, s.Report(rep))
	}
	_, err = s.FailGPUs("k80-0", 3)
	require.NoError(t, err)
	data, err := s.Snapshot()
	require.NoError(t, err)
	return s, data
}

// hostileMutations make each hostile snapshot from the base one.
var hostileMutations = map[string]func(m map[string]any){
	"worker-minus-one.json": func(m map[string]any) {
		rounds(m, 0)["last_round"].(map[string]any)["Assignments"].([]any)[0].(map[string]any)["Workers"] = []int{-1}
	},
	"unit-pairs-job-with-itself.json": func(m map[string]any) {
		rounds(m, 0)["units"].([]any)[0].(map[string]any)["job_ids"] = []int{1, 1}
	},
	"allocation-1e308.json": func(m map[string]any) {
		rounds(m, 0)["allocation"].(map[string]any)["X"].([]any)[0].([]any)[0] = 1e308
	},
	"lease-8-gpus-for-1.json": func(m map[string]any) {
		l := leaseOf(m, "b")
		var devs []any
		for i := range 4 {
			devs = append(devs, map[string]any{"server": "v100-0", "index": i}, map[string]any{"server": "v100-1", "index": i})
		}
		l["devices"], l["type"] = devs, "v100"
		delete(l, "extra")
	},
	"lease-no-rate.json": func(m map[string]any) {
		jobOf(m, "a")["spec"].(map[string]any)["throughput"] = map[string]any{"k80": 1}
	},
	"lease-device-twice.json": func(m map[string]any) {
		l := leaseOf(m, "a")
		devs := l["devices"].([]any)
		devs[1] = devs[0]
	},
	"lease-unknown-server.json": func(m map[string]any) {
		leaseOf(m, "a")["devices"].([]any)[0].(map[string]any)["server"] = "v100-9"
	},
	"lease-device-of-another-type.json": func(m map[string]any) {
		leaseOf(m, "a")["devices"].([]any)[0] = map[string]any{"server": "k80-0", "index": 2}
	},
	"lease-pairs-job-with-itself.json": func(m map[string]any) { leaseOf(m, "a")["jobs"] = []string{"a", "a"} },
	"lease-on-failed-gpu.json": func(m map[string]any) {
		m["failed"] = append(m["failed"].([]any), leaseOf(m, "a")["devices"].([]any)[0])
	},
	"job-twice.json": func(m map[string]any) {
		jobs := m["jobs"].([]any)
		m["jobs"] = append(jobs, jobs[0])
	},
	"job-id-out-of-range.json":    func(m map[string]any) { jobOf(m, "c")["id"] = 7 },
	"job-attained-1e300.json":     func(m map[string]any) { jobOf(m, "a")["attained"] = map[string]any{"v100": 1e300} },
	"job-finished-with-work.json": func(m map[string]any) { jobOf(m, "a")["finished"] = true },
	"job-empty-key.json":          func(m map[string]any) { jobOf(m, "c")["key"] = "" },
	"job-gang-nul.json":           func(m map[string]any) { jobOf(m, "c")["spec"].(map[string]any)["gang"] = "g\x00" },
	"job-tenant-nul.json":         func(m map[string]any) { jobOf(m, "a")["spec"].(map[string]any)["tenant"] = "t\x00" },
	"job-waits-unrunnable.json":   func(m map[string]any) { jobOf(m, "c")["wait"] = "too-large" },
	"last-round-unknown-tier.json": func(m map[string]any) {
		m["last_round"].(map[string]any)["units"].([]any)[0].(map[string]any)["priority"] = 9
	},
	"last-round-ends-early.json": func(m map[string]any) { m["last_round"].(map[string]any)["end"] = -5 },
	"last-round-not-the-tiers.json": func(m map[string]any) {
		m["last_round"].(map[string]any)["start"] = 100
		m["last_round"].(map[string]any)["end"] = 100
	},
	"tier-twice.json": func(m map[string]any) {
		tiers := m["tiers"].([]any)
		m["tiers"] = append(tiers, tiers[0])
	},
	"rng-garbage.json":        func(m map[string]any) { rounds(m, 0)["pcg"] = "AAAA" },
	"other-round-length.json": func(m map[string]any) { m["settings"].(map[string]any)["round_length"] = "600" },
	"other-cluster.json": func(m map[string]any) {
		m["cluster"] = append(m["cluster"].([]any), map[string]any{"id": "v100-2", "gpus": "4 v100", "digest": "x"})
	},
	"version-3.json": func(m map[string]any) { m["version"] = 3 },
	"tier-present-unknown.json": func(m map[string]any) {
		rounds(m, 0)["present"] = []int{99}
	},
	"tier-present-empty.json": func(m map[string]any) {
		rounds(m, 1)["present"] = []int{}
	},
	"tier-credited-round-unreported.json": func(m map[string]any) {
		m["last_round"].(map[string]any)["reported"] = false // the tiers' rounds say reported
	},
	"unit-of-another-type-unreported.json": func(m map[string]any) {
		lr := m["last_round"].(map[string]any)
		lr["reported"] = false
		for _, tier := range m["tiers"].([]any) {
			rounds := tier.(map[string]any)["rounds"].(map[string]any)
			rounds["reported"] = false
		}
		lr["units"].([]any)[0].(map[string]any)["type"] = "a100"
	},
}

// hostileRaw make hostile snapshots from the base one's bytes, for what
// a decoded map cannot say: bytes that are not UTF-8, a key twice.
var hostileRaw = map[string]func(b []byte) []byte{
	"job-key-not-utf8.json": func(b []byte) []byte {
		return bytes.Replace(b, []byte(`"key":"c"`), []byte("\"key\":\"c\xff\""), 1)
	},
	"duplicate-key.json": func(b []byte) []byte {
		return bytes.Replace(b, []byte(`"next_id":3`), []byte(`"next_id":3,"next_id":4`), 1)
	},
	"duplicate-key-in-tier.json": func(b []byte) []byte {
		return bytes.Replace(b, []byte(`"started":true`), []byte(`"started":true,"started":false`), 1)
	},
	"unknown-field.json": func(b []byte) []byte {
		return bytes.Replace(b, []byte(`"next_id":3`), []byte(`"next_id":3,"nxet_id":4`), 1)
	},
	"unknown-field-in-tier.json": func(b []byte) []byte {
		return bytes.Replace(b, []byte(`"started":true`), []byte(`"started":true,"strated":true`), 1)
	},
}

// rounds returns the i-th tier's mechanism snapshot, decoded in place.
func rounds(m map[string]any, i int) map[string]any {
	tier := m["tiers"].([]any)[i].(map[string]any)
	r, ok := tier["rounds"].(map[string]any)
	if !ok {
		panic("no rounds")
	}
	return r
}

func jobOf(m map[string]any, key string) map[string]any {
	for _, j := range m["jobs"].([]any) {
		if j.(map[string]any)["key"] == key {
			return j.(map[string]any)
		}
	}
	panic("no job " + key)
}

func leaseOf(m map[string]any, key string) map[string]any {
	for _, l := range m["leases"].([]any) {
		if slices.Contains(l.(map[string]any)["jobs"].([]any), any(key)) {
			return l.(map[string]any)
		}
	}
	panic("no lease of " + key)
}

// TestHostileSnapshots restores every file of testdata/hostile into the
// scheduler they were taken for and checks the outcome against
// cases.txt: each is refused with the error the file names (they used to
// be accepted: a worker of -1 then panicked inside allocation with the
// scheduler's lock held, a unit pairing a job with itself failed every
// other round, a lease of 8 GPUs for a 1-GPU job was bound), and leaves
// the scheduler without jobs. Run with -update-hostile to write them
// again from the current format.
func TestHostileSnapshots(t *testing.T) {
	dir := filepath.Join("testdata", "hostile")
	_, base := hostileBase(t)
	if *updateHostile {
		for name, mutate := range hostileMutations {
			var m map[string]any
			require.NoError(t, json.Unmarshal(base, &m))
			for _, tier := range m["tiers"].([]any) { // decoded, to mutate
				var r map[string]any
				raw, _ := json.Marshal(tier.(map[string]any)["rounds"])
				require.NoError(t, json.Unmarshal(raw, &r))
				tier.(map[string]any)["rounds"] = r
			}
			mutate(m)
			b, err := json.MarshalIndent(m, "", " ")
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
		}
		for name, mutate := range hostileRaw {
			b := mutate(base)
			require.NotEqual(t, base, b, name)
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, "base.json"), base, 0o644))
	}
	f, err := os.Open(filepath.Join(dir, "cases.txt"))
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	listed := map[string]bool{"cases.txt": true}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, want, ok := strings.Cut(line, "\t")
		require.True(t, ok, "cases.txt: %q", line)
		listed[name] = true
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err)
			s := newSched(t, nil)
			err = s.Restore(data)
			if want == "ok" {
				require.NoError(t, err)
				_, err := s.Round(ctx, 720)
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalid)
			assert.ErrorContains(t, err, want)
			assert.Empty(t, s.Jobs(), "a refused snapshot changes nothing")
			s.View(func(v *ClusterView) { assert.Zero(t, v.Generation(), "nor the cluster") })
		})
	}
	require.NoError(t, sc.Err())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.True(t, listed[e.Name()], "%s is not in cases.txt", e.Name())
	}
}

// A snapshot taken on another cluster or configuration is refused with a
// *MismatchError naming what differs (it used to be accepted silently,
// its leases dropped); the state is unchanged.
func TestRestoreRefusesMismatch(t *testing.T) {
	_, data := hostileBase(t)
	for _, tc := range []struct {
		name string
		mk   func() *Scheduler
		want []Difference
	}{
		{"round length", func() *Scheduler { return newSched(t, func(c *Config) { c.RoundLength = 600 }) },
			[]Difference{{What: "setting round_length", Snapshot: "360", Now: "600"}}},
		{"policy", func() *Scheduler {
			return newSched(t, func(c *Config) { c.Policy = &allocation.MaxMinFairness{Agnostic: true} })
		}, []Difference{{What: "setting policy", Snapshot: "*allocation.MaxMinFairness({Agnostic=false SpaceSharing=false Solver=(nil) Vertex=false Extension=(nil)})",
			Now: "*allocation.MaxMinFairness({Agnostic=true SpaceSharing=false Solver=(nil) Vertex=false Extension=(nil)})"}}},
		{"a server less", func() *Scheduler {
			return newSched(t, func(c *Config) { c.Cluster, _ = topology.ParseCompact("v100:4:4,k80:4:4", 4) })
		}, []Difference{{What: "server v100-1", Snapshot: "4 v100", Now: "absent"}}},
		{"servers in another order", func() *Scheduler {
			return newSched(t, func(c *Config) {
				c.Cluster, _ = topology.ParseCompact("v100:8:4,k80:4:4", 4)
				c.Cluster.Servers[0], c.Cluster.Servers[1] = c.Cluster.Servers[1], c.Cluster.Servers[0]
			})
		}, []Difference{{What: "server order", Snapshot: "v100-0 v100-1 k80-0", Now: "v100-1 v100-0 k80-0"}}},
		{"a GPU failed since", func() *Scheduler {
			s := newSched(t, nil)
			_, err := s.FailGPUs("v100-1", 2)
			require.NoError(t, err)
			return s
		}, []Difference{{What: "GPU v100-1/2", Snapshot: "healthy", Now: "failed"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.mk()
			err := s.Restore(data)
			require.ErrorIs(t, err, ErrInvalid)
			var me *MismatchError
			require.True(t, errors.As(err, &me), "%v", err)
			require.Len(t, me.Differences, len(tc.want), "%v", me.Differences)
			for i, d := range tc.want {
				assert.Equal(t, d.What, me.Differences[i].What)
				assert.Contains(t, me.Differences[i].Snapshot, d.Snapshot)
				assert.Contains(t, me.Differences[i].Now, d.Now)
			}
			assert.Contains(t, err.Error(), "the snapshot was taken on another cluster or configuration")
			assert.Empty(t, s.Jobs())
		})
	}
}

// Adopt loads a snapshot whatever it was taken on and says what it
// dropped: leases on a server that left are released (the job waits),
// the configuration's difference makes the policies solve again, another
// Compat mode drops the mechanisms' state; a version 1 snapshot is
// adopted (and refused by Restore).
func TestAdopt(t *testing.T) {
	orig, data := hostileBase(t)
	held := map[string]string{}
	for _, k := range orig.Jobs() {
		st, err := orig.Status(k)
		require.NoError(t, err)
		if len(st.Devices) > 0 {
			held[k] = st.Devices[0].Server
		}
	}
	// The same settings on a cluster without v100-1.
	s := newSched(t, func(c *Config) { c.Cluster, _ = topology.ParseCompact("v100:4:4,k80:4:4", 4) })
	ad, err := s.Adopt(data)
	require.NoError(t, err)
	assert.False(t, ad.Reset)
	assert.False(t, ad.MechanismsDropped)
	var released []string
	for k, srv := range held {
		if srv == "v100-1" {
			released = append(released, k)
		}
	}
	slices.Sort(released)
	assert.Equal(t, released, ad.Released)
	assert.Equal(t, orig.Jobs(), s.Jobs())
	for _, k := range ad.Released {
		st, err := s.Status(k)
		require.NoError(t, err)
		assert.Empty(t, st.Devices, k)
	}
	r, err := s.Round(ctx, 720)
	require.NoError(t, err)
	checkRound(t, s, r)

	// Another round length and Compat mode.
	s = newSched(t, func(c *Config) { c.RoundLength, c.Compat = 600, allocation.CompatGavel })
	ad, err = s.Adopt(data)
	require.NoError(t, err)
	assert.True(t, ad.Reset)
	assert.True(t, ad.MechanismsDropped)
	assert.Empty(t, ad.Released)
	r, err = s.Round(ctx, 720)
	require.NoError(t, err)
	assert.True(t, r.Reset, "the policies solve again")

	// Version 1.
	v1, err := os.ReadFile(filepath.Join("testdata", "snapshot-v1.json"))
	require.NoError(t, err)
	s = newSched(t, nil)
	err = s.Restore(v1)
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, "snapshot version 1 holds no record of the cluster and configuration it was taken on")
	ad, err = s.Adopt(v1)
	require.NoError(t, err)
	assert.Equal(t, "snapshot version", ad.Differences[0].What)
	assert.True(t, ad.Reset)
	assert.Equal(t, []string{"a", "b", "c"}, s.Jobs())
	st, err := s.Status("a")
	require.NoError(t, err)
	assert.InDelta(t, 980, st.Spec.RemainingSteps, 0)
	assert.NotEmpty(t, st.Devices, "its lease is bound again")
	r, err = s.Round(ctx, 720)
	require.NoError(t, err)
	checkRound(t, s, r)
	_, err = s.Adopt(v1)
	assert.ErrorIs(t, err, ErrInvalid, "adopt into a scheduler with jobs")
}

// A field added to a policy keeps earlier snapshots restorable while it
// is at its zero value (allocation.MaxMinFairness.Extension, issue #43);
// a field set is a difference.
func TestSameSettingIgnoresZeroFields(t *testing.T) {
	old := "*allocation.MaxMinFairness({Agnostic=false SpaceSharing=false Solver=(nil) Vertex=false})"
	assert.True(t, sameSetting(old, "*allocation.MaxMinFairness({Agnostic=false SpaceSharing=false Solver=(nil) Vertex=false Extension=(nil)})"))
	assert.True(t, sameSetting("x{A=0 B={C=\"\" D=[]} E=1}", "x{E=1 F=false}"))
	assert.False(t, sameSetting(old, "*allocation.MaxMinFairness({Agnostic=true SpaceSharing=false Solver=(nil) Vertex=false Extension=(nil)})"))
	assert.False(t, sameSetting(old, "*allocation.MaxMinFairness({Agnostic=false SpaceSharing=false Solver=(nil) Vertex=false Extension=allocation.TimeCap({Share=0.5})})"))
	assert.False(t, sameSetting("x{A=1}", "x{A=10}"))
}
