"""Figures and exercises of the paper-scale edition numbered from 1 on each of its pages.

Sphinx counts figures per section number across the whole book, so the edition's page of chapter 6,
numbered 6 like the chapter itself, would go on from the chapter's last figure (Figure 6.9 for the
edition's first). Each edition page is a chapter of its own with the same figures as the chapter, so
its numbers restart at 1 (Figure 6.1), as its Colab edition numbers them.
"""

from __future__ import annotations

EDITION_PREFIX = "book/paper_scale/"


def restart_edition_numbers(app, env) -> list[str]:
    """Renumber each edition page's figures, tables and exercises 1, 2, ... in the order Sphinx gave them."""
    renumbered = []
    for docname, by_type in env.toc_fignumbers.items():
        if not docname.startswith(EDITION_PREFIX):
            continue
        for figtype, numbers in by_type.items():
            ordered = sorted(numbers.items(), key=lambda item: item[1])
            by_type[figtype] = {
                figure_id: (*number[:-1], position)
                for position, (figure_id, number) in enumerate(
                    ordered, start=1
                )
            }
        renumbered.append(docname)
    return renumbered


def setup(app):
    # after Sphinx's own toctree collector (priority 500) has assigned the numbers
    app.connect("env-get-updated", restart_edition_numbers, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
