"""`reme-tui mcp` writes its warnings to stderr as plain one-line records (a client shows them in its log), not as
the SDK's Rich box art, even though the SDK's server sets up Rich logging when it is made."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import logging
from reme_tui import mcp_server as M
M._plain_stderr_logging()
from mcp.server.mcpserver.utilities.logging import configure_logging
configure_logging("WARNING")  # what the SDK's server does when it is made
logging.getLogger("reme.link").warning("a link in %s was not rewritten: it changed meanwhile", "race/L.md")
"""


def test_warnings_are_plain_lines():
    p = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert lines == ["reme-tui mcp: WARNING reme.link: a link in race/L.md was not rewritten: it changed meanwhile"]
