#!/usr/bin/env bash
# `make demo`: what Strata has today, on embedded defaults (no cluster, no cloud).
#   1. the Kubernetes API test server with Strata's CRDs: cloud CRs and a CAPZ cluster applied with
#      kubectl, `kubectl get azure`, and bad objects refused by the schemas;
#   2. the ARM emulator: a token, a resource group and a virtual network created over ARM REST,
#      a long-running operation polled, an ARM validation error;
#   3. strata-operator converging the cloud CRs of step 1 against the emulator;
#   4. strata-translator turning the CAPZ cluster of step 1 into cloud CRs, converged until the
#      AzureCluster is ready with its control-plane endpoint.
set -euo pipefail
cd "$(dirname "$0")/.."

work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# Starts a server binary in the background and prints the URL from its `ready <url>` line.
start() {
    local log="$work/$1.log"; shift
    "$@" >"$log" 2>&1 &
    pids+=("$!")
    for _ in $(seq 100); do
        if grep -q '^ready ' "$log"; then sed -n 's/^ready //p' "$log" | head -1; return; fi
        sleep 0.1
    done
    echo "demo: $1 did not start:" >&2; cat "$log" >&2; exit 1
}

step "building the test servers"
cargo build -q --locked -p strata-envtest -p strata-armsim -p strata-operator -p strata-translator
bin=target/debug

step "Kubernetes API test server (in memory) with Strata's CRDs"
api=$(start envtest "$bin/strata-envtest" serve --port 0 --kubeconfig "$work/kubeconfig" --crds crds/generated)
echo "serving at $api"
export KUBECONFIG="$work/kubeconfig"

step "kubectl apply -f samples/azure/   (hand-written cloud CRs, reverse dependency order)"
kubectl apply -f samples/azure/
step "kubectl get azure"
kubectl get azure

step "kubectl apply --server-side -f samples/capi/default-cluster.yaml   (a CAPZ v1beta1 cluster)"
kubectl apply --server-side -f samples/capi/default-cluster.yaml
kubectl get cluster-api

step "bad objects are refused by the CRD schemas (samples/invalid/)"
for f in samples/invalid/06-nsg-priority-below-100.yaml samples/invalid/10-public-ip-standard-dynamic.yaml \
         samples/invalid/11-load-balancer-rule-unknown-pool.yaml; do
    echo "\$ kubectl apply -f $f"
    kubectl apply -f "$f" 2>&1 | sed 's/^/  /' || true
done

step "ARM emulator (time scale 0.01: a 5 s VNet creation takes 50 ms)"
arm=$(start armsim "$bin/strata-armsim" --port 0 --time-scale 0.01 --seed 1)
echo "serving at $arm"
sub=00000000-0000-0000-0000-000000000000
token=$(curl -sf -X POST "$arm/demo-tenant/oauth2/v2.0/token" \
    -d grant_type=client_credentials -d client_id=demo -d client_secret=demo -d "scope=$arm/.default" | jq -r .access_token)
arm_call() { curl -s -X "$1" "$arm$2" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' ${3:+-d "$3"}; }

echo "\$ PUT resourceGroups/raw-arm-demo"
arm_call PUT "/subscriptions/$sub/resourceGroups/raw-arm-demo?api-version=2021-04-01" '{"location":"westeurope"}' | jq -c '{id, properties}'
echo "\$ PUT virtualNetworks/raw-arm-demo-vnet (a long-running operation)"
vnet="/subscriptions/$sub/resourceGroups/raw-arm-demo/providers/Microsoft.Network/virtualNetworks/raw-arm-demo-vnet"
arm_call PUT "$vnet?api-version=2024-03-01" \
    '{"location":"westeurope","properties":{"addressSpace":{"addressPrefixes":["10.0.0.0/8"]}}}' | jq -c '{name, state: .properties.provisioningState}'
sleep 0.3
echo "\$ GET it again once the operation has run"
arm_call GET "$vnet?api-version=2024-03-01" | jq -c '{name, state: .properties.provisioningState}'
echo "\$ PUT a subnet outside the VNet's address space"
arm_call PUT "$vnet/subnets/outside?api-version=2024-03-01" '{"properties":{"addressPrefix":"192.168.0.0/24"}}' | jq -c .error
echo "\$ GET /_sim/resources"
curl -s "$arm/_sim/resources" | jq -r '.value[] | "  \(.id)  \(.properties.provisioningState // "")"'

step "strata-operator converges the cloud CRs applied above (samples/azure/) against the emulator"
# The operator's own credential, and the token its pod's service account would have: the CAPZ
# sample's AzureClusterIdentity is of type WorkloadIdentity.
echo "a-projected-service-account-token" >"$work/token"
AZURE_RESOURCE_MANAGER_ENDPOINT="$arm" AZURE_AUTHORITY_HOST="$arm" AZURE_SUBSCRIPTION_ID="$sub" \
    AZURE_TENANT_ID=demo-tenant AZURE_CLIENT_ID=demo AZURE_CLIENT_SECRET=demo AZURE_FEDERATED_TOKEN_FILE="$work/token" \
    "$bin/strata-operator" --arm-time-scale 0.01 --poll-interval 100ms \
    --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 >"$work/operator.log" 2>&1 &
pids+=("$!")
curl -s -X DELETE "$arm/_sim/requests" >/dev/null
start_ns=$(date +%s%N)
echo "\$ kubectl wait --for=condition=Ready -f samples/azure/ --timeout=60s"
kubectl wait --for=condition=Ready -f samples/azure/ --timeout=60s | sed 's/^/  /'
echo "all Ready in $(( ($(date +%s%N) - start_ns) / 1000000 )) ms"
echo "\$ kubectl get azure"
kubectl get azure
echo "ARM requests the operator sent, by method (one PUT per resource, no wasted write):"
curl -s "$arm/_sim/requests" | jq -r '[.value[] | select(.path | startswith("/subscriptions/")) | .method] | group_by(.) | map("  \(.[0]): \(length)") | .[]'
echo "\$ kubectl get virtualmachine web-0 -o jsonpath='{.status}'"
kubectl get virtualmachine web-0 -o jsonpath='{.status}' | jq -c '{id, vmId, powerState}'

step "strata-translator turns the CAPZ cluster applied above into cloud CRs; the operator converges them"
"$bin/strata-translator" run --namespace default >"$work/translator.log" 2>&1 &
pids+=("$!")
start_ns=$(date +%s%N)
echo "\$ kubectl wait --for=jsonpath='{.status.ready}'=true azurecluster/strata-demo --timeout=90s"
kubectl wait --for=jsonpath='{.status.ready}'=true azurecluster/strata-demo --timeout=90s | sed 's/^/  /'
echo "the cluster's Azure infrastructure is Ready in $(( ($(date +%s%N) - start_ns) / 1000000 )) ms"
echo "\$ kubectl get azure -l cluster.x-k8s.io/cluster-name=strata-demo"
kubectl get azure -l cluster.x-k8s.io/cluster-name=strata-demo
echo "\$ kubectl get azurecluster strata-demo -o jsonpath='{.spec.controlPlaneEndpoint}'"
kubectl get azurecluster strata-demo -o jsonpath='{.spec.controlPlaneEndpoint}'; echo
echo "(Machines come from CAPI core, which the demo does not run yet: the end-to-end tests in e2e/tests/"
echo " create them as CAPI would, and each gets its NIC, VM, providerID and addresses.)"

step "done"
echo "Logs while the demo runs: $work/operator.log, $work/translator.log"
