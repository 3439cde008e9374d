"""One LLM client interface over the official SDKs: ``anthropic`` (Messages API) and ``openai`` (Chat Completions;
its ``base_url`` makes it any OpenAI-compatible server: Ollama, vLLM, LM Studio, DashScope).

- ``complete(messages, system=…)`` → :class:`LLMReply` (text + token usage);
- ``stream(messages, system=…)`` → iterator of :class:`StreamDelta` (text pieces, then one final item with usage);
- every HTTP request is counted in a :class:`UsageTally` (per pipeline run), the SDKs' own retries included:
  an httpx request hook on the SDK's HTTP client counts what actually goes on the wire;
- ``stream(…, cancel=CancelToken())``: setting the token from another thread shuts the call's sockets down and the
  call raises :class:`LLMCancelled` at once, bytes or no bytes received (a chat answer the person cancelled);
- retries with exponential backoff on timeouts, 429 and 5xx are the SDKs' own (``max_retries``), so the real
  retry code runs; near the run's ``max_calls`` budget a call gets only the retries the budget has left, so the
  requests of a run never exceed it; failures surface as :class:`LLMError` with a one-line reason.

SDK imports are lazy (``anthropic`` costs ~1.3 s to import, ARCHITECTURE §10.9).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable, Iterator, Protocol, Sequence

PROVIDERS = ("anthropic", "openai")

HOW_TO_CONFIGURE = (
    "set REME_LLM_PROVIDER (anthropic or openai), REME_LLM_MODEL and REME_LLM_API_KEY "
    "(or REME_LLM_BASE_URL for a local OpenAI-compatible server), or the `llm:` section of the config file"
)


class LLMError(RuntimeError):
    """An LLM call failed after the SDK's retries (network, auth, rate limit, bad reply). Message is one line."""


class LLMBudgetExceeded(LLMError):
    """The run's configured call or token budget is spent; the remaining work is retried next run."""


class LLMCancelled(LLMError):
    """The call was cancelled through its :class:`CancelToken` (the person stopped waiting): its connection was
    shut down and nothing more is sent (no SDK retry)."""


class LLMNotConfigured(LLMError):
    """No LLM is configured; the message says which feature needs it and how to configure one."""

    def __init__(self, feature: str = "this feature") -> None:
        super().__init__(f"{feature} needs an LLM: {HOW_TO_CONFIGURE}")


class CancelToken(threading.Event):
    """A cancel hook for the LLM calls of one task (a chat answer and its READ rounds): an Event that any thread may
    ``set()``. Setting it shuts down every socket those calls opened (``shutdown(SHUT_RDWR)``, which wakes a
    thread blocked reading from an endpoint that has sent nothing yet, as closing alone would not), and a call
    checks it before each attempt, so the call raises :class:`LLMCancelled` within milliseconds instead of
    waiting out ``llm.total_timeout``. Use one token per task: its sockets are kept (and shut down) until the
    token is dropped."""

    def __init__(self) -> None:
        super().__init__()
        self._closers: list[Callable[[], None]] = []
        self._closers_lock = threading.Lock()

    def set(self) -> None:
        super().set()
        with self._closers_lock:
            closers, self._closers = self._closers, []
        for close in closers:
            close()

    def on_set(self, close: Callable[[], None]) -> None:
        """Run ``close()`` when the token is set (at once when it already is). ``close`` must not raise."""
        with self._closers_lock:
            if not self.is_set():
                self._closers.append(close)
                return
        close()


class _Abort(BaseException):
    """Raised inside the SDK's HTTP stack once a call is cancelled: a BaseException, so neither SDK takes it for
    a connection error to retry (both retry on ``Exception``); the client turns it into :class:`LLMCancelled`."""


def _shutdown(sock) -> Callable[[], None]:
    """A closer that shuts ``sock`` down both ways. ``socket.socket.shutdown`` even for a TLS socket: the
    SSLSocket override would drop its TLS state under the reading thread; a socket closed meanwhile is EBADF."""
    import socket

    def close() -> None:
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except (OSError, ValueError):
            pass
    return close


@dataclass
class Message:
    """A chat message: ``role`` is "user" or "assistant"; ``content`` plain text."""

    role: str
    content: str


