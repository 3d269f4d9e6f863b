"""The records chapters write and the report reads: where they live, how they are checked, one table of all."""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

import pandas as pd

from .scoreboard import claims_frame, verdict_class
from .verdicts import CHECK_VERDICTS, FINDING_VERDICTS, PAPER_VERDICTS

__all__ = [
    "CLAIMS_MIME",
    "records_dir",
    "record_name",
    "record_defects",
    "load_records",
    "committed_record",
    "report_table",
    "model_comparison",
    "extra_records",
    "model_comparison_html",
    "HOLDING",
    "COUNTED_APART",
    "THEORY_CHECKS",
    "theory_checks",
]

CLAIMS_MIME = "application/vnd.book.claims+json"
"""The output metadata key under which a chapter's scoreboard output carries its record."""
# a paper claim "holds" on a model where its direction reproduces; these verdicts decide nothing
HOLDING = ("reproduced", "in direction only")
COUNTED_APART = ("premise absent", "too few sequences", "not testable here")

# The checks of the paper's central argument, per chapter: rank(T) = min(n, d_v) and LN(T) = LN(V), a null
# space of n - rank(T) dimensions (one fewer inside the simplex), raw = effective attention up to d_v tokens,
# and a matrix moved in the null space that leaves the running model's output unchanged; chapter 9's are the
# causal versions (a null space per row, growing by one per token past d_v).
THEORY_CHECKS = {
    "02_rank_argument": ("rank-t-attained", "rank-t-equals-rank-v", "null-spaces-equal", "patch-same-output"),
    "03_simplex_null_spaces": ("null-dim-n-dv-1", "constraint-removes-one", "patched-model-unchanged"),
    "04_effective_attention": ("short-identifiable", "long-null-dim", "effective-rows-unused"),
    "09_decoder_llm": ("causal-null-growth", "causal-eff-identity"),
}

KINDS = ("paper", "finding", "check")
VERDICTS = {"paper": PAPER_VERDICTS, "finding": FINDING_VERDICTS, "check": CHECK_VERDICTS}
SIDES = ("above", "below")


def records_dir() -> Path:
    """Where chapters write their claim records and the report reads them."""
    if os.environ.get("BOOK_CLAIMS_DIR"):
        return Path(os.environ["BOOK_CLAIMS_DIR"])
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "_config.yml").is_file() and (folder / "_toc.yml").is_file():
            return folder / "_build" / "claims"
    return Path.home() / ".cache" / "identifiability-book" / "claims"


def record_name(chapter: str, model: str) -> str:
    """The file a chapter's record goes to: ``<chapter>.json``; a run on the paper-scale edition's model
    (helpers.book.paper_scale) ``<chapter>@<model>.json``, so that both editions' records stand side by side."""
    from ..model.mpnet_weights import MPNET_MODEL

    return f"{chapter}@{model}.json" if model == MPNET_MODEL else f"{chapter}.json"


def record_defects(record: dict) -> list[str]:
    """What makes a chapter's record untrustworthy, one sentence each (empty when none).

    A paper claim or finding without a control or an interval; a control that would meet
    the claim's own bound (a claim that cannot fail); a verdict that is not of its kind.
    """
    defects = []
    for c in record.get("claims", []):
        kind, verdict, name = c.get("kind"), c.get("verdict"), c.get("id")
        if kind not in KINDS:
            defects.append(f"{name}: kind {kind!r} is none of {KINDS}")
            continue
        if verdict not in VERDICTS[kind]:
            defects.append(f"{name}: verdict {verdict!r} is not one of a {kind}'s {VERDICTS[kind]}")
        if kind == "check" or verdict == "not testable here":
            continue
        if not c.get("control"):
            defects.append(f"{name}: a {kind} without a control")
        if len(c.get("interval") or []) != 2:
            defects.append(f"{name}: a {kind} without an interval")
        side, bound, control = c.get("side"), c.get("bound"), c.get("control_value")
        if side not in SIDES or bound is None or control is None:
            defects.append(f"{name}: no side, bound or control figure recorded")
            continue
        if (side == "above" and control > bound) or (side == "below" and control < bound):
            defects.append(f"{name}: its control ({control:g}) meets its own bound ({bound:g}): it cannot fail")
    return defects


