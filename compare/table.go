package compare

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpusched/gpusched/internal/cli"
)

// Column is one metric of a report's table. A plain value, safe for
// concurrent reads.
type Column struct {
	// Key names the column in CSV headers, JSON and Select:
	// "mean_jct_h".
	Key string
	// Header names it in text and Markdown tables: "mean JCT (h)".
	Header string
	// Value returns a row's value and whether it has one (rho needs the
	// isolated times only the round engine computes).
	Value func(Row) (float64, bool)
	// Format writes a value for text and Markdown tables.
	Format func(float64) string
}

func hours(v float64) float64 { return v / 3600 }

// fixed formats with prec decimals.
func fixed(prec int) func(float64) string {
	return func(v float64) string { return cli.Fixed(v, prec) }
}

// integer formats a count.
func integer(v float64) string { return strconv.FormatFloat(math.Round(v), 'f', 0, 64) }

// summaryColumn is a column of sim.Summary.
func summaryColumn(key, header string, get func(Row) float64, format func(float64) string) Column {
	return Column{Key: key, Header: header, Value: func(r Row) (float64, bool) { return get(r), true }, Format: format}
}

// rhoColumn is a column defined only where the engine computes rho.
func rhoColumn(key, header string, get func(Row) float64, format func(float64) string) Column {
	return Column{Key: key, Header: header, Value: func(r Row) (float64, bool) { return get(r), r.HasRho }, Format: format}
}

// Columns returns every column of the report: first TextKeys' (jobs;
// JCT mean, median, p95 and p99, queueing, makespan, in hours;
// utilisation; mean rho and the share of jobs with rho > 1; the policy's
// allocations; the run time, in seconds, the one column that differs
// between runs), then the largest rho, preemptions and moves between
// types per job, cost (dollars, at allocation.DefaultPrices), GPU-hours
// of the measured jobs on each type ("gpu_h_v100"), the GPU-hours spent
// exploring (hidden rates) and the jobs whose reports failed the audit.
func (r *Report) Columns() []Column {
	cols := []Column{
		summaryColumn("jobs", "jobs", func(r Row) float64 { return float64(r.Summary.Jobs) }, integer),
		summaryColumn("mean_jct_h", "mean JCT (h)", func(r Row) float64 { return hours(r.Summary.MeanJCT) }, fixed(2)),
		summaryColumn("median_jct_h", "median (h)", func(r Row) float64 { return hours(r.Summary.MedianJCT) }, fixed(2)),
		summaryColumn("p95_jct_h", "p95 (h)", func(r Row) float64 { return hours(r.Summary.P95JCT) }, fixed(2)),
		summaryColumn("p99_jct_h", "p99 (h)", func(r Row) float64 { return hours(r.Summary.P99JCT) }, fixed(2)),
		summaryColumn("queueing_h", "queueing (h)", func(r Row) float64 { return hours(r.Summary.MeanQueueing) }, fixed(2)),
		summaryColumn("makespan_h", "makespan (h)", func(r Row) float64 { return hours(r.Summary.Makespan) }, fixed(2)),
		summaryColumn("utilisation", "utilisation", func(r Row) float64 { return r.Summary.Utilisation }, cli.Percent),
		rhoColumn("mean_rho", "mean rho", func(r Row) float64 { return r.Summary.MeanRho }, fixed(2)),
		rhoColumn("rho_above_1", "rho>1", func(r Row) float64 { return r.Summary.RhoAbove1 }, cli.Percent),
		summaryColumn("allocations", "allocations", func(r Row) float64 { return float64(r.Allocations) }, integer),
		{Key: "run_time_s", Header: "run time", Value: func(r Row) (float64, bool) { return r.Took.Seconds(), true },
			Format: func(v float64) string {
				return time.Duration(v * float64(time.Second)).Round(10 * time.Millisecond).String()
			}},
		rhoColumn("max_rho", "max rho", func(r Row) float64 { return r.Summary.MaxRho }, fixed(2)),
		summaryColumn("preemptions", "preemptions/job", func(r Row) float64 { return r.Summary.Preemptions }, fixed(2)),
		summaryColumn("type_moves", "type moves/job", func(r Row) float64 { return r.Summary.TypeMoves }, fixed(2)),
		summaryColumn("cost_usd", "cost ($)", func(r Row) float64 { return r.Summary.Cost }, fixed(0)),
	}
	for k, t := range r.Types {
		cols = append(cols, summaryColumn("gpu_h_"+string(t), string(t)+" (GPU-h)", func(r Row) float64 {
			if k < len(r.GPUHours) {
				return r.GPUHours[k]
			}
			return 0
		}, fixed(1)))
	}
	return append(cols,
		summaryColumn("explored_gpu_h", "explored (GPU-h)", func(r Row) float64 { return r.ExploredGPUHours }, fixed(1)),
		summaryColumn("audit_failed", "audit failed", func(r Row) float64 { return float64(r.AuditFailed) }, integer),
	)
}

// TextKeys are the columns examples/simulate prints.
var TextKeys = []string{"jobs", "mean_jct_h", "median_jct_h", "p95_jct_h", "p99_jct_h", "queueing_h", "makespan_h",
	"utilisation", "mean_rho", "rho_above_1", "allocations", "run_time_s"}