@dataclass
class LLMReply:
    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    model: str = ""
    stop_reason: str | None = None


@dataclass
class StreamDelta:
    """A piece of a streamed reply. ``done`` marks the last item, which carries usage and the stop reason."""

    text: str = ""
    done: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    stop_reason: str | None = None


@dataclass
class UsageTally:
    """Calls and tokens of one run (thread-safe). ``by_step`` splits the same figures per pipeline step.

    ``calls``: HTTP requests sent (an SDK retry is a call: it costs like one); ``retries``: how many of them
    were retries; ``failed_calls``: logical calls that failed after their retries."""

    calls: int = 0
    retries: int = 0
    failed_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    by_step: dict[str, dict[str, int]] = field(default_factory=dict)
    #: per-run budget (0 = unlimited); a call that would start past it raises LLMBudgetExceeded
    max_calls: int = 0
    max_tokens: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @classmethod
    def for_settings(cls, settings) -> "UsageTally":
        """A tally carrying the run budget of ``settings.llm`` (``max_calls_per_run``, ``max_tokens_per_run``)."""
        llm = getattr(settings, "llm", None)
        return cls(max_calls=getattr(llm, "max_calls_per_run", 0) or 0,
                   max_tokens=getattr(llm, "max_tokens_per_run", 0) or 0)

    def check_budget(self) -> None:
        """Raise :class:`LLMBudgetExceeded` when the run has used its calls or tokens."""
        with self._lock:
            if self.max_calls and self.calls >= self.max_calls:
                raise LLMBudgetExceeded(f"LLM budget of this run used up: {self.calls} calls (max_calls_per_run)")
            used = self.input_tokens + self.output_tokens
            if self.max_tokens and used >= self.max_tokens:
                raise LLMBudgetExceeded(f"LLM budget of this run used up: {used} tokens (max_tokens_per_run)")

    def calls_left(self) -> int | None:
        """Calls the run's budget still allows (None: unlimited)."""
        with self._lock:
            return None if not self.max_calls else max(0, self.max_calls - self.calls)

    def add(self, step: str, input_tokens: int, output_tokens: int, failed: bool = False, requests: int = 1) -> None:
        """Record one logical call that sent ``requests`` HTTP requests (1 plus the SDK's retries; 0 when it
        failed before anything was sent)."""
        requests = max(0, int(requests))
        with self._lock:
            self.calls += requests
            self.retries += max(0, requests - 1)
            self.failed_calls += int(failed)
            self.input_tokens += input_tokens
            self.output_tokens += output_tokens
            s = self.by_step.setdefault(step, {"calls": 0, "input_tokens": 0, "output_tokens": 0})
            s["calls"] += requests
            s["input_tokens"] += input_tokens
            s["output_tokens"] += output_tokens

    def to_dict(self) -> dict:
        """Plain dict (the lock is not copyable, so ``dataclasses.asdict`` cannot be used)."""
        with self._lock:
            return {"calls": self.calls, "retries": self.retries, "failed_calls": self.failed_calls,
                    "input_tokens": self.input_tokens,
                    "output_tokens": self.output_tokens, "by_step": {k: dict(v) for k, v in self.by_step.items()}}


class LLMClient(Protocol):
    provider: str
    model: str

    def complete(self, messages: Sequence[Message], *, system: str = "", max_tokens: int = 2048,
                 temperature: float = 0.2, step: str = "", tally: UsageTally | None = None) -> LLMReply: ...

    def stream(self, messages: Sequence[Message], *, system: str = "", max_tokens: int = 2048,
               temperature: float = 0.2, step: str = "", tally: UsageTally | None = None,
               cancel: CancelToken | None = None) -> Iterator[StreamDelta]: ...


def redact(text: str, *secrets: str | None) -> str:
    """``text`` with every secret (API keys, ≥ 6 chars) replaced by ``***`` — error messages of providers may
    echo the key, and they end up in logs, the journal and summaries (ARCHITECTURE §8)."""
    for sec in secrets:
        if sec and len(sec) >= 6:
            text = text.replace(sec, "***")
    return text


def _msgs(messages: Sequence[Message]) -> list[dict]:
    return [{"role": m.role, "content": m.content} for m in messages]