def load_records(folder: str | Path | None = None) -> list[dict]:
    """Every chapter record in ``folder`` (default :func:`records_dir`), sorted by chapter."""
    folder = Path(folder) if folder is not None else records_dir()
    if not folder.is_dir():
        return []
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def committed_record(notebook: str | Path) -> dict:
    """The claims record a notebook's committed scoreboard output carries (what the chapter wrote when it
    was executed and committed). Raises when the notebook has none (it was not executed to its end)."""
    notebook = Path(notebook)
    for cell in json.loads(notebook.read_text())["cells"]:
        for output in cell.get("outputs", []):
            record = output.get("metadata", {}).get(CLAIMS_MIME)
            if record:
                return record
    raise ValueError(f"{notebook}: no committed claims record (execute the notebook to its scoreboard)")


def theory_checks(records: list[dict]) -> pd.DataFrame:
    """The checks of the paper's central argument (``THEORY_CHECKS``) that the records hold, one row each:
    ``model, chapter, id, verdict, measured``, in the order of the records. A listed check missing from a
    record of its chapter raises (a renamed check would otherwise drop out of the count)."""
    rows = []
    for record in records:
        wanted = THEORY_CHECKS.get(record["chapter"], ())
        checks = {c["id"]: c for c in record["claims"] if c["kind"] == "check"}
        missing = [i for i in wanted if i not in checks]
        if missing:
            raise ValueError(f"{record['chapter']} on {record['model']}: no theory check {missing} in its record")
        rows += [
            {
                "model": record["model"],
                "chapter": record["chapter"],
                "id": i,
                "verdict": checks[i]["verdict"],
                "measured": checks[i].get("measured", ""),
            }
            for i in wanted
        ]
    return pd.DataFrame(rows, columns=["model", "chapter", "id", "verdict", "measured"])


def merged_claim(first: str, second: str) -> str:
    """One claim text for two models whose texts differ only inside brackets (the layers read, the model's
    sink): each differing bracket as "(first / second)", so "(layers 3 to 6)" and "(layers 5 to 12)" give
    "(layers 3 to 6 / layers 5 to 12)". Texts that differ elsewhere are given both, the second in brackets."""
    bracket = re.compile(r"\([^()]*\)")
    if first == second:
        return first
    if bracket.split(first) != bracket.split(second):
        return f"{first} [the second model: {second}]"
    merged = iter(
        a if a == b else f"({a[1:-1]} / {b[1:-1]})"
        for a, b in zip(bracket.findall(first), bracket.findall(second), strict=True)
    )
    return bracket.sub(lambda _: next(merged), first)


def model_comparison(
    first: list[dict],
    second: list[dict],
    *others: list[dict],
    carried: dict[tuple[str, str], tuple[str, str]] | None = None,
    kind: str = "paper",
) -> pd.DataFrame:
    """The paper's claims of the chapters both encoders' record lists cover, one row each, a column per model
    (``kind="finding"``: the book's findings, "holds" counting as holding).

    first, second: chapter records (``load_records`` / ``committed_record``) of the two encoders compared.
    others: record lists of further models, one model each (the decoder; a run supplied from elsewhere, such
    as BERT-Base from Colab): each adds a column, filled in a row where the list holds that claim, or a claim
    that carries it over (``carried``: ``(chapter, id)`` of the carrying claim to ``(chapter, id)`` of the
    carried one; default the registry's ``carries`` fields), and left empty ("") where it holds neither.

    Returns ``chapter, id, claim``, per model its verdict and ``"<model>: figure"`` (a carried claim's figure
    is prefixed with its own id), and ``holds``: on how many of the two encoders the claim holds (its verdict
    one of ``HOLDING``), or ``"apart"`` where either encoder's verdict is counted apart (``COUNTED_APART``).
    ``attrs["encoders"]`` names the two counted models, ``attrs["models"]`` every column's model in order.
    """
    if carried is None:
        from .registry import load_registry

        carried = load_registry().carried()

    def by_id(records, follow=False):
        found = {}
        for r in records:
            for c in r["claims"]:
                if c["kind"] != kind:
                    continue
                key = (r["chapter"], c["id"])
                if follow and key in carried:
                    found[carried[key]] = (r["model"], {**c, "measured": f"{c['id']}: {c['measured']}"})
                else:
                    found.setdefault(key, (r["model"], c))
        return found

    if kind not in ("paper", "finding"):
        raise ValueError(f"kind must be 'paper' or 'finding', not {kind!r}: checks have no verdict to compare")
    holding = HOLDING if kind == "paper" else ("holds",)
    one, two = by_id(first), by_id(second)
    keys = sorted(one.keys() & two.keys())
    encoders = [one[keys[0]][0], two[keys[0]][0]] if keys else []
    extra = []
    for records in others:
        models = sorted({r["model"] for r in records})
        if len(models) != 1:
            raise ValueError(f"each further record list holds one model's records, this one holds {models or 'none'}")
        if models[0] in encoders or models[0] in [m for m, _ in extra]:
            raise ValueError(f"records of {models[0]!r} are given twice: its column is already in the table")
        extra.append((models[0], by_id(records, follow=True)))
    rows = []
    for key in keys:
        (model_a, a), (model_b, b) = one[key], two[key]
        apart = a["verdict"] in COUNTED_APART or b["verdict"] in COUNTED_APART
        held = (a["verdict"] in holding) + (b["verdict"] in holding)
        row = {
            "chapter": key[0], "id": key[1], "claim": merged_claim(a["claim"], b["claim"]),
            model_a: a["verdict"], f"{model_a}: figure": a["measured"],
            model_b: b["verdict"], f"{model_b}: figure": b["measured"],
        }  # fmt: skip
        for model, claims in extra:
            claim = claims.get(key, (model, {"verdict": "", "measured": ""}))[1]
            row[model], row[f"{model}: figure"] = claim["verdict"], claim["measured"]
        rows.append({**row, "holds": "apart" if apart else held})
    table = pd.DataFrame(rows)
    table.attrs["encoders"] = encoders
    table.attrs["models"] = encoders + [m for m, _ in extra]
    return table


