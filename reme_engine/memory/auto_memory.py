"""auto-memory: a chat session's new messages → one daily card per session and day (ARCHITECTURE §6).

Flow of :func:`run_auto_memory` (called by ``Engine.auto_memory`` under the vault's writer lock):

1. Read the session record (:mod:`.session`) and take the messages after the checkpoint of catalog ``memory``
   (key: the session file's vault path; value: JSON ``{"last_id": …, "count": …}``).
2. Cut them into batches: consecutive messages of one day in the app timezone (the card's date), split further
   when a batch would be too large for one request. A batch without user messages is checkpointed with no LLM call.
3. Per batch, one LLM call. The request separates the parts (prompt files ``prompts/auto_memory.<lang>.md``)::

       <existing_card path="daily/…">…</existing_card>      (or "(none)")
       <evidence>[#3 user 09:12] …</evidence>              the user's messages: the only evidence
       <context_not_evidence>[#4 assistant 09:13] …</context_not_evidence>

   The reply is a :class:`CardReply` ``{name, description, slug, timeline: [str], current_state, notes: [str]}``.
4. Code, not the model, merges the reply into the card. Who owns the card is read from the card itself
   (:mod:`reme_engine.vault.provenance`): every card the app creates carries a ``reme_provenance: app <hash>``
   frontmatter stamp, re-stamped on each app write.

   - **The app's card** (stamp current: nobody edited it since): :func:`merge_card` — ``## Timeline`` appends new
     items (``- HH:MM text``), ``## Current state`` is rewritten, ``## Notes`` appends items not already in the
     card, ``description`` is updated; any other section, the preamble and unknown frontmatter keys are kept.
   - **The user's card** (they wrote it, or edited any byte after the app wrote it — theirs forever): none of its
     bytes change, frontmatter included. :func:`merge_into_block` proposes the update in reme's marked block at
     the end (``<!-- reme:begin … -->`` … ``<!-- reme:end -->``, rewritten in place while the user leaves it
     alone): a new description, the newest current state, the timeline items and notes no line of the card says
     yet, and the session record as source. The write is refused unless every user line is kept
     (:func:`~reme_engine.vault.provenance.keeps_user_lines`).

   Before merging, every item that quotes assistant-only text verbatim is dropped (:class:`QuoteGuard`), so
   assistant replies never become card facts.
5. The card ``daily/<date>/<slug>.md`` has frontmatter ``name``, ``description``, ``session_id`` and
   ``source_conversation: "[[session/dialog/<id>.jsonl]]"``. A later batch finds the card again by its
   ``session_id``; a new card whose slug is taken (another session, a user note) gets ``-2``, ``-3``… so two
   sessions never overwrite each other.
6. Each write is journaled (run kind ``auto_memory``) and conflict-checked; the checkpoint advances only after the
   batch's card is written. On an LLM or parse failure nothing of that batch is written or checkpointed and the run
   stops: the next run retries the same messages. Afterwards the day index pages are refreshed and the written
   cards re-indexed.

Without an LLM, :func:`append_user_messages_verbatim` is the quick-capture journal: the user's messages are appended
verbatim to ``daily/<date>/capture.md`` (journaled as run kind ``capture``). The app's capture card is stamped and
appended to; once the user edits it (or if they made it), the captures continue in reme's block at its end, on the
same page and in time order, rather than in a second card: a day's captures stay in one place, and an edit never
scatters them over ``capture-2.md``, ``capture-3.md``… A block the user edits becomes theirs; the next capture opens
a new block after it.
"""

from __future__ import annotations

import json
import time
import re
from dataclasses import asdict, dataclass, field

from ..llm.client import LLMError, Message, UsageTally
from ..llm.structured import StructuredReplyError, parse_reply
from ..markdown.frontmatter import FrontmatterError, parse_frontmatter
from ..vault import provenance as P
from ..vault.io import SkipFile, WriteConflict
from ..vault.paths import resolve
from .prompts import load_prompt, prompt_language
from .session import ChatMessage, read_session, session_link, session_rel, valid_session_id
# The steps live in their own modules; their names are re-exported here for callers of this module.
from .cards import (MAX_SLUG_CHARS, RESERVED_STEMS, _day_folder, _new_card_head, _read_card,  # noqa: F401
                    find_session_card, free_card_path, slugify)
