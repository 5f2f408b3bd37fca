#!/usr/bin/env bash
# CI's release step, after `npm test` (.ci/run, and scripts/ci-cold.sh --bare): the release artefacts into
# release/ci, then the image run without a container runtime (chroot) against a local control plane. Each under a time
# limit of its own, like every e2e file: nothing may hold CI until its 90 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
t=$(date +%s)
# syft (the image SBOMs) first, under a limit of its own: built from its Go module once per machine, minutes when cold.
timeout --kill-after=30 1800 scripts/syft/build.sh >/dev/null
timeout --kill-after=30 900 npm run release -- --out release/ci
timeout --kill-after=30 600 scripts/image/smoke.sh release/ci/persistent-ips-*.oci.tar release/ci/install.yaml
echo "ci: release + image smoke took $(( $(date +%s) - t )) s"
ls -l release/ci
