package topology

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const labSpec = `{
  "name": "lab",
  "servers": [
    {"id": "v100", "count": 4, "gpu_type": "v100", "gpus": 8,
     "interconnect": "hybrid-cube-mesh", "nic_gbps": 100, "rack": "r1"},
    {"id": "k80", "count": 2, "gpu_type": "K80", "gpus": 4, "domain": "old"},
    {"id": "odd", "devices": [
       {"type": "a100", "memory_mib": 81920, "numa_node": 0, "uuid": "GPU-1"},
       {"type": "a100", "memory_mib": 81920, "numa_node": 1, "uuid": "GPU-2", "index": 3}],
     "links": [["X", "NV12"], ["nv12", "X"]],
     "bandwidth_gbps": [[0, 280.5], [280.5, 0]]},
    {"gpu_type": "t4", "gpus": 1}
  ]
}`

func TestParseJSON(t *testing.T) {
	c, err := ParseJSON([]byte(labSpec))
	require.NoError(t, err)
	assert.Equal(t, "lab", c.Name)
	require.Len(t, c.Servers, 4+2+1+1)
	assert.Equal(t, map[GPUType]int{V100: 32, K80: 8, A100: 2, T4: 1}, c.Capacity())
	assert.Equal(t, "v100-3", c.Servers[3].ID)
	assert.Equal(t, "r1", c.Servers[3].Rack)
	assert.Equal(t, 100.0, c.Servers[3].NICGbps)
	assert.Equal(t, "NV2", c.Servers[0].Link(0, 3).String())
	assert.Equal(t, "k80-1", c.Servers[5].ID)
	assert.Equal(t, "old", c.Servers[5].Domain)
	assert.Equal(t, LinkSameBoard, c.Servers[5].Link(2, 3).Class)
	odd := &c.Servers[6]
	assert.Equal(t, "odd", odd.ID)
	assert.Equal(t, GPU{Index: 3, Type: A100, MemoryMiB: 81920, UUID: "GPU-2", NUMANode: 1}, odd.GPUs[1])
	assert.Equal(t, 280.5, odd.PairBandwidth(0, 1))
	assert.Equal(t, "server-3", c.Servers[7].ID)
	assert.Equal(t, 16<<10, c.Servers[7].GPUs[0].MemoryMiB)
}

func TestSpecRoundTrip(t *testing.T) {
	c, err := ParseJSON([]byte(labSpec))
	require.NoError(t, err)
	data, err := json.Marshal(c.Spec())
	require.NoError(t, err)
	back, err := ParseJSON(data)
	require.NoError(t, err)
	assert.Equal(t, c, back)
}