def extra_records(folder: str | Path) -> list[list[dict]]:
    """The chapter records in ``folder`` (a run of the chapters on another model, e.g. BERT-Base in Colab,
    whose ``<chapter>.json`` files were copied there), one list per model, for :func:`model_comparison`.
    Raises where the folder is missing, holds no record, or holds a file that is not a chapter record."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"no folder of records at {folder} (it should hold the chapters' <chapter>.json)")
    grouped: dict[str, list[dict]] = {}
    for path in sorted(folder.glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"{path.name} is not a chapter record: {error}") from None
        if not isinstance(record, dict) or not {"chapter", "model", "claims"} <= set(record):
            raise ValueError(f"{path.name} is not a chapter record (it needs 'chapter', 'model' and 'claims')")
        grouped.setdefault(record["model"], []).append(record)
    if not grouped:
        raise FileNotFoundError(f"{folder} holds no chapter record (<chapter>.json)")
    return [grouped[m] for m in sorted(grouped)]


def model_comparison_html(
    comparison: pd.DataFrame, links: dict[str, str] | None = None, short: dict[str, str] | None = None
) -> str:
    """``model_comparison`` as an HTML table: a row per paper claim, per model its verdict (coloured
    as in the scoreboards) above its figure and interval, "not tested" where a further model's chapters do
    not test the claim; chapters by number (``short``), linked (``links``)."""
    links, short = links or {}, short or {}
    models = comparison.attrs.get("models") or [
        c for c in comparison.columns if c not in ("chapter", "id", "claim", "holds") and ": figure" not in c
    ]
    head = "".join(f"<th>{html.escape(h)}</th>" for h in ["chapter", "claim", *models])
    rows = []
    for _, row in comparison.iterrows():
        number = short.get(row["chapter"], row["chapter"])
        href = links.get(number)
        chapter = f'<a href="{html.escape(href)}">{html.escape(number)}</a>' if href else html.escape(number)
        cells = [f"<td>{chapter}</td>", f'<td><span class="id">{html.escape(row["id"])}</span> '
                 f"{html.escape(row['claim'])}</td>"]  # fmt: skip
        for model in models:
            verdict = row[model]
            if not verdict:  # a further model's column where its chapters do not test this claim
                cells.append('<td class="verdict untested">not tested</td>')
                continue
            cells.append(
                f'<td class="verdict {verdict_class("paper", verdict)}">{html.escape(verdict)}'
                f'<div class="note">{html.escape(str(row[f"{model}: figure"]))}</div></td>'
            )
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<div class="table-scroll"><table class="scoreboard models"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def report_table(records: list[dict]) -> pd.DataFrame:
    """All records of all chapters: ``chapter`` and the ``SCOREBOARD_COLUMNS``."""
    rows = [{"chapter": r["chapter"], **c} for r in records for c in r["claims"]]
    frame = claims_frame(rows)
    frame.insert(0, "chapter", [r["chapter"] for r in rows])
    return frame
