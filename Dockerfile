# syntax=docker/dockerfile:1
# persistent-ips controller image.
#   docker build -t ghcr.io/persistent-ips/persistent-ips:dev .
# Stages: build (TypeScript -> dist/), deps (production node_modules only), runtime.

# --- build: all dependencies, compile --------------------------------------------------------------------------
FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# Install scripts stay on here: the `node` devDependency (the project's pinned Node 24 for npm scripts) fetches its
# platform binary in one, and `npm run build` runs tsc under it.
RUN npm ci
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# --- deps: production dependencies only ------------------------------------------------------------------------
# No devDependencies (typescript, @types/*, the `node` package, test tools), and no install scripts: none of the
# production dependencies has one. The runtime uses the base image's Node 24, not the `node` devDependency.
FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts && npm cache clean --force

# --- runtime ---------------------------------------------------------------------------------------------------
FROM node:24-bookworm-slim
LABEL org.opencontainers.image.title="persistent-ips" \
      org.opencontainers.image.description="Stable IP addresses for KubeVirt VMs on secondary networks, through IPAMClaims" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV NODE_ENV=production
WORKDIR /app
# package.json is needed at run time: "type": "module" makes dist/**/*.js ES modules.
COPY --from=deps /app/package.json ./package.json
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
# Files stay owned by root and read-only to the process; it writes only to /tmp (an emptyDir in the Deployment,
# whose root filesystem is read-only). 65532 is the conventional "nonroot" uid; numeric so that Kubernetes can
# verify runAsNonRoot.
USER 65532:65532
# metrics, health probes, admission webhook (HTTPS)
EXPOSE 8080 8081 9443
ENTRYPOINT ["node", "dist/cli/main.js"]
CMD ["run"]
