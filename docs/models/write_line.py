#!/usr/bin/env python3
"""A model of ARM's write line under a benchmark of N clusters x 3 machines: which order of
serving writes finishes the fleet soonest, and what each order costs a started cluster.

Not a test and not the product: a discrete-time model (0.05 s steps) of one subscription's
write bucket and the clusters' dependency chains, to try an order in seconds before building it
into the operator's throttle (docs/performance.md, "ARM's write line"). Calibrated
against `strata-bench --sides strata --time-scale 0.25` runs (within 3 % of their time to all
Ready at 30 x 3, 100 x 3 and 1,000 x 3 for the orders the operator has run, but first come at
1,000 x 3, which lost its time in the operator's line); it leaves out the operator's own
latency, reads, and the 409s of sibling subnets.

    python3 docs/models/write_line.py                 # 30, 100 and 1,000 clusters
    python3 docs/models/write_line.py --clusters 100 --rate 10 --burst 200

What it models, each from the benchmark:
- a cluster is CAPZ's default flavour with one control-plane machine and two workers: the 18
  cloud CRs, the references between them, and the emulator's create latencies
  (e2e/armsim/src/types);
- CAPI's orders, which no reference shows: the control-plane machine's CRs are made once the
  cluster's network is Ready (the AzureCluster Ready), the workers' VMs once the control-plane
  VM is (`bench::dependencies`); the rest are made when the cluster is applied;
- the clusters are applied `--spread` simulated seconds apart (0.15: the benchmark's applies);
- the operator's write bucket: ARM's 200 burst and 10 a second, times its 0.9 margin (180, 9);
- a CR joins the line when it exists and what it references is Ready; the line is served in the
  order's turn.
"""
import argparse
import heapq

# The kind's position in the dependency order (CloudKind::stage) and its create latency (s).
STAGE = dict(RG=0, VNET=1, NSG=3, RT=4, PIP=5, NAT=6, SUB=7, LB=8, AS=13, NIC=14, VM=15)
LATENCY = dict(RG=0, VNET=5, NSG=2, RT=2, PIP=5, NAT=5, SUB=2, LB=5, AS=0, NIC=3, VM=60)


def cluster(c):
    """Cluster `c`'s CRs: (c, name) -> (kind, references, made after, role)."""
    crs = {}

    def add(name, kind, refs, role="network", after=()):
        crs[name] = (kind, refs, list(after), role)

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
    add("nic-cp", "NIC", ["subnet-cp", "lb"], "control-plane", network)
    add("vm-cp", "VM", ["nic-cp"], "control-plane", network)
    for w in (1, 2):
        add(f"nic-{w}", "NIC", ["subnet-node"], "worker")
        add(f"vm-{w}", "VM", [f"nic-{w}", "as-md"], "worker", network + ["vm-cp"])
    return {
        (c, n): (k, [(c, r) for r in refs], [(c, a) for a in after], role)
        for n, (k, refs, after, role) in crs.items()
    }


def tails(crs, edges):
    """Each CR's chain of latencies from its PUT to the end of its cluster, along `edges`
    (which of a CR's references and orders count)."""
    dependents = {cr: set() for cr in crs}
    for cr, v in crs.items():
        for d in edges(v):
            dependents[d].add(cr)
    memo = {}

    def tail(cr):
        if cr not in memo:
            memo[cr] = LATENCY[crs[cr][0]] + max((tail(d) for d in dependents[cr]), default=0)
        return memo[cr]

    return {cr: tail(cr) for cr in crs}


def every_edge(v):
    return set(v[1]) | set(v[2])


def references(v):
    return set(v[1])


# Orders: the line's key for a CR (kind, role, time it joined, its tail); lowest first.
ORDERS = {
    "first come": lambda kind, role, t, tail: (t,),
    "by stage (operator since d3d167f)": lambda kind, role, t, tail: (-STAGE[kind], t),
    "longest tail first": lambda kind, role, t, tail: (-tail, t),
    "control plane first, then by stage": lambda kind, role, t, tail: (
        role != "control-plane", -STAGE[kind], t),
    "machines first, network first come": lambda kind, role, t, tail: (
        role == "network", t),
}


class KeyLine:
    """The line served by an order's key."""

    def __init__(self, order):
        self.order, self.heap = order, []

    def join(self, kind, role, t, tail, seq, cr):
        heapq.heappush(self.heap, (self.order(kind, role, t, tail), seq, cr))

    def next(self, now, end):
        return heapq.heappop(self.heap)[2] if self.heap else None