from .capture import (CAPTURE_CATALOG, CAPTURE_IDS_KEPT, CAPTURE_KIND, CAPTURE_STEM, CaptureResult,  # noqa: F401
                      _append_block, _capture_block, _capture_head, append_user_messages_verbatim)
from .merge import (BLOCK_TEXT, DESCRIPTION_LABEL, SECTION_ALIASES, SECTION_LABELS, SOURCES_LABEL,  # noqa: F401
                    _checked_block_write, _one_line, _safe_block, block_parts, merge_card, merge_into_block,
                    normalize_item, render_block_parts)
from .quote_guard import QUOTE_NGRAM, QUOTE_NOVEL_TOKENS, QuoteGuard, _guard_reply, tokens  # noqa: F401
from .reply import CardReply, _as_text, text_items  # noqa: F401

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..context import VaultContext

KIND = "auto_memory"
#: Catalog of consumed messages: session path → ``{"last_id", "count"}`` (JSON).
CATALOG = "memory"

#: Per-message caps in a request (characters); longer messages are cut with a marker.
MAX_USER_CHARS = 8000
MAX_CONTEXT_CHARS = 2000
#: Existing card text shown to the model (characters).
MAX_CARD_CHARS = 8000
#: A batch is split when its messages exceed this many characters (after the per-message caps).
MAX_BATCH_CHARS = 40000
REPLY_MAX_TOKENS = 2048


# --------------------------------------------------------------------------------------------------- results


@dataclass
class AutoMemoryReport:
    """Outcome of :func:`run_auto_memory`.

    ``status``: ``ok`` (all new messages consumed), ``nothing_new`` (no unconsumed messages; no LLM call, no run),
    ``failed`` (``error`` says why; the failed batch and later ones stay unconsumed for the next run).
    ``created``/``updated``: card paths; ``consumed``: messages checkpointed by this run; ``pending``: new messages
    left for a later run; ``filtered``: card items dropped because they quoted assistant-only text;
    ``skipped_lines``: unreadable lines in the session record; ``tally``: LLM calls and tokens.
    """

    session_id: str
    status: str = "ok"
    run_id: str | None = None
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    new_messages: int = 0
    consumed: int = 0
    pending: int = 0
    filtered: list[str] = field(default_factory=list)
    skipped_lines: int = 0
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    tally: dict = field(default_factory=dict)
    wall_s: float = 0.0

    @property
    def cards(self) -> list[str]:
        return self.created + [p for p in self.updated if p not in self.created]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["success"] = self.status != "failed"
        return d


# --------------------------------------------------------------------------------------------------- batches


@dataclass
class _Batch:
    date: str
    items: list[tuple[int, ChatMessage]] = field(default_factory=list)  # (1-based position in session, message)
    chars: int = 0

    @property
    def user(self) -> list[tuple[int, ChatMessage]]:
        return [(p, m) for p, m in self.items if m.role == "user"]

    @property
    def context(self) -> list[tuple[int, ChatMessage]]:
        return [(p, m) for p, m in self.items if m.role != "user"]


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "\n[… truncated …]"


def _batches(new: list[tuple[int, ChatMessage]], tz) -> list[_Batch]:
    """Consecutive messages of one local day, split when a batch would exceed :data:`MAX_BATCH_CHARS`."""
    out: list[_Batch] = []
    for pos, m in new:
        date = m.time(tz).date().isoformat()
        size = min(len(m.content), MAX_USER_CHARS if m.role == "user" else MAX_CONTEXT_CHARS)
        if not out or out[-1].date != date or (out[-1].items and out[-1].chars + size > MAX_BATCH_CHARS):
            out.append(_Batch(date))
        out[-1].items.append((pos, m))
        out[-1].chars += size
    return out


_TAG_RE = re.compile(r"<(/?)(evidence|context_not_evidence|existing_card)", re.I)


def _defuse(text: str) -> str:
    """Message text cannot open or close the request's tags (it is data, not structure)."""
    return _TAG_RE.sub(lambda m: "‹" + m.group(1) + m.group(2), text)


