"""Racing saves (ARCHITECTURE §8): a user's saves against the app's own edits of the same note, at the same moment.

A *user* process saves one note again and again, the way editors do:

``atomic``   write a temp file beside the note, then rename it over the note (most editors, Obsidian);
``inplace``  open the note with truncation and write it in two halves (``echo >``, vim without a backup copy);
``mixed``    either, at random.

Each save appends one more ``user <i>`` line to the user's own buffer (the editor's text) and writes the whole
buffer; the app's latest ``engine: <n>`` line is taken from the file just before (an editor reloading an
externally changed file). Between saves the user waits 0–``--gap-ms`` ms (default 100), then checks the file on disk: every ``user``
line saved so far must be there (else that save was **lost**) and the note must end with its closing line (else
it is **truncated**).

The *app* is a second process that edits the same note in a loop through the engine façade
(``Engine.edit``: bump the ``engine: <n>`` line), as ``reme-tui job edit`` does, as fast as it can; optionally a
third runs ``reme-tui --serve`` on the vault (watcher, re-indexing on every save). Its edits that find the note
changed under them are refused (conflicts); the figure that matters is that none of them lands over a user save.

``--app core`` replaces the engine loop by the write primitive alone (``read_text`` then ``atomic_write`` with the
read's hash, no index work), which races many times more often.

A save missing from the note at a check but present in a ``race (conflict <time>).md`` copy beside it (the app
displaced it and another save then held the note) is ``kept_as_conflict_copy``, not lost; ``missing_from_note``
counts both.

Target: 0 lost and 0 truncated in at least 500 saves of each kind. Prints one JSON object.
Run: ``python bench/bench_race.py --saves 500`` (``--serve`` adds the running service).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, log, machine  # noqa: E402

HEADER = "---\nname: race\n---\n# Racing note\n\nengine: 0\n\n"
FOOTER = "END-OF-NOTE\n"

ENGINE_LOOP = r"""
import json, re, sys, time
from reme_engine.config import load_settings
from reme_engine.engine import Engine, EngineError
vault, state, stop_file = sys.argv[1], sys.argv[2], sys.argv[3]
ok = conflicts = other = 0
with Engine.open(load_settings({"vault": vault, "state_dir": state, "embedder": {"kind": "none"}}, env={})) as eng:
    import os
    open(stop_file + ".ready", "w").close()
    while not os.path.exists(stop_file):
        try:
            text = eng.read("race.md").text
            m = re.search(r"^engine: (\d+)$", text, re.M)
            if not m:
                other += 1
                continue
            eng.edit("race.md", m.group(0), f"engine: {int(m.group(1)) + 1}")
            ok += 1
        except EngineError as exc:
            msg = str(exc)
            if "changed on disk" in msg or "being written" in msg or "removed since" in msg:
                conflicts += 1
            else:
                other += 1
print(json.dumps({"edits_applied": ok, "conflicts": conflicts, "other_refusals": other}))
"""


CORE_LOOP = r"""
import json, os, re, sys
from pathlib import Path
from reme_engine.vault.io import SkipFile, WriteConflict, atomic_write, read_text
import reme_engine
vault, state, stop_file = sys.argv[1], sys.argv[2], sys.argv[3]
note = Path(vault) / "race.md"
ok = conflicts = other = 0
open(stop_file + ".ready", "w").close()
while not os.path.exists(stop_file):
    try:
        tf = read_text(note, 1 << 24)
        m = re.search(r"^engine: (\d+)$", tf.text, re.M)
        if not m:
            other += 1
            continue
        atomic_write(note, tf.text.replace(m.group(0), f"engine: {int(m.group(1)) + 1}"), expected_sha=tf.sha)
        ok += 1
    except (WriteConflict, SkipFile, FileNotFoundError):
        conflicts += 1
print(json.dumps({"edits_applied": ok, "conflicts": conflicts, "other_refusals": other,
                  "engine_at": reme_engine.__file__}))
