#!/bin/bash
# The operator binary's peak RSS and CPU for N copies of samples/azure (13 CRs each), on
# strata-envtest serve + strata-armsim (time scale 0.01). Build first: cargo build -p strata-envtest
# -p strata-armsim -p strata-operator. Usage: bash e2e/measure-operator-footprint.sh [N]
set -e
N=${1:-20}
d=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf $d' EXIT
target/debug/strata-envtest serve --kubeconfig $d/kc --crds crds/generated --no-gc > $d/env.out 2>&1 &
target/debug/strata-armsim --time-scale 0.01 --ca-file $d/ca.pem > $d/sim.out 2>&1 &
for i in $(seq 50); do grep -q ready $d/env.out && grep -qi "http" $d/sim.out && break; sleep 0.2; done
sim=$(grep -o 'https://127.0.0.1:[0-9]*' $d/sim.out | head -1)
export KUBECONFIG=$d/kc
for i in $(seq $N); do
  kubectl create ns m$i >/dev/null
  for f in samples/azure/*.yaml; do
    sed -e "s/namespace: default/namespace: m$i/" -e "s/strata-web-rg/strata-web-rg-$i/g" -e "s/strata-web-0\$/strata-web-0-$i/" $f | kubectl apply -f - >/dev/null
  done
done
start=$(date +%s.%N)
AZURE_RESOURCE_MANAGER_ENDPOINT=$sim AZURE_AUTHORITY_HOST=$sim STRATA_EXTRA_CA_FILE=$d/ca.pem AZURE_TENANT_ID=t AZURE_CLIENT_ID=c AZURE_CLIENT_SECRET=s AZURE_SUBSCRIPTION_ID=00000000-0000-0000-0000-000000000000 \
  target/debug/strata-operator --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 --arm-time-scale 0.01 --poll-interval 100ms > $d/op.log 2>&1 &
op=$!
kubectl wait --for=condition=Ready -A --all azure --timeout=120s >/dev/null || kubectl get azure -A | grep -v True | head -5
end=$(date +%s.%N)
crs=$(kubectl get azure -A --no-headers | wc -l)
hwm=$(grep VmHWM /proc/$op/status | awk '{print $2}')
ticks=$(awk '{print $14+$15}' /proc/$op/stat)
echo "CRs=$crs converge_s=$(echo "$end - $start" | bc) peak_rss_MiB=$((hwm/1024)) cpu_s=$(echo "scale=2; $ticks/$(getconf CLK_TCK)" | bc)"
