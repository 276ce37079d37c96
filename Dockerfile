# syntax=docker/dockerfile:1
# The agent image: built with the official Rust image, run on distroless with glibc (NVML is
# loaded with dlopen, from the libnvidia-ml.so.1 that the NVIDIA container toolkit mounts in),
# as a non-root user with nothing else in the image: no shell, no package manager.
#
#   docker build -t gpu-labeler:0.1.0 .
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# The PCI ID database (data/pci.ids) is embedded at build time; the build needs no network
# beyond crates.io.
RUN cargo build --release --locked --package gpu-labeler \
    && strip target/release/gpu-labeler

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/gpu-labeler /usr/bin/gpu-labeler
# 65534 (nobody), the user the DaemonSet runs it as.
USER 65534:65534
ENTRYPOINT ["/usr/bin/gpu-labeler"]
CMD ["run"]