class _RequestCounter:
    """HTTP requests the SDK sent from the current thread since :meth:`start` (an httpx ``request`` event hook:
    it runs for every attempt, so the SDK's retries count too), and the call's deadline: each attempt's httpx
    timeouts are cut to what is left of ``total`` seconds since :meth:`start` (httpx reads them from the request's
    ``timeout`` extension when it sends, after the hooks), so the SDK's retries still run but one call never
    waits longer than ``total`` plus the SDK's backoff pauses.

    With a :class:`CancelToken` (``start(cancel=…)``) the hook refuses an attempt once the token is set, and puts
    an httpcore ``trace`` extension on the request: it hands each socket the attempt connects (TCP, then TLS) to
    the token, and turns the failure a shut-down socket causes into :class:`_Abort`."""

    #: httpcore trace events whose ``return_value`` is a new network stream (its socket: ``get_extra_info``).
    _CONNECTED = (".connect_tcp.complete", ".connect_unix_socket.complete", ".start_tls.complete")

    def __init__(self, total: float | None = None) -> None:
        self._local = threading.local()
        self._total = total

    def hook(self, request) -> None:
        self._local.n = getattr(self._local, "n", 0) + 1
        cancel = getattr(self._local, "cancel", None)
        if cancel is not None:
            if cancel.is_set():
                raise _Abort
            request.extensions["trace"] = self._tracer(cancel, request.extensions.get("trace"))
        end = getattr(self._local, "deadline", None)
        if end is None:
            return
        import time

        left = max(0.001, end - time.monotonic())  # spent: the attempt fails at once, as a timeout
        t = dict(request.extensions.get("timeout") or {})
        for k in ("connect", "read", "write", "pool"):
            t[k] = left if t.get(k) is None else min(t[k], left)
        request.extensions["timeout"] = t

    def _tracer(self, cancel: CancelToken, inner):
        def trace(name: str, info: dict) -> None:
            if inner is not None:
                inner(name, info)
            if name.endswith(self._CONNECTED):
                sock = getattr(info.get("return_value"), "get_extra_info", lambda _k: None)("socket")
                if sock is not None:
                    cancel.on_set(_shutdown(sock))
            elif name.endswith(".failed") and cancel.is_set():
                raise _Abort  # the shut-down socket's error: no retry, no "connection error" message
        return trace

    def start(self, cancel: CancelToken | None = None) -> None:
        import time

        self._local.n = 0
        self._local.deadline = time.monotonic() + self._total if self._total else None
        self._local.cancel = cancel

    def count(self) -> int:
        return getattr(self._local, "n", 0)


def _check_cancel(cancel: CancelToken | None) -> None:
    if cancel is not None and cancel.is_set():
        raise LLMCancelled("cancelled")


def _abort_if(cancel: CancelToken | None) -> None:
    if cancel is not None and cancel.is_set():
        raise _Abort


class _SDKClient:
    """What both clients share: the request counter on the SDK's HTTP client and the budget-aware retries."""

    def _setup(self, sdk, cls, api_key, base_url, timeout, max_retries, connect_timeout=None,
               total_timeout=None) -> None:
        self._sdk = sdk
        self._max_retries = max_retries
        self._counter = _RequestCounter(total_timeout)
        http = sdk.DefaultHttpxClient(event_hooks={"request": [self._counter.hook]})
        limits = sdk.Timeout(timeout, connect=min(timeout, connect_timeout) if connect_timeout else timeout)
        self._client = cls(api_key=api_key or "unset", base_url=base_url, timeout=limits, max_retries=max_retries,
                           http_client=http)

    def _waited(self, exc: Exception) -> str:
        """For a timeout, where and how long the call waited (the user's only clue to a stuck or wrong endpoint):
        `` (no reply from 127.0.0.1:18999 within 90 s, 3 attempts; llm.total_timeout)``; else ``""``."""
        if "Timeout" not in type(exc).__name__:
            return ""
        url = getattr(self._client, "base_url", None)
        where = f"{url.host}:{url.port}" if getattr(url, "port", None) else str(getattr(url, "host", "") or "the server")
        total = self._counter._total
        within = f" within {total:g} s" if total else ""
        return f" (no reply from {where}{within}, {self._counter.count()} attempt(s); llm.total_timeout)"

    def _sdk_for(self, tally: UsageTally | None):
        """The SDK client for one call: fewer retries when the run's call budget has less room than them."""
        left = tally.calls_left() if tally is not None else None
        if left is None or left > self._max_retries:
            return self._client
        return self._client.with_options(max_retries=max(0, left - 1))


