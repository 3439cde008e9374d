"""CPU of selected tests, this checkout vs another one, interleaved round by round (the machine is shared).

    python bench/bench_tests_cpu.py --other-checkout <worktree of an older commit> [--rounds 2] [tests ...]

Each round runs ``python -m pytest -q -p no:randomly -p no:cacheprovider <tests>`` once in each checkout (the
same virtualenv; the checkout's own packages come first on ``sys.path``) and records the child's user+sys CPU
seconds (``resource.getrusage(RUSAGE_CHILDREN)``) and wall seconds. Prints JSON: per checkout the list of runs
and the median CPU, then ``ratio`` = median(this) / median(other), the 1-minute load before and after, and the CPU
model. Paths in the JSON are written ``<repo>`` / ``<other>``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

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


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def run_once(checkout: Path, tests: list[str]) -> dict:
    """One pytest run in ``checkout``: ``{"cpu_s", "wall_s", "rc"}`` (CPU = the child's user+sys seconds)."""
    env = dict(os.environ, REME_SHARED_DATA=os.environ.get("REME_SHARED_DATA", str(REPO.parent / "shared" / "data")))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    rc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *tests],
                        cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu_s": round(cpu, 2), "wall_s": round(wall, 1), "rc": rc}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--other-checkout", required=True, type=Path)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("tests", nargs="*", default=DEFAULT_TESTS)
    a = ap.parse_args()
    runs: dict[str, list[dict]] = {"this": [], "other": []}
    load_before = os.getloadavg()[0]
    for _ in range(a.rounds):
        runs["other"].append(run_once(a.other_checkout, a.tests))
        runs["this"].append(run_once(REPO, a.tests))
    med = {k: statistics.median(r["cpu_s"] for r in v) for k, v in runs.items()}
    print(json.dumps({
        "tests": a.tests, "rounds": a.rounds, "this": "<repo>", "other": "<other>", "runs": runs,
        "median_cpu_s": med, "ratio": round(med["this"] / med["other"], 3) if med["other"] else None,
        "load_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)], "cpu_model": _cpu_model(),
    }, indent=1))


if __name__ == "__main__":
    main()
