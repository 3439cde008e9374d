"""Quick switcher (Ctrl+O) on knowledge-garden-zh (3,176 notes): time to open and time per keystroke.

The real app runs headless (``App.run_test``, 120×40) on a keyword-indexed copy of the vault. ``open_ms``: from
the Ctrl+O action until the switcher's first rows are on screen (after the refresh that paints them), reusing the
one installed switcher screen and the note index the app keeps; ``first_open_ms``: the first Ctrl+O after
startup (the app read ``engine.note_titles()`` and folded the fields in a worker once the index opened);
``open_without_index_ms``: an opening right after a vault change, before the app read the list again (the
switcher reads it in its own worker); ``open_cpu_ms``: process CPU time of an opening (what
the machine's load does not inflate). ``keystroke_ms``: the switcher's handler per key typed (match + rebuilding
the rows), for Chinese title prefixes (substring), ordered-character queries (the 1st, 3rd and last characters of
a title), and path/English queries; ``keystroke_until_painted_ms``: until the screen refreshed after it;
``matcher_ms``: the pure matching part.
Targets: open ≤ 50 ms, keystroke ≤ 30 ms (p95).

Usage: ``python bench/bench_switcher.py [--runs 5]`` — prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import VAULT_ZH, bench_tmpdir, copy_tree, emit, log, machine, open_engine, stats, target  # noqa: E402


def queries(notes) -> list[str]:
    rng = random.Random(7)
    cjk = [n for n in notes if any("\u4e00" <= ch <= "\u9fff" for ch in n.title) and len(n.title) >= 4]
    picked = rng.sample(cjk, min(12, len(cjk)))
    out = [n.title[:4] for n in picked[:6]]  # prefixes typed as substrings
    out += [n.title[0] + n.title[2] + n.title[-1] for n in picked[6:]]  # ordered characters
    out += ["daily", "calendar 笔记", "readme", "obsidian"]
    return out


async def run(app, qs: list[str], runs: int) -> dict:
    from reme_tui.screens.switcher import QuickSwitcherScreen

    open_ms: list[float] = []
    open_cpu_ms: list[float] = []
    first_open_ms: list[float] = []
    cold_open_ms: list[float] = []
    key_ms: list[float] = []
    key_paint_ms: list[float] = []
    async with app.run_test(size=(120, 40)) as pilot:
        m = app.main_screen
        deadline = time.monotonic() + 120
        # startup as a user sees it: the first pass, the first note, the note list the app reads meanwhile
        while not (m.keyword_ready and m.note.path and m.note_index is not None) and time.monotonic() < deadline:
            await pilot.pause(0.05)
        await app.workers.wait_for_complete()
        await pilot.pause(0.2)
        for r in range(runs):
            for qi, q in enumerate(qs):
                await app.workers.wait_for_complete()
                await pilot.pause(0.2)
                c0, t0 = time.process_time(), time.perf_counter()
                m.action_quick_switch()
                while not (isinstance(app.screen, QuickSwitcherScreen) and app.screen.painted_at):
                    await asyncio.sleep(0)
                s = app.screen
                ms = (s.painted_at - t0) * 1000
                (first_open_ms if r == 0 and qi == 0 else open_ms).append(ms)
                open_cpu_ms.append((time.process_time() - c0) * 1000)
                n0, p0 = len(s.filter_ms), len(s.paint_ms)
                await pilot.press(*q)
                await pilot.pause()
                key_ms.extend(s.filter_ms[n0:])
                key_paint_ms.extend(s.paint_ms[p0:])
                await pilot.press("escape")
                while app.screen is not m:
                    await asyncio.sleep(0)
            log(f"run {r + 1}/{runs}: open median {stats(open_ms)['median']} ms")
        # right after a vault change, before the app has read the note list again: the switcher reads it itself
        for _ in range(3):
            await app.workers.wait_for_complete()
            await pilot.pause(0.2)
            m.note_index = None
            t0 = time.perf_counter()
            m.action_quick_switch()
            while not (isinstance(app.screen, QuickSwitcherScreen) and app.screen.painted_at):
                await asyncio.sleep(0)
            cold_open_ms.append((app.screen.painted_at - t0) * 1000)
            await pilot.press("escape")
            while app.screen is not m:
                await asyncio.sleep(0)
    return {"open_ms": open_ms, "open_cpu_ms": open_cpu_ms, "first_open_ms": first_open_ms, "key_ms": key_ms,
            "key_paint_ms": key_paint_ms, "cold_open_ms": cold_open_ms}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    from reme_tui.app import create_app
    from reme_tui.switcher import NoteMatcher

    info = machine()
    with bench_tmpdir("switcher") as tmp:
        vault = copy_tree(VAULT_ZH, tmp / "vault")
        eng = open_engine(vault, tmp / "state", embed=False)
        t = time.perf_counter()
        eng.index(vectors=False)
        log(f"indexed in {time.perf_counter() - t:.1f} s")
        try:
            t = time.perf_counter()
            notes = eng.note_titles()
            titles_ms = (time.perf_counter() - t) * 1000
            qs = queries(notes)
            # the pure matcher, keystroke by keystroke (incremental, as the screen uses it)
            matcher_ms = []
            for _ in range(args.runs):
                for q in qs:
                    mt = NoteMatcher(notes, [])
                    for i in range(1, len(q) + 1):
                        t = time.perf_counter()
                        mt.match(q[:i], 50)
                        mt.exact(q[:i])
                        matcher_ms.append((time.perf_counter() - t) * 1000)
            res = asyncio.run(run(create_app(eng.settings, eng), qs, args.runs))
        finally:
            eng.close()
    o, k, mm = stats(res["open_ms"], 1), stats(res["key_ms"], 2), stats(matcher_ms, 2)
    emit({
        "bench": "switcher",
        "vault": "knowledge-garden-zh",
        "notes": len(notes),
        "queries": qs,
        "note_titles_ms": round(titles_ms, 1),
        "first_open_ms": stats(res["first_open_ms"], 1),
        "open_without_index_ms": stats(res["cold_open_ms"], 1),
        "open_ms": o,
        "open_cpu_ms": stats(res["open_cpu_ms"], 1),
        "keystroke_ms": k,
        "keystroke_until_painted_ms": stats(res["key_paint_ms"], 1),
        "matcher_ms": mm,
        "targets": {"open_p95_ms": target(o.get("p95"), 50), "keystroke_p95_ms": target(k.get("p95"), 30)},
        "machine": info,
    })


if __name__ == "__main__":
    main()
