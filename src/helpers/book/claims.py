"""The scoreboard every chapter ends with: the paper's claims, the book's findings, and checks.

Three kinds of record, each registered where the chapter computes it::

    claims = helpers.Claims("04_effective_attention", model=arch.name, data="book corpus")

    # a check: an identity or an engineering fact; a failure stops the chapter
    claims.check("eff-identity", "A_eff T = A T in every head", err < 1e-5,
                 measured=f"max rel. error below {helpers.residual_text(err, 1e-5)}")

    # a claim of the paper (or of later work), tested against a control
    removed = helpers.bootstrap(per_text_removed)             # a figure and its 95% interval over texts
    random_space = Control("a random column space of the same rank (r/n)", helpers.bootstrap(per_text_r_over_n))
    claims.paper("sink-null", "most raw attention on [SEP] lies in the null space",
                 removed, random_space, side="above", published="most", source="Brunner et al. 2020, §3.4")

    # the book's own finding, posed the same way
    claims.finding("sink-feeds-less", "...", estimate, control, side="above")

    claims.enforce()   # last cell: the scoreboard, the JSON record the report reads

A paper claim or finding says in advance which side of its control the figure must
fall on (``side="above"`` or ``"below"``). Its verdict comes from the interval:

* the interval clears the control (and an optional ``threshold`` from the paper,
  never from the figure) on the predicted side: **reproduced** (a finding:
  **holds**); with ``size=(published, tolerance)`` and a published figure
  outside the interval widened by the tolerance, **in direction only**;
* otherwise **not reproduced** (**does not hold**); "reversed" is added when
  the interval clears the control on the other side;
* :meth:`Claims.not_testable` records a claim the model or data cannot test, with the reason.

The bound is the control's interval edge, or the threshold where that is stricter, so a
control can never pass its own claim. A verdict is a result, not a failure: the
notebook goes on, and the notebook check compares the scoreboard with the committed
one, so a verdict that changes fails there. Only a failed check stops a chapter (in
strict mode, the default; ``BOOK_CLAIMS=report`` marks it and goes on, for a reader
trying another model).

Records go to ``$BOOK_CLAIMS_DIR`` if set, else to ``_build/claims/`` of the
book (the folder above the notebook that holds ``_config.yml``), else to
``~/.cache/identifiability-book/claims``.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import pandas as pd

from ..methods.intervals import Estimate
from .scoreboard import Scoreboard, claim_sections, claims_frame

__all__ = [
    "Claim",
    "ClaimFailed",
    "Claims",
    "Control",
    "KINDS",
    "MODES",
    "VERDICTS",
    "claims_mode",
    "records_dir",
    "load_records",
    "report_table",
    "record_defects",
]

MODES = ("strict", "report")
KINDS = ("paper", "finding", "check")
VERDICTS = {
    "paper": ("reproduced", "in direction only", "not reproduced", "not testable here"),
    "finding": ("holds", "does not hold", "not testable here"),
    "check": ("passes", "fails"),
}
SIDES = ("above", "below")
_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


class ClaimFailed(AssertionError):
    """Raised in strict mode when a check fails."""


@dataclass(frozen=True)
class Control:
    """What chance, position or the method alone would give, computed in the same run.

    what: a reader's description ("a random column space of the same rank, r/n");
    value: a number, or an :class:`~helpers.methods.intervals.Estimate` with its own interval.
    """

    what: str
    value: float | Estimate

    def __post_init__(self):
        if not isinstance(self.what, str) or not self.what.strip():
            raise ValueError("a control needs a description of what it is")
        if not isinstance(self.value, Estimate):
            object.__setattr__(self, "value", _as_number(self.value, "control", "value"))

    @property
    def low(self) -> float:
        return self.value.low if isinstance(self.value, Estimate) else self.value

    @property
    def high(self) -> float:
        return self.value.high if isinstance(self.value, Estimate) else self.value

    @property
    def point(self) -> float:
        return self.value.value if isinstance(self.value, Estimate) else self.value

    def text(self, fmt: str) -> str:
        figure = self.value.text(fmt) if isinstance(self.value, Estimate) else format(self.value, fmt)
        return f"{self.what}: {figure}"


@dataclass(frozen=True)
class Claim:
    """One record of the scoreboard (see the module docstring)."""

    id: str
    kind: str  # "paper", "finding" or "check"
    claim: str
    verdict: str
    measured: str = ""  # this model's figure, as text (with its interval)
    interval: list[float] = field(default_factory=list)  # [low, high]; empty for a check
    control: str = ""  # what the control is and its figure; empty for a check
    published: str = ""  # the published figure, as text
    source: str = ""  # who published it
    tolerance: str = ""  # how close "reproduced" must be in size, when a size is compared
    note: str = ""  # why this model departs, where it does
    section: str = ""  # the anchor of the chapter section that tests it (filled by ``enforce``)
    # what the verdict was computed from, for the tests that read the records
    estimate: float | None = None
    side: str = ""
    bound: float | None = None  # the figure the interval must clear: the control's edge or a stricter threshold
    control_value: float | None = None  # the control's own figure on the predicted side
    sequences: int | None = None

    @property
    def holds(self) -> bool:
        return self.verdict in ("reproduced", "in direction only", "holds", "passes")


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

    # --- registration -------------------------------------------------------------------------

    def check(self, id: str, claim: str, holds, *, measured: str = "", source: str = "") -> bool:
        """An identity or engineering check: passes or fails; a failure stops the chapter in strict mode.

        ``holds`` must be one boolean (Python, numpy or a one-element tensor).
        """
        passed = _as_bool(holds, id)
        self._add(Claim(id, "check", claim, "passes" if passed else "fails", measured=str(measured), source=source))
        if not passed and self.mode == "strict":
            raise ClaimFailed(
                f"check {id} fails of {self.chapter}: {claim} (this model: {measured or 'n/a'}).\n"
                "Set BOOK_CLAIMS=report to mark it and keep going."
            )
        return passed

    def paper(self, id: str, claim: str, estimate: Estimate, control: Control, side: str = "above", **options) -> str:
        """A claim of the paper (or of later work: ``source=``), tested against ``control``; returns the verdict.

        estimate: this model's figure with its interval over sequences (``helpers.bootstrap``).
        control: a :class:`Control` computed in the same run.
        side: where the paper says the figure lies relative to the control ("above" / "below").
        Options: ``published`` (text), ``source``, ``size=(published value, tolerance)``,
        ``threshold`` (a bound from the paper, used where stricter than the control),
        ``fmt`` (number format), ``note``.
        """
        return self._posed("paper", id, claim, estimate, control, side, **options)

    def finding(self, id: str, claim: str, estimate: Estimate, control: Control, side: str = "above", **options) -> str:
        """One of the book's own findings, posed as :meth:`paper` poses a claim; returns the verdict."""
        options.setdefault("source", "this book")
        return self._posed("finding", id, claim, estimate, control, side, **options)

    def not_testable(
        self, id: str, claim: str, reason: str, *, kind: str = "paper", published: str = "", source: str = ""
    ) -> str:
        """A claim this model or data cannot test; ``reason`` says why (e.g. it needs d_v = 64)."""
        if kind not in ("paper", "finding"):
            raise ValueError(f"kind must be 'paper' or 'finding', got {kind!r}")
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"claim {id!r}: say why it cannot be tested here")
        self._add(
            Claim(
                id, kind, claim, "not testable here", published=str(published),
                source=source or _default_source(kind), note=reason,
            )
        )  # fmt: skip
        return "not testable here"

    def _posed(
        self,
        kind: str,
        id: str,
        claim: str,
        estimate: Estimate,
        control: Control,
        side: str,
        *,
        published: str = "",
        source: str = "",
        size: tuple[float, float] | None = None,
        threshold: float | None = None,
        fmt: str = ".2f",
        note: str = "",
    ) -> str:
        if not isinstance(estimate, Estimate):
            raise TypeError(
                f"claim {id!r}: the figure must be an Estimate with its interval over sequences "
                "(helpers.bootstrap), not a bare number"
            )
        if not isinstance(control, Control):
            raise TypeError(f"claim {id!r}: name its control with Control(what, value), computed in the same run")
        if side not in SIDES:
            raise ValueError(f"claim {id!r}: side must be one of {SIDES}, got {side!r}")
        if not all(math.isfinite(v) for v in (estimate.value, estimate.low, estimate.high)):
            raise ValueError(f"claim {id!r}: the estimate is not finite ({estimate})")
        above = side == "above"
        # the control's edge on the predicted side; a threshold from the paper only where stricter
        edge = control.high if above else control.low
        bound = edge
        if threshold is not None:
            threshold = _as_number(threshold, id, "threshold")
            bound = max(edge, threshold) if above else min(edge, threshold)
        clears = estimate.low > bound if above else estimate.high < bound
        reversed_ = estimate.high < control.low if above else estimate.low > control.high
        tolerance_text, agrees = "", None
        if size is not None:
            value, tolerance = (_as_number(x, id, "size") for x in size)
            if tolerance < 0:
                raise ValueError(f"claim {id!r}: the size tolerance must be >= 0, got {tolerance}")
            # the published figure within the interval widened by the tolerance: a size that one
            # run's noise moves by a hair cannot flip the verdict
            agrees = estimate.low - tolerance <= value <= estimate.high + tolerance
            tolerance_text = f"±{format(tolerance, fmt)} of {format(value, fmt)}"
            published = published or format(value, fmt)
        if kind == "paper":
            verdict = ("in direction only" if agrees is False else "reproduced") if clears else "not reproduced"
        else:
            verdict = "holds" if clears else "does not hold"
        if reversed_ and not clears:
            note = "reversed: the interval lies on the other side of the control" + (f"; {note}" if note else "")
        threshold_text = (
            f" (bound {format(bound, fmt)}, from the paper)" if threshold is not None and bound != edge else ""
        )
        self._add(
            Claim(
                id,
                kind,
                claim,
                verdict,
                measured=f"{estimate.text(fmt)} over {estimate.sequences} sequences",
                interval=[estimate.low, estimate.high],
                control=control.text(fmt) + threshold_text,
                published=str(published),
                source=source or _default_source(kind),
                tolerance=tolerance_text,
                note=str(note),
                estimate=estimate.value,
                side=side,
                bound=bound,
                control_value=edge,
                sequences=estimate.sequences,
            )
        )
        return verdict

    def _add(self, claim: Claim) -> None:
        if not isinstance(claim.id, str) or not _ID.match(claim.id):
            raise ValueError(f"claim id must be lower-case letters, digits, '-', '_' or '.', got {claim.id!r}")
        if claim.id in self._claims:
            raise ValueError(f"claim {claim.id!r} is already registered in chapter {self.chapter!r}")
        if not isinstance(claim.claim, str) or not claim.claim.strip():
            raise ValueError(f"claim {claim.id!r} needs a sentence saying what it claims")
        self._claims[claim.id] = claim

    # --- reading --------------------------------------------------------------------------------

    @property
    def claims(self) -> list[Claim]:
        return list(self._claims.values())

    @property
    def failed(self) -> list[Claim]:
        """The checks that fail."""
        return [c for c in self._claims.values() if c.verdict == "fails"]

    def table(self) -> pd.DataFrame:
        """One row per record (``SCOREBOARD_COLUMNS``), indexed by id."""
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
        """Save the record and return the scoreboard; fail on a defective record or (strict) a failed check."""
        if not self._claims:
            raise ValueError(f"chapter {self.chapter!r} registered no claims")
        defects = record_defects(self.record())
        if defects:
            raise ValueError(f"the scoreboard of {self.chapter} has defects:\n" + "\n".join(defects))
        # the notebook beside the kernel, if it is there
        sections = claim_sections(Path(f"{self.chapter}.ipynb"), ids=set(self._claims))
        self._claims = {k: replace(c, section=sections.get(k, c.section)) for k, c in self._claims.items()}
        self.save(folder)
        if self.mode == "strict" and self.failed:
            lines = "\n".join(f"- {c.id}: {c.claim} (this model: {c.measured or 'n/a'})" for c in self.failed)
            raise ClaimFailed(f"{len(self.failed)} checks of {self.chapter} fail:\n{lines}")
        return Scoreboard(self.table().reset_index(), record=self.record())


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


def _default_source(kind: str) -> str:
    return "Brunner et al. 2020" if kind == "paper" else "this book"


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
    """All records of all chapters: ``chapter`` and the ``SCOREBOARD_COLUMNS``."""
    rows = [{"chapter": r["chapter"], **c} for r in records for c in r["claims"]]
    frame = claims_frame(rows)
    frame.insert(0, "chapter", [r["chapter"] for r in rows])
    return frame
