#!/usr/bin/env bash
# Builds the programs the kube module's end-to-end tests run into
# kube/.cache/bin (git-ignored), or into $GPUSCHED_KUBE_BIN, skipping those
# already there (-f rebuilds them all):
#   etcd v3.7.3             from hack/etcd, a module of its own (etcd's server
#                           module carries replace directives, so it cannot
#                           be built from this module or with go install)
#   kube-apiserver v1.37.2  from this module (its go.sum pins everything)
#   kube-scheduler v1.37.2  the stock scheduler, for the throughput comparison
#   kwok v0.8.0             fake nodes and pod lifecycles for the scale tests
#                           (go install: its module has no replace directives)
# Everything comes from the Go module proxy; about 20 minutes on 2 cores
# from a cold Go build cache, seconds once cached. The tests build
# gpusched-scheduler themselves (it changes with the code).
set -euo pipefail
kube=$(cd "$(dirname "$0")/.." && pwd)
bin=${GPUSCHED_KUBE_BIN:-$kube/.cache/bin}
force=
if [ "${1:-}" = "-f" ]; then force=1; fi
mkdir -p "$bin"

build() { # name, module folder, package
  local name=$1 dir=$2 pkg=$3
  if [ -z "$force" ] && [ -x "$bin/$name" ]; then
    echo "$name: $bin/$name (already built)"
    return
  fi
  echo "$name: building $pkg"
  (cd "$dir" && go build -o "$bin/$name.tmp" "$pkg")
  mv "$bin/$name.tmp" "$bin/$name"
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
  GOBIN="$tmp" go install "$pkg"
  mv "$tmp/$name" "$bin/$name"
  rmdir "$tmp"
}

build etcd "$kube/hack/etcd" go.etcd.io/etcd/server/v3
build kube-apiserver "$kube" k8s.io/kubernetes/cmd/kube-apiserver
build kube-scheduler "$kube" k8s.io/kubernetes/cmd/kube-scheduler
goinstall kwok sigs.k8s.io/kwok/cmd/kwok@v0.8.0
"$bin/etcd" --version | sed -n 1p  # sed reads it all: head would end the pipe early (SIGPIPE, exit 141 under pipefail)
"$bin/kube-apiserver" --version
"$bin/kube-scheduler" --version
"$bin/kwok" --version
