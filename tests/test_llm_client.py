"""The LLM layer through the real anthropic and openai SDKs against local wire-protocol servers."""

import pytest

from reme_engine.config import LLMSettings
from reme_engine.llm.client import (LLMError, LLMNotConfigured, Message, UsageTally, make_client)
from reme_engine.llm.structured import StructuredReplyError, extract_data, parse_reply
from wire.server import (Delay, ScriptedServer, anthropic_message, anthropic_stream, openai_chat, openai_stream)


def _client(provider, srv, **kw):
    base = f"http://127.0.0.1:{srv.port}" if provider == "anthropic" else srv.base_url
    s = LLMSettings(provider=provider, model="m-test", base_url=base, api_key="sk-test", **kw)
    return make_client(s)


REPLY = {"anthropic": anthropic_message, "openai": openai_chat}
STREAM = {"anthropic": anthropic_stream, "openai": openai_stream}


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_complete_sends_system_and_counts_tokens(provider):
    with ScriptedServer([REPLY[provider]("你好 hello")]) as srv:
        c = _client(provider, srv)
        tally = UsageTally()
        r = c.complete([Message("user", "hi")], system="be brief", step="chat", tally=tally)
        assert r.text == "你好 hello"
        assert (tally.calls, tally.input_tokens, tally.output_tokens) == (1, 10, 5)
        assert tally.by_step["chat"]["calls"] == 1
        body = srv.requests[0]["body"]
        assert body["model"] == "m-test"
        if provider == "anthropic":
            assert srv.requests[0]["path"] == "/v1/messages" and body["system"] == "be brief"
            h = srv.requests[0]["headers"]
            assert "sk-test" in (h.get("x-api-key", "") + h.get("authorization", ""))
        else:
            assert srv.requests[0]["path"] == "/v1/chat/completions"
            assert body["messages"][0] == {"role": "system", "content": "be brief"}


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_stream_yields_pieces_then_usage(provider):
    with ScriptedServer([STREAM[provider](["光伏", " is ", "solar"])]) as srv:
        c = _client(provider, srv)
        tally = UsageTally()
        parts = list(c.stream([Message("user", "q")], tally=tally))
        assert "".join(p.text for p in parts) == "光伏 is solar"
        assert parts[-1].done and parts[-1].output_tokens == 5 and parts[-1].input_tokens == 10
        assert tally.calls == 1 and tally.output_tokens == 5


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("status", [429, 500, 503])
def test_sdk_retries_rate_limits_and_server_errors(provider, status):
    err = (status, {"type": "error", "error": {"type": "overloaded_error", "message": "try later"}})
    with ScriptedServer([err, REPLY[provider]("ok")]) as srv:
        c = _client(provider, srv, max_retries=2)
        assert c.complete([Message("user", "x")]).text == "ok"
        assert len(srv.requests) == 2


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_bounded_retries_then_a_clear_error(provider):
    err = (500, {"type": "error", "error": {"type": "api_error", "message": "boom"}})
    with ScriptedServer(default=lambda p, b: err) as srv:
        c = _client(provider, srv, max_retries=1)
        tally = UsageTally()
        with pytest.raises(LLMError, match=provider):
            c.complete([Message("user", "x")], tally=tally)
        assert len(srv.requests) == 2  # first try + one retry
        assert tally.failed_calls == 1


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_timeout_is_an_llm_error(provider):
    with ScriptedServer(default=lambda p, b: (200, Delay(2.0, REPLY[provider]("late")[1]))) as srv:
        c = _client(provider, srv, max_retries=0, timeout=0.3)
        with pytest.raises(LLMError):
            c.complete([Message("user", "x")])


def test_not_configured_says_how():
    with pytest.raises(LLMNotConfigured, match="REME_LLM_PROVIDER"):
        make_client(LLMSettings(), "auto_dream")


@pytest.mark.parametrize("reply, expected", [
    ('{"a": 1}', {"a": 1}),
    ('Sure! ```json\n{"a": [1, 2,],}\n```', {"a": [1, 2]}),
    ("```yaml\na: 1\nb: [x, y]\n```", {"a": 1, "b": ["x", "y"]}),
    ('The answer is {"units": [{"name": "x"}]} as requested.', {"units": [{"name": "x"}]}),
    ("a: 1\nb: two\n", {"a": 1, "b": "two"}),
    ('[{"k": "v"}]', [{"k": "v"}]),
])
def test_structured_replies_are_parsed_leniently(reply, expected):
    assert extract_data(reply) == expected


