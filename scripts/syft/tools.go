//go:build tools

// The module pins the syft release that scripts/syft/build.sh builds (the SBOM of the container image); it has no
// code of its own.
package tools

import _ "github.com/anchore/syft/cmd/syft"
