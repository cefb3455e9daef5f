package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type device struct {
	Type  string `json:"type"`
	Index *int   `json:"index,omitempty"`
}

type server struct {
	ID      string     `json:"id"`
	GPUs    int        `json:"gpus,omitempty"`
	Small   int8       `json:"small,omitempty"`
	Count   *uint16    `json:"count,omitempty"`
	NIC     float64    `json:"nic_gbps,omitempty"`
	On      bool       `json:"on,omitempty"`
	Devices []device   `json:"devices,omitempty"`
	Links   [][]string `json:"links,omitempty"`
	Pair    [2]float64 `json:"pair"`
	Extra   any        `json:"extra,omitempty"`
	Rates   rates      `json:"rates,omitempty"`
	Labels  map[string]string
}

type spec struct {
	Servers []server `json:"servers"`
}

// rates checks itself: a list of positive numbers.
type rates []float64

func (r *rates) UnmarshalJSON(b []byte) error {
	var v []float64
	if err := Decode(b, &v); err != nil {
		return err
	}
	for _, x := range v {
		if x <= 0 {
			return errors.New("rates must be positive")
		}
	}
	*r = v
	return nil
}

func TestDecode(t *testing.T) {
	var s spec
	doc := "\ufeff{\"servers\": [{\"id\": \"a\", \"gpus\": 8, \"count\": 2, \"nic_gbps\": 1.5e2, \"on\": true,\n" +
		" \"devices\": [{\"type\": \"v100\", \"index\": 3}], \"links\": [[\"X\"]], \"pair\": [1, 2],\n" +
		" \"extra\": {\"k\": [1, {\"z\": null}]}, \"rates\": [1, 2], \"Labels\": {\"x\": \"y\"}}]}\n"
	require.NoError(t, Decode([]byte(doc), &s))
	require.Len(t, s.Servers, 1)
	a := s.Servers[0]
	assert.Equal(t, 8, a.GPUs)
	assert.Equal(t, uint16(2), *a.Count)
	assert.Equal(t, 150.0, a.NIC)
	assert.Equal(t, 3, *a.Devices[0].Index)
	assert.Equal(t, [2]float64{1, 2}, a.Pair)
	assert.Equal(t, rates{1, 2}, a.Rates)
	assert.Equal(t, "y", a.Labels["x"])
	var m map[string]map[string]float64
	require.NoError(t, Decode([]byte(`{"a": {"b": 1}, "b": {"b": 2}}`), &m))
	assert.Equal(t, 2.0, m["b"]["b"])
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct{ doc, where, msg string }{
		{``, "line 1, column 1", "empty document"},
		{"  \n ", "line 1, column 1", "empty document"},
		{`{"servers": [{"id": "a"}`, "line 1, column 25", "truncated"},
		{`{"servers": [{"id": "a"`, "line 1, column 24", "truncated"},
		{`{"servers": [{"id" "a"}]}`, "line 1, column 20", "invalid character"},
		{"{\"servers\": [\n  {\"id\": \"a\",\n   \"gpu\": 8}]}", "line 3, column 4", `unknown field "gpu" (known: Labels, count, devices, extra, gpus, id, links, nic_gbps, on, pair, rates, small)`},
		{`{"servers": [{"ID": "a"}]}`, "line 1, column 15", `unknown field "ID": field names are case-sensitive; did you mean "id"?`},
		{`{"servers": [{"id": "a", "id": "b"}]}`, "line 1, column 26", `field "id" appears twice`},
		{`{"servers": [], "servers": []}`, "line 1, column 17", `field "servers" appears twice`},
		{`{"servers": [{"labels": {}}]}`, "line 1, column 15", `did you mean "Labels"?`},
		{`{"servers": [{"Labels": {"x": "1", "x": "2"}}]}`, "line 1, column 36", `key "x" appears twice`},
		{`{"servers": [{"extra": {"k": {"a": 1, "a": 2}}}]}`, "line 1, column 39", `key "a" appears twice`},
		{`{"servers": [{"gpus": "8"}]}`, "line 1, column 23", "a string where an integer is wanted"},
		{`{"servers": [{"gpus": 8.5}]}`, "line 1, column 23", "8.5 is not an integer from"},
		{`{"servers": [{"gpus": 1e3}]}`, "line 1, column 23", "1e3 is not an integer"},
		{`{"servers": [{"small": 300}]}`, "line 1, column 24", "300 is not an integer from -128 to 127"},
		{`{"servers": [{"count": -1}]}`, "line 1, column 24", "-1 is not an integer from 0 to 65535"},
		{`{"servers": [{"nic_gbps": 1e400}]}`, "line 1, column 27", "1e400 is out of the range of a float64"},
		{`{"servers": [{"id": null}]}`, "line 1, column 21", "null where a string is wanted"},
		{`{"servers": [{"on": 1}]}`, "line 1, column 21", "the number 1 where a boolean is wanted"},
		{`{"servers": [{"pair": [1, 2, 3]}]}`, "line 1, column 30", "more than 2 values"},
		{`{"servers": [{"pair": [1]}]}`, "line 1, column 23", "1 values where the array needs 2"},
		{`{"servers": [{"devices": {}}]}`, "line 1, column 26", "an object where an array is wanted"},
		{`{"servers": [{"rates": [1, -2]}]}`, "line 1, column 24", "rates must be positive"},
		{`{"servers": [{"rates": [1, }]}`, "line 1, column 28", "invalid character"},
		{`{"servers": []} {}`, "line 1, column 17", "trailing data"},
		{`{"servers": []} x`, "line 1, column 17", "trailing data"},
		{`[]`, "line 1, column 1", "an array where an object is wanted"},
		{"{\n\"servers\": [{\"id\": \"é\", \"x\": 1}]}", "line 2, column 25", `unknown field "x"`},
	}
	for _, tc := range tests {
		var s spec
		err := Decode([]byte(tc.doc), &s)
		var e *Error
		if !assert.ErrorAs(t, err, &e, "%s", tc.doc) {
			continue
		}
		assert.Equal(t, tc.where, e.Where(), "%s: %v", tc.doc, err)
		assert.Contains(t, err.Error(), tc.msg, tc.doc)
		assert.NotContains(t, err.Error(), "\n")
	}
	var s spec
	err := Decode([]byte(`{"servers": [{}, {"devices": [{"type": 1}]}]}`), &s)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "servers[1].devices[0].type", e.Path)
	assert.Equal(t, "line 1, column 40: servers[1].devices[0].type: the number 1 where a string is wanted", err.Error())
	err = Decode([]byte(`{"servers": [{"Labels": {"a\"b": 1}}]}`), &s)
	assert.ErrorContains(t, err, `servers[0].Labels["a\"b"]: the number 1 where a string is wanted`)
}

