"""No-change auto_dream on knowledge-garden-zh: the second run must make zero LLM calls and return fast.

Usage: python bench/bench_dream_nochange.py VAULT_COPY STATE_DIR   (VAULT_COPY: a temp copy of knowledge-garden-zh)
Prints the first run's status and the no-change run's median wall time over 5 runs.
"""
import json, sys, time
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "tests"))
from wire.server import ScriptedServer, openai_chat
from reme_engine.config import load_settings, LLMSettings
from reme_engine.engine import Engine
from reme_engine.llm.client import make_client
s = load_settings({"vault": sys.argv[1], "state_dir": sys.argv[2], "embedder": {"kind": "none"},
                   "layers": {"daily_dir": "Calendar/Daily notes"},
                   "llm": {"provider": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key": "k"}}, env={})
e = Engine.open(s)
e.index(vectors=False)
date = "2023-05-05"
with ScriptedServer(default=lambda p, b: openai_chat(json.dumps({"units": []}))) as srv:
    llm = make_client(LLMSettings(provider="openai", model="m", base_url=srv.base_url, api_key="k"))
    r1 = e.auto_dream(date, llm=llm).to_dict()
    print("first run:", r1["status"], "calls", r1["llm"].get("calls"), "changed", len(r1["changed_files"]))
    times = []
    for _ in range(5):
        t = time.perf_counter(); r2 = e.auto_dream(date).to_dict(); times.append(time.perf_counter() - t)
    times.sort()
    print("no-change run:", r2["status"], "calls", (r2.get("llm") or {}).get("calls", 0), "median s", round(times[2], 4),
          "server requests", len(srv.requests))