class AnthropicClient(_SDKClient):
    """Anthropic Messages API through ``anthropic.Anthropic``."""

    provider = "anthropic"

    def __init__(self, model: str, api_key: str | None, *, base_url: str | None = None, timeout: float = 120.0,
                 max_retries: int = 2, connect_timeout: float | None = 10.0,
                 total_timeout: float | None = 90.0) -> None:
        import anthropic

        self.model = model
        self._key = api_key
        self._setup(anthropic, anthropic.Anthropic, api_key, base_url, timeout, max_retries, connect_timeout, total_timeout)

    def _error(self, exc: Exception) -> LLMError:
        return LLMError(redact(f"anthropic: {type(exc).__name__}: {getattr(exc, 'message', None) or exc}"
                               + self._waited(exc), self._key))

    def complete(self, messages, *, system="", max_tokens=2048, temperature=0.2, step="", tally=None) -> LLMReply:
        if tally is not None:
            tally.check_budget()
        kw = {"system": system} if system else {}
        client = self._sdk_for(tally)
        self._counter.start()
        try:
            # This SDK generation has no sampling-temperature parameter on Messages; the model's default applies.
            resp = client.messages.create(model=self.model, max_tokens=max_tokens, messages=_msgs(messages), **kw)
        except self._sdk.AnthropicError as exc:
            if tally is not None:
                tally.add(step, 0, 0, failed=True, requests=self._counter.count())
            raise self._error(exc) from exc
        text = "".join(getattr(b, "text", "") for b in resp.content if getattr(b, "type", "") == "text")
        usage = resp.usage
        reply = LLMReply(text, usage.input_tokens or 0, usage.output_tokens or 0, resp.model, resp.stop_reason)
        if tally is not None:
            tally.add(step, reply.input_tokens, reply.output_tokens, requests=self._counter.count())
        return reply

    def stream(self, messages, *, system="", max_tokens=2048, temperature=0.2, step="", tally=None, cancel=None):
        if tally is not None:
            tally.check_budget()
        _check_cancel(cancel)
        kw = {"system": system} if system else {}
        inp = out = 0
        stop = None
        client = self._sdk_for(tally)
        self._counter.start(cancel)
        sent = 0
        try:
            with client.messages.stream(model=self.model, max_tokens=max_tokens, messages=_msgs(messages),
                                        **kw) as s:
                sent = self._counter.count()  # the request (and its retries) is made on entering
                for text in s.text_stream:
                    _abort_if(cancel)  # a close-delimited reply ends "cleanly" when its socket is shut down
                    if text:
                        yield StreamDelta(text=text)
                _abort_if(cancel)
                final = s.get_final_message()
                inp, out, stop = final.usage.input_tokens or 0, final.usage.output_tokens or 0, final.stop_reason
        except self._sdk.AnthropicError as exc:
            if tally is not None:
                tally.add(step, inp, out, failed=True, requests=sent or self._counter.count())
            if cancel is not None and cancel.is_set():
                raise LLMCancelled("anthropic: cancelled") from exc
            raise self._error(exc) from exc
        except _Abort:
            if tally is not None:
                tally.add(step, inp, out, requests=sent or self._counter.count())
            raise LLMCancelled("anthropic: cancelled") from None
        if tally is not None:
            tally.add(step, inp, out, requests=sent)
        yield StreamDelta(done=True, input_tokens=inp, output_tokens=out, stop_reason=stop)


