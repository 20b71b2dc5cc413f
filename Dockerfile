# syntax=docker/dockerfile:1
# ferrosched's container image: `docker build -t ferrosched:0.1.0 .` from the repository root.
#
# Builder and runtime must share a Debian release (the binary links the builder's glibc):
# rust:*-slim-trixie + distroless cc-debian13. The Rust release is pinned to the patch: the
# dist build's hot-code order (crates/ferrosched/link/) fits one toolchain only.

FROM rust:1.95.0-slim-trixie AS build
WORKDIR /src
# The slim image ships gcc and libc6-dev, all `ring` (rustls' crypto) needs; no OpenSSL.
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --profile dist --locked -p ferrosched \
    && install -D -m 0755 target/dist/ferrosched /out/ferrosched

# distroless/cc: glibc, libgcc and CA certificates; no shell, no package manager.
FROM gcr.io/distroless/cc-debian13:nonroot
COPY --from=build /out/ferrosched /usr/local/bin/ferrosched
# The distroless `nonroot` user; manifests/deployment.yaml sets the same ids.
USER 65532:65532
# /healthz, /livez, /readyz and /metrics over HTTPS (--secure-port, as kube-scheduler).
EXPOSE 10259
ENTRYPOINT ["/usr/local/bin/ferrosched"]
CMD ["run"]
