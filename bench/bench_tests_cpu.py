"""CPU of selected tests, this checkout vs another one, interleaved round by round (the machine is shared).

    python bench/bench_tests_cpu.py --other-checkout <worktree of an older commit> [--rounds 2] [tests ...]
    python bench/bench_tests_cpu.py --per-test [--top 40] [tests ...]      # one run here: CPU per test and file

Each round runs ``python -m pytest -q -p no:randomly -p no:cacheprovider <tests>`` once in each checkout (the
same virtualenv; the checkout's own packages come first on ``sys.path``, and ``PYTHONPATH`` names the checkout so
that the CLI and MCP subprocesses the tests start run its code too) and records the child's user+sys CPU seconds
(``resource.getrusage(RUSAGE_CHILDREN)``) and wall seconds. Prints JSON: per checkout the list of runs and the
median CPU, then ``ratio`` = median(this) / median(other), the 1-minute load before and after, and the CPU model.
Paths in the JSON are written ``<repo>`` / ``<other>``.

``--per-test`` loads this file as a pytest plugin (``-p bench_tests_cpu``): around each test's whole protocol
(setup, call, teardown, so a session fixture's build is charged to the first test that asks for it) it takes
``getrusage`` of the process (all threads) and of its reaped children, and prints per-file and per-test CPU
(``self_s`` = the pytest process, ``child_s`` = subprocesses reaped meanwhile), plus ``outside_s``: the run's total
CPU minus the tests' sum (start-up, collection, and children reaped only at exit, such as a session fixture's
vector child). ``--durations`` gives wall time only; on a loaded machine CPU is what compares.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: The tests made cheaper in the test-suite CPU round (the known slow thread test and the big property tests).
DEFAULT_TESTS = [
    "tests/test_tui_panes.py::test_background_results_while_the_user_types",
    "tests/test_chunker.py::test_property_generated_markdown",
    "tests/test_chunker.py::test_property_arbitrary_text",
    "tests/test_frontmatter.py::test_update_then_parse_returns_the_updates",
    "tests/test_frontmatter.py::test_parse_never_raises_and_body_is_a_suffix",
    "tests/test_scheduler.py",
]
#: Where the plugin writes one JSON line per test (set by ``--per-test`` for its pytest child).
LOG_ENV = "REME_BENCH_TEST_CPU_LOG"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _env(checkout: Path) -> dict:
    env = dict(os.environ, REME_SHARED_DATA=os.environ.get("REME_SHARED_DATA", str(REPO.parent / "shared" / "data")))
    env["PYTHONPATH"] = os.pathsep.join([str(checkout), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def run_once(checkout: Path, tests: list[str], extra: list[str] = (), env: dict | None = None) -> dict:
    """One pytest run in ``checkout``: ``{"cpu_s", "wall_s", "rc"}`` (CPU = the child's user+sys seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    rc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *extra,
                         *tests], cwd=checkout, env=env or _env(checkout), stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL).returncode
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu_s": round(cpu, 2), "wall_s": round(wall, 1), "rc": rc}


# -- the pytest plugin (``-p bench_tests_cpu``) --------------------------------------------------------------------
def _usage() -> tuple[float, float]:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime, c.ru_utime + c.ru_stime


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """Outermost wrapper of each test's protocol: append ``{"id", "self", "child", "wall"}`` to the log."""
    path = os.environ.get(LOG_ENV)
    if not path:
        yield
        return
    s0, c0 = _usage()
    t0 = time.monotonic()
    yield
    s1, c1 = _usage()
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"id": item.nodeid, "self": round(s1 - s0, 3), "child": round(c1 - c0, 3),
                             "wall": round(time.monotonic() - t0, 3)}) + "\n")


def per_test(tests: list[str], top: int) -> dict:
    """One run here with the plugin: the run's CPU, ``outside_s``, and the ``top`` files and tests by CPU."""
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "tests.jsonl"
        env = _env(REPO)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO / "bench"), env["PYTHONPATH"]])
        env[LOG_ENV] = str(log)
        run = run_once(REPO, tests, ["-p", "bench_tests_cpu"], env=env)
        rows = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []
    files: dict[str, dict] = collections.defaultdict(lambda: {"self_s": 0.0, "child_s": 0.0, "wall_s": 0.0, "n": 0})
    for r in rows:
        f = files[r["id"].split("::")[0]]
        f["self_s"] += r["self"]
        f["child_s"] += r["child"]
        f["wall_s"] += r["wall"]
        f["n"] += 1
    summed = sum(r["self"] + r["child"] for r in rows)
    by_file = sorted(files.items(), key=lambda kv: -(kv[1]["self_s"] + kv[1]["child_s"]))
    return {
        "run": run, "tests_run": len(rows), "tests_cpu_s": round(summed, 1),
        "outside_s": round(run["cpu_s"] - summed, 1),
        "files": [{"file": k, **{m: round(v, 2) if isinstance(v, float) else v for m, v in f.items()}}
                  for k, f in by_file[:top]],
        "tests": [{"id": r["id"], "cpu_s": round(r["self"] + r["child"], 2), "self_s": r["self"],
                   "child_s": r["child"], "wall_s": r["wall"]}
                  for r in sorted(rows, key=lambda r: -(r["self"] + r["child"]))[:top]],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--other-checkout", type=Path)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--per-test", action="store_true", help="one run here, CPU per test and per file")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("tests", nargs="*")
    a = ap.parse_args()
    load_before = os.getloadavg()[0]
    if a.per_test:
        out = {"selection": a.tests or ["<all>"], "this": "<repo>", **per_test(a.tests, a.top)}
    else:
        if a.other_checkout is None:
            ap.error("--other-checkout is required (or --per-test)")
        tests = a.tests or DEFAULT_TESTS
        runs: dict[str, list[dict]] = {"this": [], "other": []}
        for _ in range(a.rounds):
            runs["other"].append(run_once(a.other_checkout, tests))
            runs["this"].append(run_once(REPO, tests))
        med = {k: statistics.median(r["cpu_s"] for r in v) for k, v in runs.items()}
        out = {"tests": tests, "rounds": a.rounds, "this": "<repo>", "other": "<other>", "runs": runs,
               "median_cpu_s": med, "ratio": round(med["this"] / med["other"], 3) if med["other"] else None}
    out.update(load_1min=[round(load_before, 2), round(os.getloadavg()[0], 2)], cpu_model=_cpu_model())
    print(json.dumps(out, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
