"""Step 2 of auto_dream — integrate, one LLM task per unit (ARCHITECTURE §11.2.3, §11.3.2 "Phase 2").

For each :class:`~reme_engine.dream.models.Unit`:

1. **Recall** (:func:`find_candidates`, "search + traverse"): a node-level search over ``digest/`` only — hybrid
   (keyword + vector) search with ``SearchFilters(path_prefix="digest/")`` so daily chunks cannot crowd digest
   nodes out — hits deduplicated by path, the top ``Budget.max_candidates`` nodes read from disk (name,
   description, excerpt, sha); then up to ``Budget.max_graph_candidates`` digest nodes one wikilink hop from the
   top ``Budget.graph_seeds`` of them that search did not offer.
2. **Decide** (:func:`ask`): the LLM answers exactly one of CREATE / CORROBORATE / REFINE / CORRECT with a target
   and the node content (:class:`~reme_engine.dream.models.IntegrateReply`). A reply that does not parse is
   asked for again ``Budget.structured_retries`` times.
3. **Check and write** (:func:`plan_write`, :func:`integrate_unit`). Code, not the model, decides what is written:

   - update targets must be one of the candidates; a CREATE goes to ``digest/<unit bucket>/<slug>.md`` with the
     slug sanitised by code (a model's folder is ignored; ``..``/absolute targets are refused) — unless a node
     of that name already exists anywhere under ``digest/`` (any bucket; its file stem, an ``aliases`` entry or
     its ``name``, compared as Obsidian resolves links: case-insensitive after NFC, or as the same slug): then
     the CREATE becomes an update (REFINE) of that node, appending its material, so no same-named twin appears
     in another bucket. ``-2``, ``-3`` … suffixes remain only as a last guard against overwriting any file;
   - ``## Sources`` / ``derived_from`` links: only paths that exist and are among the unit's inputs (if the model
     names none, the unit's inputs are used); ``relates_to::`` links: only existing digest nodes; wikilinks in
     the body pointing at paths that fail these checks are turned into plain text.

   **Ownership** (:mod:`reme_engine.vault.provenance`, read from the note itself, never from the journal):

   - a node the app created and nobody edited since (its ``reme_provenance`` stamp matches) is the app's:
     CORROBORATE adds an evidence line, sources and provenance; REFINE/CORRECT may rewrite its body, keeping
     every frontmatter key, the relates_to links, the evidence log and the sources. The write re-stamps it;
   - any other node is the **user's** (they wrote it, or edited it after the app did — forever): its bytes are
     never changed. Everything the app adds goes into its marked block at the end of the note
     (``<!-- reme:begin … -->`` … ``<!-- reme:end -->``, rewritten in place while the user leaves it alone):
     REFINE/CORRECT (and a CREATE on an existing name) append a sourced ``### Update <date> (<action>)`` entry
     with the new material (the reply's ``update``, else its ``body``) that the user may accept by editing it
     into their text; CORROBORATE adds its evidence line and sources there. No frontmatter key is touched.
     Before such a write, code checks that every line of the user's is still there, in order and unchanged
     (:func:`~reme_engine.vault.provenance.keeps_user_lines`), and refuses the write otherwise.

   Every write goes through the journal :class:`~reme_engine.memory.journal.Run` with the ``expected_sha`` of the
   read; a :class:`~reme_engine.vault.io.WriteConflict` (the user saved meanwhile) fails the unit, whose inputs
   are then retried next run. With a progress record (:mod:`.resume`) each write is announced before it is
   published and the unit marked done after, so a run resumed after a crash neither repeats nor skips a unit.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..llm.client import LLMError, Message, UsageTally
from ..llm.structured import StructuredReplyError, parse_reply
from ..markdown.frontmatter import parse_frontmatter
from ..markdown.links import normalize_name
from ..vault import provenance as P
from ..vault.io import SkipFile, WriteConflict, read_text
from ..vault.paths import VaultPathError, resolve, to_rel
from . import node as N
from .extract import Budget, format_inputs
from .models import Candidate, DreamInput, IntegrateReply, Unit, UnitOutcome
from .prompt import render
from .safety import UnsafePath, checked_llm_path, clean_llm_path, link_key, slugify

STEP = "integrate"


class Refused(Exception):
    """The reply cannot be written as asked (unsafe or unknown target, nothing to write). The unit fails."""


@dataclass
class IntegrateContext:
    """What every unit's task shares. ``inputs``: the run's packed changed inputs by path; ``written``: paths
    written so far this run (new names must not collide with them either)."""

    engine: object
    run: object
    llm: object
    date: str
    hint: str
    language: str
    budget: Budget
    tally: UsageTally
    inputs: dict[str, DreamInput]
    written: list[str] = field(default_factory=list)
    #: The run's :class:`~reme_engine.dream.resume.Progress` (None: no crash record kept, e.g. direct tests).
    progress: object = None

    @property
    def vault(self) -> Path:
        return self.engine.vault

    @property
    def digest_dir(self) -> str:
        return self.engine.settings.layers.digest_dir.strip("/") or "digest"

    @property
    def daily_dir(self) -> str:
        return self.engine.settings.layers.daily_dir.strip("/") or "daily"

    _resolver: object = field(default=None, init=False, repr=False)
    _names: dict | None = field(default=None, init=False, repr=False)

    def resolver_for(self, node_path: str):
        """``target → vault path or None`` as Obsidian resolves links written in ``node_path`` (so a short
        ``[[hybrid-retrieval]]`` and a full ``[[digest/wiki/hybrid-retrieval]]`` count as the same link)."""
        if self._resolver is None:
            self._resolver = self.engine.indexer.build_resolver()
            for p in self.written:
                self._resolver.add(p)
        r = self._resolver
        return lambda target: r.resolve(target, node_path).path

    def note_written(self, rel: str) -> None:
        self.written.append(rel)
        if self._resolver is not None:
            self._resolver.add(rel)
        if self._names is not None:
            self._names[rel] = _node_keys(self, rel)

    def digest_names(self) -> dict[str, set[str]]:
        """``{digest node path: its name keys}`` (:func:`name_keys` of the stem, aliases and ``name``), read from
        disk once per run and kept current with this run's writes."""
        if self._names is None:
            self._names = {p: _node_keys(self, p) for p in digest_files(self.vault, self.digest_dir)}
        return self._names

    def is_file(self, rel: str) -> bool:
        try:
            return resolve(self.vault, rel).abs.is_file()
        except VaultPathError:
            return False


