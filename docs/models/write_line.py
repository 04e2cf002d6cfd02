#!/usr/bin/env python3
"""A model of ARM's write line under a benchmark of N clusters x 3 machines: which order of
serving writes finishes the fleet soonest, and what each order costs a started cluster.

Not a test and not the product: a discrete-time model (0.05 s steps) of one subscription's
write bucket and the clusters' dependency chains, to try an order in seconds before building it
into the operator's throttle (docs/performance.md, "The twenty-first session"). Calibrated
against `strata-bench --sides strata --time-scale 0.25` runs (within 3 % of their time to all
Ready at 30 x 3, 100 x 3 and 1,000 x 3, for both orders the operator has run); it leaves out
the operator's own latency, reads, and the 409s of sibling subnets.

    python3 docs/models/write_line.py                 # 30, 100 and 1,000 clusters
    python3 docs/models/write_line.py --clusters 100 --rate 10 --burst 200

What it models, each from the benchmark:
- a cluster is CAPZ's default flavour with one control-plane machine and two workers: the 18
  cloud CRs, their references, and the emulator's create latencies (e2e/armsim/src/types);
- CAPI's order: the machines' CRs wait for the cluster's network (the AzureCluster Ready), the
  workers' VMs for the control-plane VM (`bench::dependencies`);
- the clusters are applied `--spread` simulated seconds apart (0.15: the benchmark's applies);
- the operator's write bucket: ARM's 200 burst and 10 a second, times its 0.9 margin (180, 9);
- a CR joins the line when its dependencies are Ready; the line is served by the order's key.
"""
import argparse
import heapq

# The kind's position in the dependency order (CloudKind::stage) and its create latency (s).
STAGE = dict(RG=0, VNET=1, NSG=3, RT=4, PIP=5, NAT=6, SUB=7, LB=8, AS=13, NIC=14, VM=15)
LATENCY = dict(RG=0, VNET=5, NSG=2, RT=2, PIP=5, NAT=5, SUB=2, LB=5, AS=0, NIC=3, VM=60)


def cluster(c):
    """Cluster `c`'s CRs: name -> (kind, dependencies, role)."""
    crs = {}

    def add(name, kind, deps, role="infra"):
        crs[name] = (kind, deps, role)

    add("rg", "RG", [])
    add("vnet", "VNET", ["rg"])
    add("nsg-cp", "NSG", ["rg"])
    add("nsg-node", "NSG", ["rg"])
    add("rt", "RT", ["rg"])
    add("pip-api", "PIP", ["rg"])
    add("pip-nat", "PIP", ["rg"])
    add("nat", "NAT", ["pip-nat"])
    add("subnet-cp", "SUB", ["vnet", "nsg-cp"])
    add("subnet-node", "SUB", ["vnet", "nsg-node", "nat", "rt"])
    add("lb", "LB", ["pip-api"])
    add("as-md", "AS", ["rg"])
    network = list(crs)
    add("nic-cp", "NIC", network, "control-plane")
    add("vm-cp", "VM", network + ["nic-cp"], "control-plane")
    for w in (1, 2):
        add(f"nic-{w}", "NIC", network, "worker")
        add(f"vm-{w}", "VM", network + [f"nic-{w}", "vm-cp"], "worker")
    return {(c, n): (k, sorted({(c, d) for d in deps}), r) for n, (k, deps, r) in crs.items()}


def tails(crs, dependents):
    """Each CR's chain of latencies from its PUT to the end of its cluster."""
    memo = {}

    def tail(cr):
        if cr not in memo:
            memo[cr] = LATENCY[crs[cr][0]] + max((tail(d) for d in dependents[cr]), default=0)
        return memo[cr]

    return {cr: tail(cr) for cr in crs}


# Orders: the line's key for a CR (kind, role, time it joined, its tail); lowest first.
ORDERS = {
    "first come": lambda kind, role, t, tail: (t,),
    "by stage (operator since d3d167f)": lambda kind, role, t, tail: (-STAGE[kind], t),
    "longest tail first": lambda kind, role, t, tail: (-tail, t),
    "control plane first, then by stage": lambda kind, role, t, tail: (
        role != "control-plane", -STAGE[kind], t),
    "machines first, network first come": lambda kind, role, t, tail: (
        role == "infra", t),
}


def run(n, order, burst=180, rate=9.0, spread=0.15, dt=0.05):
    """(time all Ready, p50 of the clusters' times, p95 of the waits for a token) in seconds."""
    crs = {}
    for c in range(n):
        crs.update(cluster(c))
    dependents = {cr: [] for cr in crs}
    for cr, (_, deps, _) in crs.items():
        for d in deps:
            dependents[d].append(cr)
    tail = tails(crs, dependents)
    blocked = {cr: set(deps) for cr, (_, deps, _) in crs.items()}
    events, line, seq = [], [], 0
    for c in range(n):  # each cluster's apply
        heapq.heappush(events, (spread * c, -1, ("apply", c)))
    joined, put, ready = {}, {}, {}

    def join(cr, t):
        nonlocal seq
        kind, _, role = crs[cr]
        joined[cr] = t
        heapq.heappush(line, (order(kind, role, t, tail[cr]), seq, cr))
        seq += 1

    tokens, t = float(burst), 0.0
    while len(ready) < len(crs):
        while events and events[0][0] <= t:
            at, _, cr = heapq.heappop(events)
            if cr[0] == "apply":
                join((cr[1], "rg"), at)
                continue
            ready[cr] = at
            for d in dependents[cr]:
                blocked[d].discard(cr)
                if not blocked[d]:
                    join(d, at)
        while line and tokens >= 1:
            cr = heapq.heappop(line)[2]
            tokens -= 1
            put[cr] = t
            heapq.heappush(events, (t + LATENCY[crs[cr][0]], seq, cr))
            seq += 1
        t += dt
        tokens = min(burst, tokens + rate * dt)
    done = {}
    for (c, _), at in ready.items():
        done[c] = max(done.get(c, 0.0), at)
    times = sorted(done.values())
    waits = sorted(put[cr] - joined[cr] for cr in crs if crs[cr][0] != "RG")

    def pct(xs, q):
        return xs[min(len(xs) - 1, int(q / 100 * len(xs)))]

    return times[-1], pct(times, 50), pct(waits, 95)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clusters", type=int, nargs="+", default=[30, 100, 1000])
    p.add_argument("--burst", type=float, default=180)
    p.add_argument("--rate", type=float, default=9.0)
    p.add_argument("--spread", type=float, default=0.15)
    a = p.parse_args()
    print("| order | clusters | all Ready (s) | p50 (s) | wait for a token p95 (s) |")
    print("| --- | --- | --- | --- | --- |")
    for name, order in ORDERS.items():
        for n in a.clusters:
            end, p50, wait = run(n, order, a.burst, a.rate, a.spread)
            print(f"| {name} | {n} | {end:.1f} | {p50:.1f} | {wait:.1f} |")


if __name__ == "__main__":
    main()
