# shellcheck shell=bash
# The `go build` flags of every binary the tests and the release build from source, one copy: sourced by
# e2e/harness/source-build.sh (control plane, KubeVirt, OVN-Kubernetes) and scripts/lib/go-tool.sh (helm, promtool,
# syft). Each build's cache key includes GO_BUILD_FLAGS_KEY, so a change here rebuilds what it affects.
#
# No DWARF from the compiler (-dwarf=false): every binary is linked with -s -w, which throws it away, so producing it
# was compile CPU spent for nothing. The binaries are the same.
#
# GO_BUILD_SERVER: binaries that run through every test (kube-apiserver, virt-controller, ...), optimised as released;
# also helm, built from the control plane's module to reuse its compiled packages, which it can only with these flags.
# GO_BUILD_TOOL: binaries that run for seconds (a rules check, an SBOM scan, OVN-K's cluster manager
# allocating a few addresses per test) but link hundreds of packages: their own packages compiled without optimisation
# or inlining (-N -l), a large part of a cold build's CPU off the tail of a cold `npm test` on 2 cores. The standard
# library keeps the server flags, so its compiled packages are shared by every build in the Go build cache.
#
# Every compile starts with a 1 GiB heap before its first garbage collection (-d=gcstart=1024; the compiler's own
# default is 128 MiB): Kubernetes' large generated packages otherwise collect many times on the way up, for compile
# CPU that a cold run on two cores waits for (docs/testing.md has the measurement). Setting GOGC or GOMEMLIMIT instead
# would turn the compiler's own starting heap off.
GO_BUILD_SERVER=(-trimpath -buildvcs=false '-gcflags=all=-dwarf=false -d=gcstart=1024')
GO_BUILD_TOOL=(-trimpath -buildvcs=false '-gcflags=all=-N -l -dwarf=false -d=gcstart=1024' '-gcflags=std=-dwarf=false -d=gcstart=1024')
GO_BUILD_FLAGS_KEY="server=${GO_BUILD_SERVER[*]} tool=${GO_BUILD_TOOL[*]}"