@dataclass
class WritePlan:
    """What :func:`integrate_unit` will write. ``expected_sha``: None for a new file (it must not exist)."""

    action: str
    target: str
    text: str
    expected_sha: str | None
    merge: str
    sources: list[str]
    dropped: list[str]
    note: str = ""


# -- recall ----------------------------------------------------------------------------------------------------
def digest_files(vault: Path, digest_dir: str) -> list[str]:
    """Every ``*.md`` under the digest folder (hidden entries skipped), for keeping the index fresh."""
    root = Path(vault) / digest_dir
    out = []
    for dp, dns, fns in os.walk(root):
        dns[:] = [d for d in dns if not d.startswith(".")]
        out += [to_rel(vault, Path(dp) / f) for f in fns if f.lower().endswith(".md") and not f.startswith(".")]
    return sorted(out)


def find_candidates(ctx: IntegrateContext, unit: Unit) -> list[Candidate]:
    """Top digest nodes for ``unit`` (see module doc), read fresh from disk; nodes gone from disk are skipped."""
    from ..search.hybrid import SearchFilters

    k = ctx.budget.max_candidates
    query = f"{unit.name}\n{unit.summary}".strip()
    res = ctx.engine.search(query, limit=max(20, 4 * k), mode="hybrid",
                            filters=SearchFilters(path_prefix=ctx.digest_dir + "/"), neighbors=False)
    paths: list[str] = []
    for h in res.hits:
        if h.path not in paths and h.path.lower().endswith(".md"):
            paths.append(h.path)
    out = _read_candidates(ctx, paths, k)
    # traverse: digest nodes linked to or from the best matches, not already offered
    extra: list[str] = []
    prefix = ctx.digest_dir + "/"
    offered = {c.path for c in out}
    for seed in [c.path for c in out[: ctx.budget.graph_seeds]]:
        try:
            hood = ctx.engine.traverse(seed, depth=1, direction="both", max_nodes=50)
        except Exception:  # a node gone meanwhile: no neighbours
            continue
        for n in hood.nodes:
            q = n.get("path") or ""
            if (n.get("depth") == 1 and not n.get("dangling") and q.startswith(prefix) and q.lower().endswith(".md")
                    and q not in offered and q not in extra):
                extra.append(q)
    out += _read_candidates(ctx, extra, ctx.budget.max_graph_candidates)
    return out


