// Package deploy holds gpusched's Kubernetes manifests (the YAML files
// of this folder, applied with kubectl), the images' Dockerfiles
// (images/) and a Grafana dashboard of its metrics (dashboards/), which
// the package embeds for tools that install it (Dashboard) and for the
// tests that check it against the metrics the code registers.
package deploy

import (
	_ "embed" // the dashboard
	"encoding/json"
	"errors"
	"fmt"
)

// Dashboard is the Grafana dashboard (JSON model) of dashboards/gpusched.json.
//
//go:embed dashboards/gpusched.json
var Dashboard []byte

// DashboardQueries returns the PromQL expressions of the dashboard's
// panels, in order.
func DashboardQueries() ([]string, error) {
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(Dashboard, &d); err != nil {
		return nil, fmt.Errorf("deploy: dashboard: %w", err)
	}
	if d.UID == "" {
		return nil, errors.New("deploy: dashboard without a uid")
	}
	var out []string
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			return nil, fmt.Errorf("deploy: dashboard panel %q has no query", p.Title)
		}
		for _, t := range p.Targets {
			if t.Expr == "" {
				return nil, fmt.Errorf("deploy: dashboard panel %q has an empty query", p.Title)
			}
			out = append(out, t.Expr)
		}
	}
	return out, nil
}
