#!/usr/bin/env bash
# Builds the unmodified upstream helm CLI from the control plane's wrapper Go module e2e/controlplane (version pinned
# in its go.mod, which says why helm is there) with the control plane's build flags, once, into
# ${PERSISTENT_IPS_CACHE:-$HOME/.cache/persistent-ips}/helm/<key>/bin/helm (scripts/lib/go-tool.sh). The last line on
# stdout is the binary's path:  HELM=$(scripts/helm/build.sh | tail -n1)
# Options:  --check  print the binary's path and exit 0 when it is built; exit 3 (no build) when not
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../lib/go-tool.sh
source "$here/../lib/go-tool.sh"
TOOL=helm MOD="$(cd "$here/../../e2e/controlplane" && pwd)" MODULE=helm.sh/helm/v3 PACKAGE=helm.sh/helm/v3/cmd/helm TOOLCHAIN=local
TOOL_BUILD_FLAGS=("${GO_BUILD_SERVER[@]}")
tool_ldflags() { echo "-X helm.sh/helm/v3/internal/version.version=$1 -X helm.sh/helm/v3/internal/version.gitTreeState=clean"; }
tool_describe() { "$1" version --short; }
go_tool_main "$@"
