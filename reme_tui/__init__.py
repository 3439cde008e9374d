"""reme_tui: the Textual front end and the `reme-tui` command line."""
