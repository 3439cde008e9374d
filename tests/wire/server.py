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


class SSE:
    """A server-sent-events reply: ``events`` is a list of ``(event name or None, JSON-able or raw str)``."""

    def __init__(self, events: list) -> None:
        self.events = events


class Delay:
    """Answer ``then`` after sleeping ``seconds`` (to exercise client timeouts)."""

    def __init__(self, seconds: float, then: Any) -> None:
        self.seconds = seconds
        self.then = then


class Hold:
    """Send nothing at all (no status line, no headers) until ``release`` is set, then answer ``then``: an
    endpoint that accepted the request and has not started its reply (a cold local model)."""

    def __init__(self, release: threading.Event, then: Any) -> None:
        self.release = release
        self.then = then


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
                try:
                    self._post()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test); nothing to answer

            def _post(self):
                n = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                with outer._lock:
                    outer.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
                    reply = outer.script.pop(0) if outer.script else outer.default
                if isinstance(reply, Hold):
                    reply.release.wait(120)
                    reply = reply.then
                if reply is None:
                    status, payload = 500, {"error": {"message": "script exhausted", "type": "server_error"}}
                elif callable(reply):
                    status, payload = reply(self.path, body)
                else:
                    status, payload = reply
                if isinstance(payload, SSE):
                    self.send_response(status)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("cache-control", "no-cache")
                    self.end_headers()
                    for event, data in payload.events:
                        chunk = (f"event: {event}\n" if event else "") + \
                            f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
                        self.wfile.write(chunk.encode())
                        self.wfile.flush()
                    return
                if isinstance(payload, Delay):
                    import time

                    time.sleep(payload.seconds)
                    payload = payload.then
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


# -- Anthropic Messages API -------------------------------------------------------------------------------
def anthropic_message(text: str, *, input_tokens: int = 10, output_tokens: int = 5, model: str = "claude-test"):
    """A ``(200, body)`` reply of ``POST /v1/messages``."""
    return 200, {
        "id": "msg_test", "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


def anthropic_stream(pieces: list[str], *, input_tokens: int = 10, output_tokens: int = 5):
    """A streamed ``POST /v1/messages`` reply (SSE) delivering ``pieces`` as text deltas."""
    events = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_test", "type": "message", "role": "assistant", "model": "claude-test", "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": input_tokens, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
    ]
    for p in pieces:
        events.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "text_delta", "text": p}}))
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": output_tokens}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return 200, SSE(events)


# -- OpenAI Chat Completions ------------------------------------------------------------------------------
def openai_chat(text: str, *, prompt_tokens: int = 10, completion_tokens: int = 5, model: str = "gpt-test"):
    """A ``(200, body)`` reply of ``POST /v1/chat/completions``."""
    return 200, {
        "id": "chatcmpl-test", "object": "chat.completion", "created": 1700000000, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


def openai_stream(pieces: list[str], *, prompt_tokens: int = 10, completion_tokens: int = 5):
    """A streamed chat completion (SSE ``data:`` chunks, a usage chunk, then ``[DONE]``)."""
    base = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1700000000, "model": "gpt-test"}
    events = [(None, {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                          "finish_reason": None}]})]
    for p in pieces:
        events.append((None, {**base, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]}))
    events.append((None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
    events.append((None, {**base, "choices": [], "usage": {"prompt_tokens": prompt_tokens,
                                                         "completion_tokens": completion_tokens,
                                                         "total_tokens": prompt_tokens + completion_tokens}}))
    events.append((None, "[DONE]"))
    return 200, SSE(events)
