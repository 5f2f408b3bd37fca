#!/usr/bin/env bash
# Builds the unmodified upstream syft CLI (github.com/anchore/syft: the container images' SBOMs) from the wrapper Go
# module beside this file (version pinned in its go.mod), once, into
# ${PERSISTENT_IPS_CACHE:-$HOME/.cache/persistent-ips}/syft/<key>/bin/syft (scripts/lib/go-tool.sh). Only
# `npm run release` needs it. The last line on stdout is the binary's path:  SYFT=$(scripts/syft/build.sh | tail -n1)
# Options:  --check  print the binary's path and exit 0 when it is built; exit 3 (no build) when not
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../lib/go-tool.sh
source "$here/../lib/go-tool.sh"
# go.mod names the Go release syft needs: an older local Go fetches that toolchain from the module proxy.
TOOL=syft MOD="$here" MODULE=github.com/anchore/syft PACKAGE=github.com/anchore/syft/cmd/syft TOOLCHAIN=auto
tool_ldflags() { echo "-X main.version=${1#v}"; }
tool_describe() { "$1" version | awk '$1 == "Version:" { print "syft " $2 }'; }
go_tool_main "$@"
