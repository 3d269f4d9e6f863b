"""The claims scoreboard every chapter ends with.

A chapter registers each claim where it computes it::

    claims = helpers.Claims("04_effective_attention", model=architecture.name, data="book corpus")
    claims.check("eff-identity", "A_eff T = A T in every head", holds=bool(err < 1e-5),
                 paper="exact (by the definition)", measured=f"max rel. error {err:.0e}")
    claims.at_most("null-small", "the null part is small", share, 0.06,
                   published=0.04, tolerance=0.02, source="Brunner et al. 2020, fig. 3")
    ...
    claims.enforce()   # last cell: the scoreboard, the JSON record, then strict or report

Each claim carries two verdicts: ``holds`` (the claim is true of this model) and
``agrees`` (this model's figure is within the stated tolerance of the published
one: True, False, or None where there is no published figure to compare, e.g. an
identity or a qualitative statement). ``at_most`` / ``at_least`` state the value
and its threshold once and write both the verdict and the measured text.

``enforce`` shows every claim in one table, writes the chapter's record (a
small JSON file the reproduction report reads), and then, in strict mode (the
default, and what CI runs), fails with the message of every claim that does
not hold. With the environment variable ``BOOK_CLAIMS=report`` it only marks
them failed, so a reader trying another model sees the whole scoreboard.

Records go to ``$BOOK_CLAIMS_DIR`` if set, else to ``_build/claims/`` of the
book (the folder above the notebook that holds ``_config.yml``), else to
``~/.cache/identifiability-book/claims``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pandas as pd

from .scoreboard import Scoreboard, claim_sections, claims_frame, verdict_of

__all__ = ["Claim", "ClaimFailed", "Claims", "MODES", "claims_mode", "records_dir", "load_records", "report_table"]

MODES = ("strict", "report")
_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


class ClaimFailed(AssertionError):
    """Raised by :meth:`Claims.enforce` in strict mode when a claim does not hold."""


@dataclass(frozen=True)
class Claim:
    """One tested claim: what it says, what the paper reports, what this model gives."""

    id: str
    claim: str
    holds: bool
    paper: str = ""  # the published figure, as text
    measured: str = ""  # this model's figure, as text
    note: str = ""  # why this model departs, where it does
    source: str = ""  # who published ``paper`` ("Brunner et al. 2020, §3.4"); default: the paper
    agrees: bool | None = None  # this model's figure within ``tolerance`` of the published one; None: not compared
    tolerance: str = ""  # the tolerance of that comparison, as text
    section: str = ""  # the anchor of the chapter section that tests it (filled by ``enforce``)

    @property
    def verdict(self) -> str:
        """ "reproduced", "in kind" (holds, but the figure is outside the tolerance) or "not reproduced"."""
        return verdict_of(self.holds, self.agrees)


def claims_mode(mode: str | None = None) -> str:
    """``mode`` if given, else ``$BOOK_CLAIMS``, else ``"strict"``; checked against :data:`MODES`."""
    value = mode if mode is not None else os.environ.get("BOOK_CLAIMS", "strict")
    value = str(value).strip().lower() or "strict"
    if value not in MODES:
        raise ValueError(f"BOOK_CLAIMS must be one of {MODES}, got {value!r}")
    return value


def records_dir() -> Path:
    """Where chapters write their claim records and the report reads them."""
    if os.environ.get("BOOK_CLAIMS_DIR"):
        return Path(os.environ["BOOK_CLAIMS_DIR"])
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "_config.yml").is_file() and (folder / "_toc.yml").is_file():
            return folder / "_build" / "claims"
    return Path.home() / ".cache" / "identifiability-book" / "claims"


class Claims:
    """The scoreboard of one chapter (see the module docstring)."""

    def __init__(self, chapter: str, model: str = "", data: str = "", mode: str | None = None):
        if not isinstance(chapter, str) or not chapter.strip():
            raise ValueError("chapter must be a non-empty name, e.g. '04_effective_attention'")
        self.chapter = chapter
        self.model = str(model)
        self.data = str(data)
        self.mode = claims_mode(mode)
        self._claims: dict[str, Claim] = {}

    def check(
        self,
        id: str,
        claim: str,
        holds,
        *,
        paper: str = "",
        measured: str = "",
        note: str = "",
        source: str = "",
        agrees=None,
        tolerance: str = "",
    ) -> bool:
        """Register one claim and return whether it holds.

        ``holds`` must be a boolean (Python, numpy or a one-element torch
        tensor), computed from this model's numbers: a claim that holds by
        construction is not a claim. ``agrees`` (a boolean or None) says whether
        this model's figure is within ``tolerance`` of the published ``paper``.
        """
        if not isinstance(id, str) or not _ID.match(id):
            raise ValueError(f"claim id must be lower-case letters, digits, '-', '_' or '.', got {id!r}")
        if id in self._claims:
            raise ValueError(f"claim {id!r} is already registered in chapter {self.chapter!r}")
        if not isinstance(claim, str) or not claim.strip():
            raise ValueError(f"claim {id!r} needs a sentence saying what it claims")
        agrees = None if agrees is None else _as_bool(agrees, id)
        self._claims[id] = Claim(
            id, claim, _as_bool(holds, id), str(paper), str(measured), str(note), str(source), agrees, str(tolerance)
        )
        return self._claims[id].holds

    def at_most(self, id: str, claim: str, value, bound, **options) -> bool:
        """``claim`` holds when ``value <= bound``; see :meth:`compare` for the options."""
        return self.compare(id, claim, value, bound, "at most", **options)

    def at_least(self, id: str, claim: str, value, bound, **options) -> bool:
        """``claim`` holds when ``value >= bound``; see :meth:`compare` for the options."""
        return self.compare(id, claim, value, bound, "at least", **options)

    def compare(
        self,
        id: str,
        claim: str,
        value,
        bound,
        side: str,
        *,
        fmt: str = ".2f",
        published=None,
        tolerance=None,
        paper: str = "",
        source: str = "",
        note: str = "",
    ) -> bool:
        """One numeric claim, stated once: the verdict and the measured text come from ``value`` and ``bound``.

        ``side`` is "at most" or "at least". With ``published`` (the published figure) and
        ``tolerance``, ``agrees`` is ``|value - published| <= tolerance``; ``paper`` defaults to
        the published figure formatted with ``fmt``.
        """
        if side not in ("at most", "at least"):
            raise ValueError(f"side must be 'at most' or 'at least', got {side!r}")
        value, bound = _as_number(value, id, "value"), _as_number(bound, id, "bound")
        holds = value <= bound if side == "at most" else value >= bound
        agrees, tolerance_text = None, ""
        if (published is None) != (tolerance is None):
            raise ValueError(f"claim {id!r}: give both published and tolerance, or neither")
        if published is not None:
            published, tolerance = _as_number(published, id, "published"), _as_number(tolerance, id, "tolerance")
            if tolerance < 0:
                raise ValueError(f"claim {id!r}: tolerance must be >= 0, got {tolerance}")
            agrees = abs(value - published) <= tolerance
            tolerance_text = f"±{format(tolerance, fmt)}"
            paper = paper or format(published, fmt)
        return self.check(
            id,
            claim,
            holds,
            paper=paper,
            measured=f"{format(value, fmt)} ({side} {format(bound, fmt)})",
            note=note,
            source=source,
            agrees=agrees,
            tolerance=tolerance_text,
        )

    @property
    def claims(self) -> list[Claim]:
        return list(self._claims.values())

    @property
    def failed(self) -> list[Claim]:
        return [c for c in self._claims.values() if not c.holds]

    def table(self) -> pd.DataFrame:
        """One row per claim (``SCOREBOARD_COLUMNS``), indexed by id."""
        return claims_frame([asdict(c) for c in self._claims.values()]).set_index("id")

    def record(self) -> dict:
        return {
            "chapter": self.chapter,
            "model": self.model,
            "data": self.data,
            "mode": self.mode,
            "claims": [asdict(c) for c in self._claims.values()],
        }

    def save(self, folder: str | Path | None = None) -> Path:
        """Write the chapter's record as ``<folder>/<chapter>.json`` and return its path."""
        folder = Path(folder) if folder is not None else records_dir()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.chapter}.json"
        path.write_text(json.dumps(self.record(), indent=1) + "\n")
        return path

    def enforce(self, folder: str | Path | None = None) -> Scoreboard:
        """Save the record, then fail in strict mode if a claim does not hold; return the scoreboard."""
        if not self._claims:
            raise ValueError(f"chapter {self.chapter!r} registered no claims")
        # the notebook beside the kernel, if it is there
        sections = claim_sections(Path(f"{self.chapter}.ipynb"), ids=set(self._claims))
        self._claims = {k: replace(c, section=sections.get(k, c.section)) for k, c in self._claims.items()}
        self.save(folder)
        if self.mode == "strict" and self.failed:
            lines = "\n".join(f"- {c.id}: {c.claim} (this model: {c.measured or 'n/a'})" for c in self.failed)
            raise ClaimFailed(
                f"{len(self.failed)} of {len(self._claims)} claims of {self.chapter} do not hold:\n{lines}\n"
                "Set BOOK_CLAIMS=report to see the whole scoreboard and keep going."
            )
        return Scoreboard(self.table().reset_index())


