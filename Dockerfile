# syntax=docker/dockerfile:1
# hetsched's container image: a static binary on a distroless base (no
# shell, no package manager), run as the non-root user 65532. Without
# Docker, tools/image assembles the same image from static binaries (the
# README's "Container image"; TestImage reads that one back).
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=v0.3.0 --build-arg REVISION=$(git rev-parse HEAD) -t REGISTRY/hetsched:v0.3.0 --push .
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -o /out/hetsched ./cmd/hetsched

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="hetsched" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION" \
      org.opencontainers.image.source="https://github.com/hetsched/hetsched" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/hetsched /usr/local/bin/hetsched
USER 65532:65532
WORKDIR /home/nonroot
EXPOSE 7070
ENTRYPOINT ["/usr/local/bin/hetsched"]
CMD ["--help"]
