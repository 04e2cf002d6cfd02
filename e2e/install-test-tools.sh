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
#     `make test` runs the API test server's suite a second time and installs Strata's CRDs, with
#     the shared kube-controller-manager beside it for the tests that need a cluster's garbage
#     collector and namespace controller.
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

# unpack XZ DIR NAME SHA256: the binary NAME of XZ into DIR, unless DIR/NAME already has the
# checksum (from the README beside the .xz): a half-written or stale unpack is redone. Returns 1
# (with a warning) when XZ is missing, so that the caller skips what needs the binary.
unpack() {
    local xz="$1" dir="$2" name="$3" sha="$4"
    if [ ! -f "$xz" ]; then
        echo "install-test-tools: no $name at $xz; the tests that run it will fail" >&2
        return 1
    fi
    if ! echo "$sha  $dir/$name" | sha256sum -c --status 2>/dev/null; then
        echo "install-test-tools: unpacking $name into $dir"
        mkdir -p "$dir"
        # Explicit exits: `set -e` does not hold inside a function called as an `if` condition.
        xz -dc "$xz" >"$dir/$name.tmp" || exit 1
        if ! echo "$sha  $dir/$name.tmp" | sha256sum -c --status; then
            echo "install-test-tools: $xz does not unpack to the $name its README names" >&2
            exit 1
        fi
        chmod +x "$dir/$name.tmp"
        mv "$dir/$name.tmp" "$dir/$name"
    fi
}

kube_dir="$repo/target/tools/kube"
if unpack "${KUBE_APISERVER_XZ:-$repo/../shared/tools/kube-apiserver/kube-apiserver.xz}" \
    "$kube_dir" kube-apiserver 1fa969db51c6e2c0e151be3cafe1c5374dd9f5fea5dc494ddc094454839896a5; then
    ln -sf "$(command -v etcd)" "$kube_dir/etcd"
    "$kube_dir/kube-apiserver" --version 2>/dev/null | head -1 || true
fi
# Beside it, the shared kube-controller-manager (see its README): the garbage collector and the
# namespace controller for the tests that need a cluster's (TestEnvBuilder::controllers).
unpack "${KUBE_CONTROLLER_MANAGER_XZ:-$repo/../shared/tools/kube-controller-manager/kube-controller-manager.xz}" \
    "$kube_dir" kube-controller-manager \
    05fbfe4019fd48ab50b0bc2ffd96ee8341aedec6060a919112a01d598da07877 || true

# The real Cluster API core manager (../shared/tools/cluster-api/, see its README), for the suite
# that runs Strata under CAPI itself (e2e/tests/real_capi.rs).
unpack "${CAPI_MANAGER_XZ:-$repo/../shared/tools/cluster-api/capi-manager.xz}" \
    "$repo/target/tools/capi" capi-manager \
    00ab404073559fd70ae25bde396d75d21af6afed3668bbe107ff1181332dd207 || true

if ! python3 -c 'import kubernetes' >/dev/null 2>&1; then
    echo "install-test-tools: installing the Python kubernetes client"
    python3 -m pip install --quiet --disable-pip-version-check kubernetes
fi
python3 -c 'import kubernetes; print("python kubernetes client", kubernetes.__version__)'
