#!/usr/bin/env python3
"""Run the test executables `cargo test --no-run --message-format=json` built, several at a time.

`make test` runs every test twice: once on the in-memory API test server and once on the real
kube-apiserver + etcd (KUBEBUILDER_ASSETS). `cargo test` runs its test binaries one after the
other, and most of them spend their time waiting (for a controller's requeue, an emulated ARM
operation, a watch): measured per binary, the kube-apiserver pass used one core on average of the
machine's two. This runner takes the executables of one build and runs both passes' binaries from
one queue, `--jobs` at a time, the longest known ones first, each as cargo would run it (working
directory = its package's directory). cargo-nextest does this and more, but it is not in the Rust
toolchain and building it from crates.io costs a cold `make test` minutes: more than it saves.

A binary's output is printed when it ends: in full when it failed, else its result line. The exit
status is 1 when any binary failed. Each binary runs in its own process group, killed whole when
the runner is interrupted, so the etcd and kube-apiserver a test started do not outlive it.

A binary that runs longer than `--limit` seconds is killed and reported as failed, with its output
so far (libtest names a test running for over 60 s in it): a hung test then fails the run with its
name instead of holding `make test` until CI's own deadline cuts it off with no word of which one.

Usage:
  run-test-binaries.py BUILD_JSON --pass NAME[:PKG,PKG...] [--env NAME:VAR=VALUE ...]
                       [--jobs N] [--first SUBSTRING,...] [--serial SUBSTRING,... ...]
                       [--times FILE] [--limit SECONDS]
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time


def executables(build_json):
    """(package name, package dir, target name, kind, executable) of every test executable."""
    out = []
    with open(build_json) as f:
        for line in f:
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue
            if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
                continue
            if not msg.get("profile", {}).get("test"):
                continue
            target = msg["target"]
            pkg_dir = os.path.dirname(msg["manifest_path"])
            # A package id is "path+file:///dir#name@version", or "path+file:///dir#version"
            # when the name is the directory's.
            url, _, fragment = msg["package_id"].partition("#")
            pkg = fragment.split("@")[0] if "@" in fragment else os.path.basename(url)
            out.append((pkg, pkg_dir, target["name"], target["kind"][0], msg["executable"]))
    return out


class Runner:
    """Runs queued jobs on `jobs` workers. A worker takes the first queued job that no running
    job excludes: jobs of one `--serial` group never overlap, and the worker that cannot start a
    grouped job goes on to the next one rather than waiting idle for the group."""

    def __init__(self, queue, jobs, groups, limit):
        self.queue = list(queue)
        self.limit = limit
        self.jobs = jobs
        self.groups = groups
        self.busy = set()  # indexes of the groups with a running job
        self.cond = threading.Condition()
        self.lock = threading.Lock()
        self.failed = []
        self.failures = {}
        self.times = {}
        self.pgids = set()
        self.stopping = False

    def group(self, job):
        return next((i for i, g in enumerate(self.groups) if any(s in job[0] for s in g)), None)

    def take(self):
        with self.cond:
            while True:
                if self.stopping or not self.queue:
                    return None
                for i, job in enumerate(self.queue):
                    g = self.group(job)
                    if g is None or g not in self.busy:
                        del self.queue[i]
                        if g is not None:
                            self.busy.add(g)
                        return job
                self.cond.wait()

    def done(self, job):
        with self.cond:
            self.busy.discard(self.group(job))
            self.cond.notify_all()

    def worker(self):
        while (job := self.take()) is not None:
            try:
                self.run_one(job)
            finally:
                self.done(job)

    def run_one(self, job):
        name, label, pkg_dir, exe, env = job
        if self.stopping:
            return
        with tempfile.TemporaryFile() as log:
            start = time.monotonic()
            proc = subprocess.Popen(
                [exe, "-q"], cwd=pkg_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
            with self.lock:
                self.pgids.add(proc.pid)
            timed_out = False
            try:
                code = proc.wait(timeout=self.limit)
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
                code = proc.wait()
            with self.lock:
                self.pgids.discard(proc.pid)
            # Whatever the binary left running (a test killed mid-way leaves its etcd) goes too.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            took = time.monotonic() - start
            log.seek(0)
            text = log.read().decode("utf-8", "replace")
        if timed_out:
            text += f"\nrun-test-binaries: killed after {self.limit:.0f} s (--limit)\n"
            code = code or -signal.SIGKILL
        result = [l for l in text.splitlines() if l.startswith("test result:")]
        # "ok. 36 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 84.68s"
        summary = (
            "; ".join(result[-1][len("test result: "):].split("; ")[:3]) if result
            else f"exit status {code}"
        )
        with self.lock:
            self.times[name] = took
            if code != 0:
                self.failed.append(label)
                self.failures[label] = text
                print(f"---- FAILED {label} ({took:.0f} s), its output:\n{text}", flush=True)
            else:
                # The binary's own "test result:" line goes out verbatim, as cargo prints it,
                # so whatever reads a cargo test log (CI's test count) reads this one too.
                print(f"{took:6.1f} s  {label}", flush=True)
                print(result[-1] if result else f"test result: {summary}", flush=True)

    def kill_all(self):
        self.stopping = True
        with self.cond:
            self.cond.notify_all()
        with self.lock:
            for pgid in list(self.pgids):
                try:
                    os.killpg(pgid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def failure_digest(text, limit=80):
    """The part of a failed test binary's output that says why: from cargo's "failures:"
    section (or the whole output when there is none), without backtrace frames, its last
    `limit` lines."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.strip() == "failures:"), 0)
    frame = re.compile(r"^\s+(\d+: |at )")
    kept = [l for l in lines[start:] if not frame.match(l) and l.strip() != "stack backtrace:"]
    return "\n".join(kept[-limit:])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("build_json")
    ap.add_argument("--pass", dest="passes", action="append", required=True,
                    help="NAME or NAME:PKG,PKG (only those packages' binaries in this pass)")
    ap.add_argument("--env", action="append", default=[], help="NAME:VAR=VALUE for pass NAME")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--first", default="", help="binaries whose label contains one of these run first")
    ap.add_argument("--serial", action="append", default=[],
                    help="a group: binaries whose label contains one of these (comma-separated) "
                         "never run at the same time; repeat for more groups")
    ap.add_argument("--times", help="a JSON file of each binary's last duration: read to order, written after")
    ap.add_argument("--limit", type=float, default=1200.0,
                    help="seconds a binary may run before it is killed and counted failed")
    args = ap.parse_args()

    bins = executables(args.build_json)
    if not bins:
        sys.exit(f"run-test-binaries: no test executable in {args.build_json}")
    known = {}
    if args.times and os.path.exists(args.times):
        with open(args.times) as f:
            known = json.load(f)
    first = [s for s in args.first.split(",") if s]

    jobs = []
    for spec in args.passes:
        name, _, pkgs = spec.partition(":")
        only = set(pkgs.split(",")) if pkgs else None
        env = dict(os.environ)
        for e in args.env:
            pass_name, _, assignment = e.partition(":")
            if pass_name == name:
                var, _, value = assignment.partition("=")
                env[var] = value
        for pkg, pkg_dir, target, kind, exe in bins:
            if only is not None and pkg not in only:
                continue
            label = f"[{name}] {pkg} {kind} {target}"
            jobs.append((label, label, pkg_dir, exe, env))

    def order(job):
        label = job[0]
        pinned = next((i for i, s in enumerate(first) if s in label), len(first))
        return (pinned, -known.get(label, 0.0))

    jobs.sort(key=order)
    groups = [[s for s in g.split(",") if s] for g in args.serial]
    runner = Runner(jobs, args.jobs, [g for g in groups if g], args.limit)

    def stop(signum, _frame):
        runner.kill_all()
        sys.exit(128 + signum)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)

    start = time.monotonic()
    print(f"run-test-binaries: {len(jobs)} test binaries, {args.jobs} at a time", flush=True)
    workers = [threading.Thread(target=runner.worker, daemon=True) for _ in range(args.jobs)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    took = time.monotonic() - start

    if args.times:
        known.update(runner.times)
        with open(args.times, "w") as f:
            json.dump(known, f, indent=1, sort_keys=True)
    slowest = sorted(runner.times.items(), key=lambda kv: -kv[1])[:10]
    print(f"run-test-binaries: {len(jobs)} binaries in {took:.0f} s; the slowest:")
    for label, t in slowest:
        print(f"  {t:6.1f} s  {label}")
    if runner.failed:
        # Again at the very end, without backtraces: a CI log shown by its head and tail keeps
        # this part, where a failure printed mid-run may be cut.
        for label in runner.failed:
            print(f"---- why {label} failed:\n" + failure_digest(runner.failures[label]))
        print("run-test-binaries: FAILED:\n  " + "\n  ".join(runner.failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
