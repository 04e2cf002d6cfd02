"""Tests of e2e/run-test-binaries.py, the runner `make test` runs the test binaries with.

Each test writes a fake `cargo test --no-run --message-format=json` build log whose test
executables are small shell scripts, runs the runner on it as a subprocess (bounded by a
timeout), and checks its exit status and the line that names the problem. Standard library only:
`python3 -m unittest discover -s e2e/runner-tests -v` (what `make test` runs first).
"""

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import unittest

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "run-test-binaries.py")
RUNNER = os.path.normpath(RUNNER)
# A whole runner run here takes well under a second; this only bounds a hang.
TIMEOUT = 60

# libtest's result line, as a fake binary prints it when it passes.
OK_LINE = "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s"
PASS = f'echo "running 1 test"; echo "."; echo ""; echo "{OK_LINE}"\n'


class RunnerTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="runner-test-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.artifacts = []
        # The caller's environment, without what would pick a server or a skip log: each test
        # adds what it means to check.
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("KUBEBUILDER_ASSETS", "USE_EXISTING_CLUSTER",
                                 "STRATA_ENVTEST_SKIP_LOG")}

    def binary(self, pkg, target, script=PASS, kind="test", mode=0o755, create=True):
        """Adds to the build log a test executable of package `pkg`: a shell script with
        `script` as its body (or, create=False, a path with no file)."""
        pkg_dir = os.path.join(self.dir, pkg)
        os.makedirs(pkg_dir, exist_ok=True)
        exe = os.path.join(self.dir, "deps", f"{target}-0123456789abcdef")
        os.makedirs(os.path.dirname(exe), exist_ok=True)
        if create:
            with open(exe, "w") as f:
                f.write("#!/bin/sh\n" + textwrap.dedent(script))
            os.chmod(exe, mode)
        # Shaped as cargo's compiler-artifact message of a test target.
        self.artifacts.append({
            "reason": "compiler-artifact",
            "package_id": f"path+file://{pkg_dir}#{pkg}@0.1.0",
            "manifest_path": os.path.join(pkg_dir, "Cargo.toml"),
            "target": {"kind": [kind], "crate_types": ["bin"], "name": target,
                       "src_path": os.path.join(pkg_dir, "tests", f"{target}.rs"),
                       "edition": "2021", "doctest": False, "test": True},
            "profile": {"opt_level": "0", "debuginfo": 2, "debug_assertions": True,
                        "overflow_checks": True, "test": True},
            "features": [],
            "filenames": [exe],
            "executable": exe,
            "fresh": False,
        })
        return exe

    def expected_skips(self, *entries):
        path = os.path.join(self.dir, "expected-skips.txt")
        with open(path, "w") as f:
            f.write("# pass test: reason\n\n" + "".join(e + "\n" for e in entries))
        return path

    def run_runner(self, *args, passes=("memory",), runner=None):
        """Runs the runner on the build log; (exit status, stdout + stderr)."""
        build = os.path.join(self.dir, "test-build.json")
        with open(build, "w") as f:
            # What else such a log holds, which the runner must pass over: a library artifact
            # (no test profile), a line that is not JSON, the build's end.
            f.write(json.dumps({"reason": "compiler-artifact", "executable": None,
                                "profile": {"test": False}}) + "\n")
            f.write("warning: not json\n")
            for a in self.artifacts:
                f.write(json.dumps(a) + "\n")
            f.write(json.dumps({"reason": "build-finished", "success": True}) + "\n")
        cmd = [sys.executable] + (runner or [RUNNER]) + [build, "--jobs", "2"]
        for p in passes:
            cmd += ["--pass", p]
        cmd += list(args)
        proc = subprocess.run(cmd, env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=TIMEOUT, cwd=self.dir)
        return proc.returncode, proc.stdout.decode("utf-8", "replace")

    def assertLine(self, output, *parts):
        """Some line of the output holds every one of `parts`."""
        if not any(all(p in line for p in parts) for line in output.splitlines()):
            self.fail(f"no line with {parts!r} in the output:\n{output}")

    def test_a_passing_run_passes_and_prints_the_result_line_verbatim(self):
        self.binary("strata-e2e", "lifecycle")
        self.binary("strata-crds", "samples")
        code, out = self.run_runner("--expected-skips", self.expected_skips())
        self.assertEqual(code, 0, out)
        self.assertIn(OK_LINE + "\n", out)
        self.assertLine(out, "[memory] strata-e2e test lifecycle")
        self.assertLine(out, "[memory] strata-crds test samples")
        self.assertLine(out, "[memory] 2 passed, 0 of them skipped")
        self.assertNotIn("FAILED", out)

    def test_a_failing_binary_fails_the_run_with_its_digest(self):
        self.binary("strata-e2e", "lifecycle", """\
            echo "failures:"
            echo "    it_breaks"
            echo "test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s"
            exit 101
            """)
        code, out = self.run_runner()
        self.assertEqual(code, 1, out)
        self.assertLine(out, "---- FAILED [memory] strata-e2e test lifecycle", "exit status 101")
        self.assertLine(out, "---- why [memory] strata-e2e test lifecycle failed:")
        self.assertLine(out, "  [memory] strata-e2e test lifecycle: exit status 101")

    def test_a_missing_executable_fails_the_run_by_name_and_the_others_still_run(self):
        self.binary("strata-e2e", "lifecycle", create=False)
        self.binary("strata-crds", "samples")
        code, out = self.run_runner()
        self.assertEqual(code, 1, out)
        self.assertLine(out, "[memory] strata-e2e test lifecycle: could not start")
        self.assertIn(OK_LINE, out)  # the other binary ran
        self.assertLine(out, "run-test-binaries: FAILED:")

    def test_a_non_executable_file_fails_the_run_by_name(self):
        self.binary("strata-e2e", "lifecycle", mode=0o644)
        code, out = self.run_runner()
        self.assertEqual(code, 1, out)
        self.assertLine(out, "[memory] strata-e2e test lifecycle: could not start", "ermission")

    def test_a_package_that_matches_no_binary_fails_the_run(self):
        self.binary("strata-e2e", "lifecycle")
        code, out = self.run_runner(passes=("memory", "kube:strata-e2e,strata-envtset"))
        self.assertEqual(code, 1, out)
        self.assertLine(out, "--pass kube: package strata-envtset matches no test binary")
        self.assertLine(out, "[kube] strata-e2e test lifecycle")  # the rest of the pass ran

    def skipping_binary(self, test="the_gc_runs", reason="needs the garbage collector: none",
                        log=True, to="stderr"):
        """A binary that skips one test as e2e/envtest/tests/common/mod.rs `skip_if` does:
        prints `SKIPPED <test>: <reason>` and (log) appends `<test>: <reason>` to the skip log."""
        redirect = " >&2" if to == "stderr" else ""
        append = f'echo "{test}: {reason}" >> "$STRATA_ENVTEST_SKIP_LOG"\n' if log else ""
        self.binary("strata-envtest", "api",
                    f'echo "SKIPPED {test}: {reason}"{redirect}\n' + append + PASS)

    def test_an_unexpected_skip_fails_the_run_naming_pass_binary_and_test(self):
        self.skipping_binary()
        code, out = self.run_runner("--expected-skips", self.expected_skips(),
                                    passes=("kube:strata-envtest",))
        self.assertEqual(code, 1, out)
        self.assertLine(out, "[kube] strata-envtest test api: test the_gc_runs skipped, "
                             "not an expected skip: `kube the_gc_runs: needs the garbage "
                             "collector: none`")
        self.assertLine(out, "[kube] 1 passed, 1 of them skipped (0 expected, 1 not expected)")

    def test_without_an_expected_list_every_skip_is_unexpected(self):
        self.skipping_binary()
        code, out = self.run_runner(passes=("kube:strata-envtest",))
        self.assertEqual(code, 1, out)
        self.assertLine(out, "test the_gc_runs skipped, not an expected skip")

    def test_an_expected_skip_passes_and_prints_as_a_skip_with_counts(self):
        self.skipping_binary()
        skips = self.expected_skips("kube the_gc_runs: needs the garbage collector: none")
        code, out = self.run_runner("--expected-skips", skips, passes=("kube:strata-envtest",))
        self.assertEqual(code, 0, out)
        self.assertIn(OK_LINE, out)
        self.assertLine(out, "of which 1 skipped (1 expected, 0 not expected)")
        self.assertLine(out, "skipped: the_gc_runs: needs the garbage collector: none")
        self.assertLine(out, "[kube] 1 passed, 1 of them skipped (1 expected, 0 not expected)")
        self.assertLine(out, "- the_gc_runs: needs the garbage collector: none",
                        "(in [kube] strata-envtest test api)")
        self.assertNotIn("NOT EXPECTED", out)

    def test_a_skip_expected_in_another_pass_or_for_another_reason_is_unexpected(self):
        self.skipping_binary()
        skips = self.expected_skips("memory the_gc_runs: needs the garbage collector: none",
                                    "kube the_gc_runs: another reason")
        code, out = self.run_runner("--expected-skips", skips, passes=("kube:strata-envtest",))
        self.assertEqual(code, 1, out)
        self.assertLine(out, "test the_gc_runs skipped, not an expected skip",
                        "expected with another reason: another reason")

    def test_a_skip_printed_but_not_logged_counts_once_logged_and_printed(self):
        # Printed on stdout after libtest's progress dots, not logged: still a skip.
        self.binary("strata-envtest", "api",
                    'printf "..SKIPPED quiet_one: no log\\n"\n' + PASS)
        code, out = self.run_runner("--expected-skips", self.expected_skips(),
                                    passes=("kube:strata-envtest",))
        self.assertEqual(code, 1, out)
        self.assertLine(out, "test quiet_one skipped, not an expected skip: `kube quiet_one: no log`")
        # Logged and printed: one skip, not two.
        self.artifacts.clear()
        self.skipping_binary()
        skips = self.expected_skips("kube the_gc_runs: needs the garbage collector: none")
        code, out = self.run_runner("--expected-skips", skips, passes=("kube:strata-envtest",))
        self.assertEqual(code, 0, out)
        self.assertLine(out, "[kube] 1 passed, 1 of them skipped (1 expected, 0 not expected)")

    def test_an_expected_skip_that_did_not_happen_is_a_note_not_a_failure(self):
        self.binary("strata-envtest", "api")
        skips = self.expected_skips("kube the_gc_runs: needs the garbage collector: none",
                                    "other some_test: some reason")
        code, out = self.run_runner("--expected-skips", skips, passes=("kube:strata-envtest",))
        self.assertEqual(code, 0, out)
        self.assertLine(out, "note: expected skips that did not happen")
        self.assertLine(out, "kube the_gc_runs: needs the garbage collector: none")
        self.assertLine(out, "note:", "entries of passes this run has not (other)")

    def test_a_malformed_expected_skips_line_ends_the_run(self):
        self.binary("strata-envtest", "api")
        code, out = self.run_runner("--expected-skips", self.expected_skips("kube no_reason"))
        self.assertNotEqual(code, 0, out)
        self.assertLine(out, "expected-skips.txt:3: not `<pass> <test>: <reason>`: kube no_reason")

    def test_each_run_gets_a_fresh_skip_log_whatever_env_says(self):
        given = os.path.join(self.dir, "given-skips.txt")
        # Fails unless its skip log exists, is empty and is not the one --env names.
        self.binary("strata-envtest", "api", f"""\
            [ -f "$STRATA_ENVTEST_SKIP_LOG" ] && [ ! -s "$STRATA_ENVTEST_SKIP_LOG" ] || exit 3
            [ "$STRATA_ENVTEST_SKIP_LOG" != "{given}" ] || exit 4
            echo "x: y" >> "$STRATA_ENVTEST_SKIP_LOG"
            """ + PASS)
        self.env["STRATA_ENVTEST_SKIP_LOG"] = given
        skips = self.expected_skips("memory x: y", "kube x: y")
        code, out = self.run_runner("--expected-skips", skips, f"--env=kube:STRATA_ENVTEST_SKIP_LOG={given}",
                                    passes=("memory", "kube"))
        self.assertEqual(code, 0, out)
        self.assertLine(out, "[memory] 1 passed, 1 of them skipped (1 expected")
        self.assertLine(out, "[kube] 1 passed, 1 of them skipped (1 expected")
        self.assertFalse(os.path.exists(given))

    def test_a_binary_killed_by_a_signal_fails_the_run_by_name(self):
        self.binary("strata-e2e", "chaos", 'echo "running 1 test"\nkill -9 $$\n')
        code, out = self.run_runner()
        self.assertEqual(code, 1, out)
        self.assertLine(out, "---- FAILED [memory] strata-e2e test chaos", "killed by signal 9 (SIGKILL)")
        self.assertLine(out, "  [memory] strata-e2e test chaos: killed by signal 9 (SIGKILL)")

    def test_a_binary_over_the_limit_is_killed_and_fails_the_run(self):
        self.binary("strata-e2e", "chaos", 'echo "running 1 test"\nsleep 30\n')
        code, out = self.run_runner("--limit", "1")
        self.assertEqual(code, 1, out)
        self.assertLine(out, "  [memory] strata-e2e test chaos: killed after 1 s (--limit)")

    def test_exit_status_0_without_a_result_line_fails_the_run(self):
        self.binary("strata-e2e", "lifecycle", 'echo "running 1 test"\nexit 0\n')
        code, out = self.run_runner()
        self.assertEqual(code, 1, out)
        self.assertLine(out, "[memory] strata-e2e test lifecycle: exit status 0 but no "
                             "`test result:` line")

    def test_each_pass_gets_exactly_its_environment(self):
        assets = os.path.join(self.dir, "kube-assets")
        # Prints what it sees; fails when a server variable is not what its pass claims.
        self.binary("strata-e2e", "lifecycle", """\
            echo "sees assets=${KUBEBUILDER_ASSETS-unset} existing=${USE_EXISTING_CLUSTER-unset} other=${OTHER-unset}"
            case "$PASS_NAME" in
              memory) [ -z "${KUBEBUILDER_ASSETS+x}" ] && [ -z "${USE_EXISTING_CLUSTER+x}" ] || exit 5 ;;
              kube) [ "$KUBEBUILDER_ASSETS" = "$WANT_ASSETS" ] && [ -z "${USE_EXISTING_CLUSTER+x}" ] || exit 6 ;;
              *) exit 7 ;;
            esac
            [ "$OTHER" = "kept" ] || exit 8
            """ + PASS)
        # The caller has a real server selected: the memory pass must not see it.
        self.env.update(KUBEBUILDER_ASSETS="/callers/assets", USE_EXISTING_CLUSTER="true",
                        OTHER="kept")
        code, out = self.run_runner(
            "--env", "memory:PASS_NAME=memory",
            "--env", "kube:PASS_NAME=kube",
            "--env", f"kube:KUBEBUILDER_ASSETS={assets}",
            "--env", f"kube:WANT_ASSETS={assets}",
            "--expected-skips", self.expected_skips(),
            passes=("memory", "kube:strata-e2e"))
        self.assertEqual(code, 0, out)
        self.assertLine(out, "[memory] strata-e2e test lifecycle")
        self.assertLine(out, "[kube] strata-e2e test lifecycle")
        self.assertEqual(out.count(OK_LINE), 2, out)

    def test_the_memory_pass_fails_on_kubebuilder_assets_from_the_caller(self):
        # The same check without --env: a binary that fails when it sees KUBEBUILDER_ASSETS.
        self.binary("strata-e2e", "lifecycle",
                    '[ -z "${KUBEBUILDER_ASSETS+x}" ] || { echo "sees $KUBEBUILDER_ASSETS"; exit 9; }\n'
                    + PASS)
        self.env["KUBEBUILDER_ASSETS"] = "/callers/assets"
        code, out = self.run_runner()
        self.assertEqual(code, 0, out)
        self.assertNotIn("sees", out)

    def test_an_env_for_no_pass_is_refused(self):
        self.binary("strata-e2e", "lifecycle")
        code, out = self.run_runner("--env", "kub:KUBEBUILDER_ASSETS=/x", passes=("memory", "kube"))
        self.assertEqual(code, 2, out)
        self.assertLine(out, "--env kub:KUBEBUILDER_ASSETS=/x: not NAME:VAR=VALUE")

    def patched_runner(self, patch):
        """Runs the runner's main() with `patch` (Python source, the module as `m`) applied
        first: how a test reaches a fault no fake binary can cause."""
        script = os.path.join(self.dir, "patched_runner.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(f"""\
                import importlib.util, sys
                spec = importlib.util.spec_from_file_location("runner", {RUNNER!r})
                m = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(m)
                """) + textwrap.dedent(patch) + "m.main()\n")
        return [script]

    def test_an_exception_in_a_worker_fails_that_binary_and_the_others_still_run(self):
        self.binary("strata-e2e", "lifecycle")
        self.binary("strata-crds", "samples")
        self.binary("strata-operator", "rbac")
        runner = self.patched_runner("""\
            run_one = m.Runner.run_one
            def boom(self, job):
                if "lifecycle" in job.label:
                    raise OSError(26, "Text file busy")
                return run_one(self, job)
            m.Runner.run_one = boom
            """)
        code, out = self.run_runner(runner=runner)
        self.assertEqual(code, 1, out)
        self.assertLine(out, "[memory] strata-e2e test lifecycle: the runner failed running it")
        self.assertIn("Text file busy", out)
        self.assertEqual(out.count(OK_LINE), 2, out)

    def test_a_queued_binary_that_never_ran_fails_the_run(self):
        self.binary("strata-e2e", "lifecycle")
        self.binary("strata-crds", "samples")
        # Every worker gone at once: the queue never drains.
        runner = self.patched_runner("m.Runner.worker = lambda self: None\n")
        code, out = self.run_runner(runner=runner)
        self.assertEqual(code, 1, out)
        self.assertLine(out, "[memory] strata-e2e test lifecycle: no result: it never ran to an end")
        self.assertLine(out, "[memory] strata-crds test samples: no result: it never ran to an end")

    def test_times_are_written_and_first_runs_first(self):
        self.binary("strata-e2e", "chaos")
        self.binary("strata-crds", "samples")
        times = os.path.join(self.dir, "times.json")
        code, out = self.run_runner("--times", times, "--first", "chaos", "--jobs", "1")
        self.assertEqual(code, 0, out)
        with open(times) as f:
            self.assertEqual(sorted(json.load(f)),
                             ["[memory] strata-crds test samples", "[memory] strata-e2e test chaos"])
        self.assertLess(out.index("strata-e2e test chaos"), out.index("strata-crds test samples"))

    def test_a_serial_group_never_overlaps(self):
        # Each fails when it finds the other's lock: they must run one after the other.
        lock = os.path.join(self.dir, "lock")
        body = f"""\
            [ -e "{lock}" ] && exit 3
            touch "{lock}"; sleep 0.3; rm -f "{lock}"
            """ + PASS
        self.binary("strata-operator", "cli", body)
        self.binary("strata-translator", "cli", body)
        code, out = self.run_runner(
            "--serial", "strata-operator test cli,strata-translator test cli")
        self.assertEqual(code, 0, out)


if __name__ == "__main__":
    unittest.main()