class OpenAIClient(_SDKClient):
    """OpenAI Chat Completions through ``openai.OpenAI`` (any compatible server via ``base_url``)."""

    provider = "openai"

    def __init__(self, model: str, api_key: str | None, *, base_url: str | None = None, timeout: float = 120.0,
                 max_retries: int = 2, connect_timeout: float | None = 10.0,
                 total_timeout: float | None = 90.0) -> None:
        import openai

        self.model = model
        self._key = api_key
        self._setup(openai, openai.OpenAI, api_key, base_url, timeout, max_retries, connect_timeout, total_timeout)

    def _error(self, exc: Exception) -> LLMError:
        return LLMError(redact(f"openai: {type(exc).__name__}: {getattr(exc, 'message', None) or exc}"
                               + self._waited(exc), self._key))

    @staticmethod
    def _with_system(messages, system):
        msgs = _msgs(messages)
        return ([{"role": "system", "content": system}] + msgs) if system else msgs

    def complete(self, messages, *, system="", max_tokens=2048, temperature=0.2, step="", tally=None) -> LLMReply:
        if tally is not None:
            tally.check_budget()
        client = self._sdk_for(tally)
        self._counter.start()
        try:
            resp = client.chat.completions.create(model=self.model, max_tokens=max_tokens, temperature=temperature,
                                                  messages=self._with_system(messages, system))
        except self._sdk.OpenAIError as exc:
            if tally is not None:
                tally.add(step, 0, 0, failed=True, requests=self._counter.count())
            raise self._error(exc) from exc
        if not resp.choices:
            if tally is not None:
                tally.add(step, 0, 0, failed=True, requests=self._counter.count())
            raise LLMError("openai: reply has no choices")
        choice = resp.choices[0]
        usage = resp.usage
        reply = LLMReply(choice.message.content or "", getattr(usage, "prompt_tokens", 0) or 0,
                         getattr(usage, "completion_tokens", 0) or 0, resp.model, choice.finish_reason)
        if tally is not None:
            tally.add(step, reply.input_tokens, reply.output_tokens, requests=self._counter.count())
        return reply

    def stream(self, messages, *, system="", max_tokens=2048, temperature=0.2, step="", tally=None, cancel=None):
        if tally is not None:
            tally.check_budget()
        _check_cancel(cancel)
        inp = out = 0
        stop = None
        client = self._sdk_for(tally)
        self._counter.start(cancel)
        sent = 0
        stream = None
        try:
            stream = client.chat.completions.create(
                model=self.model, max_tokens=max_tokens, temperature=temperature, stream=True,
                stream_options={"include_usage": True}, messages=self._with_system(messages, system))
            sent = self._counter.count()  # the request (and its retries) is made by create()
            for chunk in stream:
                _abort_if(cancel)  # a close-delimited reply ends "cleanly" when its socket is shut down
                if chunk.usage is not None:
                    inp = chunk.usage.prompt_tokens or 0
                    out = chunk.usage.completion_tokens or 0
                for ch in chunk.choices or []:
                    if ch.delta is not None and ch.delta.content:
                        yield StreamDelta(text=ch.delta.content)
                    if ch.finish_reason:
                        stop = ch.finish_reason
            _abort_if(cancel)
        except self._sdk.OpenAIError as exc:
            if tally is not None:
                tally.add(step, inp, out, failed=True, requests=sent or self._counter.count())
            if cancel is not None and cancel.is_set():
                raise LLMCancelled("openai: cancelled") from exc
            raise self._error(exc) from exc
        except _Abort:
            if tally is not None:
                tally.add(step, inp, out, requests=sent or self._counter.count())
            if stream is not None:
                stream.close()  # the response (its socket is shut down already)
            raise LLMCancelled("openai: cancelled") from None
        if tally is not None:
            tally.add(step, inp, out, requests=sent)
        yield StreamDelta(done=True, input_tokens=inp, output_tokens=out, stop_reason=stop)


def make_client(llm_settings, feature: str = "this feature") -> LLMClient:
    """The client for ``settings.llm`` (an ``LLMSettings``). Raises :class:`LLMNotConfigured` when unset."""
    s = llm_settings
    if not s.configured:
        raise LLMNotConfigured(feature)
    if s.provider not in PROVIDERS:
        raise LLMError(f"unknown LLM provider {s.provider!r} (use anthropic or openai)")
    if not s.model:
        raise LLMNotConfigured(feature)
    cls = AnthropicClient if s.provider == "anthropic" else OpenAIClient
    return cls(s.model, s.api_key, base_url=s.base_url, timeout=s.timeout, max_retries=s.max_retries,
               connect_timeout=getattr(s, "connect_timeout", 10.0), total_timeout=getattr(s, "total_timeout", 90.0))
