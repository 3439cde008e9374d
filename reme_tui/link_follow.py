"""Following a link: resolve it as the index does (through the façade, in a worker), then open the note, or offer
to create a missing one (as Obsidian does); the link picker (``f``) for the keyboard way."""

from __future__ import annotations

from .messages import FollowLink, LinkResolved, OpenNote


def resolve(engine, target: str, anchor: str | None, source: str | None) -> LinkResolved:
    """(Worker thread.) The resolution of ``target`` written in ``source`` as a :class:`LinkResolved` message
    (``error`` set when the engine failed)."""
    try:
        res = engine.resolve_link(target, source or "")
    except Exception as exc:
        return LinkResolved(target, anchor, None, None, error=str(exc))
    return LinkResolved(target, anchor, res.path, res.virtual or None, bool(res.ambiguous))


def missing_targets(engine, links: list, source: str) -> set[str]:
    """(Worker thread.) The targets among ``links`` (``(shown, target, anchor)`` rows) that resolve to no file."""
    targets = list(dict.fromkeys(t for _shown, t, _anchor in links if t))
    try:
        return {t for t, r in zip(targets, engine.resolve_links(targets, source)) if r.path is None}
    except Exception:  # the marks are a help, never a reason not to show the note
        return set()


def on_resolved(screen, message: LinkResolved, index_ready: bool) -> None:
    """(UI thread.) Open the resolved note, warn about an ambiguous one, or offer to create a missing one."""
    if message.error:
        screen.notify(f"cannot resolve {message.target!r}: {message.error}", severity="error")
        return
    if message.path is None:
        if not index_ready:
            name = message.virtual or message.target
            screen.notify(f"{name} does not exist yet (index still building)", title="Dangling link",
                          severity="warning")
            return
        from .screens.dialogs import NewNoteScreen

        def chosen(path: str | None) -> None:
            if path:
                screen.create_note(path)

        screen.app.push_screen(NewNoteScreen(initial=message.target.strip(),
                                             reason=f"[[{message.target}]] points to a note that does not exist "
                                                    "yet. Create it?"), chosen)
        return
    if message.ambiguous:
        screen.notify(f"{message.target!r} matches several notes; opened {message.path}", severity="warning")
    screen.post_message(OpenNote(message.path, anchor=message.anchor, focus=True))


def pick_link(screen, chat, doc, missing: set[str] | frozenset = frozenset()) -> None:
    """(UI thread.) Let the user pick one of the open note's links (or, with the chat transcript focused, one of
    the last answer's citations) and follow it; ``missing``: targets that point to no note, marked in the list."""
    from .screens.dialogs import LinkPickerScreen

    if chat.log_view.has_focus and (cites := chat.last_citations()):
        def cited(choice) -> None:
            if choice is not None:
                screen.post_message(FollowLink(choice[0], choice[1], None))

        screen.app.push_screen(LinkPickerScreen(cites, "Citations of the answer"), cited)
        return
    if doc is None:
        screen.notify("Open a note first", timeout=2)
        return

    def chosen(choice) -> None:
        if choice is not None:
            target, anchor = choice
            screen.post_message(FollowLink(target, anchor, doc.path))

    screen.app.push_screen(LinkPickerScreen(list(doc.links), f"Links of {doc.path}", missing=missing), chosen)
