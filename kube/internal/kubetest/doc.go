// Package kubetest runs a real Kubernetes control plane for end-to-end
// tests: etcd and kube-apiserver started on free loopback ports from binaries
// built from the Go module proxy (hack/e2e-binaries.sh caches them in
// .cache/bin; GPUSCHED_KUBE_BIN names another folder), processes stopped by
// their pid, the default ServiceAccount created (no controller-manager runs),
// and fake GPU nodes as plain API objects that carry GPU feature discovery's
// labels, capacity and a Ready condition. Nothing runs the pods: binding is
// the end of a scheduler's work, which is what these tests check.
//
// It is a test helper: its functions take a context and return errors, and
// RequireBinaries skips a test (saying why) only when the binaries are
// missing and cannot be built.
package kubetest
