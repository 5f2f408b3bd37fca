#!/usr/bin/env bash
# Renders every kustomization under manifests/ and checks what the renders must (and must not) contain. Given a
# kubeconfig, also sends each render to the API server as a server-side dry run (`kubectl apply --dry-run=server`):
# schema, defaulting, admission (Pod Security included) and webhook-configuration validation, without persisting
# anything.
#
#   manifests/verify.sh                           # offline: renders and static checks
#   manifests/verify.sh --kubeconfig DIR/kubeconfig  # plus server-side dry runs (e.g. npm run cluster:up -- --dir DIR)
#
# Namespaces: a dry run does not create the namespaces the other objects of the same render live in, so any
# namespace a render declares that the cluster lacks is created for real (from the render, labels included, so that
# Pod Security admission judges the Deployment as it would on install) and deleted again on exit. Use a test
# cluster. Objects whose kind the cluster does not serve (cert-manager's without cert-manager, KubeVirt's without
# KubeVirt) are reported as skipped, not failed; --strict turns skips into failures.
#
# Exit status: 0 when every check passed. The last line reads "N passed, N failed, N skipped".
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
kubectl="${KUBECTL:-kubectl}"
kubeconfig=""
strict=0

while [ $# -gt 0 ]; do
  case "$1" in
    --kubeconfig) kubeconfig="${2:?--kubeconfig needs a path}"; shift 2 ;;
    --kubeconfig=*) kubeconfig="${1#--kubeconfig=}"; shift ;;
    --strict) strict=1; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

# Every kustomization, bases included, so that a broken base is named as such.
overlays=(rbac controller webhook ipamclaim-crd default with-crds cert-manager examples prometheus claim-reference-policy)
# The ones a user applies; only these are dry-run (the bases are parts of them). claim-reference-policy is a
# kustomize Component, applied on its own or listed under an overlay's components.
installs=(default with-crds ipamclaim-crd cert-manager examples claim-reference-policy)

passed=0 failed=0 skipped=0
pass() { passed=$((passed + 1)); printf 'ok    %s\n' "$*"; }
fail() { failed=$((failed + 1)); printf 'FAIL  %s\n' "$*"; }
skip() { skipped=$((skipped + 1)); printf 'skip  %s\n' "$*"; }

