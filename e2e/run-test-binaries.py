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

A pass gets exactly the environment its `--pass`/`--env` name: the caller's environment without
the variables that pick the API server the tests use (KUBEBUILDER_ASSETS, USE_EXISTING_CLUSTER),
plus that pass's `--env` assignments. So the in-memory pass stays in memory even when the caller
has KUBEBUILDER_ASSETS set.

A binary's output is printed when it ends: in full when it failed, else its result line. Each
binary runs in its own process group, killed whole when the runner is interrupted, so the etcd and
kube-apiserver a test started do not outlive it.

A binary that runs longer than `--limit` seconds is killed and reported as failed, with its output
so far (libtest names a test running for over 60 s in it): a hung test then fails the run with its
name instead of holding `make test` until CI's own deadline cuts it off with no word of which one.

Skips. A test skips itself by printing `SKIPPED <test>: <reason>` and appending `<test>: <reason>`
to the file STRATA_ENVTEST_SKIP_LOG names; libtest counts it as passed. The runner gives every
binary run a fresh skip log of its own (whatever `--env` says for that variable), reads it when the
binary ends, and adds the `SKIPPED` lines of the binary's output (libtest shows a passing test's
output only with --nocapture, but a failing test's, or a child process's, it does). Every skip is
printed as one, with counts per binary and per pass at the end. `--expected-skips FILE` lists the
skips that are expected, one `<pass> <test>: <reason>` a line (# comments): any other skip fails
the run; a listed skip that did not happen is only noted (the test ran: fine).

The exit status is 1 when any binary failed: a non-zero exit status, killed by a signal (or by
`--limit`), exit status 0 without libtest's `test result:` line, could not be started, or never
ran to a result at all; and also when a test skipped unexpectedly, or when a package a `--pass`
names matches no test binary (a typo would else drop a whole suite silently).

Usage:
  run-test-binaries.py BUILD_JSON --pass NAME[:PKG,PKG...] [--env NAME:VAR=VALUE ...]
                       [--jobs N] [--first SUBSTRING,...] [--serial SUBSTRING,... ...]
                       [--times FILE] [--limit SECONDS] [--expected-skips FILE]
"""

import argparse
import collections
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

# The variables that make a test use a real API server instead of the in-memory one
# (strata_envtest::testenv::Server::from_env): never inherited by a pass, only given by `--env`.
SERVER_VARS = ("KUBEBUILDER_ASSETS", "USE_EXISTING_CLUSTER")
# The file tests append their skips to (e2e/envtest/tests/common/mod.rs `skip_if`,
# operator/tests/common/mod.rs `skip_on_existing_cluster`); the runner sets it per binary run.
SKIP_LOG_VAR = "STRATA_ENVTEST_SKIP_LOG"
# What those same functions print. Leading dots: libtest's -q progress dots share the line when a
# test's output is not captured (a child process's, or --nocapture).
SKIPPED_LINE = re.compile(r"^[.\s]*SKIPPED (\S+): (.*\S)\s*$")

# label: "[pass] package kind target", unique per job (it keys times and results).
Job = collections.namedtuple("Job", "label pass_name pkg_dir exe env")


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


def parse_skip(line):
    """(test, reason) of a `<test>: <reason>` line. Test names are function names, without
    ": "; reasons may hold one ("needs the in-memory server: ...")."""
    test, _, reason = line.strip().partition(": ")
    return test, reason.strip()


def read_expected_skips(path):
    """{(pass, test, reason)} of an expected-skips file: `<pass> <test>: <reason>` lines, blank
    lines and `#` comment lines ignored. A malformed line ends the run: a typo there must not pass
    for an entry that matches nothing."""
    expected = set()
    with open(path) as f:
        for n, line in enumerate(f, 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            pass_name, _, rest = text.partition(" ")
            test, reason = parse_skip(rest)
            if not pass_name or not test or " " in test or not reason:
                sys.exit(f"run-test-binaries: {path}:{n}: not `<pass> <test>: <reason>`: {text}")
            expected.add((pass_name, test, reason))
    return expected


def skips_of(skip_log, output):
    """The (test, reason) pairs a binary run logged to its skip log or printed as `SKIPPED`:
    the union, so a skip printed but not logged (or the reverse) still counts, once."""
    found = set()
    try:
        with open(skip_log, encoding="utf-8", errors="replace") as f:
            found.update(parse_skip(l) for l in f if l.strip())
    except FileNotFoundError:
        pass
    for line in output.splitlines():
        if m := SKIPPED_LINE.match(line):
            found.add((m.group(1), m.group(2)))
    return sorted(found)


def describe_exit(code):
    """Why a binary's exit status is a failure, in words, or None when it is 0."""
    if code == 0:
        return None
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "unknown signal"
        return f"killed by signal {-code} ({name})"
    return f"exit status {code}"


class Runner:
    """Runs queued jobs on `jobs` workers. A worker takes the first queued job that no running
    job excludes: jobs of one `--serial` group never overlap, and the worker that cannot start a
    grouped job goes on to the next one rather than waiting idle for the group.

    Every job taken gets an entry in `outcome` (None: it passed, else why not); `main` counts a
    queued job without one as failed, so no way a job can go wrong passes unseen."""

    def __init__(self, queue, jobs, groups, limit, expected, skip_dir):
        self.queue = list(queue)
        self.limit = limit
        self.jobs = jobs
        self.groups = groups
        self.expected = expected  # {(pass, test, reason)}, see read_expected_skips
        self.skip_dir = skip_dir  # where each run's skip log is made
        self.busy = set()  # indexes of the groups with a running job
        self.cond = threading.Condition()
        self.lock = threading.Lock()
        self.outcome = {}  # label -> None (passed) or why it failed
        self.failed = []  # (label, why), in the order they happened
        self.failures = {}  # label -> output of a binary that ran and failed, for the digest
        self.times = {}
        self.passed = collections.Counter()  # pass -> tests libtest counted passed
        self.skips = []  # (pass, label, test, reason, expected)
        self.pgids = set()
        self.stopping = False

    def group(self, job):
        return next((i for i, g in enumerate(self.groups) if any(s in job.label for s in g)), None)

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
            except Exception:
                # A bug of the runner's own, or the OS refusing something run_one does not
                # expect: the job fails by name and this worker goes on with the queue, where
                # a dead worker would leave its job unreported (and, all dead, the queue).
                self.fail(job.label, "the runner failed running it:\n" + traceback.format_exc())
            finally:
                self.done(job)

    def fail(self, label, why, output=None):
        with self.lock:
            self.outcome[label] = why
            self.failed.append((label, why))
            if output is not None:
                self.failures[label] = output

    def run_one(self, job):
        if self.stopping:
            return
        # A fresh skip log per run: what is in it after the run is this binary's, of this pass.
        fd, skip_log = tempfile.mkstemp(prefix="skips-", suffix=".txt", dir=self.skip_dir)
        os.close(fd)
        env = dict(job.env, **{SKIP_LOG_VAR: skip_log})
        try:
            with tempfile.TemporaryFile() as log:
                start = time.monotonic()
                try:
                    proc = subprocess.Popen(
                        [job.exe, "-q"], cwd=job.pkg_dir, env=env, stdout=log,
                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                    )
                except OSError as e:
                    # Missing, not executable, "text file busy", fork failing: no result.
                    why = f"could not start {job.exe}: {e}"
                    print(f"---- FAILED {job.label}: {why}", flush=True)
                    self.fail(job.label, why)
                    return
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
            skips = skips_of(skip_log, text)
        finally:
            os.unlink(skip_log)
        self.report(job, code, timed_out, took, text, skips)

    def report(self, job, code, timed_out, took, text, skips):
        """Judges and prints one binary run that ended."""
        result = [l for l in text.splitlines() if l.startswith("test result:")]
        if timed_out:
            text += f"\nrun-test-binaries: killed after {self.limit:.0f} s (--limit)\n"
            why = f"killed after {self.limit:.0f} s (--limit)"
        elif code == 0 and not result:
            # libtest prints its result line whatever happens; a binary that exits 0 without
            # one did not run its tests (std::process::exit in a test, a harness-less target).
            why = "exit status 0 but no `test result:` line (libtest always prints one)"
        else:
            why = describe_exit(code)
        judged = [(test, reason, (job.pass_name, test, reason) in self.expected)
                  for test, reason in skips]
        unexpected = [(test, reason) for test, reason, ok in judged if not ok]
        with self.lock:
            self.times[job.label] = took
            if m := re.search(r"(\d+) passed", result[-1] if result else ""):
                self.passed[job.pass_name] += int(m.group(1))
            self.skips += [(job.pass_name, job.label, t, r, ok) for t, r, ok in judged]
            if why is not None:
                self.outcome[job.label] = why
                self.failed.append((job.label, why))
                self.failures[job.label] = text
                print(f"---- FAILED {job.label} ({took:.0f} s): {why}, its output:\n"
                      f"{text or '(none)'}", flush=True)
            else:
                self.outcome[job.label] = None
                # The binary's own "test result:" line goes out verbatim, as cargo prints it,
                # so whatever reads a cargo test log (CI's test count) reads this one too.
                print(f"{took:6.1f} s  {job.label}", flush=True)
                print(result[-1], flush=True)
            # Right under the result line: libtest counted these among the passed.
            if judged:
                print(f"  of which {len(judged)} skipped ({len(judged) - len(unexpected)} "
                      f"expected, {len(unexpected)} not expected):", flush=True)
            for test, reason, ok in judged:
                print(f"    skipped{'' if ok else ' (NOT EXPECTED)'}: {test}: {reason}",
                      flush=True)
            for test, reason in unexpected:
                self.failed.append((job.label, self.unexpected_why(job.pass_name, test, reason)))

    def unexpected_why(self, pass_name, test, reason):
        why = f"test {test} skipped, not an expected skip: `{pass_name} {test}: {reason}`"
        other = [r for p, t, r in self.expected if (p, t) == (pass_name, test)]
        if other:
            why += f" (expected with another reason: {other[0]})"
        return why

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


def print_skip_summary(runner, pass_names, expected, expected_file):
    """Per pass: how many tests libtest counted passed, how many of them skipped, which.
    Then the expected skips that did not happen, as a note."""
    print("run-test-binaries: skipped tests (counted passed by libtest):")
    for name in pass_names:
        skips = [s for s in runner.skips if s[0] == name]
        bad = sum(1 for s in skips if not s[4])
        print(f"  [{name}] {runner.passed[name]} passed, {len(skips)} of them skipped "
              f"({len(skips) - bad} expected, {bad} not expected){':' if skips else ''}")
        for _, label, test, reason, ok in sorted(skips, key=lambda s: (s[2], s[1])):
            print(f"    - {test}: {reason}  (in {label}){'' if ok else '  NOT EXPECTED'}")
    happened = {(p, t, r) for p, _, t, r, _ in runner.skips}
    # An entry of a pass this run did not have is neither stale nor met: say so, as a typo
    # in a pass name would else hide the entry for good.
    stale = sorted(e for e in expected - happened if e[0] in pass_names)
    foreign = sorted(e for e in expected if e[0] not in pass_names)
    if stale:
        print(f"run-test-binaries: note: expected skips that did not happen "
              f"(the tests ran; remove the entries from {expected_file}?):")
        for p, t, r in stale:
            print(f"    {p} {t}: {r}")
    if foreign:
        print(f"run-test-binaries: note: {expected_file} entries of passes this run has not "
              f"({', '.join(sorted({e[0] for e in foreign}))}): not checked")


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
    ap.add_argument("--expected-skips", metavar="FILE",
                    help="the skips that do not fail the run: `<pass> <test>: <reason>` lines "
                         "(without it, every skip fails the run)")
    args = ap.parse_args()

    # The passes, and each one's --env assignments, checked before anything runs: an assignment
    # for no pass (a typo) would else leave a pass without the server it claims.
    specs = []
    for spec in args.passes:
        name, _, pkgs = spec.partition(":")
        if not name or any(name == s[0] for s in specs):
            ap.error(f"--pass {spec}: a pass needs a name of its own")
        specs.append((name, [p for p in pkgs.split(",") if p] if pkgs else None))
    pass_names = [s[0] for s in specs]
    assignments = {name: {} for name in pass_names}
    for e in args.env:
        pass_name, _, assignment = e.partition(":")
        var, eq, value = assignment.partition("=")
        if pass_name not in assignments or not var or not eq:
            ap.error(f"--env {e}: not NAME:VAR=VALUE for one of the passes {', '.join(pass_names)}")
        if var == SKIP_LOG_VAR:
            print(f"run-test-binaries: --env {e} not used: each binary run gets a skip log "
                  f"of its own", flush=True)
            continue
        assignments[pass_name][var] = value

    expected = read_expected_skips(args.expected_skips) if args.expected_skips else set()
    bins = executables(args.build_json)
    if not bins:
        sys.exit(f"run-test-binaries: no test executable in {args.build_json}")
    known = {}
    if args.times and os.path.exists(args.times):
        with open(args.times) as f:
            known = json.load(f)
    first = [s for s in args.first.split(",") if s]

    # The caller's environment minus what picks a server (and the skip log, set per run): a pass
    # then runs on the server its own --env names, whatever the caller's shell has set.
    base_env = {k: v for k, v in os.environ.items() if k not in SERVER_VARS and k != SKIP_LOG_VAR}
    jobs = []
    unmatched = []  # (pass, package) a --pass names that no binary is of
    for name, only in specs:
        env = dict(base_env, **assignments[name])
        for pkg in only or []:
            if not any(b[0] == pkg for b in bins):
                unmatched.append((name, pkg))
                print(f"run-test-binaries: --pass {name}: no test binary of package {pkg}",
                      flush=True)
        for pkg, pkg_dir, target, kind, exe in bins:
            if only is not None and pkg not in only:
                continue
            label = f"[{name}] {pkg} {kind} {target}"
            jobs.append(Job(label, name, pkg_dir, exe, env))

    def order(job):
        pinned = next((i for i, s in enumerate(first) if s in job.label), len(first))
        return (pinned, -known.get(job.label, 0.0))

    jobs.sort(key=order)
    groups = [[s for s in g.split(",") if s] for g in args.serial]
    with tempfile.TemporaryDirectory(prefix="run-test-binaries-") as skip_dir:
        runner = Runner(jobs, args.jobs, [g for g in groups if g], args.limit, expected, skip_dir)

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
    print_skip_summary(runner, pass_names, expected, args.expected_skips or "--expected-skips")

    failed = list(runner.failed)
    # What was queued but never came to a result (all workers gone, a path run_one returns by
    # without one): failed too, or a run could pass with binaries that never ran.
    failed += [(j.label, "no result: it never ran to an end") for j in jobs
               if j.label not in runner.outcome]
    failed += [(f"--pass {p}", f"package {pkg} matches no test binary") for p, pkg in unmatched]
    if failed:
        # Again at the very end, without backtraces: a CI log shown by its head and tail keeps
        # this part, where a failure printed mid-run may be cut.
        for label, text in runner.failures.items():
            print(f"---- why {label} failed:\n" + failure_digest(text))
        print("run-test-binaries: FAILED:\n  " +
              "\n  ".join(f"{label}: {why}" for label, why in failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