def read_candidate(ctx: IntegrateContext, p: str) -> Candidate | None:
    """The digest node at ``p`` read fresh from disk, its owner decided by its own text
    (:func:`~reme_engine.vault.provenance.note_ownership`); None when gone, oversized or not UTF-8 (never
    offered, so never rewritten lossily)."""
    try:
        tf = read_text(resolve(ctx.vault, p).abs, ctx.engine.settings.max_file_bytes)
    except (VaultPathError, SkipFile, OSError):
        return None
    if tf.encoding not in ("utf-8", "utf-8-sig"):
        return None
    text, sha = tf.text, tf.sha
    fm = parse_frontmatter(text)
    meta = fm.meta
    body = text[fm.body_offset:].strip()
    excerpt = body if len(body) <= ctx.budget.excerpt_chars else body[: ctx.budget.excerpt_chars] + " …"
    return Candidate(p, str(meta.get("name") or Path(p).stem), str(meta.get("description") or ""), excerpt, text,
                     sha, P.note_ownership(text).app_owned, bom=tf.encoding == "utf-8-sig")


def _read_candidates(ctx: IntegrateContext, paths: list[str], k: int) -> list[Candidate]:
    """Up to ``k`` of ``paths`` read fresh from disk as candidates (unreadable ones skipped)."""
    out: list[Candidate] = []
    for p in paths:
        if len(out) >= k:
            break
        c = read_candidate(ctx, p)
        if c is not None:
            out.append(c)
    return out


# -- names ------------------------------------------------------------------------------------------------------
def name_keys(name: str) -> set[str]:
    """Comparison keys of a node name or file stem: as Obsidian compares link targets (NFC, casefolded) and as a
    slug (so ``Work Preferences`` and ``work-preferences`` are one name). ``.md`` is dropped; blank → empty."""
    s = " ".join(str(name or "").split())
    if s.lower().endswith(".md"):
        s = s[:-3].strip()
    if not s:
        return set()
    keys = {normalize_name(s)}
    slug = slugify(s)
    if len(slug) >= 2 and (slug != "note" or normalize_name(s) == "note"):  # "C++" → "c" names nothing
        keys.add(slug)
    return keys


def _node_keys(ctx: IntegrateContext, rel: str) -> set[str]:
    keys = name_keys(Path(rel).stem)
    try:
        tf = read_text(resolve(ctx.vault, rel).abs, ctx.engine.settings.max_file_bytes)
    except (VaultPathError, SkipFile, OSError):
        return keys  # its name still exists: a CREATE of it must not make a twin
    meta = parse_frontmatter(tf.text).meta
    aliases = meta.get("aliases")
    for a in [aliases] if isinstance(aliases, str) else (aliases if isinstance(aliases, list) else []):
        if isinstance(a, str):
            keys |= name_keys(a)
    if isinstance(meta.get("name"), str):
        keys |= name_keys(meta["name"])
    return keys


