package main

import (
	"image/color"
	"io"
	"slices"

	"github.com/gpusched/gpusched/internal/cli"
	"github.com/gpusched/gpusched/sim"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
}

// plots writes the JCT CDF and the utilisation over time, and returns the
// files written.
func plots(dir string, results []outcome, from, to int) ([]string, error) {
	cdf := plot.New()
	cdf.Title.Text = "Job completion time"
	cdf.X.Label.Text = "JCT (hours, log scale)"
	cdf.Y.Label.Text = "fraction of jobs"
	cdf.X.Scale = plot.LogScale{}
	cdf.X.Tick.Marker = plot.LogTicks{Prec: -1}
	cdf.Legend.Top, cdf.Legend.Left = true, true
	util := plot.New()
	util.Title.Text = "Cluster utilisation"
	util.X.Label.Text = "time (hours)"
	util.Y.Label.Text = "busy GPUs (share, hourly mean)"
	util.Y.Min, util.Y.Max = 0, 1.05
	util.Legend.Top = true
	anyJobs := false
	for i, r := range results {
		recs := slices.Clone(r.result.Records)
		slices.SortStableFunc(recs, func(a, b sim.Record) int {
			switch {
			case a.Arrival < b.Arrival:
				return -1
			case a.Arrival > b.Arrival:
				return 1
			}
			return a.ID - b.ID
		})
		lo, hi := min(from, len(recs)), min(to, len(recs))
		var jct []float64
		for _, rec := range recs[lo:hi] {
			jct = append(jct, max(rec.JCT()/3600, 1e-3))
		}
		slices.Sort(jct)
		pts := make(plotter.XYs, len(jct))
		for j, v := range jct {
			pts[j] = plotter.XY{X: v, Y: float64(j+1) / float64(len(jct))}
		}
		c := palette[i%len(palette)]
		if len(pts) > 0 {
			l, err := plotter.NewLine(pts)
			if err != nil {
				return nil, err
			}
			l.Color, l.Width = c, vg.Points(1.5)
			cdf.Add(l)
			cdf.Legend.Add(r.name, l)
			anyJobs = true
		}
		hourly := hourlyMean(r.result.Utilisation, r.result.End)
		if len(hourly) > 1 {
			l, err := plotter.NewLine(hourly)
			if err != nil {
				return nil, err
			}
			l.Color, l.Width = c, vg.Points(1)
			util.Add(l)
			util.Legend.Add(r.name, l)
		}
	}
	if !anyJobs {
		// No job in the window: a log axis needs a positive range.
		cdf.X.Min, cdf.X.Max = 0.01, 100
	}
	files := []string{plotPath(dir, "jct_cdf.svg"), plotPath(dir, "utilisation.svg")}
	if err := save(cdf, 7*vg.Inch, 4.5*vg.Inch, files[0]); err != nil {
		return nil, err
	}
	if err := save(util, 9*vg.Inch, 4*vg.Inch, files[1]); err != nil {
		return nil, err
	}
	return files, nil
}

// save writes a plot as SVG through a temporary file renamed into place,
// so that a symbolic link planted at the name is replaced, not followed.
func save(p *plot.Plot, w, h vg.Length, file string) error {
	wt, err := p.WriterTo(w, h, "svg")
	if err != nil {
		return err
	}
	return cli.WriteFile(file, func(out io.Writer) error {
		_, err := wt.WriteTo(out)
		return err
	})
}

// hourlyMean averages a per-round series over hours.
func hourlyMean(samples []sim.Sample, end float64) plotter.XYs {
	var out plotter.XYs
	bucket, sum, span := -1, 0.0, 0.0
	flush := func() {
		if bucket >= 0 && span > 0 {
			out = append(out, plotter.XY{X: float64(bucket) + 0.5, Y: sum / span})
		}
	}
	for i, s := range samples {
		stop := end
		if i+1 < len(samples) {
			stop = samples[i+1].Time
		}
		b := int(s.Time / 3600)
		if b != bucket {
			flush()
			bucket, sum, span = b, 0, 0
		}
		d := max(stop-s.Time, 0)
		sum += s.Value * d
		span += d
	}
	flush()
	return out
}