func TestParseJSONErrors(t *testing.T) {
	tests := []struct {
		name, spec string
		kind       error
		msg        string
	}{
		{"empty", ``, ErrMalformedSpec, "line 1, column 1: malformed spec: empty document"},
		{"syntax", "{\n\"servers\": [\n{\"id\": }]}", ErrMalformedSpec, "line 3, column 8: malformed spec: servers[0].id: invalid character '}'"},
		{"wrong type", "{\"servers\": [{\"gpus\": \"four\"}]}", ErrMalformedSpec, `line 1, column 23: malformed spec: servers[0].gpus: a string where an integer is wanted`},
		{"unknown field", `{"servers": [{"gpu": "v100"}]}`, ErrMalformedSpec, `line 1, column 15: malformed spec: servers[0]: unknown field "gpu"`},
		{"trailing", `{"servers": [{"gpu_type": "v100", "gpus": 1}]} {}`, ErrMalformedSpec, "trailing data"},
		{"no servers", `{"servers": []}`, ErrInvalidCount, "at least one server"},
		{"no GPUs", `{"servers": [{"id": "a"}]}`, ErrMalformedSpec, `servers[0] "a": malformed spec: server has neither`},
		{"zero GPUs", `{"servers": [{"gpu_type": "v100", "gpus": 0}]}`, ErrInvalidCount, "0 GPUs per v100 server"},
		{"negative GPUs", `{"servers": [{"gpu_type": "v100", "gpus": -8}]}`, ErrInvalidCount, "-8 GPUs"},
		{"zero count", `{"servers": [{"gpu_type": "v100", "gpus": 8, "count": 0}]}`, ErrInvalidCount, "count 0"},
		{"huge count", `{"servers": [{"gpu_type": "v100", "gpus": 8, "count": 1000000}]}`, ErrInvalidCount, "more than 1048576 GPUs"},
		{"huge server", `{"servers": [{"gpu_type": "v100", "gpus": 5000}]}`, ErrInvalidCount, "more than 1024 GPUs in one server"},
		{"duplicate ids", `{"servers": [{"id": "a", "gpu_type": "v100", "gpus": 1}, {"id": "a", "gpu_type": "k80", "gpus": 1}]}`, ErrDuplicateID, `server id "a"`},
		{"duplicate from count", `{"servers": [{"id": "a", "count": 2, "gpu_type": "v100", "gpus": 1}, {"id": "a-1", "gpu_type": "k80", "gpus": 1}]}`, ErrDuplicateID, `server id "a-1"`},
		{"bad type", `{"servers": [{"gpu_type": "v100!", "gpus": 1}]}`, ErrInvalidGPUType, `character '!'`},
		{"custom type needs memory", `{"servers": [{"devices": [{"type": "mygpu"}]}]}`, ErrInvalidCount, `devices[0]: invalid count: memory_mib is needed`},
		{"unknown link", `{"servers": [{"gpu_type": "v100", "gpus": 2, "links": [["X", "NVX"], ["NVX", "X"]]}]}`, ErrUnknownLinkClass, `links[0][1]`},
		{"asymmetric", `{"servers": [{"gpu_type": "v100", "gpus": 2, "links": [["X", "NV2"], ["NV1", "X"]]}]}`, ErrAsymmetricLinks, "NV2 but links[1][0]=NV1"},
		{"links wrong size", `{"servers": [{"gpu_type": "v100", "gpus": 3, "links": [["X", "NV2"], ["NV2", "X"]]}]}`, ErrMalformedSpec, "not 3x3"},
		{"both interconnect and links", `{"servers": [{"gpu_type": "v100", "gpus": 2, "interconnect": "pcie", "links": [["X", "NV2"], ["NV2", "X"]]}]}`, ErrMalformedSpec, "either interconnect or links"},
		{"both devices and type", `{"servers": [{"gpu_type": "v100", "devices": [{"type": "v100"}]}]}`, ErrMalformedSpec, "either devices or gpu_type"},
		{"unknown interconnect", `{"servers": [{"gpu_type": "v100", "gpus": 2, "interconnect": "ib"}]}`, ErrUnknownLinkClass, `unknown interconnect "ib"`},
		{"duplicate index", `{"servers": [{"devices": [{"type": "v100", "index": 1}, {"type": "v100"}]}]}`, ErrDuplicateID, "GPU index 1"},
		{"negative NIC", `{"servers": [{"gpu_type": "v100", "gpus": 1, "nic_gbps": -100}]}`, ErrInvalidCount, "NIC bandwidth -100"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseJSON([]byte(tc.spec))
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.kind)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestReadJSON(t *testing.T) {
	c, err := ReadJSON(strings.NewReader(`{"servers": [{"gpu_type": "h200", "gpus": 8, "interconnect": "nvswitch"}]}`))
	require.NoError(t, err)
	assert.Equal(t, 8, c.Capacity()[H200])
}

func FuzzParseJSON(f *testing.F) {
	f.Add([]byte(labSpec))
	f.Add([]byte(`{"servers": [{"gpu_type": "v100", "gpus": 2, "links": [["X", "NV2"], ["NV1", "X"]]}]}`))
	f.Add([]byte(`{"servers": [{"devices": [{"type": "v100", "index": 1}, {"type": "v100"}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseJSON(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "topology: ") {
				t.Fatalf("error without package prefix: %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("ParseJSON returned an invalid cluster: %v", err)
		}
		out, err := json.Marshal(c.Spec())
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		back, err := ParseJSON(out)
		if err != nil {
			t.Fatalf("round trip: %v\n%s", err, out)
		}
		if back.NumGPUs() != c.NumGPUs() {
			t.Fatalf("round trip changed the GPU count")
		}
	})
}

func FuzzParseCompact(f *testing.F) {
	for _, s := range []string{"v100:36,p100:36,k80:36", "36:36:36", "v100:32:8,k80:8", "0:1", "a:1:1"} {
		f.Add(s, 4)
	}
	f.Fuzz(func(t *testing.T, spec string, perServer int) {
		c, err := ParseCompact(spec, perServer%64)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("ParseCompact(%q) returned an invalid cluster: %v", spec, err)
		}
	})
}
