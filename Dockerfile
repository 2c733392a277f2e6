# Builds the operator image: static binaries on a distroless, non-root base.
# /manager is the operator; /reloader runs beside memcached in the pods of a
# Memcached with TLS or authentication (cmd/reloader); /discovery serves the
# Memcached's membership beside memcached (cmd/discovery); /warm runs memcached
# in its container so that a restart keeps the cache (cmd/warm), copied there
# by the pods' init container.
FROM golang:1.27 AS builder
# The toolchain go.mod names, exactly, whatever Go the tag holds: the go
# command fetches it when the image has another (make vulncheck scans
# programs built with it).
ENV GOTOOLCHAIN=go1.27.3
WORKDIR /workspace
# Modules first, so that this layer is cached across source changes.
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY applyconfig/ applyconfig/
COPY cmd/ cmd/
COPY pkg/ pkg/
# One go command for the four: the packages they share compile once, and
# one program links while the others compile.
RUN CGO_ENABLED=0 go build -trimpath -o bin/ ./cmd ./cmd/reloader ./cmd/discovery ./cmd/warm && \
    mv bin/cmd bin/manager

FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY --from=builder /workspace/bin/manager /workspace/bin/reloader /workspace/bin/discovery /workspace/bin/warm ./
USER 65532:65532
ENTRYPOINT ["/manager"]
