"""First paint of the real app: ``reme-tui --vault …`` started in a tmux pane until its main screen is on screen.

The clock starts just before tmux starts the process and stops when ``tmux capture-pane`` first shows the main
screen's pane titles (polled every 10 ms), so it includes interpreter start-up, imports, opening the engine and
Textual's first layout — what the user waits for. Vaults: the demo vault (30 notes) and copies of
knowledge-garden-zh (3,176 notes) and of that vault ten times (31,760 notes), each with its index already built
(the usual start), offline embedder with the vault's vectors from the bench cache for knowledge-garden-zh.
Target: ≤ 0.5 s. Also reports each start's import time of ``reme_tui.app`` (``python -X importtime``).

Prints one JSON object. ``--runs`` starts per vault (default 7, one discarded warm-up), ``--quick``: 3 runs.
``--other-checkout DIR`` (e.g. a ``git worktree`` of an older commit) starts that checkout's app too
(``PYTHONPATH``, ``python -P``) on the same vault and state, the two sides alternating start by start, so a
loaded machine affects both alike; compare the per-side medians of one run.

Bytecode: a user's installed app starts from compiled bytecode (pip compiles a wheel's modules; an editable
install writes ``__pycache__`` on the first start). A fresh checkout run with ``PYTHONDONTWRITEBYTECODE=1`` (as
some shells here set it) compiles every module of ``reme_tui`` and ``reme_engine`` on every start (~0.1 s). So the
starts here drop that variable and keep bytecode in the bench's temp dir (``PYTHONPYCACHEPREFIX``; the discarded
warm-up start compiles); ``--no-bytecode-cache`` keeps the caller's environment (``bytecode`` in the JSON says which).
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


def first_paint(exe: str, vault: Path, state: Path, sock: str, embedder: str, pycache: Path | None = None
                ) -> tuple[float | None, float | None]:
    """(seconds from launching ``exe`` in a new tmux server to the main screen in ``capture-pane``, the app's CPU
    seconds by then); (None, None) when not within 20 s. ``pycache``: keep bytecode there (``PYTHONPYCACHEPREFIX``) instead of the caller's setting."""
    subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)
    env = {**os.environ, "TERM": "xterm-256color"}
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    cmd = f"{exe} --vault {vault} --state-dir {state} --embedder {embedder}"
    t0 = time.perf_counter()
    subprocess.run(["tmux", "-S", sock, "new-session", "-d", "-x", "160", "-y", "48", cmd], check=True, env=env)
    painted = cpu = None
    while time.perf_counter() - t0 < 20:
        screen = subprocess.run(["tmux", "-S", sock, "capture-pane", "-p"], capture_output=True, text=True).stdout
        if sum(m in screen for m in MARKERS) >= 2:
            painted = time.perf_counter() - t0
            cpu = process_cpu_s(sock)
            break
        time.sleep(0.01)
    subprocess.run(["tmux", "-S", sock, "send-keys", "q"], capture_output=True)
    time.sleep(0.5)
    subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)
    return painted, cpu


def process_cpu_s(sock: str) -> float | None:
    """user+sys CPU seconds so far of the process in the tmux pane (``/proc/<pid>/stat``, clock ticks): under
    load, wall time is mostly waiting for a core, CPU time is the app's own work."""
    pid = subprocess.run(["tmux", "-S", sock, "display", "-p", "#{pane_pid}"], capture_output=True,
                         text=True).stdout.strip()
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 3)
    except (OSError, ValueError, IndexError):
        return None


def side_exe(root: str | None) -> str:
    """The command that starts the app of this checkout (``root`` None) or of the checkout at ``root``."""
    if root is None:
        return shutil.which("reme-tui", path=str(Path(sys.executable).parent)) or "reme-tui"
    # -P: no current directory on sys.path (it would put this checkout ahead of PYTHONPATH)
    return f"env PYTHONPATH={root} {sys.executable} -P -c 'from reme_tui.cli import main; main()'"


def import_ms(root: str | None = None, pycache: Path | None = None) -> float:
    """Cumulative import time of ``reme_tui.app`` in a fresh interpreter (µs summed by ``-X importtime``), ms;
    ``root``/``pycache`` as for the app's starts."""
    env = {**os.environ, "PYTHONPATH": root} if root else dict(os.environ)
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    p = subprocess.run([sys.executable, "-P", "-X", "importtime", "-c", "import reme_tui.app"],
                       capture_output=True, text=True, env=env)
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
    ap.add_argument("--other-checkout", type=Path, help="another checkout's app, alternating start by start")
    ap.add_argument("--no-bytecode-cache", action="store_true",
                    help="keep the caller's bytecode setting (else bytecode is cached in the bench's temp dir)")
    args = ap.parse_args()
    if args.quick:
        args.runs = 3
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is required")
    sides = {"this": None}
    if args.other_checkout:
        sides["other"] = str(args.other_checkout.resolve())
        args.other_checkout = "<other checkout>"
    out: dict = {"bench": "app_first_paint", "machine": machine(), "args": vars(args), "vaults": []}
    with bench_tmpdir("app", args.keep) as tmp:
        sock = str(tmp / "tmux.sock")
        pycache = None if args.no_bytecode_cache else tmp / "pycache"
        out["bytecode"] = ("cached (PYTHONPYCACHEPREFIX in the bench's temp dir)" if pycache is not None else
                           f"caller's environment (PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r})")
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
            samples: dict[str, list[float]] = {k: [] for k in sides}
            cpus: dict[str, list[float]] = {k: [] for k in sides}
            for i in range(args.runs + 1):
                for side, root in sides.items():
                    t, cpu = first_paint(side_exe(root), vault, state, sock, embedder, pycache)
                    if i and t is not None:
                        samples[side].append(t)
                        if cpu is not None:
                            cpus[side].append(cpu)
            row = {"vault": size, "notes": notes, "embedder": embedder, "first_paint_s": stats(samples["this"]),
                   "first_paint_cpu_s": stats(cpus["this"]),
                   "target": target(stats(samples["this"]).get("median"), 0.5)}
            if "other" in sides:
                row["other_first_paint_s"] = stats(samples["other"])
                row["other_first_paint_cpu_s"] = stats(cpus["other"])
            log(f"{size} ({notes} notes): first paint median {row['first_paint_s'].get('median')} s"
                f" (CPU {row['first_paint_cpu_s'].get('median')} s)"
                + (f", other checkout {row['other_first_paint_s'].get('median')} s"
                   f" (CPU {row['other_first_paint_cpu_s'].get('median')} s)" if "other" in sides else ""))
            out["vaults"].append(row)
            out["loadavg_1min"] = out.get("loadavg_1min", []) + [round(os.getloadavg()[0], 2)]
        out["import_reme_tui_app_ms"] = stats([import_ms(None, pycache) for _ in range(5)], 1)
        if "other" in sides:
            out["other_import_reme_tui_app_ms"] = stats([import_ms(sides["other"], pycache) for _ in range(5)], 1)
    emit(out)


if __name__ == "__main__":
    main()
