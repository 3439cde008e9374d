"""auto-resource: files under ``resource/`` → source-linked daily cards (ARCHITECTURE §6).

:func:`run_auto_resource` (called by ``Engine.auto_resource`` under the vault's writer lock):

1. Scan ``<resource_dir>/`` (hidden entries skipped). Text types (:data:`TEXT_EXTS`) are read with the vault's size
   limit; other types, binary, undecodable and oversized files are reported in ``skipped`` with a reason.
2. A file whose content hash differs from catalog ``resource`` (path → sha) is new or changed. Its text (HTML
   reduced to plain text) goes to the LLM: whole when at most :data:`PIECE_CHARS` characters; otherwise cut at
   line boundaries into pieces of at most that size, one *map* call per piece (at most :data:`MAX_PIECES`; a
   longer document is sampled evenly from head to tail and the card says so), then one *reduce* call over the
   piece notes. The reply is a :class:`ResourceCard` ``{name, description, summary, key_points}``.
3. The card ``daily/<date>/<resource stem>.md`` (``date`` from a ``YYYY-MM-DD`` folder in the resource's path,
   else today; a stem that is taken gets ``-2``…) carries frontmatter ``name``, ``description`` and
   ``source_resource: "[[resource/…]]"`` and the app's provenance stamp (``reme_provenance: app <hash>``,
   :mod:`reme_engine.vault.provenance`). Ownership is read from the card itself, never from the catalog or the
   journal: a changed resource rewrites its card in place (re-stamped) while the stamp still matches; a card the
   user edited (any byte) or made is the user's forever: its bytes are never changed, and the new summary is
   proposed in reme's marked block at its end (:func:`propose_in_block`; rewritten in place on later changes,
   reported in ``kept``). Catalog ``resource_card`` (path → JSON ``{"card", "sha"}``) remembers which card
   belongs to which resource.
4. Only after the card is written is the file checkpointed in ``resource``, so a failed call or write retries next
   run. Two consecutive LLM failures stop the run (the rest is ``pending``); at most :data:`MAX_FILES_PER_RUN` files
   are summarised per run.
5. A resource that disappeared has its card deleted (journaled) if the card is still the app's (stamp current); a
   card the user edited or made is kept and reported. Every write is journaled (run kind ``auto_resource``); day
   index pages of the touched days are refreshed and written cards re-indexed.
"""

from __future__ import annotations

import json
import os
import re
import time
import unicodedata
import uuid
from dataclasses import asdict, dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, field_validator

from ..llm.client import LLMError, Message, UsageTally
from ..llm.structured import StructuredReplyError, parse_reply
from ..markdown.frontmatter import parse_frontmatter
from ..vault import provenance as P
from ..vault.daily import valid_date
from ..vault.io import SkipFile, WriteConflict, read_text
from ..vault.paths import VaultPathError, is_hidden, resolve, to_rel

# Card helpers shared with auto-memory (same frontmatter, heading-safety and naming rules for every daily card).
from .cards import _day_folders, _new_card_head, _read_card, free_card_path
from .merge import BLOCK_TEXT, DESCRIPTION_LABEL, _checked_block_write, _one_line, _safe_block, normalize_item
from .prompts import load_prompt
from .reply import _as_text, text_items

if TYPE_CHECKING:
    from ..context import VaultContext