def existing_node(ctx: IntegrateContext, unit: Unit, reply: IntegrateReply, cands: list[Candidate]) -> str | None:
    """The digest node a CREATE names already (any bucket; see :func:`name_keys`), or None. Several: one in the
    unit's bucket first, then the best-ranked candidate, then the shortest path (as Obsidian picks)."""
    wanted: set[str] = set()
    if reply.target.strip():
        try:
            wanted |= name_keys(checked_llm_path(reply.target, add_md=False).rsplit("/", 1)[-1])
        except UnsafePath:
            pass  # refused later by _new_target with its reason
    wanted |= name_keys(reply.name or unit.name)
    if not wanted:
        return None
    hits = [p for p, keys in ctx.digest_names().items() if keys & wanted]
    if not hits:
        return None
    rank = {c.path: i for i, c in enumerate(cands)}
    bucket = f"{ctx.digest_dir}/{unit.bucket}/"
    return min(hits, key=lambda p: (not p.startswith(bucket), rank.get(p, len(rank)), len(p), p))


def format_candidates(cands: list[Candidate]) -> str:
    if not cands:
        return "(none — CREATE is the only possible action)"
    parts = []
    for c in cands:
        mode = ("editable" if c.app_owned else
                "append-only: the user owns it; your update is shown to them as a proposal, never rewrites it")
        parts.append(f"=== NODE: {c.path} ({mode}) ===\nname: {c.name}\ndescription: {c.description}\n\n"
                     f"{c.excerpt}\n=== END NODE ===")
    return "\n\n".join(parts)


