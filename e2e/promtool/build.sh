#!/usr/bin/env bash
# Builds the unmodified upstream promtool (github.com/prometheus/prometheus/cmd/promtool) from the wrapper Go module in
# this directory (version pinned in its go.mod), once, into
# ${PERSISTENT_IPS_CACHE:-$HOME/.cache/persistent-ips}/promtool/<key>/bin/promtool (scripts/lib/go-tool.sh). The last
# line on stdout is the binary's path. e2e/operability/prometheus.test.ts checks manifests/prometheus with it.
# Options:  --check  print the binary's path and exit 0 when it is built; exit 3 (no build) when not
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../../scripts/lib/go-tool.sh
source "$here/../../scripts/lib/go-tool.sh"
TOOL=promtool MOD="$here" MODULE=github.com/prometheus/prometheus PACKAGE=github.com/prometheus/prometheus/cmd/promtool TOOLCHAIN=local
# Prometheus 3.x is published as module version v0.3MM.P: v0.308.1 is Prometheus 3.8.1.
tool_ldflags() {
  [[ $1 =~ ^v0\.([0-9])([0-9]{2})\.([0-9]+)$ ]] || { echo "cannot read the Prometheus version from $1" >&2; exit 1; }
  echo "-X github.com/prometheus/common/version.Version=${BASH_REMATCH[1]}.$((10#${BASH_REMATCH[2]})).${BASH_REMATCH[3]} -X github.com/prometheus/common/version.Branch=$1"
}
tool_describe() { "$1" --version 2>&1 | head -n1; }
go_tool_main "$@"
