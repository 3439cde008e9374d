"""Widgets of the main screen. They post request messages upward (see ``reme_tui.messages``) and never call the
engine themselves."""