def unit_inputs(ctx: IntegrateContext, unit: Unit) -> list[DreamInput]:
    """The unit's packed inputs, cut further so together they stay within ``Budget.max_unit_chars``."""
    ins = [ctx.inputs[p] for p in unit.paths if p in ctx.inputs]
    total = sum(len(i.text) for i in ins)
    if total <= ctx.budget.max_unit_chars or not ins:
        return ins
    share = max(500, ctx.budget.max_unit_chars // len(ins))
    from .extract import _cut

    return [DreamInput(i.path, i.sha, _cut(i.text, share), True) if len(i.text) > share else i for i in ins]


# -- decide ----------------------------------------------------------------------------------------------------
def ask(ctx: IntegrateContext, unit: Unit, cands: list[Candidate]) -> IntegrateReply:
    """The model's decision for ``unit``. Raises LLMError, or StructuredReplyError after the re-asks."""
    ins = unit_inputs(ctx, unit)
    system, user = render(STEP, ctx.language, date=ctx.date, hint=ctx.hint.strip() or "(none)", name=unit.name,
                          bucket=unit.bucket, summary=unit.summary or "(none)", input_count=len(ins),
                          inputs=format_inputs(ins), candidate_count=len(cands),
                          candidates=format_candidates(cands))
    messages = [Message("user", user)]
    attempts = 0
    while True:
        attempts += 1
        reply = ctx.llm.complete(messages, system=system, max_tokens=4096, step=STEP, tally=ctx.tally)
        try:
            return parse_reply(reply.text, IntegrateReply)
        except StructuredReplyError as exc:
            if attempts > ctx.budget.structured_retries:
                raise
            messages = messages + [Message("assistant", reply.text or "(empty)"),
                                   Message("user", f"That reply could not be used ({exc}). Reply again with only "
                                                   "the JSON object described above.")]


# -- check -----------------------------------------------------------------------------------------------------
def _new_target(ctx: IntegrateContext, unit: Unit, reply: IntegrateReply) -> str:
    """``digest/<unit bucket>/<slug>.md``, free on disk and in this run."""
    stem = ""
    if reply.target.strip():
        try:
            stem = checked_llm_path(reply.target).rsplit("/", 1)[-1]
        except UnsafePath as exc:
            raise Refused(f"CREATE target refused: {exc}") from exc
    slug = slugify(stem) if stem else "note"
    if slug == "note":
        slug = slugify(reply.name or unit.name)
    folder = f"{ctx.digest_dir}/{unit.bucket}"
    try:
        folder_abs = resolve(ctx.vault, folder).abs
    except VaultPathError as exc:
        raise Refused(f"digest folder unusable: {exc}") from exc
    taken = {n.casefold() for n in (os.listdir(folder_abs) if folder_abs.is_dir() else [])}
    taken |= {p.rsplit("/", 1)[-1].casefold() for p in ctx.written if p.startswith(folder + "/")}
    name, n = slug, 2
    while f"{name}.md".casefold() in taken:  # casefold: macOS/Windows file systems ignore case
        name, n = f"{slug}-{n}", n + 1
    return f"{folder}/{name}.md"


def _sources(ctx: IntegrateContext, unit: Unit, reply: IntegrateReply) -> tuple[list[str], list[str]]:
    """(validated source paths, dropped raw values). Valid = among the unit's inputs and existing on disk."""
    allowed = {link_key(p): p for p in unit.paths}
    out, dropped = [], []
    for raw in reply.sources:
        p = clean_llm_path(raw)
        real = allowed.get(link_key(p)) if p else None
        if real is None or not ctx.is_file(real):
            dropped.append(f"source {raw[:120]!r} (not an existing input of this unit)")
        elif real not in out:
            out.append(real)
    if not out:  # the node still derives from the unit's inputs, which code has validated
        out = [p for p in unit.paths if ctx.is_file(p)]
    return out, dropped


def _related(ctx: IntegrateContext, reply: IntegrateReply, target: str) -> tuple[list[str], list[str]]:
    out, dropped = [], []
    for raw in reply.related:
        p = clean_llm_path(raw)
        if p is not None and link_key(p) == link_key(target):
            continue  # a node does not relate to itself
        if p is None or not p.startswith(ctx.digest_dir + "/") or not ctx.is_file(p):
            dropped.append(f"related {raw[:120]!r} (not an existing digest node)")
        elif p not in out:
            out.append(p)
    return out, dropped


def _link_checker(ctx: IntegrateContext, unit: Unit):
    """For wikilinks inside LLM body text: daily links must be unit inputs, other path links must exist; bare
    concept links (``[[CTP]]``) are kept as they are (Obsidian's dangling-link nodes)."""
    allowed = {link_key(p) for p in unit.paths}

    def ok(p: str) -> bool:
        if "/" not in p:
            return True
        if p.startswith(ctx.daily_dir + "/"):
            return link_key(p) in allowed and ctx.is_file(p)
        return ctx.is_file(p)

    return ok


def _ensure_h1(body: str, name: str) -> str:
    first = next((ln for ln in body.splitlines() if ln.strip()), "")
    return body if first.startswith("# ") else f"# {name}\n\n{body}"


def plan_write(ctx: IntegrateContext, unit: Unit, cands: list[Candidate], reply: IntegrateReply) -> WritePlan:
    """Validate ``reply`` against the unit and the candidates and build the node text. Raises Refused."""
    action = reply.action
    link_ok = _link_checker(ctx, unit)
    note = ""
    if action == "CREATE":
        hit = existing_node(ctx, unit, reply, cands)
        if hit is None:
            target = _new_target(ctx, unit, reply)
            sources, dropped = _sources(ctx, unit, reply)
            related, dropped_rel = _related(ctx, reply, target)
            name = " ".join((reply.name or unit.name).split())
            body = N.sanitize_body(reply.body, link_ok) or N.sanitize_body(unit.summary, link_ok)
            if not body.strip():
                raise Refused("CREATE without a body")
            text = N.render_new_node(name=name, description=" ".join(reply.description.split()) or unit.summary,
                                     tags=reply.tags, body=body, related=related, sources=sources)
            return WritePlan(action, target, P.stamp(text), None, "", sources, dropped + dropped_rel)
        cand = next((c for c in cands if c.path == hit), None) or read_candidate(ctx, hit)
        if cand is None:
            raise Refused(f"CREATE of {reply.name or unit.name!r}: a node of that name exists ({hit}) but cannot be "
                          "read as UTF-8 text; not creating a twin")
        note = f"CREATE for an existing name became an update of {hit}"
        action = "REFINE"
        material = N.strip_title(reply.update or reply.body or unit.summary)
        reply = reply.model_copy(update={"action": action, "target": hit, "body": "", "update": material})
    else:
        try:
            wanted = checked_llm_path(reply.target)
        except UnsafePath as exc:
            raise Refused(f"{action} target refused: {exc}") from exc
        by_key = {link_key(c.path): c for c in cands}
        cand = by_key.get(link_key(wanted))
        if cand is None:
            raise Refused(f"{action} target {reply.target[:120]!r} is not one of the candidate nodes")
    target = cand.path
    sources, dropped = _sources(ctx, unit, reply)
    related, dropped_rel = _related(ctx, reply, target)
    res = ctx.resolver_for(target)
    evidence = " ".join((reply.evidence or unit.summary or unit.name).split())
    if cand.app_owned:
        text, merge = _update_app_node(ctx, cand, unit, reply, action, sources, related, evidence, link_ok, res)
    else:
        text, merge = _update_user_note(ctx, cand, reply, action, sources, related, evidence, link_ok, res)
    return WritePlan(action, target, text, cand.sha, merge, sources, dropped + dropped_rel, note)


def _update_app_node(ctx, cand: Candidate, unit: Unit, reply: IntegrateReply, action: str, sources, related,
                     evidence: str, link_ok, res) -> tuple[str, str]:
    """An update of a node the app owns: additive, or a body rewrite for REFINE/CORRECT; re-stamped."""
    text = cand.text
    if action == "CORROBORATE":
        merge = "additive"
        text = N.update_meta(text, derived_from=sources, tags=reply.tags, resolve=res)
    else:
        body = N.sanitize_body(reply.body, link_ok)
        material = N.sanitize_body(reply.update, link_ok)
        if body.strip():
            merge = "rewrite"
            meta_name = str(parse_frontmatter(text).meta.get("name") or unit.name)
            text = N.replace_body(text, _ensure_h1(body, reply.name or meta_name), res)
            text = N.update_meta(text, derived_from=sources, tags=reply.tags, name=" ".join(reply.name.split()),
                                 description=" ".join(reply.description.split()), resolve=res)
        else:
            if not material.strip():
                raise Refused(f"{action} of {cand.path} without new material")
            merge = "append"
            text = N.append_update(text, ctx.date, material)
            text = N.update_meta(text, derived_from=sources, tags=reply.tags, resolve=res)
    text, _ = N.add_relates(text, related, res)
    text = N.add_evidence(text, f"{ctx.date} ({action.lower()}): {evidence}")
    text, _ = N.add_sources(text, sources, res)
    return P.stamp(text), merge


def _update_user_note(ctx, cand: Candidate, reply: IntegrateReply, action: str, sources, related, evidence: str,
                      link_ok, res) -> tuple[str, str]:
    """An update of a note the user owns: only the app's block changes (module doc). Raises Refused when the
    result would not keep every user line."""
    text = cand.text
    material = ""
    if action != "CORROBORATE":
        material = N.sanitize_body(reply.update, link_ok) or N.sanitize_body(reply.body, link_ok)
        if not material.strip():
            raise Refused(f"{action} of {cand.path} without new material")
    inner = N.block_update(text, P.live_block(text), date=ctx.date, action=action, material=material,
                           evidence=evidence, sources=sources, related=related, resolve=res,
                           language=ctx.language)
    new = P.set_block(text, inner)
    if not P.keeps_user_lines(text, new) or P.note_ownership(new).app_owned:
        raise Refused(f"{action} of {cand.path} would change the user's lines; not written")
    return new, "append" if material else "additive"


# -- run -------------------------------------------------------------------------------------------------------
def integrate_unit(ctx: IntegrateContext, unit: Unit, index: int | None = None) -> UnitOutcome:
    """Recall → decide → check → write one unit (``index``: its place in the run, for the progress record).
    Never raises for the unit's own failures (LLMError is re-raised after recording, so the caller can notice an
    endpoint that is down)."""
    out = UnitOutcome(unit=unit, status="failed")
    try:
        cands = find_candidates(ctx, unit)
    except Exception as exc:  # a broken index must fail this unit, not the run
        out.error = f"digest search failed: {exc}"
        return out
    out.candidates = [c.path for c in cands]
    try:
        reply = ask(ctx, unit, cands)
    except LLMError as exc:
        out.error = str(exc)
        raise _UnitLLMError(out) from exc
    except StructuredReplyError as exc:
        out.error = f"unusable integrate reply: {exc}"
        return out
    out.action = reply.action
    try:
        plan = plan_write(ctx, unit, cands, reply)
    except Refused as exc:
        out.error = str(exc)
        return out
    out.action, out.note = plan.action, plan.note
    out.target, out.merge, out.sources, out.dropped = plan.target, plan.merge, plan.sources, plan.dropped
    if not plan.target.startswith(ctx.digest_dir + "/"):  # defence in depth: dream writes only digest nodes
        out.error = f"refused to write outside {ctx.digest_dir}/: {plan.target}"
        return out
    progress = ctx.progress if index is not None else None
    try:
        with ctx.engine.write_lock:
            if progress is not None:  # announce the write, so a crash right after it is settled, not redone
                before_text, _ = ctx.run.read(plan.target)
                progress.set_pending(index, dataclasses.replace(out, status="ok"), before_sha=plan.expected_sha,
                                     before_text=before_text, text=plan.text, step=STEP)
            ctx.run.write(plan.target, plan.text, step=STEP, sources=plan.sources, expected_sha=plan.expected_sha)
    except WriteConflict as exc:
        out.error = f"{plan.target}: {exc}; retried next run"
        return out
    except (VaultPathError, OSError) as exc:
        out.error = f"{plan.target}: {exc}"
        return out
    ctx.note_written(plan.target)
    # Index now so the next unit's recall sees this node (two units must not create twins).
    ctx.engine.index_paths([plan.target])
    out.status = "ok"
    if progress is not None:
        progress.set_done(index, out)
    return out


class _UnitLLMError(Exception):
    def __init__(self, outcome: UnitOutcome) -> None:
        super().__init__(outcome.error)
        self.outcome = outcome


def integrate_all(ctx: IntegrateContext, units: list[Unit]) -> list[UnitOutcome]:
    """Integrate ``units`` in order. After ``Budget.max_consecutive_llm_errors`` LLM errors in a row the rest
    are skipped (status ``skipped``) instead of each waiting out the SDK's retries."""
    outcomes: list[UnitOutcome] = []
    streak = 0
    if ctx.progress is not None:
        ctx.progress.settle_pending(ctx.vault, ctx.run)
    for i, unit in enumerate(units):
        done = ctx.progress.done_outcome(i) if ctx.progress is not None else None
        if done is not None:  # written before a crash (see .resume): reported, not redone
            outcomes.append(done)
            if done.target:
                ctx.note_written(done.target)
            continue
        if streak >= ctx.budget.max_consecutive_llm_errors:
            outcomes.append(UnitOutcome(unit=unit, status="skipped",
                                        error="skipped: the LLM failed repeatedly; retried next run"))
            continue
        try:
            outcome = integrate_unit(ctx, unit, i)
            streak = 0
        except _UnitLLMError as exc:
            outcome = exc.outcome
            streak += 1
        except Exception as exc:  # a bug on one unit must not lose the others' work
            outcome = UnitOutcome(unit=unit, status="failed", error=f"{type(exc).__name__}: {exc}")
        outcomes.append(outcome)
    return outcomes
