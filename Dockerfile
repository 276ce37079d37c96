# The agent image: a static-enough binary on distroless (glibc for dlopen of libnvidia-ml.so.1,
# which the NVIDIA container toolkit mounts in). Unprivileged: runs as nobody (see deploy/).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p gpu-labeler

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/gpu-labeler /usr/bin/gpu-labeler
USER 65534:65534
ENTRYPOINT ["/usr/bin/gpu-labeler"]
CMD ["run"]
