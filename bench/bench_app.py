"""First paint of the real app: ``reme-tui --vault …`` started in a tmux pane until its main screen is on screen.

The clock starts just before tmux starts the process and stops when ``tmux capture-pane`` first shows the main
screen's pane titles (polled every 10 ms), so it includes interpreter start-up, imports, opening the engine and
Textual's first layout — what the user waits for. Vaults: the demo vault (30 notes) and copies of
knowledge-garden-zh (3,176 notes) and of that vault ten times (31,760 notes), each with its index already built
(the usual start), offline embedder with the vault's vectors from the bench cache for knowledge-garden-zh.
Target: ≤ 0.5 s. Also reports each start's import time of ``reme_tui.app`` (``python -X importtime``).

Prints one JSON object. ``--runs`` starts per vault (default 7, one discarded warm-up), ``--quick``: 3 runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (VAULT_ZH, bench_tmpdir, copy_tree, emit, index_with_cache, loaded_embedder, log,  # noqa: E402
                     machine, open_engine, stats, target)

#: What the main screen shows once laid out (pane titles; any one of them counts as painted).
MARKERS = ("Daily", "Links", "Agenda")


def first_paint(exe: str, vault: Path, state: Path, sock: str, embedder: str) -> float | None:
    subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)
    env = {**os.environ, "TERM": "xterm-256color"}
    cmd = f"{exe} --vault {vault} --state-dir {state} --embedder {embedder}"
    t0 = time.perf_counter()
    subprocess.run(["tmux", "-S", sock, "new-session", "-d", "-x", "160", "-y", "48", cmd], check=True, env=env)
    painted = None
    while time.perf_counter() - t0 < 20:
        screen = subprocess.run(["tmux", "-S", sock, "capture-pane", "-p"], capture_output=True, text=True).stdout
        if sum(m in screen for m in MARKERS) >= 2:
            painted = time.perf_counter() - t0
            break
        time.sleep(0.01)
    subprocess.run(["tmux", "-S", sock, "send-keys", "q"], capture_output=True)
    time.sleep(0.5)
    subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)
    return painted


def import_ms() -> float:
    """Cumulative import time of ``reme_tui.app`` in a fresh interpreter (µs summed by ``-X importtime``)."""
    p = subprocess.run([sys.executable, "-X", "importtime", "-c", "import reme_tui.app"], capture_output=True,
                       text=True)
    for line in reversed(p.stderr.splitlines()):
        if line.rstrip().endswith("reme_tui.app"):
            return round(int(line.split("|")[1]) / 1000, 1)
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sizes", default="demo,zh,zh10")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.runs = 3
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is required")
    exe = shutil.which("reme-tui", path=str(Path(sys.executable).parent)) or "reme-tui"
    out: dict = {"bench": "app_first_paint", "machine": machine(), "args": vars(args), "vaults": []}
    with bench_tmpdir("app", args.keep) as tmp:
        sock = str(tmp / "tmux.sock")
        for size in args.sizes.split(","):
            if size == "demo":
                from reme_engine.demo import demo_vault_source

                vault, embedder = copy_tree(demo_vault_source(), tmp / "demo"), "offline"
                eng = open_engine(vault, tmp / "demo-state", embed=True)
                eng.index()
                eng.close()
                state = tmp / "demo-state"
            elif size == "zh":
                vault, embedder = copy_tree(VAULT_ZH, tmp / "zh"), "offline"
                emb, _ = loaded_embedder()
                state, _ = index_with_cache(vault, tmp / "zh-state", emb, True, "cli-vault")
            else:  # zh10: keyword + graph only (no cached vectors for it)
                vault, embedder = copy_tree(VAULT_ZH, tmp / "zh10"), "none"
                for k in range(1, 10):
                    shutil.copytree(VAULT_ZH, vault / f"copy-{k}", symlinks=True, ignore=shutil.ignore_patterns(".*"))
                eng = open_engine(vault, tmp / "zh10-state", embed=False)
                eng.index()
                eng.close()
                state = tmp / "zh10-state"
            notes = sum(1 for _ in vault.rglob("*.md"))
            samples = []
            for i in range(args.runs + 1):
                t = first_paint(exe, vault, state, sock, embedder)
                if i and t is not None:
                    samples.append(t)
            row = {"vault": size, "notes": notes, "embedder": embedder, "first_paint_s": stats(samples),
                   "target": target(stats(samples).get("median"), 0.5)}
            log(f"{size} ({notes} notes): first paint median {row['first_paint_s'].get('median')} s")
            out["vaults"].append(row)
    out["import_reme_tui_app_ms"] = stats([import_ms() for _ in range(5)], 1)
    emit(out)


if __name__ == "__main__":
    main()