def _as_bool(value, id: str) -> bool:
    if hasattr(value, "numel") and hasattr(value, "item"):  # torch tensor
        if value.numel() != 1:
            raise TypeError(f"claim {id!r}: holds must be one boolean, got a tensor of {value.numel()} elements")
        value = value.item()
    if hasattr(value, "dtype") and getattr(value, "shape", None) == ():  # numpy scalar
        value = value.item()
    if not isinstance(value, bool):
        raise TypeError(f"claim {id!r}: holds must be a boolean, got {type(value).__name__}")
    return value


def _as_number(value, id: str, what: str) -> float:
    if hasattr(value, "numel") and hasattr(value, "item"):
        if value.numel() != 1:
            raise TypeError(f"claim {id!r}: {what} must be one number, got a tensor of {value.numel()} elements")
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise TypeError(f"claim {id!r}: {what} must be a number, got {type(value).__name__}")
    value = float(value)
    if value != value:
        raise ValueError(f"claim {id!r}: {what} is NaN")
    return value


def load_records(folder: str | Path | None = None) -> list[dict]:
    """Every chapter record in ``folder`` (default :func:`records_dir`), sorted by chapter."""
    folder = Path(folder) if folder is not None else records_dir()
    if not folder.is_dir():
        return []
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def report_table(records: list[dict]) -> pd.DataFrame:
    """All claims of all chapters: ``chapter`` and the ``SCOREBOARD_COLUMNS``."""
    rows = [{"chapter": r["chapter"], **c} for r in records for c in r["claims"]]
    frame = claims_frame(rows)
    frame.insert(0, "chapter", [r["chapter"] for r in rows])
    return frame
