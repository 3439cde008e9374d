"""Grounded chat answers through the real SDKs: retrieval context, citations, the bounded read loop."""

import pytest

from reme_engine.chat import ChatAnswerer, ChatTurn, MAX_TOOL_ROUNDS
from reme_engine.config import LLMSettings
from reme_engine.llm.client import LLMError, Message, make_client
from wire.server import ScriptedServer, anthropic_stream, openai_stream

STREAM = {"anthropic": anthropic_stream, "openai": openai_stream}


def _client(provider, srv):
    base = f"http://127.0.0.1:{srv.port}" if provider == "anthropic" else srv.base_url
    return make_client(LLMSettings(provider=provider, model="m", base_url=base, api_key="k", max_retries=0))


@pytest.fixture
def eng(make_engine, demo_vault):
    e = make_engine(demo_vault, embed=False)
    e.index()
    return e


def _user_text(req, provider):
    msgs = req["body"]["messages"]
    return msgs[-1]["content"] if isinstance(msgs[-1]["content"], str) else msgs[-1]["content"][0]["text"]


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_answer_streams_with_retrieved_context(eng, provider):
    with ScriptedServer([STREAM[provider](["光伏产业链", "有五个环节 ", "[[digest/wiki/光伏产业链.md#L1-L9]]"])]) as srv:
        turn = ChatTurn("光伏产业链有哪些环节？")
        parts = list(ChatAnswerer(eng, _client(provider, srv)).stream([], turn.question, turn))
        text = "".join(p.text for p in parts)
        assert text.startswith("光伏产业链有五个环节") and parts[-1].done
        assert turn.citations and any(c.path == "digest/wiki/光伏产业链.md" for c in turn.citations)
        sent = _user_text(srv.requests[0], provider)
        assert "Context from the user's notes" in sent and "digest/wiki/光伏产业链.md#L" in sent
        assert turn.unknown_citations == [] and turn.tally.calls == 1


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_read_loop_is_bounded_and_read_only(eng, provider):
    before = {p: p.read_bytes() for p in eng.vault.rglob("*.md")}
    script = [STREAM[provider](["READ: digest/wiki/光伏产业链.md#L1-L5"]),
              STREAM[provider](["READ: ../../etc/passwd"]),
              STREAM[provider](["READ: digest/wiki/新能源.md"])]  # third tool request: not honoured
    with ScriptedServer(script) as srv:
        turn = ChatTurn("光伏")
        text = "".join(p.text for p in ChatAnswerer(eng, _client(provider, srv)).stream([], "光伏", turn))
        assert len(srv.requests) == MAX_TOOL_ROUNDS + 1
        assert [c.path for c in turn.reads] == ["digest/wiki/光伏产业链.md"]
        second = _user_text(srv.requests[1], provider)
        assert second.startswith("Read results") and "光伏产业链" in second
        third = _user_text(srv.requests[2], provider)
        assert "cannot read" in third
        assert text.startswith("READ:")  # the unhonoured request is shown as the answer, not executed
    assert before == {p: p.read_bytes() for p in eng.vault.rglob("*.md")}


def test_nothing_found_is_said_and_unknown_citations_flagged(make_engine, tmp_path):
    v = tmp_path / "v"
    v.mkdir()
    (v / "a.md").write_text("apples\n")
    e = make_engine(v, embed=False)
    e.index()
    with ScriptedServer([STREAM["openai"](["Nothing in your notes. See [[made/up.md]]"])]) as srv:
        turn = ChatTurn("zebra migration")
        list(ChatAnswerer(e, _client("openai", srv)).stream([Message("user", "hi"), Message("assistant", "hello")],
                                                          turn.question, turn))
        assert turn.nothing_found
        assert "nothing relevant was found" in _user_text(srv.requests[0], "openai")
        assert turn.unknown_citations == ["made/up.md"]
        assert srv.requests[0]["body"]["messages"][1] == {"role": "user", "content": "hi"}


def test_provider_failure_raises_llm_error(eng):
    with ScriptedServer(default=lambda p, b: (500, {"error": {"message": "down"}})) as srv:
        with pytest.raises(LLMError):
            list(ChatAnswerer(eng, _client("openai", srv)).stream([], "光伏"))


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_cancelled_chat_answer_frees_its_thread_and_records_nothing(make_engine, tmp_path, provider):
    """``Engine.chat_answer(…, cancel)`` on an endpoint that holds its reply (no byte sent): setting the token from
    another thread (the TUI's Escape) ends the answer within a second with LLMCancelled, not after
    llm.total_timeout (60 s here); the chat record keeps the question only; a READ round after it is never asked."""
    import threading
    import time

    from reme_engine.engine import CancelToken, LLMCancelled
    from wire.server import Hold

    v = tmp_path / "v"
    v.mkdir()
    (v / "pv.md").write_text("# PV\n\nThe photovoltaic chain has five stages.\n", encoding="utf-8")
    release = threading.Event()
    with ScriptedServer([Hold(release, STREAM[provider](["late words"]))]) as srv:
        base = f"http://127.0.0.1:{srv.port}" if provider == "anthropic" else srv.base_url
        e = make_engine(v, embed=False, llm={"provider": provider, "model": "m", "base_url": base, "api_key": "k",
                                             "total_timeout": 60})
        e.index()
        q = e.chat_append("s1", "user", "photovoltaic chain?")
        cancel, out, texts = CancelToken(), {}, []

        def answer():
            try:
                out["turn"] = e.chat_answer("s1", q.id, texts.append, cancel)
            except BaseException as exc:  # noqa: BLE001 - inspected below
                out["error"] = exc
        th = threading.Thread(target=answer, daemon=True)
        th.start()
        try:
            end = time.monotonic() + 30
            while len(srv.requests) < 1:  # the question is with the model, which says nothing yet
                assert time.monotonic() < end and th.is_alive(), out
                time.sleep(0.01)
            t0 = time.monotonic()
            cancel.set()
            th.join(10)
            assert not th.is_alive() and time.monotonic() - t0 < 3.0
        finally:
            release.set()
        assert isinstance(out.get("error"), LLMCancelled), out
        assert texts == [] and len(srv.requests) == 1
        assert [(m.role, m.content) for m in e.chat_history("s1")] == [("user", "photovoltaic chain?")]