KIND = "auto_resource"
#: Checkpoints: resource path → content sha, set only after the resource's card is written.
CATALOG = "resource"
#: Cards the app wrote: resource path → JSON ``{"card": card path, "sha": card content sha as written}``.
CARD_CATALOG = "resource_card"
TEXT_EXTS = frozenset({"md", "txt", "json", "jsonl", "csv", "yaml", "yml", "html", "htm"})
#: A resource longer than this (characters) is summarised in pieces of at most this size.
PIECE_CHARS = 12000
#: Map calls per resource at most; longer documents are sampled evenly.
MAX_PIECES = 8
#: Resources summarised per run at most (the rest stays pending for the next run).
MAX_FILES_PER_RUN = 50
#: Consecutive LLM failures that end the run early (the service is down: stop spending retries).
MAX_CONSECUTIVE_FAILURES = 2
MAP_MAX_TOKENS = 800
CARD_MAX_TOKENS = 2048
#: Characters of one piece's notes passed to the reduce call.
MAP_NOTE_CHARS = 3000
_REPLY_HINT = "Reply with the JSON object described in the instructions."
_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/reme-tui/resource")


# --------------------------------------------------------------------------------------------------- results


@dataclass
class AutoResourceReport:
    """Outcome of :func:`run_auto_resource`.

    ``status``: ``ok``, ``no_change`` (nothing new, changed or removed: no LLM call, no journal run) or ``failed``
    (at least one file failed; see ``failed``).
    ``items``: one entry per handled resource ``{path, resource_id (stable uuid5), card, action
    (created | updated | proposed (in reme's block of the user's card) | adopted), pieces, map_calls, truncated}``.
    ``created``/``updated``/``removed``: card paths. ``kept``: ``{path, card, reason}`` for cards the app did not
    overwrite or delete (edited by the user, or hand-made and adopted). ``skipped``: ``{path, reason}``
    (unsupported type, binary, undecodable, oversized). ``failed``: ``{path, error}`` (retried next run).
    ``pending``: changed files left for a later run; ``unchanged``: files already checkpointed; ``tally``: LLM
    calls and tokens (``by_step``: ``auto_resource.summarise`` / ``.map`` / ``.reduce``).
    """

    status: str = "ok"
    run_id: str | None = None
    items: list[dict] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    kept: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    failed: list[dict] = field(default_factory=list)
    pending: int = 0
    unchanged: int = 0
    warnings: list[str] = field(default_factory=list)
    tally: dict = field(default_factory=dict)
    wall_s: float = 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["success"] = not self.failed
        return d


class ResourceCard(BaseModel):
    """The model's structured reply for a resource card."""

    model_config = ConfigDict(extra="ignore")

    name: str = ""
    description: str = ""
    summary: str = ""
    key_points: list[str] = []

    @field_validator("name", "description", "summary", mode="before")
    @classmethod
    def _text(cls, v: Any) -> str:
        return _as_text(v).strip()

    @field_validator("key_points", mode="before")
    @classmethod
    def _items(cls, v: Any) -> list[str]:
        return text_items(v)


# --------------------------------------------------------------------------------------------------- text prep


