// Command kube-scheduler is Kubernetes' own scheduler command, unmodified: the extender
// tests point its KubeSchedulerConfiguration at wasm-scheduler's extender.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
