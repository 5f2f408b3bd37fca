# The persistent-ips controller image: FROM scratch plus one prepared root filesystem per architecture, so that a
# build needs no base image and no RUN step (hence no container runtime, and no emulation for another architecture).
# scripts/image/build.sh assembles the context (rootfs-amd64/, rootfs-arm64/: Node 24 from the npm package
# node-linux-<arch>, glibc/libstdc++ from Debian's packages for that architecture, dist/: one bundle, no node_modules)
# and builds this file with buildah once per platform; with a registry and Docker at hand, the same recipe:
#   scripts/image/build.sh --context-only build/image-context
#   docker buildx build --platform linux/amd64,linux/arm64 -f Dockerfile -t ghcr.io/persistent-ips/persistent-ips:dev \
#     --build-arg VERSION=dev --build-arg REVISION="$(git rev-parse HEAD)" build/image-context
FROM scratch
# Set by the builder from --platform (buildah, docker buildx).
ARG TARGETARCH
ARG VERSION=dev
ARG REVISION=unknown
ARG CREATED=1970-01-01T00:00:00Z
# Files are owned by root and read-only to the process; it writes only to /tmp (an emptyDir in the Deployment,
# whose root filesystem is read-only).
COPY rootfs-${TARGETARCH}/ /
LABEL org.opencontainers.image.title="persistent-ips" \
      org.opencontainers.image.description="Stable IP addresses for KubeVirt VMs on secondary networks, through IPAMClaims" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="https://github.com/persistent-ips/persistent-ips" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV NODE_ENV=production \
    PATH=/usr/local/bin
WORKDIR /app
# 65532 is the conventional "nonroot" uid (in the image's /etc/passwd); numeric so that Kubernetes can verify
# runAsNonRoot.
USER 65532:65532
# metrics (HTTPS), health probes, admission webhook (HTTPS): the Deployment's container ports
EXPOSE 8443 8081 9443
ENTRYPOINT ["/usr/local/bin/node", "/app/dist/cli/main.js"]
CMD ["run"]
