# syntax=docker/dockerfile:1
# flakestream as a container image: a static binary (no cgo) on distroless,
# running as a non-root user. docker-compose.yml builds it for the worker and
# the audit consumer:
#
#   docker build -t flakestream:local .
#   docker run --rm flakestream:local layout
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# The commit --version shows: the build context may hold no .git to stamp
# it from (docker build --build-arg COMMIT=$(git rev-parse HEAD) .).
ARG COMMIT=
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
	CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/flakestream/flakestream/internal/cli.commit=${COMMIT}" -o /out/flakestream .

# distroless/static has CA certificates (Kafka TLS, rediss://) and tzdata,
# and no shell.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/flakestream /usr/local/bin/flakestream
USER nonroot:nonroot
# run serves /metrics, /healthz, /readyz on 9464; audit on 9465.
EXPOSE 9464 9465
ENTRYPOINT ["/usr/local/bin/flakestream"]
CMD ["--help"]
