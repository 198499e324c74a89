# fencer's container image: a static binary (CGO_ENABLED=0) on an empty base.
#
#   podman build -t fencer .        (or docker build)
#   podman run --rm fencer version
#
# The image runs `fencer serve` as user 65532 with its state in
# /var/lib/fencer (mount a volume there); set flags by their FENCER_*
# environment variables or as arguments. deploy/kubernetes uses it.
FROM docker.io/library/golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/usr/local/bin/fencer ./cmd/fencer \
 && mkdir -p /out/var/lib/fencer /out/tmp \
 && chmod 1777 /out/tmp \
 && chown 65532:65532 /out/var/lib/fencer \
 && chmod 700 /out/var/lib/fencer

FROM scratch
COPY --from=build /out/ /
USER 65532:65532
ENV FENCER_DATA_DIR=/var/lib/fencer \
    FENCER_HTTP_ADDR=0.0.0.0:7001
EXPOSE 7001 8001
VOLUME /var/lib/fencer
ENTRYPOINT ["/usr/local/bin/fencer"]
CMD ["serve"]
