#!/usr/bin/env bash
# Installs what `make demo` needs beyond the Rust toolchain, only when it is missing, and nothing
# else, so that the first command a new user types is as quick as it can be:
#   - kubectl: `strata-demo` applies the cluster with it, and the user explores with it. Any
#     kubectl on the PATH is used; otherwise Debian's `kubernetes-client`.
# The test tools (etcd, kube-apiserver, Debian's kubectl 1.20, the Python client) are
# e2e/install-test-tools.sh's, which runs this first.
set -euo pipefail

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        echo "install-demo-tools: need root to run: $*" >&2; return 1; fi
}

if ! command -v kubectl >/dev/null 2>&1; then
    echo "install-demo-tools: installing Debian's kubernetes-client (kubectl)"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq kubernetes-client >/dev/null
fi
kubectl version --client 2>/dev/null | head -1 || true
