package multires

import (
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/gpusched/gpusched/internal/safeio"
	"github.com/gpusched/gpusched/internal/strictjson"
)

// Profile is what the allocators know of a kind of job: its throughput
// surface and its best-case demand (Synergy section 4.1).
// A Profile is not changed after it is validated: safe for concurrent
// reads.
type Profile struct {
	// Name names the model ("res18").
	Name string `json:"name"`
	// Task is its kind ("image", "lang", "speech"); free text.
	Task string `json:"task,omitempty"`
	// IterTime is the seconds per iteration at the proportional share the
	// surface is relative to (where Surface.At is 1).
	IterTime float64 `json:"iter_time_s"`
	// Ideal is the best-case demand per GPU: the least CPUs and memory at
	// which the job runs at its fastest. Profiles read from a file may
	// state it; when they do not, it is the surface's Knee(0, ...).
	Ideal Share `json:"ideal"`
	// Surface is the rate as a function of CPUs and memory per GPU.
	Surface *Surface `json:"-"`
}

// Validate checks the profile; errors are *Error of kind
// ErrInvalidProfile or ErrInvalidSurface.
func (p *Profile) Validate() error { return p.validate("profile") }

func (p *Profile) validate(where string) error {
	switch {
	case p.Name == "" || len(p.Name) > 256:
		return errorf(ErrInvalidProfile, where+".name", "%q: want 1 to 256 bytes", p.Name)
	case !(p.IterTime > 0 && p.IterTime <= 1e6):
		return errorf(ErrInvalidProfile, where+".iter_time_s", "%g: want seconds in (0, 1e6]", p.IterTime)
	case p.Surface == nil:
		return errorf(ErrInvalidProfile, where, "no surface")
	}
	if err := p.Surface.validate(where); err != nil {
		return err
	}
	if err := p.Ideal.check(where+".ideal", ErrInvalidProfile); err != nil {
		return err
	}
	// The best case is where the job runs at its fastest: a declared one
	// where the surface says it is slow would have the allocators place
	// it there as if that were its best.
	if r, top := p.IdealRate(), p.Surface.Max(); r < (1-IdealTolerance)*top {
		return errorf(ErrInvalidProfile, where+".ideal", "rate %g at %v, below the surface's highest %g: the best case must reach it within %g%%", r, p.Ideal, top, IdealTolerance*100)
	}
	return nil
}

// IdealTolerance is how far below its surface's highest rate a profile's
// best case may run.
const IdealTolerance = 0.05

// IdealRate returns the surface's rate at the ideal share.
func (p *Profile) IdealRate() float64 { return p.Surface.At(p.Ideal) }

// Profiles is a set of profiles measured against one proportional share,
// as Synergy's model zoo is. It is not changed after it is read: safe for
// concurrent reads.
type Profiles struct {
	// Proportional is the share per GPU at which every surface is 1: a
	// GPU's proportional share of the servers the profiles were measured
	// on.
	Proportional Share
	// Models are the profiles, in the file's order.
	Models []*Profile
	// Source and Licence say where the numbers come from.
	Source, Licence string
}

// Lookup returns the profile named name, or nil.
func (ps *Profiles) Lookup(name string) *Profile {
	for _, p := range ps.Models {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// MaxProfilesBytes bounds a profile file.
const MaxProfilesBytes = 8 << 20

// profilesFile is the file's layout: one grid for all models, as the
// zoo's; each model's rate rows over it.
type profilesFile struct {
	Source       string    `json:"source"`
	Licence      string    `json:"licence"`
	Proportional Share     `json:"proportional"`
	CPUs         []float64 `json:"cpus"`
	MemGB        []float64 `json:"mem_gb"`
	Models       []struct {
		Name     string      `json:"name"`
		Task     string      `json:"task"`
		IterTime float64     `json:"iter_time_s"`
		Ideal    *Share      `json:"ideal"`
		Rate     [][]float64 `json:"rate"`
	} `json:"models"`
}

// MaxProfiles bounds the models of a profile file.
const MaxProfiles = 4096

// ReadProfiles reads profiles in the layout of the embedded zoo
// (data/synergy.json): a proportional share, one grid (cpus, mem_gb) and
// per model its name, task, iteration time, optional ideal share and rate
// rows. Unknown keys, duplicate names and values out of range are errors
// naming where they are (*strictjson.Error or *Error). At most
// MaxProfilesBytes are read.
func ReadProfiles(r io.Reader) (*Profiles, error) {
	data, err := safeio.ReadAll(r, MaxProfilesBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedProfiles, err)
	}
	var f profilesFile
	if err := strictjson.Decode(data, &f); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedProfiles, err)
	}
	return f.build()
}

func (f *profilesFile) build() (*Profiles, error) {
	if err := f.Proportional.check("proportional", ErrMalformedProfiles); err != nil {
		return nil, err
	}
	if len(f.Models) == 0 || len(f.Models) > MaxProfiles {
		return nil, errorf(ErrMalformedProfiles, "models", "%d models: want 1 to %d", len(f.Models), MaxProfiles)
	}
	ps := &Profiles{Proportional: f.Proportional, Source: f.Source, Licence: f.Licence}
	seen := make(map[string]bool, len(f.Models))
	for i, m := range f.Models {
		where := fmt.Sprintf("models[%d]", i)
		p := &Profile{Name: m.Name, Task: m.Task, IterTime: m.IterTime,
			Surface: &Surface{CPUs: f.CPUs, MemGB: f.MemGB, Rate: m.Rate}}
		if p.Surface.CPUs != nil && p.Surface.MemGB != nil && m.Ideal == nil && len(m.Rate) > 0 {
			if err := p.Surface.validate(where); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrMalformedProfiles, err)
			}
			p.Ideal = p.Surface.Knee(0, f.Proportional)
		} else if m.Ideal != nil {
			p.Ideal = *m.Ideal
		}
		if err := p.validate(where); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformedProfiles, err)
		}
		if seen[p.Name] {
			return nil, errorf(ErrMalformedProfiles, where+".name", "%q named twice", p.Name)
		}
		seen[p.Name] = true
		if r := p.Surface.At(f.Proportional); math.Abs(r-1) > 0.05 {
			return nil, errorf(ErrMalformedProfiles, where+".rate", "rate %g at the proportional share %v: want 1 (rates are relative to it)", r, f.Proportional)
		}
		ps.Models = append(ps.Models, p)
	}
	return ps, nil
}

//go:embed data/synergy.json
var zooJSON []byte

var zoo = sync.OnceValues(func() (*Profiles, error) { return ReadProfiles(bytes.NewReader(zooJSON)) })

// Zoo returns Synergy's model zoo (github.com/msr-fiddle/synergy, MIT;
// data/README.md): ten models, their iteration times at the proportional
// share of 3 CPUs and 62.5 GB per GPU, their best-case demands and their
// surfaces over 1 to 24 CPUs and 20.83 to 250 GB per GPU. The same value
// is returned to every caller: do not change it.
func Zoo() *Profiles {
	ps, err := zoo()
	if err != nil {
		panic("multires: the embedded zoo does not read: " + err.Error())
	}
	return ps
}
