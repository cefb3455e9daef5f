# syntax=docker/dockerfile:1
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
ARG GO_IMAGE=golang:1.26-bookworm
ARG RUN_IMAGE=gcr.io/distroless/static-debian12:nonroot

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
