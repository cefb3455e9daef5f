package lptest

import (
	"compress/gzip"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/gpusched/gpusched/allocation/lp"
)

// NetlibProblem is one problem of the netlib LP test set as shipped in
// allocation/lp/testdata/netlib (see SOURCES.md there): its size, the
// expected status and, for optimal problems, the optimal objective
// (objective constant included).
type NetlibProblem struct {
	Name                 string
	Rows, Cols, Nonzeros int
	Status               lp.Status
	Objective            float64
	// Path is the gzip-compressed MPS file.
	Path string
}

// Netlib reads the list of netlib problems (optima.csv) in dir, the
// directory that holds them.
func Netlib(dir string) ([]NetlibProblem, error) {
	f, err := os.Open(filepath.Join(dir, "optima.csv"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only: nothing to lose
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("lptest: optima.csv: %w", err)
	}
	if len(recs) < 1 || len(recs[0]) < 6 || recs[0][0] != "name" {
		return nil, errors.New("lptest: optima.csv lacks its header")
	}
	var out []NetlibProblem
	for k, r := range recs[1:] {
		p := NetlibProblem{Name: r[0], Path: filepath.Join(dir, r[0]+".mps.gz")}
		var errs []error
		atoi := func(s string) int {
			v, err := strconv.Atoi(s)
			errs = append(errs, err)
			return v
		}
		p.Rows, p.Cols, p.Nonzeros = atoi(r[1]), atoi(r[2]), atoi(r[3])
		switch r[4] {
		case "optimal":
			p.Status = lp.Optimal
			v, err := strconv.ParseFloat(r[5], 64)
			p.Objective = v
			errs = append(errs, err)
		case "infeasible":
			p.Status = lp.Infeasible
		case "unbounded":
			p.Status = lp.Unbounded
		default:
			errs = append(errs, fmt.Errorf("status %q", r[4]))
		}
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("lptest: optima.csv line %d: %w", k+2, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Load reads the problem's model.
func (p NetlibProblem) Load() (*lp.Model, error) {
	f, err := os.Open(p.Path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only: nothing to lose
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Path, err)
	}
	m, err := lp.ReadMPS(z)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Path, err)
	}
	if _, err := io.Copy(io.Discard, z); err != nil {
		return nil, fmt.Errorf("%s: %w", p.Path, err)
	}
	return m, nil
}
