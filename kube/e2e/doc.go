// Package e2e holds gpusched's end-to-end tests on a real control plane:
// etcd and kube-apiserver on loopback (internal/kubetest), the
// gpusched-scheduler binary built from this module with the profile of
// deploy/scheduler-config.yaml, fake GPU nodes as API objects, and pods
// whose bindings a watcher checks as they happen. The tests skip, saying
// why, only when the control plane's binaries are missing and cannot be
// built (hack/e2e-binaries.sh).
package e2e