class LatestStartLine:
    """By stage, unless a CR's latest start has come: the time by which it must be written for
    its cluster to be Ready when the writes end (`end`, given at each turn), less its tail."""

    def __init__(self):
        self.by_stage, self.by_tail, self.served = [], [], set()

    def join(self, kind, role, t, tail, seq, cr):
        heapq.heappush(self.by_stage, ((-STAGE[kind], t), seq, cr))
        heapq.heappush(self.by_tail, (-tail, seq, cr))

    def next(self, now, end):
        for heap in (self.by_tail, self.by_stage):
            while heap and heap[0][2] in self.served:
                heapq.heappop(heap)
        if self.by_tail and end + self.by_tail[0][0] <= now:
            cr = heapq.heappop(self.by_tail)[2]
        elif self.by_stage:
            cr = heapq.heappop(self.by_stage)[2]
        else:
            return None
        self.served.add(cr)
        return cr


# Latest start, with what it is told: (the writes' end known or estimated, the chains it sees).
# "oracle": every write the run will make and every CR's whole chain. "operator's view": the end
# estimated from the CRs that exist and are not written yet (plus `margin`), and either the
# whole chains (had the translator told it CAPI's orders) or the references' alone.
LATEST_START = {
    "by stage, unless a CR's latest start has come (oracle)": ("oracle", every_edge),
    "latest start, operator's view, whole chains": ("estimated", every_edge),
    "latest start, operator's view, references' chains": ("estimated", references),
}


def run(n, order, burst=180, rate=9.0, spread=0.15, dt=0.05, margin=30.0):
    """(time all Ready, p50 of the clusters' times, p95 of the waits for a token) in seconds."""
    crs = {}
    for c in range(n):
        crs.update(cluster(c))
    if order in LATEST_START:
        knows, edges = LATEST_START[order]
        line = LatestStartLine()
    else:
        knows, edges = None, every_edge
        line = KeyLine(order)
    tail = tails(crs, edges)
    dependents = {cr: [] for cr in crs}
    for cr, v in crs.items():
        for d in every_edge(v):
            dependents[d].append(cr)
    # Made when what it comes after is Ready; joins the line when, besides, its references are.
    unmade = {cr: set(v[2]) for cr, v in crs.items()}
    blocked = {cr: every_edge(v) for cr, v in crs.items()}
    events, seq = [], 0
    for c in range(n):  # each cluster's apply
        heapq.heappush(events, (spread * c, -1, ("apply", c)))
    made, joined, put, ready = set(), {}, {}, {}
    of_cluster = {}
    for cr in crs:
        of_cluster.setdefault(cr[0], []).append(cr)

    def join(cr, t):
        nonlocal seq
        kind, _, _, role = crs[cr]
        joined[cr] = t
        line.join(kind, role, t, tail[cr], seq, cr)
        seq += 1

    tokens, t = float(burst), 0.0
    while len(ready) < len(crs):
        while events and events[0][0] <= t:
            at, _, cr = heapq.heappop(events)
            if cr[0] == "apply":
                made.update(k for k in of_cluster[cr[1]] if not unmade[k])
                join((cr[1], "rg"), at)
                continue
            ready[cr] = at
            for d in dependents[cr]:
                unmade[d].discard(cr)
                if not unmade[d]:
                    made.add(d)
                blocked[d].discard(cr)
                if not blocked[d]:
                    join(d, at)
        if knows == "oracle":
            end = (len(crs) - burst) / rate + LATENCY["VM"]
        else:
            end = t + max(0.0, len(made) - len(put) - tokens) / rate + LATENCY["VM"] + margin
        while tokens >= 1:
            cr = line.next(t, end)
            if cr is None:
                break
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
    p.add_argument("--margin", type=float, default=30.0,
                   help="seconds added to the operator's estimate of the writes' end")
    a = p.parse_args()
    print("| order | clusters | all Ready (s) | p50 (s) | wait for a token p95 (s) |")
    print("| --- | --- | --- | --- | --- |")
    for name, order in [*ORDERS.items(), *((k, k) for k in LATEST_START)]:
        for n in a.clusters:
            end, p50, wait = run(n, order, a.burst, a.rate, a.spread, margin=a.margin)
            print(f"| {name} | {n} | {end:.1f} | {p50:.1f} | {wait:.1f} |")


if __name__ == "__main__":
    main()
