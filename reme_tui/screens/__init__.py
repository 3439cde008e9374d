"""Screens: ``MainScreen`` (the coordinator), ``SearchScreen`` and ``HelpScreen`` (modals)."""