class _HTMLText(HTMLParser):
    """Visible text of an HTML document: scripts/styles dropped, block elements on their own lines."""

    _BLOCK = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article",
                        "header", "footer", "table", "ul", "ol", "pre", "blockquote", "title"})
    _SKIP = frozenset({"script", "style", "noscript", "template", "svg"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in self._SKIP:
            self.skip += 1
        elif tag in self._BLOCK:
            self.out.append("\n")

    def handle_endtag(self, tag):
        if tag in self._SKIP:
            self.skip = max(0, self.skip - 1)
        elif tag in self._BLOCK:
            self.out.append("\n")

    def handle_data(self, data):
        if not self.skip:
            self.out.append(data)


def html_to_text(html: str) -> str:
    """Plain text of ``html`` (whitespace collapsed per line, blank runs squeezed)."""
    p = _HTMLText()
    p.feed(html)
    p.close()
    lines = [" ".join(line.split()) for line in "".join(p.out).split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def split_pieces(text: str, size: int = PIECE_CHARS) -> list[str]:
    """``text`` cut at line boundaries into pieces of at most ``size`` characters (very long lines hard-split)."""
    if len(text) <= size:
        return [text]
    pieces: list[str] = []
    cur: list[str] = []
    n = 0
    for line in text.splitlines(keepends=True):
        while len(line) > size:
            if cur:
                pieces.append("".join(cur))
                cur, n = [], 0
            pieces.append(line[:size])
            line = line[size:]
        if cur and n + len(line) > size:
            pieces.append("".join(cur))
            cur, n = [], 0
        if line:
            cur.append(line)
            n += len(line)
    if cur:
        pieces.append("".join(cur))
    return pieces


def sample_indexes(n: int, k: int = MAX_PIECES) -> list[int]:
    """``k`` indexes spread evenly over ``range(n)`` from first to last (all of them when ``n <= k``)."""
    if n <= k:
        return list(range(n))
    if k == 1:
        return [0]
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


def resource_id(rel: str) -> str:
    """A stable id of a resource path (uuid5), the same on every run and machine."""
    return str(uuid.uuid5(_NAMESPACE, rel))


def resource_date(rel: str, resource_dir: str) -> str | None:
    """The date of the first ``YYYY-MM-DD`` folder in ``rel`` below ``resource_dir``, else None."""
    parts = rel.split("/")
    skip = len([p for p in resource_dir.strip("/").split("/") if p])
    for part in parts[skip:-1]:
        try:
            return valid_date(part)
        except ValueError:
            continue
    return None


_UNSAFE_STEM_RE = re.compile(r"[\[\]#|^\x00-\x1f\\/:*?\"<>]+")


def card_stem(rel: str) -> str:
    """The card's file stem: the resource's stem with characters that break wikilinks or file names replaced."""
    name = rel.rsplit("/", 1)[-1]
    stem = name.rsplit(".", 1)[0] if "." in name else name
    stem = _UNSAFE_STEM_RE.sub("-", unicodedata.normalize("NFC", stem)).strip(" .-")
    return stem[:100] or "resource"


# --------------------------------------------------------------------------------------------------- scan


@dataclass
class _Resource:
    rel: str
    ext: str
    text: str
    sha: str


def scan_resources(engine, report: AutoResourceReport) -> dict[str, _Resource | None]:
    """Every file under the resource folder: ``{path: _Resource}`` for readable text files, ``{path: None}`` for
    files that exist but are skipped (reason appended to ``report.skipped``)."""
    layers = engine.settings.layers
    try:
        root = resolve(engine.vault, layers.resource_dir.strip("/") or "resource")
    except VaultPathError as exc:
        report.warnings.append(f"resource folder: {exc}")
        return {}
    out: dict[str, _Resource | None] = {}
    if not root.abs.is_dir():
        return out
    for dirpath, dirnames, filenames in os.walk(root.abs):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for fname in sorted(filenames):
            if fname.startswith("."):
                continue
            rel = to_rel(engine.vault, Path(dirpath) / fname)
            if is_hidden(rel):
                continue
            ext = fname.rsplit(".", 1)[-1].lower() if "." in fname else ""
            if ext not in TEXT_EXTS:
                out[rel] = None
                kind = f".{ext}" if ext else "(none)"
                report.skipped.append({"path": rel, "reason": f"unsupported file type {kind}"
                                       f" (text files only: {', '.join(sorted(TEXT_EXTS))})"})
                continue
            try:
                vp = resolve(engine.vault, rel)
                tf = read_text(vp.abs, engine.settings.max_file_bytes)
            except VaultPathError as exc:
                out[rel] = None
                report.skipped.append({"path": rel, "reason": str(exc)})
                continue
            except SkipFile as exc:
                out[rel] = None
                report.skipped.append({"path": rel, "reason": exc.reason})
                continue
            except OSError as exc:
                out[rel] = None
                report.skipped.append({"path": rel, "reason": f"cannot read: {exc.strerror or exc}"})
                continue
            out[rel] = _Resource(rel, ext, tf.text, tf.sha)
    return out


# --------------------------------------------------------------------------------------------------- the run


def _card_record(engine, rel: str) -> dict | None:
    raw = engine.store.catalog_get(CARD_CATALOG).get(rel)
    if not raw:
        return None
    try:
        rec = json.loads(raw)
    except ValueError:
        return None
    return rec if isinstance(rec, dict) and rec.get("card") else None


def _app_owns(text: str) -> bool:
    """The card's own provenance stamp says the app wrote it and nobody edited it since
    (:func:`~reme_engine.vault.provenance.note_ownership`); read from the card, never from the catalog or journal,
    so it holds after a restart, a deleted state dir or a pruned journal."""
    return P.note_ownership(text).app_owned


def _exists(engine, rel: str) -> bool:
    try:
        return resolve(engine.vault, rel).abs.exists()
    except VaultPathError:
        return False  # no longer a valid path (a symlink now leaves the vault): treat as gone


def _link(rel: str) -> str:
    # The exact resource path, extension included (a Markdown resource keeps its .md: format_link would drop it).
    return f"[[{rel}]]"


def run_auto_resource(engine: VaultContext, *, llm) -> AutoResourceReport:
    """Summarise new/changed resources into daily cards and remove the cards of removed ones (module doc).

    ``llm``: an :class:`~reme_engine.llm.client.LLMClient`. Failures (LLM, parse, write conflict) are reported per
    file in ``failed`` and retried next run; nothing is raised for them.
    """
    t0 = time.perf_counter()
    report = AutoResourceReport()
    tally = UsageTally.for_settings(engine.settings)
    files = scan_resources(engine, report)
    checkpoints = engine.store.catalog_get(CATALOG)
    changed = [r for rel, r in files.items() if r is not None and checkpoints.get(rel) != r.sha]
    report.unchanged = sum(1 for r in files.values() if r is not None and checkpoints.get(r.rel) == r.sha)
    removed = [rel for rel in checkpoints if rel not in files and not _exists(engine, rel)]
    if not changed and not removed:
        report.status = "no_change"
        report.wall_s = round(time.perf_counter() - t0, 3)
        return report

    run = engine.journal.start_run(engine.vault, KIND, {"changed": len(changed), "removed": len(removed)})
    report.run_id = run.run_id
    dates: set[str] = set()
    for rel in removed:
        try:
            _remove_card(engine, run, rel, report, dates)
        except OSError as exc:
            report.failed.append({"path": rel, "error": f"card of the removed resource not deleted: {exc}"})

    todo = changed[:MAX_FILES_PER_RUN]
    report.pending = len(changed) - len(todo)
    failures_in_row = 0
    for i, res in enumerate(todo):
        if failures_in_row >= MAX_CONSECUTIVE_FAILURES:
            report.pending += len(todo) - i
            report.warnings.append("stopped after repeated LLM failures; the rest is retried next run")
            break
        try:
            item = _summarise(engine, run, res, llm, tally, report, dates, res.rel in checkpoints)
        except (LLMError, StructuredReplyError) as exc:
            failures_in_row += 1
            report.failed.append({"path": res.rel, "error": str(exc)})
            continue
        except (WriteConflict, SkipFile, VaultPathError, OSError) as exc:
            report.failed.append({"path": res.rel, "error": f"card not written: {exc}"})
            continue
        except BaseException as exc:  # a bug or an interrupt: close the journal run before propagating
            run.finish("failed", {"error": f"{type(exc).__name__}: {exc}"}, tally.to_dict())
            raise
        failures_in_row = 0
        report.items.append(item)

    from ..errors import EngineError

    from .day_index import reindex_day

    for date in sorted(dates):
        try:
            reindex_day(engine, run, date)
        except EngineError as exc:
            report.warnings.append(f"day index {date} not refreshed: {exc}")
    if run.written:
        engine.index_paths(sorted(set(run.written)))
    report.tally = tally.to_dict()
    report.wall_s = round(time.perf_counter() - t0, 3)
    report.status = "failed" if report.failed else "ok"
    run.finish(report.status,
               {"created": report.created, "updated": report.updated, "removed": report.removed,
                "kept": report.kept, "failed": report.failed, "pending": report.pending}, report.tally)
    return report


def _remove_card(engine, run, rel: str, report: AutoResourceReport, dates: set[str]) -> None:
    """The resource ``rel`` is gone: delete its card if it is still the app's version, else keep and report it."""
    rec = _card_record(engine, rel)
    card_rel = rec.get("card") if rec else None
    try:
        cur = _read_card(engine, card_rel) if card_rel else None
    except (SkipFile, VaultPathError):
        cur = None
        report.kept.append({"path": rel, "card": card_rel, "reason": "card is not readable text; not deleted"})
    if card_rel and cur is not None:
        text, sha, _ = cur
        if _app_owns(text):
            with engine.write_lock:
                try:
                    run.delete(card_rel, step="remove", sources=[rel], expected_sha=sha)
                except WriteConflict:
                    report.kept.append({"path": rel, "card": card_rel, "reason": "card changed while deleting"})
                else:
                    report.removed.append(card_rel)
                    dates.add(card_rel.split("/")[-2])
        else:
            report.kept.append({"path": rel, "card": card_rel,
                                "reason": "card was edited since the app wrote it; not deleted"})
    engine.store.catalog_delete(CATALOG, [rel])
    engine.store.catalog_delete(CARD_CATALOG, [rel])


def _summarise(engine, run, res: _Resource, llm, tally: UsageTally, report: AutoResourceReport,
               dates: set[str], seen_before: bool) -> dict:
    """LLM calls for one resource, then its card write and checkpoint. Returns the report item.

    ``seen_before``: the resource was checkpointed before (a change, not a new file).
    """
    lang = engine.settings.language
    date = resource_date(res.rel, engine.settings.layers.resource_dir) or engine.settings.today()
    item = {"path": res.rel, "resource_id": resource_id(res.rel), "card": None, "action": None,
            "pieces": 0, "map_calls": 0, "truncated": False}
    if not seen_before and _card_record(engine, res.rel) is None:
        target, cur = _existing_card(engine, res.rel, None, date)
        if target is not None and cur is not None and not _app_owns(cur[0]):
            # A card the app did not write (hand-made, or shipped with the vault) already covers this resource:
            # adopt it as is, without an LLM call, rather than write a near-duplicate beside it.
            report.kept.append({"path": res.rel, "card": target,
                                "reason": "an existing card not written by the app covers this resource; left as is"})
            engine.store.catalog_set(CATALOG, {res.rel: res.sha})
            item.update(card=target, action="adopted")
            return item
    text = html_to_text(res.text) if res.ext in ("html", "htm") else res.text
    pieces = split_pieces(text)
    chosen = sample_indexes(len(pieces))
    truncated = len(chosen) < len(pieces)
    system = load_prompt("auto_resource", lang)
    head = f'<resource path="{res.rel}" type="{res.ext}">'
    if len(pieces) == 1:
        content = f"{head}\n{_defuse(text)}\n</resource>\n\n{_REPLY_HINT}"
        reply = llm.complete([Message("user", content)], system=system, max_tokens=CARD_MAX_TOKENS,
                             step=f"{KIND}.summarise", tally=tally)
    else:
        map_system = load_prompt("auto_resource_map", lang)
        notes = []
        offsets = _offsets(pieces)
        for idx in chosen:
            part = f"part {idx + 1} of {len(pieces)}, characters {offsets[idx]}-{offsets[idx + 1]}"
            content = (f'<resource path="{res.rel}" type="{res.ext}" part="{idx + 1}/{len(pieces)}">\n'
                       f"{_defuse(pieces[idx])}\n</resource>")
            r = llm.complete([Message("user", content)], system=map_system, max_tokens=MAP_MAX_TOKENS,
                             step=f"{KIND}.map", tally=tally)
            notes.append(f"[{part}]\n{_defuse(r.text.strip()[:MAP_NOTE_CHARS])}")
        note = (f"Only {len(chosen)} of {len(pieces)} parts were read (sampled from start to end).\n\n"
                if truncated else "")
        content = (f'<part_notes path="{res.rel}" type="{res.ext}" parts="{len(pieces)}">\n{note}'
                   + "\n\n".join(notes) + "\n</part_notes>\n\n" + _REPLY_HINT)
        reply = llm.complete([Message("user", content)], system=system, max_tokens=CARD_MAX_TOKENS,
                             step=f"{KIND}.reduce", tally=tally)
    card = parse_reply(reply.text, ResourceCard)
    if not card.summary and not card.key_points:
        raise StructuredReplyError("reply has neither a summary nor key points", reply.text)

    stem = card_stem(res.rel)
    name = _one_line(card.name) or stem
    body = f"\n# {name}\n\n{_safe_block(card.summary)}\n" if card.summary else f"\n# {name}\n"
    if card.key_points:
        body += "\n## Key points\n\n" + "".join(f"- {p}\n" for p in card.key_points)
    extent = (f" · summarised from {len(chosen)} of {len(pieces)} parts" if truncated
              else (f" · summarised in {len(pieces)} parts" if len(pieces) > 1 else ""))
    body += f"\n## Source\n\n- {_link(res.rel)}{extent}\n"
    text_out = P.stamp(_new_card_head({"name": name, "description": _one_line(card.description)},
                                      "source_resource", _link(res.rel)) + body)

    item.update(pieces=len(pieces), map_calls=len(chosen) if len(pieces) > 1 else 0, truncated=truncated)
    with engine.write_lock:
        rec = _card_record(engine, res.rel)
        target, cur = _existing_card(engine, res.rel, rec, date)
        if target is not None and cur is not None and not _app_owns(cur[0]):
            # The user's card: never rewritten; the new summary is proposed in reme's block at its end.
            text, sha, enc = cur
            new = propose_in_block(text, card, res.rel, extent, lang)
            if new != text:
                new = _checked_block_write(text, new, target)
                ch = run.write(target, new, step="summarise",
                               sources=[res.rel], expected_sha=sha)
                report.updated.append(target)
                dates.add(target.split("/")[-2])
                new_sha = ch.after_sha
                why = "the card is yours (you made or edited it); the new summary is proposed in reme's block"
            else:
                new_sha = sha
                why = "the card is yours (you made or edited it); it already says what the new summary says"
            report.kept.append({"path": res.rel, "card": target, "reason": why})
            item["action"] = "proposed"
        elif target is not None and cur is not None:
            text, sha, _ = cur
            if text != text_out:
                ch = run.write(target, text_out, step="summarise", sources=[res.rel], expected_sha=sha)
                report.updated.append(target)
                dates.add(target.split("/")[-2])
                new_sha = ch.after_sha
            else:
                new_sha = sha
            item["action"] = "updated"
        else:
            for _ in range(5):
                target = free_card_path(engine, date, stem)
                try:
                    ch = run.write(target, text_out, step="summarise", sources=[res.rel], expected_sha=None)
                except WriteConflict:
                    continue
                break
            else:
                raise WriteConflict(f"could not find a free card name for {stem!r}")
            new_sha = ch.after_sha
            report.created.append(target)
            dates.add(date)
            item["action"] = "created"
        item["card"] = target
        # Checkpoint only now that the card is on disk: a crash before this line retries the file next run.
        engine.store.catalog_set(CARD_CATALOG, {res.rel: json.dumps({"card": target, "sha": new_sha},
                                                                    ensure_ascii=False)})
        engine.store.catalog_set(CATALOG, {res.rel: res.sha})
    return item


_BLOCK_LABELS = {"en": ("Summary", "Key points", "Source"), "zh": ("摘要", "要点", "来源")}


def propose_in_block(text: str, card: ResourceCard, rel: str, extent: str = "", language: str = "en") -> str:
    """``text`` (a card the **user** owns) with reme's block holding the new summary of resource ``rel``; ``text``
    itself when the card already says all of it.

    The block (:func:`~reme_engine.vault.provenance.set_block`: the last intact reme block rewritten in place,
    else a new one at the end) holds the title and hint, a description that differs from the card's own, the
    summary unless every line of it is a line of the card already, the key points no line of the card says yet
    (:func:`~reme_engine.memory.auto_memory.normalize_item`), and the source link with ``extent`` (e.g.
    ``" · summarised in 3 parts"``). It describes the resource as it is now, so a later change replaces it.
    Every byte outside the block is kept.
    """
    lang = "zh" if str(language).lower().startswith("zh") else "en"
    title, hint = BLOCK_TEXT[lang]
    s_label, k_label, src_label = _BLOCK_LABELS[lang]
    lf = text.replace("\r\n", "\n")
    skip = set()
    own = P.note_ownership(text)
    lines = lf.lstrip("\ufeff").split("\n")
    for a, b in own.app_ranges:  # the old block is replaced: only the user's lines count as "said already"
        skip.update(range(a - 1, b))
    said = {normalize_item(ln) for i, ln in enumerate(lines) if i not in skip and ln.strip()}
    out = [f"## {title}", "", hint, ""]
    news = False
    desc = _one_line(card.description)
    if desc and desc != _one_line(str(parse_frontmatter(lf).meta.get("description") or "")):
        out += [f"**{DESCRIPTION_LABEL[lang]}:** {desc}", ""]
        news = True
    summary = _safe_block(card.summary)
    if summary and not all(normalize_item(ln) in said for ln in summary.split("\n") if ln.strip()):
        out += [f"### {s_label}", "", summary, ""]
        news = True
    points = [p for p in card.key_points if normalize_item(p) not in said]
    if points:
        out += [f"### {k_label}", "", *(f"- {p}" for p in points), ""]
        news = True
    if not news:
        return text
    out += [f"### {src_label}", "", f"- {_link(rel)}{extent}"]
    inner = "\n".join(out)
    if P.live_block(text) == inner:
        return text
    return P.set_block(text, inner)


def _existing_card(engine, rel: str, rec: dict | None, date: str) -> tuple[str | None, tuple | None]:
    """``(card path, (text, sha, encoding) as just read)`` of the card that belongs to resource ``rel``, or
    ``(None, None)``.

    The catalog record names it; without one (state rebuilt), the day folder is searched for a card whose
    ``source_resource`` links to ``rel``.
    """
    link = _link(rel)
    candidates = []
    if rec:
        candidates.append(rec["card"])
    for day_rel in _day_folders(engine, date):
        folder = resolve(engine.vault, day_rel)
        if folder.abs.is_dir():
            candidates += [f"{folder.rel}/{unicodedata.normalize('NFC', p.name)}" for p in sorted(folder.abs.iterdir())
                           if p.name.lower().endswith(".md") and not p.name.startswith(".")]
    for cand in candidates:
        try:
            cur = _read_card(engine, cand)
        except (SkipFile, VaultPathError, OSError):
            continue
        if cur is None:
            continue
        if str(parse_frontmatter(cur[0]).meta.get("source_resource")) == link:
            return cand, cur
    return None, None


def _offsets(pieces: list[str]) -> list[int]:
    out = [0]
    for p in pieces:
        out.append(out[-1] + len(p))
    return out


_TAG_RE = re.compile(r"<(/?)(resource|part_notes)\b", re.I)


def _defuse(text: str) -> str:
    """Document text cannot close the request's tags (it is data, not structure)."""
    return _TAG_RE.sub(lambda m: "‹" + m.group(1) + m.group(2), text)
