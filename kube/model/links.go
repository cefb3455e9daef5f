package model

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/gpusched/gpusched/topology"
)

const (
	// MaxAnnotationLen bounds the annotations read here, in bytes (the
	// API server allows 256 KiB for all annotations of an object together).
	MaxAnnotationLen = 256 << 10
	// MaxGPUsPerNode bounds the GPUs of one node.
	MaxGPUsPerNode = topology.MaxGPUsPerServer
)

// ParseLinks reads the link annotation of a node (AnnotationLinks) into the
// JSON form of a server. It accepts three notations:
//
//   - the matrix nvidia-smi topo -m prints: a header line naming the GPU
//     columns (GPU0 GPU1 ...), then one line per GPU (GPU0 X NV1 ...);
//     NIC rows and columns, the CPU and NUMA affinity columns, the legend
//     and terminal escape codes are ignored;
//   - a JSON matrix in the same notation: [["X","NV1"],["NV1","X"]];
//   - a JSON object with the fields of topology.ServerSpec ("links",
//     "interconnect" such as "hybrid-cube-mesh" or "nvswitch", "devices",
//     "nic_gbps", "bandwidth_gbps", ...), for one server ("count" must be
//     absent or 1).
//
// The matrix's rows and columns are ordered by GPU index. Shape and link
// classes are checked when the server is built (ParseNode); here only the
// notation is. Errors are *FieldError values wrapping ErrInvalid.
func ParseLinks(v string) (topology.ServerSpec, error) {
	var spec topology.ServerSpec
	if len(v) > MaxAnnotationLen {
		return spec, fieldErr(AnnotationLinks, v, nil, "%d bytes, more than %d", len(v), MaxAnnotationLen)
	}
	t := strings.TrimSpace(v)
	switch {
	case t == "":
		return spec, fieldErr(AnnotationLinks, v, nil, "empty")
	case t[0] == '[':
		var m [][]string
		if err := strictJSON(t, &m); err != nil {
			return spec, fieldErr(AnnotationLinks, v, err, "not a JSON matrix of link names")
		}
		spec.Links = m
	case t[0] == '{':
		if err := strictJSON(t, &spec); err != nil {
			return topology.ServerSpec{}, fieldErr(AnnotationLinks, v, err, "not a JSON server spec")
		}
		if spec.Count != nil && *spec.Count != 1 {
			return topology.ServerSpec{}, fieldErr(AnnotationLinks, v, nil, "count %d: a node is one server", *spec.Count)
		}
		spec.Count = nil
	default:
		m, err := parseTopoMatrix(t)
		if err != nil {
			return spec, fieldErr(AnnotationLinks, v, err, "not an nvidia-smi topo -m matrix")
		}
		spec.Links = m
	}
	if len(spec.Links) > MaxGPUsPerNode || len(spec.Devices) > MaxGPUsPerNode {
		return topology.ServerSpec{}, fieldErr(AnnotationLinks, v, nil, "more than %d GPUs", MaxGPUsPerNode)
	}
	return spec, nil
}

func strictJSON(s string, v any) error {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errTrailing
	}
	return nil
}

type parseError string

func (e parseError) Error() string { return string(e) }

const errTrailing = parseError("trailing data after the JSON value")

// parseTopoMatrix reads the GPU part of nvidia-smi topo -m's output.
func parseTopoMatrix(s string) ([][]string, error) {
	s = stripEscapes(s)
	var (
		cols   []int // GPU index of each header field, -1 for other columns
		ngpu   int
		rows   [][]string
		seen   []bool
		header = true
	)
	for line := range strings.Lines(s) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if strings.HasPrefix(fields[0], "Legend") {
			break
		}
		if header {
			header = false
			cols = make([]int, len(fields))
			for k, f := range fields {
				cols[k] = -1
				if i, ok := gpuName(f); ok {
					if i != ngpu {
						return nil, parseError("header: GPU columns must be GPU0, GPU1, ... in order, found " + quote(f) + " at column " + strconv.Itoa(k))
					}
					cols[k] = i
					ngpu++
				}
			}
			if ngpu == 0 {
				return nil, parseError("header names no GPU column (want GPU0 GPU1 ...)")
			}
			if ngpu > MaxGPUsPerNode {
				return nil, parseError("more than " + strconv.Itoa(MaxGPUsPerNode) + " GPU columns")
			}
			rows = make([][]string, ngpu)
			seen = make([]bool, ngpu)
			continue
		}
		i, ok := gpuName(fields[0])
		if !ok {
			continue // a NIC row
		}
		if i >= ngpu {
			return nil, parseError("row " + quote(fields[0]) + " has no column")
		}
		if seen[i] {
			return nil, parseError("row " + quote(fields[0]) + " twice")
		}
		seen[i] = true
		vals := fields[1:]
		row := make([]string, ngpu)
		for k, c := range cols {
			if c < 0 {
				continue
			}
			if k >= len(vals) {
				return nil, parseError("row " + quote(fields[0]) + " has " + strconv.Itoa(len(vals)) + " values, fewer than the GPU columns")
			}
			row[c] = vals[k]
		}
		rows[i] = row
	}
	for i, ok := range seen {
		if !ok {
			return nil, parseError("no row for GPU" + strconv.Itoa(i))
		}
	}
	return rows, nil
}

// gpuName reads "GPU<n>".
func gpuName(f string) (int, bool) {
	d, ok := strings.CutPrefix(f, "GPU")
	if !ok || d == "" || len(d) > 4 {
		return 0, false
	}
	for _, r := range d {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	if len(d) > 1 && d[0] == '0' {
		return 0, false
	}
	i, _ := strconv.Atoi(d)
	return i, true
}

func quote(s string) string { return strconv.Quote(cutShown(s)) }

// cutShown cuts s to maxShown bytes, for an error or a note.
func cutShown(s string) string {
	if len(s) > maxShown {
		return s[:maxShown] + "..."
	}
	return s
}

// stripEscapes removes ANSI escape sequences (nvidia-smi underlines its
// header on a terminal).
func stripEscapes(s string) string {
	if !strings.Contains(s, "\x1b") {
		return s
	}
	var b bytes.Buffer
	for i := 0; i < len(s); i++ {
		if s[i] != 0x1b {
			b.WriteByte(s[i])
			continue
		}
		// ESC [ params final-byte
		if i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = j
		}
	}
	return b.String()
}