work="$(mktemp -d)"
created_namespaces=()
cleanup() {
  if [ ${#created_namespaces[@]} -gt 0 ]; then
    "$kubectl" --kubeconfig "$kubeconfig" delete namespace "${created_namespaces[@]}" --wait=false >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# docs FILE KIND: prints the YAML documents of FILE whose top-level kind is KIND (kustomize output: documents
# separated by "---", top-level keys at column 0).
docs() {
  awk -v kind="$2" '
    function flush() { if (doc != "" && match_) printf "%s---\n", doc; doc = ""; match_ = 0 }
    /^---$/ { flush(); next }
    { doc = doc $0 "\n"; if ($0 == "kind: " kind) match_ = 1 }
    END { flush() }' "$1"
}
# names FILE KIND: metadata.name of each document of that kind.
names() { docs "$1" "$2" | awk '/^metadata:/ { m = 1; next } m && /^  name: / { print $2; m = 0 } /^[^ ]/ { m = 0 }'; }
count_kind() { grep -c "^kind: $2\$" "$1"; }

# --- render -----------------------------------------------------------------------------------------------------
for o in "${overlays[@]}"; do
  if "$kubectl" kustomize "$here/$o" >"$work/$o.yaml" 2>"$work/$o.err"; then
    pass "render $o ($(grep -c '^kind: ' "$work/$o.yaml") objects)"
  else
    fail "render $o: $(tr '\n' ' ' <"$work/$o.err")"
    rm -f "$work/$o.yaml"
  fi
done

rendered() { [ -s "$work/$1.yaml" ]; }

# --- static checks ----------------------------------------------------------------------------------------------
if rendered default; then
  n="$(count_kind "$work/default.yaml" CustomResourceDefinition)"
  [ "$n" = 0 ] && pass "default installs no CRD" || fail "default installs $n CRD(s); CRDs belong to with-crds"
  absent=""
  for kind in Namespace ServiceAccount ClusterRole ClusterRoleBinding Role RoleBinding Deployment Service \
    MutatingWebhookConfiguration PodDisruptionBudget NetworkPolicy; do
    [ "$(count_kind "$work/default.yaml" "$kind")" -ge 1 ] || absent="$absent $kind"
  done
  [ -z "$absent" ] && pass "default has every kind of the standard install" || fail "default lacks:$absent"
  # No wildcard anywhere in RBAC rules (apiGroups, resources, verbs, resourceNames).
  { docs "$work/default.yaml" ClusterRole; docs "$work/default.yaml" Role; } >"$work/rbac.yaml"
  if grep -nE "(- ['\"]?\*['\"]?$|\[.*['\"]\*['\"].*\])" "$work/rbac.yaml"; then
    fail "RBAC rules contain a wildcard"
  else
    pass "RBAC rules contain no wildcard"
  fi
  # pods: list and patch only (a running launcher pod pointed at a claim made after it started), never more.
  pod_verbs=$(awk '/^  - pods$/{p=1;next} p&&/^  verbs:/{v=1;next} v&&/^  - /{print $2;next} {p=0;v=0}' "$work/rbac.yaml" | sort -u | tr '\n' ' ')
  if [ -n "$pod_verbs" ] && [ "$pod_verbs" != "list patch " ]; then fail "RBAC grants more than list and patch on pods: $pod_verbs"; else pass "RBAC grants at most list and patch on pods (${pod_verbs:-none})"; fi
fi

if rendered default; then
  # Metrics are served over HTTPS with the cluster checking each scrape's token, and the controller may ask it.
  if grep -q -- '--metrics-secure=false' "$work/default.yaml"; then
    fail "default serves /metrics over plain HTTP (--metrics-secure=false)"
  elif names "$work/default.yaml" ClusterRole | grep -qx persistent-ips-metrics-auth \
    && names "$work/default.yaml" ClusterRole | grep -qx persistent-ips-metrics-reader; then
    pass "default serves secure metrics (TokenReview/SubjectAccessReview RBAC, metrics-reader ClusterRole)"
  else
    fail "default lacks ClusterRole persistent-ips-metrics-auth or persistent-ips-metrics-reader"
  fi
fi

if rendered prometheus; then
  if [ "$(count_kind "$work/prometheus.yaml" ServiceMonitor)" = 1 ] && [ "$(count_kind "$work/prometheus.yaml" PrometheusRule)" = 1 ] \
    && grep -q 'grafana_dashboard: "1"' "$work/prometheus.yaml"; then
    pass "prometheus has a ServiceMonitor, a PrometheusRule and the Grafana dashboard ConfigMap"
  else
    fail "prometheus must render one ServiceMonitor, one PrometheusRule and the dashboard ConfigMap"
  fi
fi

if rendered with-crds; then
  crds="$(names "$work/with-crds.yaml" CustomResourceDefinition | tr '\n' ' ')"
  if [ "$crds" = "ipamclaims.k8s.cni.cncf.io " ]; then
    pass "with-crds adds exactly the IPAMClaim CRD"
  else
    fail "with-crds must add only ipamclaims.k8s.cni.cncf.io, has: ${crds:-none}"
  fi
fi

# The claim-reference policy is optional: only its own Component has it, and it refuses (Deny, failurePolicy Fail).
if rendered claim-reference-policy; then
  f="$work/claim-reference-policy.yaml"
  kinds="$(grep '^kind: ' "$f" | sort | tr '\n' ' ')"
  if [ "$kinds" != "kind: ValidatingAdmissionPolicy kind: ValidatingAdmissionPolicyBinding " ]; then
    fail "claim-reference-policy must render one ValidatingAdmissionPolicy and its binding, has: $kinds"
  elif ! grep -q '^  failurePolicy: Fail$' "$f" || ! grep -qx '  - Deny' "$f" || grep -q '^  - \(Warn\|Audit\)$' "$f"; then
    fail "claim-reference-policy must be failurePolicy Fail with validationActions [Deny]"
  else
    pass "claim-reference-policy: one ValidatingAdmissionPolicy (failurePolicy Fail) and its binding (Deny)"
  fi
fi
leaked=""
for o in "${overlays[@]}"; do
  [ "$o" = claim-reference-policy ] && continue
  rendered "$o" || continue
  grep -q '^kind: ValidatingAdmissionPolicy' "$work/$o.yaml" && leaked="$leaked $o"
done
[ -z "$leaked" ] && pass "no other kustomization installs the claim-reference policy" \
  || fail "the claim-reference policy is optional, but these install it:$leaked"

# The IPAMClaim CRD is the only one shipped (KubeVirt's and the NAD CRD belong to KubeVirt and Multus; the tests'
# stand-ins live in e2e/crds), and only through the overlays meant for it.
foreign=""
for o in "${overlays[@]}"; do
  rendered "$o" || continue
  for crd in $(names "$work/$o.yaml" CustomResourceDefinition); do
    case "$o:$crd" in
      ipamclaim-crd:ipamclaims.k8s.cni.cncf.io | with-crds:ipamclaims.k8s.cni.cncf.io) ;;
      *) foreign="$foreign $o:$crd" ;;
    esac
  done
done
[ -z "$foreign" ] && pass "no CRD besides IPAMClaim's, and that one only in ipamclaim-crd and with-crds" \
  || fail "CRDs where none belong:$foreign"

if rendered cert-manager; then
  ok=1
  grep -q -- '--webhook-cert-provisioning=external' "$work/cert-manager.yaml" || { ok=0; fail "cert-manager: controller not told --webhook-cert-provisioning=external"; }
  grep -q 'cert-manager.io/inject-ca-from: persistent-ips-system/persistent-ips-webhook' "$work/cert-manager.yaml" || { ok=0; fail "cert-manager: inject-ca-from annotation missing or wrong"; }
  grep -q 'secretName: persistent-ips-webhook-tls' "$work/cert-manager.yaml" || { ok=0; fail "cert-manager: serving certificate Secret not mounted"; }
  if names "$work/cert-manager.yaml" Role | grep -qx persistent-ips-webhook-cert \
    || names "$work/cert-manager.yaml" ClusterRole | grep -qx persistent-ips-webhook-cabundle; then
    ok=0; fail "cert-manager: self-provisioning RBAC should be removed"
  fi
  [ $ok = 1 ] && pass "cert-manager overlay wires cert-manager and drops self-provisioning RBAC"
fi

# --- server-side dry run ----------------------------------------------------------------------------------------
if [ -z "$kubeconfig" ]; then
  skip "server-side dry run (no --kubeconfig given)"
else
  k() { "$kubectl" --kubeconfig "$kubeconfig" "$@"; }
  if ! k get --raw /readyz >/dev/null 2>&1; then
    fail "API server behind $kubeconfig is not ready"
  else
    pass "API server ready ($(k get --raw /version 2>/dev/null | awk -F'"' '/gitVersion/ { print $4; exit }'))"
    for o in "${installs[@]}"; do
      rendered "$o" || continue
      f="$work/$o.yaml"
      # Namespaces the render declares and the cluster lacks: create them for real (see the header).
      for ns in $(names "$f" Namespace); do
        if ! k get namespace "$ns" >/dev/null 2>&1; then
          if docs "$f" Namespace | awk -v ns="$ns" 'BEGIN{RS="---\n"} $0 ~ "\n  name: " ns "\n" {printf "%s", $0}' | k create --save-config -f - >/dev/null 2>"$work/ns.err"; then
            created_namespaces+=("$ns")
          else
            fail "dry-run $o: cannot create namespace $ns: $(tr '\n' ' ' <"$work/ns.err")"
          fi
        fi
      done
      k apply --dry-run=server -f "$f" >"$work/$o.out" 2>&1
      total="$(grep -c '^kind: ' "$f")"
      okn="$(grep -c '(server dry run)' "$work/$o.out")"
      missing="$(grep -o 'no matches for kind "[^"]*" in version "[^"]*"' "$work/$o.out" | sort -u)"
      nmissing="$(grep -c 'no matches for kind' "$work/$o.out")"
      # Everything else that kubectl printed: errors and warnings (Pod Security "would violate" included). Not a
      # problem: kubectl's note that an object created by other means (e.g. a CRD a test cluster pre-installs)
      # lacks its last-applied annotation.
      problems="$(grep -v '(server dry run)' "$work/$o.out" | grep -v 'no matches for kind' \
        | grep -v '^ensure CRDs are installed first' \
        | grep -v 'is missing the kubectl.kubernetes.io/last-applied-configuration annotation' | grep -v '^$' || true)"
      if [ -n "$problems" ]; then
        fail "dry-run $o: $okn/$total accepted; problems:"
        printf '        %s\n' "$problems"
      elif [ "$okn" -ne $((total - nmissing)) ]; then
        fail "dry-run $o: only $okn of $((total - nmissing)) objects accepted"
        sed 's/^/        /' "$work/$o.out"
      else
        pass "dry-run $o: $okn/$total objects accepted by the API server"
      fi
      if [ "$nmissing" -gt 0 ]; then
        msg="dry-run $o: $nmissing object(s) of kinds the cluster does not serve: $(printf '%s' "$missing" | sed 's/no matches for kind //; s/ in version /@/' | tr '\n' ' ')"
        if [ $strict = 1 ]; then fail "$msg"; else skip "$msg"; fi
      fi
    done
  fi
fi

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
