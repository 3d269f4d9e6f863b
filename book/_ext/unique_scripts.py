"""Include each inline script once per page.

sphinx-thebe adds its configuration (``const THEBE_JS_URL = ...``) as an inline
script each time the environment reads documents, so a build that reads twice
declares the constants twice and every page logs a SyntaxError. Scripts with
the same file name and body are kept once, in their first position.
"""

from __future__ import annotations


def unique(scripts: list) -> list:
    """Drop repeated scripts: same file name (None or "" for inline ones) and same body."""
    seen, kept = set(), []
    for script in scripts:
        filename = getattr(script, "filename", str(script)) or None
        key = (
            filename,
            getattr(script, "attributes", {}).get("body", ""),
        )
        if key not in seen:
            seen.add(key)
            kept.append(script)
    return kept


def drop_repeated_scripts(
    app, pagename, templatename, context, doctree
) -> None:
    # In place: later handlers (MathJax on pages with math) add to the same list.
    if "script_files" in context:
        context["script_files"][:] = unique(context["script_files"])


def setup(app):
    # Early: html-page-context stops at the first handler that returns a template.
    app.connect("html-page-context", drop_repeated_scripts, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