def test_structured_reply_validation():
    import pydantic

    class Unit(pydantic.BaseModel):
        name: str
        bucket: str

    class Units(pydantic.BaseModel):
        units: list[Unit]

    ok = parse_reply('```json\n{"units": [{"name": "n", "bucket": "wiki"}]}\n```', Units)
    assert ok.units[0].bucket == "wiki"
    with pytest.raises(StructuredReplyError, match="units.0.bucket"):
        parse_reply('{"units": [{"name": "n"}]}', Units)
    with pytest.raises(StructuredReplyError, match="no JSON"):
        parse_reply("I cannot help with that.", Units)


def test_keys_are_redacted_from_errors():
    secret = "sk-very-secret-key-123"
    with ScriptedServer(default=lambda p, b: (401, {"error": {"message": f"bad key {secret}"}})) as srv:
        c = make_client(LLMSettings(provider="openai", model="m", base_url=srv.base_url, api_key=secret,
                                    max_retries=0))
        with pytest.raises(LLMError) as ei:
            c.complete([Message("user", "x")])
        assert secret not in str(ei.value) and "***" in str(ei.value)


def test_run_budget_stops_further_calls():
    from reme_engine.llm.client import LLMBudgetExceeded

    with ScriptedServer(default=lambda p, b: openai_chat("ok")) as srv:
        c = make_client(LLMSettings(provider="openai", model="m", base_url=srv.base_url, api_key="k"))
        tally = UsageTally(max_calls=2)
        c.complete([Message("user", "1")], tally=tally)
        c.complete([Message("user", "2")], tally=tally)
        with pytest.raises(LLMBudgetExceeded, match="max_calls_per_run"):
            c.complete([Message("user", "3")], tally=tally)
        assert len(srv.requests) == 2
        tokens = UsageTally(max_tokens=15)
        c.complete([Message("user", "1")], tally=tokens)  # 15 tokens used
        with pytest.raises(LLMBudgetExceeded, match="tokens"):
            list(c.stream([Message("user", "2")], tally=tokens))


def test_budget_comes_from_settings():
    from reme_engine.config import load_settings

    s = load_settings({"llm": {"max_calls_per_run": 7}}, env={})
    t = UsageTally.for_settings(s)
    assert t.max_calls == 7 and t.max_tokens == 2_000_000


ERR500 = (500, {"type": "error", "error": {"type": "api_error", "message": "boom"}})


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("streamed", [False, True])
def test_tally_counts_every_http_request_including_sdk_retries(provider, streamed):
    """A scripted 500 then 200: the SDK retries once; the tally says 2 calls, as the server saw."""
    ok = (STREAM[provider](["fine"]) if streamed else REPLY[provider]("fine"))
    with ScriptedServer([ERR500, ok]) as srv:
        c = _client(provider, srv, max_retries=2)
        tally = UsageTally()
        if streamed:
            assert "".join(p.text for p in c.stream([Message("user", "x")], step="s", tally=tally)) == "fine"
        else:
            assert c.complete([Message("user", "x")], step="s", tally=tally).text == "fine"
        assert len(srv.requests) == 2
        d = tally.to_dict()
        assert (d["calls"], d["retries"], d["failed_calls"], d["by_step"]["s"]["calls"]) == (2, 1, 0, 2)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_failed_call_counts_all_its_attempts(provider):
    with ScriptedServer(default=lambda p, b: ERR500) as srv:
        c = _client(provider, srv, max_retries=2)
        tally = UsageTally()
        with pytest.raises(LLMError):
            c.complete([Message("user", "x")], tally=tally)
        assert len(srv.requests) == 3 and (tally.calls, tally.retries, tally.failed_calls) == (3, 2, 1)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_call_budget_bounds_the_requests_retries_included(provider):
    """max_calls_per_run bounds what reaches the server: near the budget a call gets only the retries left."""
    from reme_engine.llm.client import LLMBudgetExceeded

    with ScriptedServer([ERR500, REPLY[provider]("a"), ERR500, ERR500, ERR500], default=lambda p, b: ERR500) as srv:
        c = _client(provider, srv, max_retries=2)
        tally = UsageTally(max_calls=4)
        assert c.complete([Message("user", "1")], tally=tally).text == "a"  # 2 requests
        with pytest.raises(LLMError):
            c.complete([Message("user", "2")], tally=tally)  # 2 left: one try, one retry
        with pytest.raises(LLMBudgetExceeded):
            c.complete([Message("user", "3")], tally=tally)
        assert len(srv.requests) == tally.calls == 4


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_silent_endpoint_costs_the_total_timeout_not_every_retry(provider):
    """An endpoint that accepts the connection and never answers: the SDK still retries, but all attempts of one
    call share ``total_timeout`` (before: each waited the full ``timeout``, 3 × 120 s with the defaults)."""
    import socket
    import threading
    import time

    lsn = socket.create_server(("127.0.0.1", 0))
    lsn.settimeout(0.05)
    conns, stop = [], threading.Event()

    def accept():
        while not stop.is_set():
            try:
                conns.append(lsn.accept()[0])  # read nothing, answer nothing
            except OSError:
                pass
    th = threading.Thread(target=accept, daemon=True)
    th.start()
    try:
        port = lsn.getsockname()[1]
        base = f"http://127.0.0.1:{port}" + ("" if provider == "anthropic" else "/v1")
        c = make_client(LLMSettings(provider=provider, model="m-test", base_url=base, api_key="sk-test",
                                    timeout=30.0, total_timeout=1.0, max_retries=2))
        tally = UsageTally()
        t0 = time.monotonic()
        with pytest.raises(LLMError, match=r"Timeout.*no reply from 127\.0\.0\.1:\d+ within 1 s, 3 attempt"):
            c.complete([Message("user", "x")], tally=tally)  # the error says where and how long it waited
        waited = time.monotonic() - t0
        assert (tally.calls, tally.retries, tally.failed_calls) == (3, 2, 1)  # the retries still ran
        assert 1.0 <= waited < 20.0  # ~1 s + the SDK's backoff pauses; unbounded it would be ≥ 90 s
        assert len(conns) >= 1
    finally:
        stop.set()
        th.join(5)
        for s in conns:
            s.close()
        lsn.close()


