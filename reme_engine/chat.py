"""Chat answers grounded in the vault: retrieve, cite, stream; a bounded read-only tool loop.

Each user turn: hybrid search over the vault (the question plus the previous user turn), the top chunks go to the
LLM as numbered context blocks labelled with their citation ``[[path#Lx-Ly]]``; the system prompt tells the model
to answer only from them, cite what it uses, and say plainly when nothing relevant was found. The model may ask to
read more of a cited note by answering with lines ``READ: path#Lx-Ly`` and nothing else; the engine reads those
ranges (read-only, inside the vault, at most ``MAX_READ_LINES`` lines each) and asks again — at most
``MAX_TOOL_ROUNDS`` times. Citations in the final answer that do not refer to retrieved or read notes are
reported in :attr:`ChatTurn.unknown_citations` so the UI can flag them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterator

from .llm.client import CancelToken, LLMClient, Message, StreamDelta, UsageTally
from .markdown.links import parse_links
from .memory.prompts import load_prompt

#: Context chunks per turn and the characters kept of each.
CONTEXT_HITS = 6
CONTEXT_CHARS = 1500
MAX_TOOL_ROUNDS = 2
MAX_READ_LINES = 80
_READ_RE = re.compile(r"^\s*READ:\s*(.+?)\s*$", re.M)

#: System prompts of a chat turn (``memory/prompts/chat.<lang>.md``).
SYSTEM_EN = load_prompt("chat", "en")
SYSTEM_ZH = load_prompt("chat", "zh")


@dataclass
class Citation:
    path: str
    start_line: int
    end_line: int

    @property
    def ref(self) -> str:
        return f"[[{self.path}#L{self.start_line}-L{self.end_line}]]"


@dataclass
class ChatTurn:
    """What a turn used and produced: ``citations`` offered as context, ``reads`` done by the tool loop,
    ``answer`` (full text), ``unknown_citations`` (cited but neither retrieved nor read), ``tally``."""

    question: str
    citations: list[Citation] = field(default_factory=list)
    reads: list[Citation] = field(default_factory=list)
    answer: str = ""
    unknown_citations: list[str] = field(default_factory=list)
    nothing_found: bool = False
    tally: UsageTally = field(default_factory=UsageTally)


def retrieve(engine, question: str, previous: str = "", limit: int = CONTEXT_HITS) -> tuple[str, list[Citation]]:
    """Context text (numbered blocks) and citations for ``question`` from a hybrid search of the vault."""
    query = question if not previous else f"{question}\n{previous}"
    res = engine.search(query[:2000], limit=limit, neighbors=False)
    blocks, cites = [], []
    for i, h in enumerate(res.hits, start=1):
        c = Citation(h.path, h.start_line, h.end_line)
        cites.append(c)
        text = h.text if len(h.text) <= CONTEXT_CHARS else h.text[:CONTEXT_CHARS] + "…"
        title = f"{h.name} — {h.description}" if h.description else h.name
        blocks.append(f"[{i}] {c.ref} ({title})\n{text}")
    return "\n\n".join(blocks), cites


def _parse_ref(ref: str) -> tuple[str, int | None, int | None]:
    ref = ref.strip().strip("[]")
    m = re.match(r"^(.*?)(?:#L(\d+)-L(\d+))?$", ref)
    assert m is not None
    return m.group(1).strip(), (int(m.group(2)) if m.group(2) else None), (int(m.group(3)) if m.group(3) else None)


class ChatAnswerer:
    """Streams grounded answers. ``llm`` is an :class:`LLMClient`; ``engine`` the :class:`Engine` façade."""

    def __init__(self, engine, llm: LLMClient) -> None:
        self.engine = engine
        self.llm = llm

    def stream(self, history: list[Message], question: str, turn: ChatTurn | None = None, *,
               cancel: CancelToken | None = None) -> Iterator[StreamDelta]:
        """Yield the answer's text pieces (and a final ``done`` item). ``turn`` (optional) is filled in.

        ``history``: earlier messages of the session (oldest first), without the new question. ``cancel``: set
        from any thread, it stops every LLM round of this answer (see :class:`~reme_engine.llm.client.CancelToken`).
        Raises :class:`~reme_engine.llm.client.LLMError` when the provider fails, ``LLMCancelled`` when cancelled.
        """
        turn = turn or ChatTurn(question)
        prev_user = next((m.content for m in reversed(history) if m.role == "user"), "")
        context, cites = retrieve(self.engine, question, prev_user)
        turn.citations = cites
        turn.nothing_found = not cites
        system = SYSTEM_ZH if getattr(self.engine.settings, "language", "en") == "zh" else SYSTEM_EN
        ctx_msg = ("Context from the user's notes:\n\n" + context) if context else \
            "Context from the user's notes: (nothing relevant was found)"
        msgs = [*history[-12:], Message("user", f"{ctx_msg}\n\nQuestion: {question}")]
        for round_no in range(MAX_TOOL_ROUNDS + 1):
            pieces: list[str] = []
            buffered: list[StreamDelta] = []
            decided = False
            final = None
            for d in self.llm.stream(msgs, system=system, step="chat", tally=turn.tally, cancel=cancel):
                if d.done:
                    final = d
                    continue
                pieces.append(d.text)
                if not decided:
                    so_far = "".join(pieces).lstrip()
                    # a tool request starts with READ:; anything else is the answer — stream it through
                    if len(so_far) >= 5 and not so_far.startswith("READ:"):
                        decided = True
                        yield from buffered
                        buffered = []
                        yield d
                    else:
                        buffered.append(d)
                else:
                    yield d
            text = "".join(pieces)
            reads = _READ_RE.findall(text) if not decided else []
            if reads and round_no < MAX_TOOL_ROUNDS and all(line.startswith("READ:") for line in
                                                            text.strip().splitlines() if line.strip()):
                got = []
                for ref in reads[:4]:
                    path, a, b = _parse_ref(ref)
                    try:
                        start = a or 1
                        end = min(b or start + MAX_READ_LINES - 1, start + MAX_READ_LINES - 1)
                        r = self.engine.read(path, start, end)
                        c = Citation(r.path, r.start_line, r.end_line)
                        turn.reads.append(c)
                        got.append(f"{c.ref}\n{r.text}")
                    except Exception as exc:  # a bad path is reported to the model, not raised
                        got.append(f"[[{path}]]: cannot read ({exc})")
                msgs = [*msgs, Message("assistant", text), Message("user", "Read results:\n\n" + "\n\n".join(got))]
                continue
            if not decided:
                yield from buffered
            turn.answer = text
            known = {c.path for c in turn.citations} | {c.path for c in turn.reads}
            cited = {lk.target for lk in parse_links(text) if lk.kind == "wikilink" and lk.target}
            turn.unknown_citations = sorted(cited - known)
            yield final or StreamDelta(done=True)
            return
