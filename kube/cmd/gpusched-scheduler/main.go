// Command gpusched-scheduler is kube-scheduler with gpusched's plugin
// (package gpusched) registered as GPUSched; enable it with a
// KubeSchedulerConfiguration profile such as deploy/scheduler-config.yaml.
// It takes every flag kube-scheduler takes.
package main

import (
	"os"

	"github.com/gpusched/gpusched/kube/gpusched"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	cmd := app.NewSchedulerCommand(app.WithPlugin(gpusched.Name, gpusched.New))
	os.Exit(cli.Run(cmd))
}
