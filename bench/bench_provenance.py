"""Dream actions on real user-written notes: how many of the user's lines survive (ARCHITECTURE §8 "Ownership").

Usage: python bench/bench_provenance.py [--notes 60] [--runs 4] [--seed 7]

Copies ``--notes`` real notes of knowledge-garden-zh (their bytes as they are; every 6th converted to CRLF, every
6th given a BOM, every 6th without a final newline) into ``digest/{personal,procedure,wiki}/`` of a temp vault —
so all of them are notes the user wrote — and runs ``--runs`` auto_dream runs through the real OpenAI SDK against
the scripted wire server (tests/wire). In each run every note gets one action, cycling CREATE (of its own name, in
another bucket; after a rename, its new name) / CORROBORATE / REFINE (with a full rewrite offered) / CORRECT (likewise); an update whose note
recall did not offer becomes a CREATE of its name. Run 2 reuses the engine, run 3 is a restart (new Engine), before
run 4 half the notes are renamed and the state dir is deleted. After every run each note is compared with the
user's original bytes: its lines must be a subsequence of the file, byte for byte. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import VAULT_ZH, log, loadavg, machine  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from wire.server import ScriptedServer, openai_chat  # noqa: E402

from reme_engine.config import LLMSettings, load_settings  # noqa: E402
from reme_engine.dream.extract import Budget  # noqa: E402
from reme_engine.dream.pipeline import run_auto_dream  # noqa: E402
from reme_engine.dream.safety import slugify  # noqa: E402
from reme_engine.engine import Engine  # noqa: E402
from reme_engine.llm.client import make_client  # noqa: E402
from reme_engine.vault import provenance as P  # noqa: E402

BUCKETS = ("personal", "procedure", "wiki")
ACTIONS = ("CREATE", "CORROBORATE", "REFINE", "CORRECT")


def lines_of(data: bytes) -> list[bytes]:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    out = data.split(b"\n")
    if out and out[-1] == b"":
        out.pop()
    return [ln[:-1] if ln.endswith(b"\r") else ln for ln in out]


def lost_lines(user: bytes, final: bytes) -> int:
    have, i, lost = lines_of(final), 0, 0
    for ln in lines_of(user):
        j = i
        while j < len(have) and have[j] != ln:
            j += 1
        if j == len(have):
            lost += 1
        else:
            i = j + 1
    return lost


def pick_notes(n: int, seed: int) -> list[Path]:
    pool, stems = [], set()
    for p in sorted(VAULT_ZH.rglob("*.md")):
        rel = p.relative_to(VAULT_ZH).as_posix()
        if rel.startswith(".") or "Daily" in rel or not 200 <= p.stat().st_size <= 20_000:
            continue
        key = p.stem.casefold()
        if key in stems or slugify(p.stem) == "note":
            continue
        stems.add(key)
        pool.append(p)
    random.Random(seed).shuffle(pool)
    return pool[:n]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=60)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-prov-"))
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        os.environ[var] = str(tmp / var.lower())
    vault, state = tmp / "vault", tmp / "state"
    for b in BUCKETS:
        (vault / "digest" / b).mkdir(parents=True)
    notes: list[dict] = []
    for i, src in enumerate(pick_notes(args.notes, args.seed)):
        data = src.read_bytes()
        if i % 6 == 1:
            data = data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        elif i % 6 == 2:
            data = b"\xef\xbb\xbf" + data
        elif i % 6 == 3:
            data = data.rstrip(b"\r\n")
        bucket = BUCKETS[i % 3]
        rel = f"digest/{bucket}/{src.name}"
        (vault / rel).write_bytes(data)
        notes.append({"i": i, "stem": src.stem, "bucket": bucket, "path": rel, "user": data})
    log(f"{len(notes)} notes, {sum(len(lines_of(n['user'])) for n in notes)} user lines")

    def settings():
        return load_settings({"vault": str(vault), "state_dir": str(state), "embedder": {"kind": "none"}}, env={})

    counts = {"actions": 0, "by_action": {a: 0 for a in ACTIONS}, "update_became_create": 0, "failed_units": 0,
              "user_lines_checked": 0, "user_lines_lost": 0, "notes_with_loss": 0, "twins_created": 0,
              "notes_not_users": 0, "dream_wall_s": []}
    state_run = {"r": 0, "day": ""}

    def handler(path, body):
        user_msg = body["messages"][-1]["content"]
        if "EXISTING DIGEST NODES" not in user_msg:  # extract
            units = [{"name": Path(n["path"]).stem, "bucket": BUCKETS[(n["i"] + 1) % 3], "summary": f"更新 {n['stem']}",
                      "paths": [state_run["day"]]} for n in notes]
            return openai_chat(json.dumps({"units": units}, ensure_ascii=False))
        name = re.search(r"^UNIT\nname: (.*)$", user_msg, re.M).group(1)
        n = next(x for x in notes if Path(x["path"]).stem == name)
        r = state_run["r"]
        action = ACTIONS[(n["i"] + r) % 4]
        offered = re.findall(r"^=== NODE: (.*?) \((?:editable|append-only)", user_msg, re.M)
        if action != "CREATE" and n["path"] not in offered:
            counts["update_became_create"] += 1
            action = "CREATE"
        counts["by_action"][action] += 1
        material = f"- run {r} material for {name}"
        if action == "CREATE":
            reply = {"action": "CREATE", "target": f"digest/{BUCKETS[(n['i'] + 1) % 3]}/{slugify(name)}.md",
                     "name": name, "description": "REPLACED", "body": f"# {name}\n\n{material}"}
        else:
            reply = {"action": action, "target": n["path"], "name": name, "description": "REPLACED",
                     "body": f"# {name}\n\nTOTAL REWRITE {r}", "update": material, "evidence": f"run {r}"}
        reply["sources"] = [state_run["day"]]
        return openai_chat(json.dumps(reply, ensure_ascii=False))

    t0 = time.perf_counter()
    c0 = time.process_time()  # this process only: the dream runs in-process (the wire server's threads too)
    eng = Engine.open(settings())
    with ScriptedServer(default=handler) as srv:
        llm = make_client(LLMSettings(provider="openai", model="m", base_url=srv.base_url, api_key="k",
                                      max_retries=0))
        for r in range(1, args.runs + 1):
            if r == 3:  # restart
                eng.close()
                eng = Engine.open(settings())
            if r == 4:  # renames, then the state dir deleted
                eng.close()
                for n in notes[::2]:
                    new = n["path"][:-3] + " (renamed).md"
                    os.rename(vault / n["path"], vault / new)
                    n["path"] = new
                shutil.rmtree(state)
                eng = Engine.open(settings())
            date = f"2026-12-{r:02d}"
            day = f"daily/{date}/notes.md"
            (vault / day).parent.mkdir(parents=True, exist_ok=True)
            (vault / day).write_text(f"# {date}\n\n" + "\n".join(f"- {n['stem']}" for n in notes) + "\n")
            state_run.update(r=r, day=day)
            t = time.perf_counter()
            rep = run_auto_dream(eng, date=date, llm=llm, budget=Budget(max_units=len(notes) + 5))
            counts["dream_wall_s"].append(round(time.perf_counter() - t, 2))
            counts["actions"] += len(rep.outcomes)
            counts["failed_units"] += rep.failed
            if rep.failed:
                log("errors:", rep.errors[:3])
            known = {n["path"] for n in notes}
            counts["twins_created"] = sum(1 for p in (vault / "digest").rglob("*.md")
                                          if p.relative_to(vault).as_posix() not in known)
            for n in notes:
                final = (vault / n["path"]).read_bytes()
                counts["user_lines_checked"] += len(lines_of(n["user"]))
                lost = lost_lines(n["user"], final)
                counts["user_lines_lost"] += lost
                counts["notes_with_loss"] += bool(lost)
                counts["notes_not_users"] += P.note_ownership(final.decode("utf-8", "replace")).app_owned
            log(f"run {r}: {rep.status}, {len(rep.outcomes)} units, lost so far {counts['user_lines_lost']}")
    eng.close()
    counts["wall_s"] = round(time.perf_counter() - t0, 1)
    counts["cpu_s"] = round(time.process_time() - c0, 1)
    print(json.dumps({"bench": "provenance", "notes": len(notes), "runs": args.runs, **counts,
                      "machine": machine(), "load": loadavg()}, ensure_ascii=False))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