def build_request(session_id: str, date: str, card_rel: str | None, card_text: str | None, batch: _Batch,
                  tz) -> str:
    """The user-turn text of one auto-memory call (shape in the module docstring)."""
    ev = [f"[#{p} user {m.time(tz):%H:%M}]\n{_defuse(_cap(m.content, MAX_USER_CHARS))}" for p, m in batch.user]
    ctx = [f"[#{p} {m.role} {m.time(tz):%H:%M}]\n{_defuse(_cap(m.content, MAX_CONTEXT_CHARS))}"
           for p, m in batch.context]
    if card_text is None:
        card = "<existing_card>\n(none)\n</existing_card>"
    else:
        card = f'<existing_card path="{card_rel}">\n{_defuse(_cap(card_text, MAX_CARD_CHARS))}\n</existing_card>'
    return "\n\n".join([
        f"Session: {session_id}\nDate: {date}",
        card,
        "<evidence>\n" + "\n\n".join(ev) + "\n</evidence>",
        "<context_not_evidence>\n" + ("\n\n".join(ctx) or "(none)") + "\n</context_not_evidence>",
        "Reply with the JSON object described in the instructions.",
    ])


# --------------------------------------------------------------------------------------------------- the run


def _consumed_upto(engine, srel: str, msgs: list[ChatMessage]) -> int:
    """How many leading messages of ``msgs`` the catalog says were consumed."""
    raw = engine.store.catalog_get(CATALOG).get(srel)
    if not raw:
        return 0
    try:
        ptr = json.loads(raw)
    except ValueError:
        return 0
    last = ptr.get("last_id") if isinstance(ptr, dict) else None
    for i, m in enumerate(msgs):
        if m.id == last:
            return i + 1
    try:  # the message vanished from the record (hand edit): fall back to the count
        return min(int(ptr.get("count") or 0), len(msgs))
    except (TypeError, ValueError, AttributeError):
        return 0


def _checkpoint(engine, srel: str, pos: int, msg: ChatMessage) -> None:
    engine.store.catalog_set(CATALOG, {srel: json.dumps({"last_id": msg.id, "count": pos})})


def run_auto_memory(engine: VaultContext, session_id: str, *, llm) -> AutoMemoryReport:
    """Create or merge the daily card(s) of ``session_id`` from its unconsumed messages (see module doc).

    ``llm``: an :class:`~reme_engine.llm.client.LLMClient`. Returns an :class:`AutoMemoryReport`; LLM, parse and
    write-conflict failures are reported (``status="failed"``), not raised. Raises EngineError for an invalid
    session id or a session with no record.
    """
    from ..errors import EngineError

    t0 = time.perf_counter()
    try:
        sid = valid_session_id(session_id)
    except ValueError as exc:
        raise EngineError(str(exc)) from exc
    settings = engine.settings
    layers, tz, lang = settings.layers, settings.tzinfo(), settings.language
    srel = session_rel(layers, sid, engine.vault)
    report = AutoMemoryReport(sid)
    msgs = read_session(engine.vault, layers, sid)
    report.skipped_lines = msgs.skipped
    if not msgs and not resolve(engine.vault, srel).abs.exists():
        raise EngineError(f"no session record {srel}")
    new = list(enumerate(msgs, 1))[_consumed_upto(engine, srel, msgs):]
    report.new_messages = len(new)
    if not new:
        report.status = "nothing_new"
        report.wall_s = round(time.perf_counter() - t0, 3)
        return report

    tally = UsageTally.for_settings(engine.settings)
    system = load_prompt("auto_memory", lang)
    user_texts = [m.content for m in msgs if m.role == "user"]
    batches = _batches(new, tz)
    run = None
    dates: set[str] = set()
    for i, batch in enumerate(batches):
        if batch.user:
            if run is None:
                run = engine.journal.start_run(engine.vault, KIND, {"session_id": sid, "session": srel})
                report.run_id = run.run_id
            try:
                path, created = _process_batch(engine, run, sid, srel, batch, system, llm, tally, user_texts,
                                               report.filtered)
            except (LLMError, StructuredReplyError, WriteConflict, FrontmatterError, SkipFile, OSError) as exc:
                report.status = "failed"
                report.error = f"{batch.date}: {exc}"
                report.pending = sum(len(b.items) for b in batches[i:])
                break
            except BaseException as exc:  # a bug or an interrupt: close the journal run before propagating
                run.finish("failed", {"error": f"{type(exc).__name__}: {exc}"}, tally.to_dict())
                raise
            if path:
                dates.add(batch.date)
                (report.created if created else report.updated).append(path)
        pos, last = batch.items[-1]
        _checkpoint(engine, srel, pos, last)
        report.consumed += len(batch.items)

    from .day_index import reindex_day

    for date in sorted(dates):
        try:
            reindex_day(engine, run, date)
        except EngineError as exc:
            report.warnings.append(f"day index {date} not refreshed: {exc}")
    if run is not None and run.written:
        engine.index_paths(sorted(set(run.written)))
    report.updated = [p for p in dict.fromkeys(report.updated) if p not in report.created]
    report.created = list(dict.fromkeys(report.created))
    report.tally = tally.to_dict()
    report.wall_s = round(time.perf_counter() - t0, 3)
    if run is not None:
        run.finish(report.status, {"created": report.created, "updated": report.updated,
                                   "consumed": report.consumed, "pending": report.pending,
                                   "filtered": len(report.filtered), "error": report.error}, report.tally)
    return report


