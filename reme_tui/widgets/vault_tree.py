"""The vault tree (left pane): Daily (days newest first → their cards), Digest (buckets), then the vault's other
folders and files, loaded lazily as they are expanded.

It loads its own data (``loaders.tree_root`` / ``loaders.tree_children`` in thread workers; a node whose children
are not loaded yet asks with :class:`~reme_tui.messages.LoadChildren`, answered by :meth:`VaultTree.set_children`)
and reloads its top level when files come or go (the context's ``vault_changed`` signal). It posts up:

* :class:`~reme_tui.messages.OpenNote` when a file node is selected (Enter or click).
"""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from .. import loaders
from ..messages import ChildrenLoaded, LoadChildren, OpenNote, TreeEntry, TreeRootLoaded

_ICONS = {"daily": "📅 ", "digest": "🧠 ", "day": "", "dir": "", "file": ""}


class VaultTree(Tree[TreeEntry]):
    """Tree of the vault. Node data is a :class:`TreeEntry`; ``_loaded`` holds ids of nodes with children."""

    BINDINGS = [
        Binding("right", "expand_node", "Expand", show=False, id="tree.expand"),
        Binding("left", "collapse_node", "Collapse", show=False, id="tree.collapse"),
    ]

    def __init__(self, ctx=None, *, id: str | None = None) -> None:
        super().__init__("vault", data=TreeEntry("root", "", "vault", True), id=id)
        self.ctx = ctx  # PaneContext (None: a bare view filled by set_root/set_children)
        self._root_loaded = False
        self.top_dirs: list[str] | None = None  # the vault's top-level folders (None until the first load)
        self.show_root = False
        self.guide_depth = 2
        self._loaded: set[int] = set()
        self._loading: set[int] = set()
        self._reexpand: set[tuple[str, str]] = set()  # (kind, path) of nodes to open again after a reload

    # -- filling --------------------------------------------------------------------------------------------
    def _label(self, entry: TreeEntry) -> Text:
        label = Text(_ICONS.get(entry.kind, "") + entry.label)
        if entry.kind in ("daily", "digest"):
            label.stylize("bold")
        elif entry.kind == "dir":
            label.stylize("bold")
        if entry.dim:
            label.stylize("dim")
        return label

    def _add(self, parent: TreeNode[TreeEntry], entry: TreeEntry) -> TreeNode[TreeEntry]:
        if entry.expandable:
            return parent.add(self._label(entry), data=entry, allow_expand=True)
        return parent.add_leaf(self._label(entry), data=entry)

    def expanded_entries(self) -> set[tuple[str, str]]:
        """``(kind, path)`` of every expanded node (to restore them after a reload)."""
        out: set[tuple[str, str]] = set()
        stack = list(self.root.children)
        while stack:
            node = stack.pop()
            if node.is_expanded and node.data is not None:
                out.add((node.data.kind, node.data.path))
                stack.extend(node.children)
        return out

    def _restore(self, nodes) -> None:
        for node in nodes:
            if node.data is not None and (node.data.kind, node.data.path) in self._reexpand:
                self._reexpand.discard((node.data.kind, node.data.path))
                node.expand()  # lazy nodes ask for their children again (LoadChildren)

    def set_root(self, entries: list[TreeEntry], groups: dict[str, list[TreeEntry]],
                 keep_expanded: bool = False) -> None:
        """Fill the top level; ``groups`` gives the already-known children of group nodes (Daily, Digest).

        ``keep_expanded``: re-open the nodes that were open before (a reload after re-indexing)."""
        self._reexpand = self.expanded_entries() if keep_expanded else set()
        cursor = self.cursor_node.data if keep_expanded and self.cursor_node is not None else None
        self.clear()
        self._loaded.clear()
        self._loading.clear()
        for entry in entries:
            node = self._add(self.root, entry)
            kids = groups.get(entry.kind)
            if kids is not None:
                for kid in kids:
                    self._add(node, kid)
                self._loaded.add(node.id)
        if keep_expanded:
            self._restore(self.root.children)
            for node in self.root.children:
                self._restore(node.children)
        else:
            # the groups are the point of the app: show them open
            for node in self.root.children:
                if node.data is not None and node.data.kind in ("daily", "digest") and node.id in self._loaded:
                    node.expand()
        if self.root.children:
            self.cursor_line = 0
        if cursor is not None:
            self.call_after_refresh(self._move_to, cursor)

    def _move_to(self, entry: TreeEntry) -> None:
        queue = list(self.root.children)
        while queue:
            node = queue.pop(0)
            if node.data is not None and (node.data.kind, node.data.path) == (entry.kind, entry.path):
                self.move_cursor(node)
                return
            queue.extend(node.children)

    def set_children(self, node_id: int, entries: list[TreeEntry], error: str | None = None) -> None:
        """Replace the children of node ``node_id`` (ignored when the node is gone, e.g. after a reload)."""
        self._loading.discard(node_id)
        try:
            node = self.get_node_by_id(node_id)
        except Exception:  # UnknownNodeID: the tree was rebuilt meanwhile
            return
        node.remove_children()
        if error:
            node.add_leaf(Text(f"⚠ {error}", style="dim italic"), data=None)
        elif not entries:
            node.add_leaf(Text("(empty)", style="dim italic"), data=None)
        for entry in entries:
            self._add(node, entry)
        self._loaded.add(node_id)
        if self._reexpand:
            self._restore(node.children)

    def find_path(self, path: str) -> TreeNode[TreeEntry] | None:
        """A loaded node for file ``path`` (first match, breadth first), if any."""
        queue = list(self.root.children)
        while queue:
            node = queue.pop(0)
            if node.data is not None and node.data.kind == "file" and node.data.path == path:
                return node
            queue.extend(node.children)
        return None

    # -- loading (thread workers → messages to itself) ------------------------------------------------------
    def on_mount(self) -> None:
        if self.ctx is not None:
            self.ctx.vault_changed.subscribe(self, self._vault_changed)

    @work(thread=True, exclusive=True, group="tree-root", exit_on_error=False)
    def load_root(self) -> None:
        """Re-read the top level (Daily, Digest, the rest)."""
        try:
            entries, groups = loaders.tree_root(self.ctx.engine, self.ctx.settings.layers)
        except Exception as exc:
            self.post_message(TreeRootLoaded([TreeEntry("info", "", f"⚠ {exc}", dim=True)], {}))
            return
        self.post_message(TreeRootLoaded(entries, groups))

    def on_tree_root_loaded(self, message: TreeRootLoaded) -> None:
        message.stop()
        self.set_root(message.entries, message.groups, keep_expanded=self._root_loaded)
        self.top_dirs = [e.path for e in message.entries if e.kind in ("dir", "daily", "digest") and e.path]
        self._root_loaded = True

    def on_load_children(self, message: LoadChildren) -> None:
        if self.ctx is not None:
            message.stop()
            self.load_children(message.node_id, message.entry)

    @work(thread=True, group="tree", exit_on_error=False)
    def load_children(self, node_id: int, entry: TreeEntry) -> None:
        try:
            kids = loaders.tree_children(self.ctx.engine, self.ctx.daily_dir, entry)
        except Exception as exc:
            self.post_message(ChildrenLoaded(node_id, [], str(exc)))
            return
        self.post_message(ChildrenLoaded(node_id, kids))

    def on_children_loaded(self, message: ChildrenLoaded) -> None:
        message.stop()
        self.set_children(message.node_id, message.entries, message.error)

    def _vault_changed(self, change) -> None:
        if change.names_changed and not change.first_pass:
            self.load_root()  # files came or went: reload, keeping what was open

    # -- events ---------------------------------------------------------------------------------------------
    def on_tree_node_expanded(self, event: Tree.NodeExpanded[TreeEntry]) -> None:
        node = event.node
        if node.data is None or node.id in self._loaded or node.id in self._loading:
            return
        self._loading.add(node.id)
        node.add_leaf(Text("loading…", style="dim italic"), data=None)
        self.post_message(LoadChildren(node.id, node.data))

    def on_tree_node_selected(self, event: Tree.NodeSelected[TreeEntry]) -> None:
        entry = event.node.data
        if entry is not None and entry.kind == "file":
            event.stop()
            self.post_message(OpenNote(entry.path))

    def action_expand_node(self) -> None:
        node = self.cursor_node
        if node is not None and node.allow_expand and not node.is_expanded:
            node.expand()

    def action_collapse_node(self) -> None:
        node = self.cursor_node
        if node is None:
            return
        if node.allow_expand and node.is_expanded:
            node.collapse()
        elif node.parent is not None and node.parent is not self.root:
            self.move_cursor(node.parent)
