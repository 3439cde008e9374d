"""Parse step of a sync: one file → :class:`ParsedFile` (frontmatter, chunks, links, tokens), pure CPU and no
store access, so it can run in a worker process. Per-file work is bounded (ARCHITECTURE §8, issue 12): at most
:data:`MAX_LINKS_PER_FILE` links, a description read from a bounded prefix, big bodies chunked in one linear pass.

A mixin of :class:`reme_engine.index.indexer.Indexer` (``self.settings``, ``self.tokenizer`` and the roots).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..markdown.opaque import OPAQUE_ONLY_REASON, searchable_body
from ..vault.io import SkipFile, read_text
from .scan import MARKDOWN_EXTS, ScanEntry, path_date
from .store import remember_title
from .tokenizer import default_tokenizer

#: Links kept per file: every link costs a row, a resolution and graph work, so one note with 200,000 links (a
#: generated index) must not cost minutes. Beyond it the file's warning says where its graph stops.
MAX_LINKS_PER_FILE = 20_000


@dataclass
class ParsedFile:
    rel: str
    sha: str
    size: int
    mtime: float
    kind: str
    meta: dict
    name: str
    description: str
    date: str | None
    aliases: list[str]
    warning: str | None
    chunks: list  # list[Chunk]
    links: list  # list[Link]
    title_tokens: str
    chunk_tokens: list[str] = field(default_factory=list)  # space-joined BM25 tokens of each chunk's embed text



#: ``chunks.has_vec`` value of a chunk that gets no vector by design (see :func:`wants_vector`).
NO_VECTOR = 2
#: Chunks with fewer content characters than this get no vector: on the real vaults, near-empty chunks
#: ("-", a lone heading, an empty note's title) were nearest neighbours of almost every query ("hubs"),
#: crowding out real matches. They stay searchable by keyword (body and title fields).
MIN_VECTOR_CHARS = 12
_NON_CONTENT = r"[\s#>*_`|\-=~\[\]()!:.,;]"
_NON_CONTENT_RE = re.compile(_NON_CONTENT + "+")
#: MIN_VECTOR_CHARS content characters, each after any non-content ones: a match ends at the 12th (the two classes
#: are disjoint, so no backtracking), where counting all of a chunk's first 200 characters read them all.
_ENOUGH_CONTENT_RE = re.compile(f"(?:{_NON_CONTENT}*[^{_NON_CONTENT[1:-1]}]){{{MIN_VECTOR_CHARS}}}")


def wants_vector(text: str) -> bool:
    """True when a chunk's own text has enough content to be worth an embedding: at least
    :data:`MIN_VECTOR_CHARS` characters outside Markdown punctuation and whitespace among its first 200."""
    return _ENOUGH_CONTENT_RE.match(text, 0, 200) is not None



def chunk_vid(path: str, text: str, occurrence: int) -> int:
    """Stable 60-bit id of a chunk: from the chunk hash of (path, text), disambiguated by occurrence."""
    from ..markdown.chunker import chunk_id

    h = chunk_id(path, text if occurrence == 0 else f"{text}\x00{occurrence}")
    return int(h[:15], 16)


def _as_str_list(v) -> list[str]:
    if v is None:
        return []
    if isinstance(v, (list, tuple)):
        return [str(x) for x in v if x is not None and str(x).strip()]
    return [str(v)] if str(v).strip() else []


_CALLOUT_RE = re.compile(r"^\[![^\]]*\][+-]?\s*")
# No '[' in the label and no '(' in the destination: each attempt stops at the next bracket, so the scan is linear
# (the old ``[^\]]*`` label took 225 s on a line of 60,000 '[').
_MD_LINK_RE = re.compile(r"!?\[([^\[\]\n]*)\]\([^()\n]*\)")
_EMPHASIS_RE = re.compile(r"(\*\*|__|\*|`|==|~~)")
#: Characters of a line :func:`plain_line` looks at in a summary: a description keeps 120 of them, and one
#: pathological line (5 MB, 200,000 links) must not cost more than a short one.
SUMMARY_SCAN_CHARS = 4000


def plain_line(line: str) -> str:
    """A Markdown line as plain text: wikilinks → their display text, Markdown links → their label, callout
    markers, emphasis and code ticks removed. Linear in ``len(line)``."""
    from ..markdown.links import parse_links

    links = parse_links(line)
    if links:
        parts: list[str] = []
        pos = 0
        for lk in sorted(links, key=lambda x: x.start):
            if lk.start < pos:
                continue
            parts.append(line[pos:lk.start])
            parts.append(lk.alias or lk.display or lk.target)
            pos = lk.end
        parts.append(line[pos:])
        line = "".join(parts)
    line = _MD_LINK_RE.sub(r"\1", line)
    line = _CALLOUT_RE.sub("", line)
    return " ".join(_EMPHASIS_RE.sub("", line).split())


#: Characters of a body :func:`_first_line_summary` splits into lines first: the first prose line is nearly always
#: near the top, and splitting a whole 100 KB note for it cost more than the rest of the summary.
SUMMARY_HEAD_CHARS = 4096


def _first_line_summary(text: str, limit: int = 120) -> str:
    """The first prose line of a body as plain text (a note's description when its frontmatter has none).
    Looks at most at 200 lines of at most :data:`SUMMARY_SCAN_CHARS` characters each: first at the complete lines
    of the first :data:`SUMMARY_HEAD_CHARS` characters (the same first lines as the whole text's), then, when no
    line there is prose and there are fewer than 200 of them, at the whole text's."""
    if len(text) > SUMMARY_HEAD_CHARS:
        lines = text[:SUMMARY_HEAD_CHARS].splitlines()
        lines.pop()  # may be cut short, or end at a break whose other half follows ("\r" + "\n")
        got = _summary_of(lines[:200], limit)
        if got is not None:
            return got
        if len(lines) >= 200:
            return ""
    return _summary_of(text[: 200 * SUMMARY_SCAN_CHARS].splitlines()[:200], limit) or ""


def _summary_of(lines: list[str], limit: int) -> str | None:
    """The summary of the first prose line among ``lines`` (see :func:`_first_line_summary`), None without one."""
    for line in lines:
        line = line[:SUMMARY_SCAN_CHARS]
        s = line.strip()
        if not s or s.startswith(("#", "```", "~~~", "---", "|", "<", "!", "%%")) or "::" in s:
            continue
        s = plain_line(s.lstrip("-*> ").strip())
        if s and not s.startswith("[!"):
            return s[:limit] + ("…" if len(s) > limit else "")
    return None



class ParseStep:
    """Reads and parses one file."""

    def parse(self, entry: ScanEntry) -> ParsedFile:
        """Read and parse one file. Raises SkipFile (with a reason) or OSError (vanished)."""
        from ..markdown.chunker import chunk_markdown, chunk_plain

        tf = read_text(entry.abs, self.settings.max_file_bytes)
        text = tf.text
        rel = entry.rel
        stem = rel.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        budget = self.settings.chunk_bytes
        meta: dict = {}
        warning = None
        links: list = []
        if rel.lower().endswith(MARKDOWN_EXTS):
            from ..markdown.frontmatter import parse_frontmatter
            from ..markdown.links import frontmatter_links, parse_links

            fm = parse_frontmatter(text)
            meta, warning = fm.meta, fm.warning
            start_line, offset = fm.body_start_line, fm.body_offset
            if warning and fm.has_block:
                # Invalid frontmatter is the user's text too: index it as body so nothing becomes unsearchable.
                start_line, offset = 1, 0
            body = text[offset:]
            # chunks, tokens, vectors and the description see only what a person searches for (no drawing data or
            # base64 blobs: markdown/opaque.py); links come from the real body
            sb = searchable_body(body, rel=rel, meta=meta)
            if sb.only_opaque and not meta:
                raise SkipFile(OPAQUE_ONLY_REASON)
            chunks = chunk_markdown(sb.text, line_offset=start_line - 1, max_bytes=budget)
            links = parse_links(body, start_line=start_line, start_offset=offset, limit=MAX_LINKS_PER_FILE + 1)
            if len(links) > MAX_LINKS_PER_FILE:
                del links[MAX_LINKS_PER_FILE:]
                line = links[-1].line
                partial = (f"indexed partially: links after line {line} are not in the graph"
                           f" (more than {MAX_LINKS_PER_FILE:,} links)")
                warning = f"{warning}; {partial}" if warning else partial
            links.extend(frontmatter_links(meta))
            kind = "markdown"
        elif rel.startswith(self._dialog_root) and rel.lower().endswith(".jsonl"):
            # a chat record: one readable line per message, line i <-> file line i
            from ..search.chats import chunk_dialog, dialog_text

            body = dialog_text(text)[0]
            chunks = chunk_dialog(body, max_bytes=budget)  # small windows of whole turns, one day each
            kind = "text"
            sb = None
        else:
            sb = searchable_body(text, rel=rel)
            if sb.only_opaque:
                raise SkipFile(OPAQUE_ONLY_REASON)
            chunks = chunk_plain(sb.text, max_bytes=budget)
            kind = "text"
        name = ""
        for key in ("name", "title"):
            v = meta.get(key)
            if isinstance(v, (str, int, float)) and str(v).strip():
                name = str(v).strip()
                break
        name = name or stem
        desc_v = meta.get("description")
        description = str(desc_v).strip() if isinstance(desc_v, (str, int, float)) else ""
        if not description:
            description = _first_line_summary(sb.text if sb is not None else body)
        if not chunks:
            # An empty (or frontmatter-only) note is still findable by its name: one title-only chunk.
            from ..markdown.chunker import Chunk

            last = max(1, text.count("\n") + (0 if text.endswith("\n") else 1))
            chunks = [Chunk(last, last, "", (name or stem,))]
        aliases = _as_str_list(meta.get("aliases")) + _as_str_list(meta.get("alias"))
        from ..markdown.frontmatter import frontmatter_text_values

        title_text = (" ".join([stem, name, *frontmatter_text_values(meta)]) if meta else f"{stem} {name}")[:20000]
        title_tokens = " ".join(self.tokenizer.tokenize(title_text))
        if self.tokenizer is default_tokenizer():  # the one the store re-derives titles with
            remember_title(title_text, title_tokens)
        chunk_tokens = [" ".join(self.tokenizer.tokenize(ch.embed_text())) for ch in chunks]
        return ParsedFile(
            rel=rel, sha=tf.sha, size=tf.size, mtime=tf.mtime, kind=kind, meta=meta, name=name,
            description=description[:300], date=path_date(rel), aliases=aliases, warning=warning,
            chunks=chunks, links=links, title_tokens=title_tokens, chunk_tokens=chunk_tokens,
        )

    def _parse_safe(self, entry: ScanEntry) -> tuple[ParsedFile | None, str | None]:
        """``(parsed, None)`` or ``(None, skip reason)``; ``"__vanished__"`` when the file disappeared."""
        try:
            return self.parse(entry), None
        except SkipFile as sk:
            return None, sk.reason
        except FileNotFoundError:
            return None, "__vanished__"
        except (OSError, RuntimeError, RecursionError, ValueError) as exc:
            return None, f"unreadable: {exc}"
