#!/usr/bin/env bash
# Builds the programs the kube module's end-to-end tests run into
# kube/.cache/bin (git-ignored), or into $GPUSCHED_KUBE_BIN, skipping those
# already there (-f rebuilds them all):
#   etcd v3.7.3             from hack/etcd, a module of its own (etcd's server
#                           module carries replace directives, so it cannot
#                           be built from this module or with go install)
#   kube-apiserver v1.37.2  from this module (its go.sum pins everything),
#                           linked with its version (-ldflags): built plainly
#                           it reports v0.0.0-master, and Kueue's manager
#                           refuses such a server; an unstamped binary found
#                           there is rebuilt
#   kube-scheduler v1.37.2  the stock scheduler, for the throughput comparison
#   kube-controller-manager v1.37.2 and kubectl v1.37.2
#                           from hack/k8s, a module of its own (k8s.io/kubernetes
#                           with this module's staging replace block; this
#                           module's go.sum lacks the controller-manager's
#                           dependencies): the job controller for the Kueue
#                           tests, kubectl to apply Kueue's CRDs. Its go.mod
#                           selects every module this one does at the same
#                           version (kubetest's TestBuildGraphsAgree), so the
#                           packages kube-apiserver compiled are reused: 109 s
#                           for kube-controller-manager after them, not 478
#   kueue v0.17.0           Kueue's manager, go install from its own module
#                           (no replace directives; its k8s.io v0.35 stays out
#                           of our go.mod), with its CRDs and webhook
#                           manifests copied from the module into
#                           kueue-v0.17.0/ beside it
#   kwok v0.8.0             fake nodes and pod lifecycles for the scale tests
#                           (go install: its module has no replace directives)
# Everything comes from the Go module proxy. On 2 cores from a cold Go build
# cache: about 20 minutes for etcd, kube-apiserver and kube-scheduler, about
# 6 minutes for kube-controller-manager and kubectl, up to 14 for Kueue and 8
# for kwok (measured under load: docs/kueue.md, docs/operations.md); seconds
# once cached. Each binary is built to NAME.tmp (or a folder of its own) and
# moved into place, so a shared folder never holds half a binary. The tests
# build gpusched-scheduler themselves (it changes with the code).
set -euo pipefail
kube=$(cd "$(dirname "$0")/.." && pwd)
bin=${GPUSCHED_KUBE_BIN:-$kube/.cache/bin}
force=
if [ "${1:-}" = "-f" ]; then force=1; fi
mkdir -p "$bin"

k8s_version=v1.37.2
kueue_version=v0.17.0
# The version k8s.io/component-base/version reports (what `kubectl version`
# and Kueue's server version fetcher read).
version_ldflags="-X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean"

# stamped NAME: the binary reports $k8s_version.
stamped() {
  "$bin/$1" --version 2>/dev/null | grep -q "$k8s_version"
}

build() { # name, module folder, package, [ldflags], [check]
  local name=$1 dir=$2 pkg=$3 ldflags=${4:-} check=${5:-}
  if [ -z "$force" ] && [ -x "$bin/$name" ] && { [ -z "$check" ] || "$check" "$name"; }; then
    echo "$name: $bin/$name (already built)"
    return
  fi
  echo "$name: building $pkg"
  local start=$SECONDS
  (cd "$dir" && go build -ldflags "$ldflags" -o "$bin/$name.tmp" "$pkg")
  mv "$bin/$name.tmp" "$bin/$name"
  echo "$name: built in $((SECONDS - start)) s"
}

# kueue: go install into a folder of its own under $bin (same file system,
# so the final mv is atomic), and Kueue's CRDs and webhook manifests from
# the module it was built from.
build_kueue() {
  local cfg=$bin/kueue-$kueue_version
  if [ -z "$force" ] && [ -x "$bin/kueue" ] && [ -d "$cfg/crd" ] && [ -f "$cfg/webhook/manifests.yaml" ]; then
    echo "kueue: $bin/kueue (already built)"
    return
  fi
  echo "kueue: building sigs.k8s.io/kueue/cmd/kueue@$kueue_version"
  local start=$SECONDS tmp
  tmp=$(mktemp -d "$bin/.kueue.XXXXXX")
  # Outside any module (its own go.mod decides), without our GOFLAGS.
  (cd "$tmp" && GOFLAGS= GOBIN="$tmp" go install "sigs.k8s.io/kueue/cmd/kueue@$kueue_version")
  local mod
  mod=$(cd "$tmp" && GOFLAGS= go mod download -json "sigs.k8s.io/kueue@$kueue_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  if [ -z "$mod" ] || [ ! -d "$mod/config/components/crd/bases" ]; then
    echo "kueue: cannot find the module's config/components/crd/bases (go mod download said: ${mod:-nothing})" >&2
    rm -rf "$tmp"
    return 1
  fi
  mkdir -p "$tmp/cfg/crd" "$tmp/cfg/webhook"
  cp "$mod"/config/components/crd/bases/*.yaml "$tmp/cfg/crd/"
  cp "$mod/config/components/webhook/manifests.yaml" "$tmp/cfg/webhook/"
  cp "$mod/LICENSE" "$tmp/cfg/LICENSE"
  chmod -R u+w "$tmp/cfg"
  rm -rf "$cfg.old"
  if [ -d "$cfg" ]; then mv "$cfg" "$cfg.old"; fi
  mv "$tmp/cfg" "$cfg"
  rm -rf "$cfg.old"
  mv "$tmp/kueue" "$bin/kueue"
  rm -rf "$tmp"
  echo "kueue: built in $((SECONDS - start)) s"
}

# goinstall name, module@version: go install into a folder of its own, then
# an atomic move (the folder may be shared).
goinstall() {
  local name=$1 pkg=$2
  if [ -z "$force" ] && [ -x "$bin/$name" ]; then
    echo "$name: $bin/$name (already built)"
    return
  fi
  echo "$name: installing $pkg"
  local tmp
  tmp=$(mktemp -d "$bin/.$name.XXXXXX")
  (cd "$tmp" && GOFLAGS= GOBIN="$tmp" go install "$pkg")
  mv "$tmp/$name" "$bin/$name"
  rmdir "$tmp"
}

build etcd "$kube/hack/etcd" go.etcd.io/etcd/server/v3
build kube-apiserver "$kube" k8s.io/kubernetes/cmd/kube-apiserver "$version_ldflags" stamped
build kube-scheduler "$kube" k8s.io/kubernetes/cmd/kube-scheduler
build kube-controller-manager "$kube/hack/k8s" k8s.io/kubernetes/cmd/kube-controller-manager "$version_ldflags" stamped
build kubectl "$kube/hack/k8s" k8s.io/kubernetes/cmd/kubectl "$version_ldflags"
build_kueue
goinstall kwok sigs.k8s.io/kwok/cmd/kwok@v0.8.0
"$bin/etcd" --version | sed -n 1p  # sed reads it all: head would end the pipe early (SIGPIPE, exit 141 under pipefail)
"$bin/kube-apiserver" --version
"$bin/kube-scheduler" --version
"$bin/kube-controller-manager" --version
"$bin/kubectl" version --client | sed -n 1p
"$bin/kwok" --version
echo "kueue $kueue_version: $bin/kueue, its CRDs and webhooks in $bin/kueue-$kueue_version"
