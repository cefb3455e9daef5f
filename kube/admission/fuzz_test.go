package admission

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/scheduler"
	"k8s.io/apimachinery/pkg/types"
)

// FuzzDecodeState: whatever the state ConfigMaps hold (a tenant who could
// write them, a corrupt etcd), decoding them and restoring the core from
// them returns an error or a state within its bounds, never a panic.
func FuzzDecodeState(f *testing.F) {
	st := newCtrlState()
	st.Rounds = 3
	st.Admitted["pod/a/x"] = &record{Type: "v100", UIDs: []types.UID{"u1"}, Pods: []string{"x"}, NS: "a"}
	st.Requeue["pod/a/y"] = []requeued{{NS: "a", Name: "y", Old: "u2", Copy: "c"}}
	snap := `{"version":1,"next_id":2,"jobs":[{"key":"pod/a/x","id":1,"spec":{"gpus":1,"throughput":{"v100":1}},"arrival":0}]}`
	for _, doc := range []string{
		mustJSON(f, stateDoc{Controller: st, Scheduler: json.RawMessage(snap)}),
		`{"controller":{"version":2,"rounds":-1},"scheduler":{}}`,
		`{"controller":{"version":2},"scheduler":null,"learner":{"version":1,"types":["v100"],"seq":1,"jobs":[{"name":"pod/a/x","gpus":1,"info":{}}]}}`,
		`{"controller":{"version":2,"admitted":{"k":null}},"scheduler":null}`,
		`{"controller":{"version":2},"scheduler":{"version":1,"next_id":-5,"jobs":[{"key":"x","id":1,"spec":{"gpus":1e9}}]}}`,
	} {
		gz := gzipped(f, []byte(doc))
		sum := sha256.Sum256(gz)
		head := fmt.Sprintf(`{"version":2,"gen":1,"chunks":0,"bytes":%d,"sha256":%q}`, len(gz), hex.EncodeToString(sum[:]))
		f.Add(head, gz, uint8(0))
		f.Add(strings.Replace(head, `"chunks":0`, `"chunks":2`, 1), gz, uint8(len(gz)/2))
		f.Add(strings.Replace(head, `"gen":1`, `"gen":9223372036854775807`, 1), gz, uint8(0))
	}
	f.Fuzz(func(t *testing.T, head string, blob []byte, split uint8) {
		chunk := func(_ int64, i int) ([]byte, error) {
			k := min(int(split), len(blob))
			switch i {
			case 0:
				return blob[:k], nil
			case 1:
				return blob[k:], nil
			}
			return nil, errors.New("no such chunk")
		}
		doc, h, err := decodeState(map[string]string{stateKeyHead: head}, map[string][]byte{stateKeyBlob: blob}, chunk)
		if err != nil {
			return
		}
		st, snap := doc.Controller, doc.Scheduler
		if st.Version != stateVersion || st.Rounds < 0 || h.Chunks > maxChunks || h.Gen < 0 || h.Gen > maxGen || st.Admitted == nil || st.Requeue == nil {
			t.Fatalf("accepted a state out of bounds: %+v %+v", st, h)
		}
		for k, r := range st.Admitted {
			if r == nil || len(r.UIDs) == 0 || len(r.Pods) > len(r.UIDs) {
				t.Fatalf("record %q: %+v", k, r)
			}
		}
		s, err := scheduler.New(scheduler.Config{Policy: &allocation.MaxMinFairness{}})
		if err != nil {
			t.Fatal(err)
		}
		_ = s.Restore(snap)
		l, err := learn.New(learn.Config{})
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Restore(doc.Learner)
	})
}

func mustJSON(f *testing.F, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		f.Fatal(err)
	}
	return string(b)
}

func gzipped(f testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		f.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		f.Fatal(err)
	}
	return buf.Bytes()
}
