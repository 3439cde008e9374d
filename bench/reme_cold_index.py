#!/usr/bin/env python
"""ReMe's cold index of a vault, timed in this process (run it with a Python that has ``reme-ai`` installed).

    <venv with reme-ai 0.4.1.8>/bin/python bench/reme_cold_index.py VAULT WORKSPACE

Copies VAULT into ``WORKSPACE/daily`` (a folder ReMe's default config watches), builds ReMe's application from its
default config (BM25 keyword index, no embedding store: its default), starts its components and base jobs, then
runs its ``reindex`` job (clear the store, scan, chunk, index every file) and prints one JSON line: ``cpu_s``
(user+sys of this process during the job), ``wall_s``, ``process_cpu_s`` (from before ReMe's import), ``disk_mb``
(``WORKSPACE/metadata``, its whole state) and ``files`` (changes the job reported). No network: the LLM client
it builds is given a dummy key and is never called by ``reindex``.
"""

import asyncio
import json
import os
import resource
import shutil
import sys
import time


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    src, ws = sys.argv[1], sys.argv[2]
    shutil.rmtree(ws, ignore_errors=True)
    os.makedirs(ws)
    shutil.copytree(src, os.path.join(ws, "daily"), symlinks=True)
    for var in ("OPENAI_API_KEY", "LLM_API_KEY", "CODEX_API_KEY", "CLAUDE_CODE_API_KEY"):
        os.environ.setdefault(var, "dummy")
    os.environ.setdefault("LLM_BASE_URL", "http://127.0.0.1:9/v1")
    c_start = cpu()
    from reme.components.job.background_job import BackgroundJob
    from reme.components.job.stream_job import StreamJob
    from reme.components.service.cli_service import prepare_start_config
    from reme.reme import ReMe

    async def run() -> dict:
        app = ReMe(**prepare_start_config({"workspace_dir": ws, "enable_logo": False, "log_to_console": False}))
        jobs = [j for j in app.context.jobs.values() if not isinstance(j, (StreamJob, BackgroundJob))]
        for c in app._topological_order() + jobs:
            await app._start_one(c)
        c0, t0 = cpu(), time.perf_counter()
        r = await app.run_job("reindex")
        out = {"cpu_s": round(cpu() - c0, 3), "wall_s": round(time.perf_counter() - t0, 3),
               "process_cpu_s": round(cpu() - c_start, 3)}
        await app._close()
        meta = os.path.join(ws, "metadata")
        out["disk_mb"] = round(sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(meta)
                                   for f in fs) / 1e6, 2)
        answer = getattr(r, "answer", None)
        out["files"] = len(answer) if isinstance(answer, list) else None
        out["ok"] = bool(getattr(r, "success", False))
        return out

    print(json.dumps(asyncio.run(run())))


if __name__ == "__main__":
    main()