def test_llm_timeouts_must_be_positive(tmp_path):
    from reme_engine.config import ConfigError, load_settings

    cfg = tmp_path / "c.yaml"
    cfg.write_text("llm:\n  connect_timeout: 0\n")
    with pytest.raises(ConfigError, match="llm.connect_timeout"):
        load_settings({}, env={}, config_path=cfg)
    cfg.write_text("llm:\n  total_timeout: 45\n")
    assert load_settings({}, env={}, config_path=cfg).llm.total_timeout == 45


def _stream_in_thread(c, cancel, tally):
    """Run ``c.stream`` on a worker thread as the TUI does; returns (thread, outcome dict: pieces, error)."""
    import threading

    out = {"pieces": [], "error": None}

    def run():
        try:
            for d in c.stream([Message("user", "q")], step="chat", tally=tally, cancel=cancel):
                out["pieces"].append(d.text)
        except BaseException as exc:  # noqa: BLE001 - the test inspects what came out
            out["error"] = exc
    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th, out


def _until(cond, timeout=30.0):
    import time

    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "condition not met"
        time.sleep(0.01)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_cancelled_stream_frees_its_thread_before_the_endpoint_sends_a_byte(provider):
    """The endpoint has read the request and sends nothing (no status line yet): setting the call's CancelToken
    shuts its connection down, so the thread is free within a second (before: it waited out total_timeout, here
    60 s), with LLMCancelled, one request on the wire (the SDK's retries are not made) and no failure counted."""
    import threading
    import time

    from reme_engine.llm.client import CancelToken, LLMCancelled
    from wire.server import Hold

    release = threading.Event()
    with ScriptedServer([Hold(release, STREAM[provider](["late"]))]) as srv:
        try:
            c = _client(provider, srv, total_timeout=60.0, max_retries=2)
            cancel, tally = CancelToken(), UsageTally()
            th, out = _stream_in_thread(c, cancel, tally)
            _until(lambda: len(srv.requests) == 1)  # the request is in; the server holds its reply
            t0 = time.monotonic()
            cancel.set()
            th.join(10)
            freed = time.monotonic() - t0
            assert not th.is_alive() and freed < 3.0, freed  # ~5 ms on an idle machine
            assert isinstance(out["error"], LLMCancelled), out
            assert out["pieces"] == [] and len(srv.requests) == 1
            assert (tally.calls, tally.retries, tally.failed_calls) == (1, 0, 0)
        finally:
            release.set()


def test_a_cancelled_stream_stops_mid_answer_and_a_set_token_sends_nothing():
    """Cancelled after its first words while the model pauses: the thread stops at once with what arrived. A
    token already set: the call raises before any request."""
    import threading

    from reme_engine.llm.client import CancelToken, LLMCancelled
    from wire.server import SSE

    release = threading.Event()
    status, sse = openai_stream(["The chain has ", "five stages"])
    events = list(sse.events)

    def stalling():
        yield from events[:2]  # role + the first words
        release.wait(60)
        yield from events[2:]

    with ScriptedServer([(status, SSE(stalling()))]) as srv:
        try:
            c = _client("openai", srv, total_timeout=60.0)
            cancel = CancelToken()
            th, out = _stream_in_thread(c, cancel, UsageTally())
            _until(lambda: "The chain has " in out["pieces"])
            cancel.set()
            th.join(10)
            assert not th.is_alive() and isinstance(out["error"], LLMCancelled), out
            assert "".join(out["pieces"]) == "The chain has "
        finally:
            release.set()
        with pytest.raises(LLMCancelled):
            list(c.stream([Message("user", "again")], cancel=cancel))
        assert len(srv.requests) == 1
