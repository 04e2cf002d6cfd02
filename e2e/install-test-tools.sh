#!/usr/bin/env bash
# Installs what Strata's tests need beyond the Rust toolchain, only when it is missing, so that
# `make test` works on a fresh Debian machine:
#   - kubectl: any kubectl on the PATH is used; otherwise Debian's `kubernetes-client`.
#   - Debian's kubectl 1.20 (package kubernetes-client, unpacked into target/tools/kubectl-1.20/,
#     not installed system-wide) so the API test server is also tested with an old kubectl that
#     validates client-side against the protobuf /openapi/v2.
#   - the Python `kubernetes` client (PyPI), for the API test server's client-compatibility tests.
#   - etcd (Debian's `etcd-server`, /usr/bin/etcd): any etcd on the PATH is used; the API test
#     server's KUBEBUILDER_ASSETS launcher starts a real one in its tests.
set -euo pipefail

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        echo "install-test-tools: need root to run: $*" >&2; return 1; fi
}

if ! command -v kubectl >/dev/null 2>&1; then
    echo "install-test-tools: installing Debian's kubernetes-client (kubectl)"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq kubernetes-client >/dev/null
fi
kubectl version --client 2>/dev/null | head -1 || true

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

if ! python3 -c 'import kubernetes' >/dev/null 2>&1; then
    echo "install-test-tools: installing the Python kubernetes client"
    python3 -m pip install --quiet --disable-pip-version-check kubernetes
fi
python3 -c 'import kubernetes; print("python kubernetes client", kubernetes.__version__)'
