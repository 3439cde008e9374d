"""Links step of a sync: the vault's file names, the resolver over them, and ``links.resolved`` kept in step
(incrementally when the names did not change), plus the consistency check and repair of the graph.

A mixin of :class:`reme_engine.index.indexer.Indexer` (``self.store``, ``self.lock``, ``self._paths*``,
``self._resolver``; ``scan`` and ``_final_txn`` come from the other steps).
"""

from __future__ import annotations

import json
import os
from typing import Iterable

from ..crashpoints import crash_point


class LinksStep:
    """Link resolution of the index."""

    def check_links(self, sample: int | None = 200) -> dict:
        """Link resolution against the path set: links resolved to a path that is not a file of the vault (as of
        the last sync), and ``sample`` random links (None: all) re-resolved with a fresh resolver.

        Returns ``{"links", "checked", "stale", "mismatched"}`` (counts); both problem counts are 0 when the
        index is consistent."""
        c = self.store.conn
        cached = self.store.get_meta("all_paths_cache")
        paths = set(json.loads(cached)) if cached else {r[0] for r in c.execute("SELECT path FROM files")}
        total = c.execute("SELECT count(*) FROM links").fetchone()[0]
        stale = sum(n for res, n in c.execute(
            "SELECT resolved, count(*) FROM links WHERE resolved IS NOT NULL GROUP BY resolved") if res not in paths)
        q = ("SELECT l.target, f.path, l.resolved, l.ambiguous, l.virtual FROM links l JOIN files f ON f.id = l.src_id")
        rows = [] if sample == 0 else c.execute(q + (" ORDER BY random() LIMIT ?" if sample is not None else ""),
                                                (sample,) if sample is not None else ()).fetchall()
        mismatched = 0
        if rows:
            resolver = self.build_resolver(paths)
            for target, src, res, amb, virt in rows:
                if not target:
                    want = (src, 0, src)
                else:
                    r = resolver.resolve(target, src)
                    want = (r.path, int(r.ambiguous), r.path or r.virtual)
                mismatched += want != (res, amb, virt)
        return {"links": total, "checked": len(rows), "stale": stale, "mismatched": mismatched}

    def repair_links(self) -> int:
        """Re-resolve every link against a fresh scan of the vault's files, in one transaction (after
        :meth:`check_links` found a problem). Returns the number of links updated."""
        with self.lock, self._file_lock:
            _, all_paths = self.scan()
            with self._final_txn():
                return self.resolve_links(all_paths=all_paths, only_changed=False, changed=[], rebuild=True)

    def _vault_paths(self) -> set[str]:
        """Every file path of the vault as of the last sync (attachments too): the in-memory copy, reloaded from
        the store when another process's sync changed it. The caller must not mutate it."""
        gen = self.store.get_meta("names_gen")
        if self._paths is None or gen != self._paths_gen:
            cached = self.store.get_meta("all_paths_cache")
            self._paths = set(json.loads(cached) if cached else
                              (r[0] for r in self.store.conn.execute("SELECT path FROM files")))
            self._paths_gen = gen
            self._resolver = None
        return self._paths

    def _aliases_of(self, paths: Iterable[str] | None = None) -> dict[str, list]:
        """``{path: aliases}`` of indexed files with aliases (all, or those in ``paths``)."""
        c = self.store.conn
        if paths is None:
            return {p: json.loads(a) for p, a in c.execute("SELECT path, aliases FROM files WHERE aliases != '[]'")}
        out: dict[str, list] = {}
        paths = list(paths)
        for i in range(0, len(paths), 500):
            part = paths[i : i + 500]
            out.update((p, json.loads(a)) for p, a in c.execute(
                f"SELECT path, aliases FROM files WHERE aliases != '[]' AND path IN ({','.join('?' * len(part))})",
                part))
        return out

    def build_resolver(self, all_paths: Iterable[str] | None = None):
        """A new :class:`LinkResolver` over every file of the vault (as of the last sync) and the indexed aliases.

        Callers own the result (sync keeps its own, updated in place)."""
        from ..markdown.links import LinkResolver

        if all_paths is None:
            # lock-free: sync replaces ``_paths`` (never mutates it), so a snapshot of the reference is safe
            paths, gen = self._paths, self._paths_gen
            if paths is None or gen != self.store.get_meta("names_gen"):
                cached = self.store.get_meta("all_paths_cache")
                paths = json.loads(cached) if cached else [r[0] for r in self.store.conn.execute("SELECT path FROM files")]
            all_paths = list(paths)
        return LinkResolver(all_paths, self._aliases_of())

    def resolve_links(self, *, all_paths: Iterable[str] | None, only_changed: bool, changed: list[str],
                      removed: list[str] = (), rebuild: bool = False) -> int:
        """(Re)compute ``links.resolved`` after a sync.

        ``all_paths``: the vault's files now (None: unchanged); ``changed``: files (re)written by the sync;
        ``removed``: files gone (renamed ones by their old path). The links of ``changed`` files are always
        re-resolved. When files appeared or vanished or a changed file has aliases (``only_changed`` False), the
        links elsewhere that may resolve differently are too: those resolved to a removed or changed file, and
        those whose target names an added or removed file (its name or stem, compared as the resolver does) or
        one of a changed file's aliases. With no usable in-memory resolver (first sync of this process, or
        another process changed the vault's names) every link is re-resolved. ``rebuild``: re-resolve every link
        with a fresh resolver and rewrite the path list (after an interrupted sync). Caller holds ``self.lock``;
        the writes join the caller's transaction when one is open. Returns the number of links updated.
        """
        from ..markdown.links import normalize_name

        c = self.store.conn
        if rebuild:
            self._resolver = None
            only_changed = False
        old_paths = self._vault_paths()
        resolver = self._resolver
        new_paths = old_paths if all_paths is None else set(all_paths)
        added, gone = new_paths - old_paths, old_paths - new_paths
        if added or gone or not only_changed:
            with self.store.write():
                if added or gone or rebuild:
                    self.store.set_meta("all_paths_cache", json.dumps(sorted(new_paths), ensure_ascii=False))
                gen = os.urandom(8).hex()
                self.store.set_meta("names_gen", gen)
            self._paths, self._paths_gen = new_paths, gen
        if only_changed and not changed and not added and not gone:
            return 0
        full = resolver is None
        if full:
            resolver = self.build_resolver(new_paths)
        else:
            for p in gone:
                resolver.remove(p)
            renamed_aliases = self._aliases_of(list(added) + list(changed))
            for p in added:
                resolver.add(p, renamed_aliases.get(p, ()))
            for p in changed:  # re-adding replaces a file's aliases
                if p in new_paths:
                    resolver.add(p, renamed_aliases.get(p, ()))
        self._resolver = resolver
        cols = "l.id, l.target, f.path, l.resolved, l.ambiguous, l.virtual"
        if full and (added or gone or not only_changed):
            rows = c.execute(f"SELECT {cols} FROM links l JOIN files f ON f.id = l.src_id").fetchall()
        else:
            rows = []
            for i in range(0, len(changed), 500):
                part = changed[i : i + 500]
                rows += c.execute(f"SELECT {cols} FROM links l JOIN files f ON f.id = l.src_id"
                                  f" WHERE f.path IN ({','.join('?' * len(part))})", part).fetchall()
            if added or gone or not only_changed:
                seen = {r[0] for r in rows}
                # links resolved to a file that went away or changed (its aliases may be gone)
                pointed = list(set(removed) | gone | set(changed))
                for i in range(0, len(pointed), 500):
                    part = pointed[i : i + 500]
                    for r in c.execute(f"SELECT {cols} FROM links l JOIN files f ON f.id = l.src_id"
                                       f" WHERE l.resolved IN ({','.join('?' * len(part))})", part):
                        if r[0] not in seen:
                            seen.add(r[0])
                            rows.append(r)
                # links whose target names an added/removed file, or is an alias of a changed/added file
                names: set[str] = set()
                for p in added | gone:
                    name = normalize_name(p).rsplit("/", 1)[-1]
                    names.add(name)
                    if name.endswith(".md"):
                        names.add(name[:-3])
                alias_keys = {normalize_name(a.strip()) for al in renamed_aliases.values() for a in (
                    [al] if isinstance(al, str) else al) if isinstance(a, str) and a.strip()} if not full else set()
                if names or alias_keys:
                    wanted = []
                    for lid, target in c.execute("SELECT id, target FROM links"):
                        if lid in seen or not target:
                            continue
                        nt = normalize_name(target.strip())
                        last = nt.rsplit("/", 1)[-1]
                        if last in names or (last.endswith(".md") and last[:-3] in names) or nt in alias_keys:
                            wanted.append(lid)
                    for i in range(0, len(wanted), 500):
                        part = wanted[i : i + 500]
                        rows += c.execute(f"SELECT {cols} FROM links l JOIN files f ON f.id = l.src_id"
                                          f" WHERE l.id IN ({','.join('?' * len(part))})", part).fetchall()
        updates = []
        # A non-empty target resolves the same from every note of one folder (the resolver ranks by the linking
        # note's folder only), and hubs ("up:: [[MOC]]") are linked from many notes of a folder.
        memo: dict[tuple[str, str], tuple] = {}
        for lid, target, src, old_res, old_amb, old_virt in rows:
            if not target:  # same-note heading link
                r_path, amb, virt = src, 0, src
            else:
                key = (target, src.rpartition("/")[0])
                got = memo.get(key)
                if got is None:
                    r = resolver.resolve(target, src)
                    got = memo[key] = (r.path, int(r.ambiguous), (r.path or r.virtual))
                r_path, amb, virt = got
            if (r_path, amb, virt) != (old_res, old_amb, old_virt):
                updates.append((r_path, amb, virt, lid))
        if updates:
            with self.store.write() as cw:
                cw.executemany("UPDATE links SET resolved=?, ambiguous=?, virtual=? WHERE id=?", updates[:1])
                crash_point("sync.in_links")
                cw.executemany("UPDATE links SET resolved=?, ambiguous=?, virtual=? WHERE id=?", updates[1:])
        return len(updates)
