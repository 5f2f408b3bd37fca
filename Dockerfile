# The persistent-ips controller image: FROM scratch plus one prepared root filesystem, so that a build needs no
# base image and no RUN step (hence no container runtime). scripts/image/build.sh assembles the context (Node 24 from
# the `node` npm package, glibc/libstdc++ from Debian packages, dist/: one bundle, no node_modules) and builds this
# file with buildah; with a registry and Docker at hand, the same recipe:
#   scripts/image/build.sh --context-only build/image-context
#   docker build -f Dockerfile -t ghcr.io/persistent-ips/persistent-ips:dev \
#     --build-arg VERSION=dev --build-arg REVISION="$(git rev-parse HEAD)" build/image-context
FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
ARG CREATED=1970-01-01T00:00:00Z
# Files are owned by root and read-only to the process; it writes only to /tmp (an emptyDir in the Deployment,
# whose root filesystem is read-only).
COPY rootfs/ /
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
