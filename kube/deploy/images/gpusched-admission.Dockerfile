# gpusched-admission: the round-based admission controller
# (kube/cmd/gpusched-admission). Build from the root of a clone (the kube
# module builds against the root module beside it):
#
#   docker build -f kube/deploy/images/gpusched-admission.Dockerfile \
#     -t gpusched-admission:dev .
#
# Two stages: the Go toolchain builds a static binary (no cgo), which runs
# alone on distroless's static image as its nonroot user (65532), so the
# Deployment's runAsNonRoot holds.
# Both base images are pinned by digest, not tag (a tag can be moved
# under you). The digests are the admin's to fill: this file cannot carry
# ones verified offline, and a build with the placeholders fails
# ("invalid reference format") rather than pull by tag. Look them up
# once (docker buildx imagetools inspect IMAGE:TAG, or crane digest
# IMAGE:TAG), check them as your registry policy says, and either edit
# the two lines below or pass them:
#
#   --build-arg GO_IMAGE=golang:1.26-bookworm@sha256:<digest> \
#   --build-arg RUN_IMAGE=gcr.io/distroless/static-debian12:nonroot@sha256:<digest>
#
# kube/deploy/images_test.go fails on a FROM without a digest.
ARG GO_IMAGE=golang:1.26-bookworm@sha256:PIN-THE-DIGEST
ARG RUN_IMAGE=gcr.io/distroless/static-debian12:nonroot@sha256:PIN-THE-DIGEST

FROM ${GO_IMAGE} AS build
WORKDIR /src
# The modules first: a change of code does not download them again.
COPY go.mod go.sum ./
COPY kube/go.mod kube/go.sum ./kube/
RUN cd kube && go mod download
COPY . .
RUN cd kube && CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w" \
      -o /out/gpusched-admission ./cmd/gpusched-admission

FROM ${RUN_IMAGE}
COPY --from=build /out/gpusched-admission /gpusched-admission
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/gpusched-admission"]
