package gpusched_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/allocation/lp"
	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/elastic"
	"github.com/gpusched/gpusched/gang"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/sim"
	"github.com/gpusched/gpusched/topology"
)

// words splits a message into its words of letters ("server", "gpu").
var words = regexp.MustCompile(`[A-Za-z]{2,}|[^A-Za-z\s]+`)

// TestErrorTexts checks a sample of the errors each package returns for
// bad input: one line each (a log line, an event, a CLI's last line), no
// word twice in a row, no package prefix twice in a row, and the kind not
// restated in other words ("unknown server: no such server").
func TestErrorTexts(t *testing.T) {
	ctx := context.Background()
	c, err := topology.ParseCompact("v100:8:4,k80:4:4", 4)
	if err != nil {
		t.Fatal(err)
	}
	st, err := cluster.New(c)
	if err != nil {
		t.Fatal(err)
	}
	s, err := scheduler.New(scheduler.Config{Policy: &allocation.MaxMinFairness{}, Cluster: c})
	if err != nil {
		t.Fatal(err)
	}
	spec := scheduler.JobSpec{GPUs: 1, Throughput: map[topology.GPUType]float64{topology.V100: 1}}
	if err := s.Submit("a", spec, 0); err != nil {
		t.Fatal(err)
	}
	many := &topology.Cluster{}
	for range 30 {
		srv := c.Servers[0]
		many.Servers = append(many.Servers, srv)
	}
	one := func(_ any, err error) error { return err }
	cases := []struct {
		name string
		err  error
		want string // the whole text, where it is pinned
	}{
		{"topology compact", one(topology.ParseCompact("v100:x", 4)), ""},
		{"topology duplicate type", one(topology.ParseCompact("v100:4,v100:4", 4)), ""},
		{"topology JSON", one(topology.ParseJSON([]byte(`{"servers":[{"id":"a","gpu_type":"v100","gpus":2, "links":[["X","NV1"],["NV2","X"]]}]}`))), ""},
		{"topology many problems", many.Validate(), ""},
		{"cluster remove", one(st.RemoveServer("nope")), `cluster: remove server "nope": unknown server`},
		{"cluster fail", one(st.FailServer("nope")), `cluster: fail server "nope": unknown server`},
		{"cluster add", one(st.AddServer(c.Servers[0])), `cluster: add server "v100-0": duplicate server: a server of this id exists`},
		{"cluster bind", st.Bind("a", []cluster.GPURef{{Server: 0, GPU: 99}}), ""},
		{"scheduler remove server", one(s.RemoveServer("nope")), `cluster: remove server "nope": unknown server`},
		{"scheduler fail GPUs", one(s.FailGPUs("nope", 0)), `cluster: lookup server "nope": unknown server`},
		{"scheduler duplicate", s.Submit("a", spec, 0), `scheduler: duplicate job: "a"`},
		{"scheduler bad spec", s.Submit("b", scheduler.JobSpec{GPUs: -1}, 0), ""},
		{"scheduler unknown", s.Remove("zz"), `scheduler: unknown job: "zz"`},
		{"scheduler restore", s.Restore([]byte("garbage")), ""},
		{"scheduler report", s.Report(scheduler.RoundReport{Start: 5}), `scheduler: report does not match the last round: the report is for the round at 5`},
		{"scheduler round", one(s.Round(ctx, -1)), ""},
		{"allocation problem", (&allocation.Problem{Types: []topology.GPUType{topology.V100}, Capacity: []int{4},
			Jobs: []allocation.Job{{ID: 0, ScaleFactor: 1, Throughput: []float64{1e300}}}}).Validate(), ""},
		{"allocation report", (&allocation.Rounds{}).Report(allocation.RoundReport{}), `allocation: invalid round report: no round has run`},
		{"allocation snapshot", (&allocation.Rounds{}).Restore([]byte("x")), ""},
		{"placement chooser", one(placement.GPUChooser{}.Choose(&c.Servers[0], []bool{true}, 2)), ""},
		{"gang decide", one(gang.FIFO{}.Decide(0, []int{4}, []gang.JobView{{ID: 1, ScaleFactor: 1, Throughput: []float64{1}, Type: -1},
			{ID: 1, ScaleFactor: 1, Throughput: []float64{1}, Type: -1}}, nil)), ""},
		{"gang group", func() error {
			co := &gang.Coscheduler{}
			if err := co.SetGroup("g", 3); err != nil {
				return err
			}
			return co.SetGroup("g", 2)
		}(), `gang: group declared with another size: "g" needs 3 members, declared again with 2`},
		{"elastic cluster", one(elastic.NewCluster(-1, 8)), ""},
		{"sim trace", one(sim.ReadGavelTrace(strings.NewReader("a\tb\n"), "x.trace")), ""},
		{"sim config", one(sim.Run(ctx, sim.Config{}, nil)), ""},
		{"sim pollux", one(sim.LoadPolluxApp(nil, "", "nope")), `sim: unknown application: "nope" is not one of Pollux's applications`},
		{"perfmodel job", one(gavel.Simulation().Throughput(perfmodel.JobKey{Model: "nope", BatchSize: 1, ScaleFactor: 1}, topology.V100)), ""},
		{"perfmodel table", one(perfmodel.ParseGavelJSON([]byte(`{"v100": {"x": 1}}`))), ""},
		{"learn config", one(learn.New(learn.Config{Window: -1})), `learn: Window: invalid configuration: -1 (want 1 to 86400)`},
		{"learn observe", func() error {
			l, err := learn.New(learn.Config{})
			if err != nil {
				return err
			}
			if err := l.Observe("a", learn.Observation{Type: topology.V100, GPUs: 1, Segment: 2, Steps: 100, Time: 10}); err != nil {
				return err
			}
			return l.Observe("a", learn.Observation{Type: topology.V100, GPUs: 1, Segment: 2, Steps: 90, Time: 20})
		}(), `learn: job "a": Steps: out of order: 90 after 100 in segment 2`},
		{"learn restore", func() error {
			l, err := learn.New(learn.Config{})
			if err != nil {
				return err
			}
			return l.Restore([]byte(`{"version":1,"types":["v100","v100"],"seq":0,"jobs":[]}`))
		}(), `learn: types[1]: malformed snapshot: v100 twice`},
		{"lp MPS", one(lp.ReadMPS(strings.NewReader("NAME x\nROWS\n N obj\nCOLUMNS\n x obj 1 zz 2\nENDATA\n"))), ""},
	}
	restated := [][2]string{{"unknown server", "no such server"}, {"unknown job", "no such job"}, {"unknown application", "unknown"}}
	for _, tc := range cases {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		msg := tc.err.Error()
		if strings.ContainsAny(msg, "\n\r") {
			t.Errorf("%s: error on several lines: %q", tc.name, msg)
		}
		ws := words.FindAllString(msg, -1)
		for i := 1; i < len(ws); i++ {
			if strings.EqualFold(ws[i-1], ws[i]) && len(ws[i]) > 1 && isWord(ws[i]) {
				t.Errorf("%s: %q written twice: %q", tc.name, ws[i], msg)
			}
		}
		if i := strings.Index(msg, ": "); i > 0 && strings.HasPrefix(msg[i+2:], msg[:i+2]) {
			t.Errorf("%s: prefix %q twice: %q", tc.name, msg[:i], msg)
		}
		for _, r := range restated {
			if k := strings.Index(msg, r[0]+": "); k >= 0 && strings.Contains(msg[k+len(r[0]):], r[1]) {
				t.Errorf("%s: %q restated as %q: %q", tc.name, r[0], r[1], msg)
			}
		}
		if tc.want != "" && msg != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, msg, tc.want)
		}
	}
}

func isWord(w string) bool {
	for _, r := range w {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') {
			return false
		}
	}
	return true
}