def _process_batch(engine, run, sid: str, srel: str, batch: _Batch, system: str, llm, tally: UsageTally,
                   user_texts: list[str], dropped: list[str]) -> tuple[str | None, bool]:
    """One LLM call and the card write for ``batch`` (merged in place into the app's card, proposed in reme's
    block of the user's card, or a new stamped card). Returns ``(card path or None, created)``."""
    settings = engine.settings
    tz, lang = settings.tzinfo(), settings.language
    card_rel = find_session_card(engine, batch.date, sid)
    card = _read_card(engine, card_rel) if card_rel else None
    content = build_request(sid, batch.date, card_rel, card[0] if card else None, batch, tz)
    reply = llm.complete([Message("user", content)], system=system, max_tokens=REPLY_MAX_TOKENS, step=KIND,
                         tally=tally)
    data = parse_reply(reply.text, CardReply)

    link = session_link(settings.layers, sid, engine.vault)
    time_label = f"{batch.user[0][1].time(tz):%H:%M}"
    with engine.write_lock:
        # Read again: the user (or another app window) may have edited or created the card while the model
        # was thinking; the merge is done in code, so it applies to the newest text.
        card_rel = find_session_card(engine, batch.date, sid)
        card = _read_card(engine, card_rel) if card_rel else None
        allowed = user_texts + ([card[0]] if card else [])
        data = _guard_reply(data, QuoteGuard([m.content for _, m in batch.context], allowed), dropped)
        if card is not None and not P.note_ownership(card[0]).app_owned:
            # The user's card (they wrote it, or edited it after the app did): its lines and frontmatter are
            # never changed; what the batch adds is proposed in reme's block at its end.
            assert card_rel is not None
            text, sha, enc = card
            new_text = merge_into_block(text, data, time_label=time_label, language=lang, sources=[srel])
            if new_text == text:
                return None, False
            new_text = _checked_block_write(text, new_text, card_rel)
            run.write(card_rel, new_text, step=KIND, sources=[srel], expected_sha=sha)
            return card_rel, False
        if card is not None:
            assert card_rel is not None
            text, sha, enc = card
            meta = parse_frontmatter(text).meta
            wanted = {"session_id": sid, "source_conversation": link}
            if data.description:
                wanted["description"] = _one_line(data.description)
            if not meta.get("name"):
                wanted["name"] = _one_line(data.name) or _default_name(batch.date, lang)
            updates = {k: v for k, v in wanted.items() if str(meta.get(k)) != v}
            new_text = merge_card(text, data, time_label=time_label, language=lang, frontmatter=updates)
            if new_text == text:
                return None, False
            new_text = P.stamp(new_text)  # still the app's card: re-stamped with the hash of this write
            run.write(card_rel, new_text, step=KIND, sources=[srel], expected_sha=sha)
            return card_rel, False
        if data.is_empty():
            return None, False  # nothing worth a card (small talk); the messages still count as consumed
        name = _one_line(data.name) or _default_name(batch.date, lang)
        head = _new_card_head({"name": name, "description": _one_line(data.description), "session_id": sid},
                              "source_conversation", link)
        new_text = P.stamp(merge_card(f"{head}\n# {name}\n", data, time_label=time_label, language=lang))
        slug = slugify(data.slug or data.name, f"session_{sid}"[:MAX_SLUG_CHARS])
        for _ in range(5):
            rel = free_card_path(engine, batch.date, slug)
            try:
                run.write(rel, new_text, step=KIND, sources=[srel], expected_sha=None)
            except WriteConflict:
                continue  # the name was taken a moment ago: the next free one
            return rel, True
        raise WriteConflict(f"could not find a free card name for {slug!r}")




def _default_name(date: str, language: str) -> str:
    return f"对话 {date}" if prompt_language(language) == "zh" else f"Chat {date}"
