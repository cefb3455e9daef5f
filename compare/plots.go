package compare

import (
	"image/color"
	"io"
	"os"
	"path/filepath"
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

// The plots' file names, in the order WritePlots returns them.
const (
	PlotJCT         = "jct_cdf.svg"
	PlotUtilisation = "utilisation.svg"
	PlotGPUHours    = "gpu_hours.svg"
)

// WritePlots writes three SVG plots into dir (which must exist): the CDF
// of the measured jobs' JCT (PlotJCT), the share of busy GPUs over time,
// hourly means (PlotUtilisation), and the measured jobs' GPU-hours on
// each type, a group of bars per entrant (PlotGPUHours). Each file is
// written to a temporary file and renamed into place (a symbolic link at
// its name is replaced, not followed). It returns the files written.
func (r *Report) WritePlots(dir string) ([]string, error) {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		if err == nil {
			err = &os.PathError{Op: "plot", Path: dir, Err: os.ErrInvalid}
		}
		return nil, err
	}
	cdf, err := r.jctPlot()
	if err != nil {
		return nil, err
	}
	util, err := r.utilisationPlot()
	if err != nil {
		return nil, err
	}
	use, err := r.gpuHoursPlot()
	if err != nil {
		return nil, err
	}
	files := []string{filepath.Join(dir, PlotJCT), filepath.Join(dir, PlotUtilisation), filepath.Join(dir, PlotGPUHours)}
	for i, p := range []struct {
		p    *plot.Plot
		w, h vg.Length
	}{{cdf, 7 * vg.Inch, 4.5 * vg.Inch}, {util, 9 * vg.Inch, 4 * vg.Inch}, {use, 7 * vg.Inch, 4.5 * vg.Inch}} {
		if err := save(p.p, p.w, p.h, files[i]); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// jctPlot draws the CDF of the measured jobs' JCTs, a line per entrant
// (rows resumed without records have none).
func (r *Report) jctPlot() (*plot.Plot, error) {
	cdf := plot.New()
	cdf.Title.Text = "Job completion time"
	cdf.X.Label.Text = "JCT (hours, log scale)"
	cdf.Y.Label.Text = "fraction of jobs"
	cdf.X.Scale = plot.LogScale{}
	cdf.X.Tick.Marker = plot.LogTicks{Prec: -1}
	cdf.Legend.Top, cdf.Legend.Left = true, true
	anyJobs := false
	for i, row := range r.Rows {
		if row.Result == nil {
			continue
		}
		var jct []float64
		for _, rec := range sim.Window(row.Result.Records, r.From, r.To) {
			jct = append(jct, max(rec.JCT()/3600, 1e-3))
		}
		if len(jct) == 0 {
			continue
		}
		slices.Sort(jct)
		pts := make(plotter.XYs, len(jct))
		for j, v := range jct {
			pts[j] = plotter.XY{X: v, Y: float64(j+1) / float64(len(jct))}
		}
		if err := addLine(cdf, pts, i, 1.5, row.Entrant); err != nil {
			return nil, err
		}
		anyJobs = true
	}
	if !anyJobs {
		// No job in the window: a log axis needs a positive range.
		cdf.X.Min, cdf.X.Max = 0.01, 100
	}
	return cdf, nil
}

// utilisationPlot draws the share of busy GPUs over time, hourly means, a
// line per entrant.
func (r *Report) utilisationPlot() (*plot.Plot, error) {
	util := plot.New()
	util.Title.Text = "Cluster utilisation"
	util.X.Label.Text = "time (hours)"
	util.Y.Label.Text = "busy GPUs (share, hourly mean)"
	util.Y.Min, util.Y.Max = 0, 1.05
	util.Legend.Top = true
	for i, row := range r.Rows {
		if row.Result == nil {
			continue
		}
		hourly := hourlyMean(row.Result.Utilisation, row.Result.End)
		if len(hourly) < 2 {
			continue
		}
		if err := addLine(util, hourly, i, 1, row.Entrant); err != nil {
			return nil, err
		}
	}
	return util, nil
}

// addLine adds entrant i's line to a plot and its legend.
func addLine(p *plot.Plot, pts plotter.XYs, i int, width float64, name string) error {
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color, l.Width = palette[i%len(palette)], vg.Points(width)
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// gpuHoursPlot draws the measured jobs' GPU-hours per type: one group of
// bars per entrant, one bar per type.
func (r *Report) gpuHoursPlot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "GPU-hours of the measured jobs, per type"
	p.Y.Label.Text = "GPU-hours"
	p.Legend.Top = true
	names := make([]string, len(r.Rows))
	for i, row := range r.Rows {
		names[i] = row.Entrant
	}
	if len(names) == 0 {
		return p, nil
	}
	p.NominalX(names...)
	width := vg.Points(max(4, 48/float64(max(1, len(r.Types)))))
	for k, t := range r.Types {
		vals := make(plotter.Values, len(r.Rows))
		for i, row := range r.Rows {
			if k < len(row.GPUHours) {
				vals[i] = row.GPUHours[k]
			}
		}
		b, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, err
		}
		b.LineStyle.Width = 0
		b.Color = palette[k%len(palette)]
		b.Offset = vg.Length(float64(k)-float64(len(r.Types)-1)/2) * width
		p.Add(b)
		p.Legend.Add(string(t), b)
	}
	return p, nil
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
