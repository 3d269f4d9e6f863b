"""Bibliography labels in the text's own style: "Brunner et al., 2020", not "[BLR+20]".

The citations in the text are author-year (``bibtex_reference_style``); pybtex's
label styles are "alpha" and "number" only, so the references page would list
entries under labels a reader never saw. This registers a label style
``author_year`` and a bibliography style that uses it (``bibtex_default_style``).
"""

from __future__ import annotations

import latexcodec  # noqa: F401  (registers the "latex" codec)
from pybtex.plugin import register_plugin
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle


def author_year(entry) -> str:
    """ "Surname, 2020", "Surname & Other, 2020" or "Surname et al., 2020" (editors when there are no authors)."""
    people = (
        entry.persons.get("author") or entry.persons.get("editor") or []
    )
    names = [
        " ".join(p.last_names)
        .encode()
        .decode("latex")
        .replace("{", "")
        .replace("}", "")
        for p in people
    ]
    if not names:
        who = entry.fields.get("key", entry.key)
    elif len(names) == 1:
        who = names[0]
    elif len(names) == 2:
        who = f"{names[0]} & {names[1]}"
    else:
        who = f"{names[0]} et al."
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearLabels(BaseLabelStyle):
    def format_labels(self, sorted_entries):
        seen: dict[str, int] = {}
        for entry in sorted_entries:
            label = author_year(entry)
            seen[label] = seen.get(label, 0) + 1
            yield (
                label
                if seen[label] == 1
                else f"{label}{chr(ord('a') + seen[label] - 1)}"
            )


class AuthorYearStyle(UnsrtStyle):
    default_label_style = "author_year"
    default_sorting_style = "author_year_title"


def setup(app):
    register_plugin(
        "pybtex.style.labels", "author_year", AuthorYearLabels
    )
    register_plugin(
        "pybtex.style.formatting", "author_year", AuthorYearStyle
    )
    return {"parallel_read_safe": True}
