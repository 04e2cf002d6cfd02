#!/usr/bin/env bash
# Installs what Strata's tests need beyond the Rust toolchain, only when it is missing, so that
# `make test` works on a fresh Debian machine:
#   - kubectl, through e2e/install-demo-tools.sh (all that `make demo` needs): any kubectl on the
#     PATH is used; otherwise Debian's `kubernetes-client`.
#   - Debian's kubectl 1.20 (package kubernetes-client, unpacked into target/tools/kubectl-1.20/,
#     not installed system-wide) so the API test server is also tested with an old kubectl that
#     validates client-side against the protobuf /openapi/v2.
#   - the real Cluster API core manager (../shared/tools/cluster-api/), unpacked into target/tools/capi/.
#   - the Python `kubernetes` client (PyPI), for the API test server's client-compatibility tests.
#   - etcd (Debian's `etcd-server`, /usr/bin/etcd): any etcd on the PATH is used; the API test
#     server's KUBEBUILDER_ASSETS launcher starts a real one in its tests.
#   - a real kube-apiserver (../shared/tools/kube-apiserver/kube-apiserver.xz, see its README) unpacked
#     into target/tools/kube/ next to a link to etcd: the KUBEBUILDER_ASSETS directory against which
#     `make test` runs the API test server's suite a second time and installs Strata's CRDs.
set -euo pipefail

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        echo "install-test-tools: need root to run: $*" >&2; return 1; fi
}

bash "$(dirname "$0")/install-demo-tools.sh"

legacy_dir="$(cd "$(dirname "$0")/.." && pwd)/target/tools/kubectl-1.20"
if [ ! -x "$legacy_dir/kubectl" ]; then
    echo "install-test-tools: unpacking Debian's kubectl 1.20 into $legacy_dir"
    work="$(mktemp -d)"
    as_root apt-get update -qq
    (cd "$work" && apt-get download -qq kubernetes-client 2>/dev/null && dpkg-deb -x kubernetes-client_*.deb root)
    mkdir -p "$legacy_dir"
    cp "$work/root/usr/bin/kubectl" "$legacy_dir/kubectl"
    rm -rf "$work"
fi
"$legacy_dir/kubectl" version --client 2>/dev/null | head -1 || true

if ! command -v etcd >/dev/null 2>&1; then
    echo "install-test-tools: installing Debian's etcd-server (etcd)"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq etcd-server >/dev/null
fi
etcd --version 2>/dev/null | head -1 || true

repo="$(cd "$(dirname "$0")/.." && pwd)"
kube_dir="$repo/target/tools/kube"
kube_xz="${KUBE_APISERVER_XZ:-$repo/../shared/tools/kube-apiserver/kube-apiserver.xz}"
# The binary's checksum (from the README beside the .xz): a half-written or stale unpack is redone.
kube_sha=1fa969db51c6e2c0e151be3cafe1c5374dd9f5fea5dc494ddc094454839896a5
if [ -f "$kube_xz" ]; then
    if ! echo "$kube_sha  $kube_dir/kube-apiserver" | sha256sum -c --status 2>/dev/null; then
        echo "install-test-tools: unpacking kube-apiserver into $kube_dir"
        mkdir -p "$kube_dir"
        xz -dc "$kube_xz" >"$kube_dir/kube-apiserver.tmp"
        echo "$kube_sha  $kube_dir/kube-apiserver.tmp" | sha256sum -c --status
        chmod +x "$kube_dir/kube-apiserver.tmp"
        mv "$kube_dir/kube-apiserver.tmp" "$kube_dir/kube-apiserver"
    fi
    ln -sf "$(command -v etcd)" "$kube_dir/etcd"
    "$kube_dir/kube-apiserver" --version 2>/dev/null | head -1 || true
else
    echo "install-test-tools: no kube-apiserver at $kube_xz; the real-server tests will fail" >&2
fi

# The real Cluster API core manager (../shared/tools/cluster-api/capi-manager.xz, see its README),
# for the suite that runs Strata under CAPI itself (e2e/tests/real_capi.rs).
capi_dir="$repo/target/tools/capi"
capi_xz="${CAPI_MANAGER_XZ:-$repo/../shared/tools/cluster-api/capi-manager.xz}"
capi_sha=00ab404073559fd70ae25bde396d75d21af6afed3668bbe107ff1181332dd207
if [ -f "$capi_xz" ]; then
    if ! echo "$capi_sha  $capi_dir/capi-manager" | sha256sum -c --status 2>/dev/null; then
        echo "install-test-tools: unpacking Cluster API's manager into $capi_dir"
        mkdir -p "$capi_dir"
        xz -dc "$capi_xz" >"$capi_dir/capi-manager.tmp"
        echo "$capi_sha  $capi_dir/capi-manager.tmp" | sha256sum -c --status
        chmod +x "$capi_dir/capi-manager.tmp"
        mv "$capi_dir/capi-manager.tmp" "$capi_dir/capi-manager"
    fi
else
    echo "install-test-tools: no Cluster API manager at $capi_xz; the real-CAPI tests will fail" >&2
fi

if ! python3 -c 'import kubernetes' >/dev/null 2>&1; then
    echo "install-test-tools: installing the Python kubernetes client"
    python3 -m pip install --quiet --disable-pip-version-check kubernetes
fi
python3 -c 'import kubernetes; print("python kubernetes client", kubernetes.__version__)'