// Select returns the report's columns of these keys, in this order; no
// keys means every column but the run time (the ones that reproduce).
// An unknown key is an error wrapping ErrUnknown that lists the known.
func (r *Report) Select(keys ...string) ([]Column, error) {
	all := r.Columns()
	if len(keys) == 0 {
		var out []Column
		for _, c := range all {
			if c.Key != "run_time_s" {
				out = append(out, c)
			}
		}
		return out, nil
	}
	byKey := map[string]Column{}
	var known []string
	for _, c := range all {
		byKey[c.Key] = c
		known = append(known, c.Key)
	}
	out := make([]Column, 0, len(keys))
	for _, k := range keys {
		c, ok := byKey[k]
		if !ok {
			return nil, fmt.Errorf("compare: column %q: %w (known: %s)", k, ErrUnknown, strings.Join(known, ", "))
		}
		out = append(out, c)
	}
	return out, nil
}

// cell formats a row's value of a column, "-" where it has none.
func cell(c Column, row Row) string {
	v, ok := c.Value(row)
	if !ok {
		return "-"
	}
	return c.Format(v)
}

// WriteText writes the table aligned for a terminal, as
// examples/simulate prints it: a column "policy" and then cols.
func (r *Report) WriteText(w io.Writer, cols []Column) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"policy"}
	for _, c := range cols {
		head = append(head, c.Header)
	}
	if _, err := fmt.Fprintln(tw, strings.Join(head, "\t")+"\t"); err != nil {
		return err
	}
	for _, row := range r.Rows {
		cells := []string{row.Entrant}
		for _, c := range cols {
			cells = append(cells, cell(c, row))
		}
		if _, err := fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t"); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// WriteMarkdown writes the table in GitHub's Markdown, as the docs show
// it.
func (r *Report) WriteMarkdown(w io.Writer, cols []Column) error {
	head, rule := []string{"policy"}, []string{"---"}
	for _, c := range cols {
		head, rule = append(head, c.Header), append(rule, "---")
	}
	lines := []string{"| " + strings.Join(head, " | ") + " |", "| " + strings.Join(rule, " | ") + " |"}
	for _, row := range r.Rows {
		cells := []string{row.Entrant}
		for _, c := range cols {
			cells = append(cells, cell(c, row))
		}
		lines = append(lines, "| "+strings.Join(cells, " | ")+" |")
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}

// WriteCSV writes the table as CSV (RFC 4180): a header of keys, one
// line per entrant, values at full precision in the keys' units, empty
// where a row has none.
func (r *Report) WriteCSV(w io.Writer, cols []Column) error {
	cw := csv.NewWriter(w)
	head := []string{"entrant"}
	for _, c := range cols {
		head = append(head, c.Key)
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, row := range r.Rows {
		cells := []string{row.Entrant}
		for _, c := range cols {
			v, ok := c.Value(row)
			s := ""
			if ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
				s = strconv.FormatFloat(v, 'g', -1, 64)
			}
			cells = append(cells, s)
		}
		if err := cw.Write(cells); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// jsonReport is the JSON form of a report.
type jsonReport struct {
	Scenario string           `json:"scenario,omitempty"`
	Cluster  string           `json:"cluster"`
	GPUs     int              `json:"gpus"`
	From     int              `json:"from"`
	To       int              `json:"to"`
	Rows     []map[string]any `json:"rows"`
}

// WriteJSON writes the report as one JSON object: the scenario, its
// cluster and window, and per entrant an object of the columns' keys
// (values at full precision in the keys' units; a value a row does not
// have is left out).
func (r *Report) WriteJSON(w io.Writer, cols []Column) error {
	out := jsonReport{Scenario: r.Scenario, Cluster: r.Cluster, GPUs: r.GPUs, From: r.From, To: r.To, Rows: []map[string]any{}}
	for _, row := range r.Rows {
		m := map[string]any{"entrant": row.Entrant}
		for _, c := range cols {
			if v, ok := c.Value(row); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
				m[c.Key] = v
			}
		}
		out.Rows = append(out.Rows, m)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// Format names a table format: FormatText, FormatMarkdown, FormatCSV or
// FormatJSON. Its values are constants, safe for concurrent use.
type Format string

// The table formats.
const (
	FormatText     Format = "text"
	FormatMarkdown Format = "markdown"
	FormatCSV      Format = "csv"
	FormatJSON     Format = "json"
)

// Formats lists the formats, in the order a flag's help names them.
var Formats = []Format{FormatText, FormatMarkdown, FormatCSV, FormatJSON}

// Write writes the table in a format, with cols, or, when cols is empty,
// every reproducible column (Select()); an unknown format is an error
// wrapping ErrUnknown.
func (r *Report) Write(w io.Writer, f Format, cols []Column) error {
	if len(cols) == 0 {
		var err error
		if cols, err = r.Select(); err != nil {
			return err
		}
	}
	switch f {
	case FormatText:
		return r.WriteText(w, cols)
	case FormatMarkdown:
		return r.WriteMarkdown(w, cols)
	case FormatCSV:
		return r.WriteCSV(w, cols)
	case FormatJSON:
		return r.WriteJSON(w, cols)
	}
	return fmt.Errorf("compare: format %q: %w (known: text, markdown, csv, json)", f, ErrUnknown)
}