"""


def _save(path: Path, text: str, kind: str) -> None:
    if kind == "atomic":
        tmp = path.with_name(".race.md.swp")
        with open(tmp, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    else:
        with open(path, "w") as fh:
            half = len(text) // 2
            fh.write(text[:half])
            fh.flush()
            os.sched_yield()
            fh.write(text[half:])


def run_kind(kind: str, saves: int, serve: bool, seed: int, args_gap: float, src: Path = REPO,
             app: str = "engine", tmp_root: str | None = None) -> dict:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="reme-race-", dir=tmp_root) as td:
        root = Path(td)
        vault, state = root / "vault", root / "state"
        vault.mkdir()
        note = vault / "race.md"
        user_lines: list[str] = []
        note.write_text(HEADER + FOOTER)
        # ``-S`` and an explicit path: the editable install's import hook would otherwise win over PYTHONPATH
        site_dirs = [p for p in sys.path if p.endswith("site-packages")]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(src), *site_dirs]), REME_EMBEDDER="none", REME_STATE_DIR=str(state),
                   XDG_CONFIG_HOME=str(root / "cfg"), XDG_DATA_HOME=str(root / "data"))
        serve_proc = None
        if serve:
            serve_proc = subprocess.Popen([sys.executable, "-m", "reme_tui.cli", "--serve", "--vault", str(vault)],
                                          env=dict(env, REME_STATE_DIR=str(root / "serve-state")),
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stop = root / "stop"
        eng = subprocess.Popen([sys.executable, "-S", "-c", ENGINE_LOOP if app == "engine" else CORE_LOOP, str(vault), str(state), str(stop)], env=env, cwd=root,
                               stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not (root / "stop.ready").exists():  # the engine is open and editing
            if eng.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the engine loop did not start")
            time.sleep(0.01)
        lost: set[int] = set()
        truncated = 0
        checks = 0
        t0 = time.perf_counter()
        for i in range(1, saves + 1):
            try:
                current = note.read_text()
            except FileNotFoundError:
                current = ""
            m = re.search(r"^engine: \d+$", current, re.M)
            engine_line = m.group(0) if m else "engine: 0"
            user_lines.append(f"user {i}")
            text = HEADER.replace("engine: 0", engine_line) + "".join(f"{u}\n" for u in user_lines) + FOOTER
            _save(note, text, kind if kind != "mixed" else rng.choice(["atomic", "inplace"]))
            time.sleep(rng.uniform(0, args_gap))
            on_disk = note.read_text()
            checks += 1
            if not on_disk.endswith(FOOTER) or not on_disk.startswith(HEADER[:20]):
                truncated += 1
            present = set(re.findall(r"^user (\d+)$", on_disk, re.M))
            lost |= {k for k in range(1, i + 1) if str(k) not in present}
        elapsed = time.perf_counter() - t0
        stop.write_text("stop")
        out, _ = eng.communicate(timeout=60)
        if serve_proc is not None:
            serve_proc.terminate()
            serve_proc.wait(timeout=30)
        stats = json.loads(out.strip().splitlines()[-1])
        # a save missing from the note but kept beside it as a conflict copy (a displaced save that could not go
        # back because another save held the note) is not lost: the person finds it next to the note
        copies = [p.read_text(errors="replace") for p in vault.glob("race (conflict *).md")]
        in_copies = set().union(*(set(re.findall(r"^user (\d+)$", c, re.M)) for c in copies)) if copies else set()
        kept = {k for k in lost if str(k) in in_copies}
        return {"kind": kind, "saves": saves, "app": app, "tmpfs": tmp_root is not None, "gap_ms": round(args_gap * 1000),
                "lost": len(lost - kept), "missing_from_note": len(lost), "kept_as_conflict_copy": len(kept),
                "conflict_copies": len(copies), "truncated": truncated, "checks": checks,
                "seconds": round(elapsed, 2), **stats}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--saves", type=int, default=500)
    ap.add_argument("--kinds", default="atomic,inplace,mixed")
    ap.add_argument("--serve", action="store_true", help="also run `reme-tui --serve` on the vault")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--tmpfs", action="store_true",
                    help="vault in /dev/shm: fsync costs nothing there, so both sides run many more cycles")
    ap.add_argument("--app", choices=["engine", "core"], default="engine",
                    help="engine: Engine.edit in a loop (as `job edit`); core: the write primitive alone "
                         "(read_text + atomic_write with the read's hash, thousands of races a second)")
    ap.add_argument("--engine-src", default=str(REPO),
                    help="checkout whose engine runs the app side (e.g. a worktree of an older commit, to compare)")
    ap.add_argument("--gap-ms", type=float, default=100.0,
                    help="the user waits 0..GAP ms between saves (the app only edits a note quiet for 50 ms)")
    args = ap.parse_args()
    result = {"bench": "race", "machine": machine(), "serve": args.serve, "engine_src": args.engine_src != str(REPO),
              "runs": []}
    for kind in args.kinds.split(","):
        r = run_kind(kind, args.saves, args.serve, args.seed, args.gap_ms / 1000, Path(args.engine_src), args.app,
                     "/dev/shm" if args.tmpfs else None)
        log(json.dumps(r))
        result["runs"].append(r)
    result["lost_total"] = sum(r["lost"] for r in result["runs"])
    result["truncated_total"] = sum(r["truncated"] for r in result["runs"])
    print(json.dumps(result, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
