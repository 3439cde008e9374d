"""A tiny scripted HTTP server on 127.0.0.1 that speaks a provider's wire protocol (for tests).

Each test gives a script: a list of replies, consumed one per request; a reply is a callable
``(path, body_json) -> (status, json_body)`` or a ``(status, json_body)`` tuple. Requests are recorded so tests
can assert what the real SDK sent (path, headers, body). When the script runs out, the ``default`` handler
answers (or 500).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


class ScriptedServer:
    def __init__(self, script: list | None = None, default: Callable | None = None) -> None:
        self.script = list(script or [])
        self.default = default
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # keep test output clean
                pass

            def do_POST(self):
                n = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                with outer._lock:
                    outer.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
                    reply = outer.script.pop(0) if outer.script else outer.default
                if reply is None:
                    status, payload = 500, {"error": {"message": "script exhausted", "type": "server_error"}}
                elif callable(reply):
                    status, payload = reply(self.path, body)
                else:
                    status, payload = reply
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "ScriptedServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def openai_embeddings(dim: int = 8, vector_for: Callable[[str], list[float]] | None = None) -> Callable:
    """A handler answering ``POST /v1/embeddings`` in OpenAI's format with deterministic vectors."""
    import hashlib

    def vec(text: str) -> list[float]:
        if vector_for is not None:
            return vector_for(text)
        h = hashlib.sha256(text.encode()).digest()
        return [((h[i % len(h)] / 255.0) - 0.5) for i in range(dim)]

    def handler(path: str, body: dict):
        assert path.endswith("/embeddings"), path
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        return 200, {
            "object": "list",
            "model": body.get("model", "test"),
            "data": [{"object": "embedding", "index": i, "embedding": vec(t)} for i, t in enumerate(inputs)],
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }

    return handler