func TestDeepNesting(t *testing.T) {
	var v any
	doc := strings.Repeat("[", 100) + strings.Repeat("]", 100)
	err := Decode([]byte(doc), &v)
	assert.ErrorContains(t, err, "nested deeper than 64")
	assert.Panics(t, func() { _ = Decode([]byte(`{}`), spec{}) })
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"servers": [{"id": "a", "gpus": 8, "devices": [{"type": "x"}], "pair": [1, 2], "extra": [1, {"a": null}]}]}`))
	f.Add([]byte(`{"servers": [{"ID": 1, "id": 2}]}`))
	f.Add([]byte(`{"a\u0041": [true, false, null, -0.5e+3, "\n"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s spec
		check := func(err error) {
			if err == nil {
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("not an *Error: %v", err)
			}
			if e.Line < 1 || e.Column < 1 || e.Offset < 0 || e.Offset > int64(len(data)) {
				t.Fatalf("bad position: %+v", e)
			}
		}
		err := Decode(data, &s)
		check(err)
		if err == nil && !json.Valid(bytes.TrimPrefix(data, []byte("\ufeff"))) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		// Any shape: the walk's syntax check agrees with encoding/json's.
		var v any
		err = Decode(data, &v)
		check(err)
		syntax := err != nil && (strings.Contains(err.Error(), "invalid character") || strings.Contains(err.Error(), "truncated") ||
			strings.Contains(err.Error(), "empty document") || strings.Contains(err.Error(), "trailing data"))
		valid := json.Valid(bytes.TrimPrefix(data, []byte("\ufeff")))
		if valid && syntax || !valid && err == nil {
			t.Fatalf("json.Valid %v but Decode says %v for %q", valid, err, data)
		}
	})
}
