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

A paper claim or finding is first defined in the claims registry
(:mod:`~helpers.book.registry`: the statistic, the control and how it is compared, the
side, a threshold or size, the minimum sample, confirmatory or exploratory); a chapter
refuses a record the registry does not define, or defines otherwise. Its verdict comes
from :func:`~helpers.book.verdicts.decide`: where the estimate and its control are measured
on the same sequences, from the interval of their paired difference
(``Control.paired(what, values, control_values)``); against a fixed control, from the
estimate's interval. Paper claims: reproduced, in direction only (a published size outside
the interval widened by the registry's tolerance), inconclusive (the interval holds its
bound), not reproduced (it clears on the other side), premise absent, too few sequences
(fewer than 10; counted apart), not testable here. Findings: holds, inconclusive, does not
hold, too few sequences, not testable here.

A verdict is a result, not a failure: the notebook goes on, and the notebook check
compares the scoreboard with the committed one, so a verdict that changes fails there.
Only a failed check stops a chapter (in strict mode, the default; ``BOOK_CLAIMS=report``
marks it and goes on, for a reader trying another model).

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

from ..methods.intervals import Estimate, resolving_format
from ..model.token_names import names_if_not_bert, own_token_names
from .controls import Control, as_bool, as_number
from .records import load_records, record_defects, record_name, records_dir, report_table
from .registry import Registry, UnregisteredClaim, load_registry
from .scoreboard import Scoreboard, claims_frame, registered_quantity
from .sections import claim_sections
from .verdicts import CHECK_VERDICTS, FINDING_VERDICTS, PAPER_VERDICTS, POSITIVE, decide

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
VERDICTS = {"paper": PAPER_VERDICTS, "finding": FINDING_VERDICTS, "check": CHECK_VERDICTS}
BOOK_REGISTRY = "book"
"""``Claims(registry=...)`` default: the book's registry (``helpers/book/claims_registry.yaml``)."""
SIDES = ("above", "below")
_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


class ClaimFailed(AssertionError):
    """Raised in strict mode when a check fails."""


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
    comparison: str = ""  # "paired", "fixed" or "independent"
    difference: list[float] = field(default_factory=list)  # the paired difference's [low, high]
    status: str = ""  # "confirmatory" or "exploratory" (from the registry)
    reading: str = ""  # what each compared interval said, in one line

    @property
    def holds(self) -> bool:
        return self.verdict in (*POSITIVE, "passes")


def claims_mode(mode: str | None = None) -> str:
    """``mode`` if given, else ``$BOOK_CLAIMS``, else ``"strict"``; checked against :data:`MODES`."""
    value = mode if mode is not None else os.environ.get("BOOK_CLAIMS", "strict")
    value = str(value).strip().lower() or "strict"
    if value not in MODES:
        raise ValueError(f"BOOK_CLAIMS must be one of {MODES}, got {value!r}")
    return value


class Claims:
    """The scoreboard of one chapter (see the module docstring)."""

    def __init__(
        self,
        chapter: str,
        model: str = "",
        data: str = "",
        mode: str | None = None,
        registry: Registry | str | Path | None = BOOK_REGISTRY,
        special_tokens: dict[str, str] | None = None,
    ):
        """registry: the book's (default), a :class:`~helpers.book.registry.Registry` or a path to a
        registry file; ``None`` registers nothing in advance (scratch use outside the book only).
        special_tokens: the model's own names for BERT's ``[CLS]`` and ``[SEP]``
        (:func:`~helpers.model.token_names.special_token_names` of its tokenizer): each claim's text, its
        control and the registry's quantity line then name the model's tokens. None: BERT's names."""
        if not isinstance(chapter, str) or not chapter.strip():
            raise ValueError("chapter must be a non-empty name, e.g. '04_effective_attention'")
        self.chapter = chapter
        self.model = str(model)
        self.data = str(data)
        self.mode = claims_mode(mode)
        if registry is BOOK_REGISTRY:
            registry = load_registry()
        elif isinstance(registry, (str, Path)):
            registry = load_registry(registry)
        self.registry: Registry | None = registry
        names = names_if_not_bert(special_tokens)
        self.special_tokens: dict[str, str] | None = names
        self._claims: dict[str, Claim] = {}

    # --- registration -------------------------------------------------------------------------

    def check(self, id: str, claim: str, holds, *, measured: str = "", source: str = "") -> bool:
        """An identity or engineering check: passes or fails; a failure stops the chapter in strict mode.

        ``holds`` must be one boolean (Python, numpy or a one-element tensor).
        """
        passed = as_bool(holds, id)
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
        Options: ``published`` (text), ``source``, ``size=<published value>`` (its tolerance is the
        registry's), ``threshold`` (a bound on the estimate from the paper, read beside the control),
        ``premise=(holds, what)`` (a model property the claim presumes, checked before the result:
        where it fails the verdict is "premise absent"), ``fmt`` (number format), ``note``.
        The id must be registered for this chapter with the same side, comparison, threshold and size.
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
        entry = self._registered(id, kind)
        self._add(
            Claim(
                id, kind, claim, "not testable here", published=str(published),
                source=source or _default_source(kind), note=reason,
                status=entry.status if entry else "",
            )
        )  # fmt: skip
        return "not testable here"

    def _registered(self, id: str, kind: str):
        """The registry's entry for ``id`` (None without a registry); refuses an unregistered one."""
        if self.registry is None:
            return None
        entry = self.registry.entry(self.chapter, id)
        if entry.kind != kind:
            raise UnregisteredClaim(f"claim {id!r} is registered as a {entry.kind}, not a {kind}")
        return entry

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
        size: float | None = None,
        threshold: float | None = None,
        fmt: str = ".2f",
        note: str = "",
        premise: tuple[bool, str] | None = None,
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
        if isinstance(size, tuple):
            raise TypeError(f"claim {id!r}: pass size=<published figure>; its tolerance comes from the registry's rule")
        if threshold is not None:
            threshold = as_number(threshold, id, "threshold")
        if size is not None:
            size = as_number(size, id, "size")
        entry = self._registered(id, kind)
        min_sequences, status, tolerance = 10, "", None
        if entry is not None:
            departs = [
                f"{what}: registered {want!r}, given {got!r}"
                for what, want, got in (
                    ("side", entry.side, side),
                    ("comparison", entry.comparison, control.comparison),
                    ("threshold", entry.threshold, threshold),
                    ("a compared size", entry.size, size is not None),
                    ("a premise", bool(entry.premise), premise is not None),
                )
                if not (want == got or (what == "threshold" and want is not None and got is not None
                                        and math.isclose(want, got, rel_tol=1e-9)))
            ]  # fmt: skip
            if departs:
                raise UnregisteredClaim(
                    f"claim {id!r} of {self.chapter} departs from its registered definition ("
                    + "; ".join(departs)
                    + "): change the registry, keeping the old definition under deviations, or the call"
                )
            min_sequences, status = entry.min_sequences, entry.status
            if size is not None:
                tolerance = self.registry.tolerance(entry, size)
        elif size is not None:
            tolerance = max(0.10 * abs(size), 0.01)
        if premise is not None:
            premise_holds, premise_text = premise
            premise_holds = as_bool(premise_holds, id)
            if not premise_holds:
                note = f"premise absent: {premise_text}" + (f"; {note}" if note else "")
        else:
            premise_holds = True
        if control.comparison == "paired" and control.difference.sequences != estimate.sequences:
            raise ValueError(
                f"claim {id!r}: the paired control rests on {control.difference.sequences} sequences, the "
                f"estimate on {estimate.sequences}"
            )
        decision = decide(
            kind,
            estimate,
            side,
            difference=control.difference,
            control=control.value if control.comparison == "fixed" else None,
            control_interval=(control.low, control.high) if control.comparison == "independent" else None,
            threshold=threshold,
            size=size,
            tolerance=tolerance,
            min_sequences=min_sequences,
            premise=premise_holds,
        )
        verdict = decision.verdict
        # as many decimals as it takes for no interval end to print as the bound it is read against
        fmt = resolving_format(fmt, [(end, c.bound) for c in decision.comparisons for end in (c.low, c.high)])
        if decision.reversed and verdict in ("not reproduced", "does not hold"):
            note = "reversed: the interval lies on the other side of the control" + (f"; {note}" if note else "")
        if verdict == "too few sequences":
            note = (
                f"{estimate.sequences} sequences, fewer than the {min_sequences} a verdict needs; "
                f"the interval alone: {decision.reading}" + (f"; {note}" if note else "")
            )
        tolerance_text = ""
        if size is not None:
            tolerance_text = f"±{format(tolerance, fmt)} of {format(size, fmt)}"
            published = published or format(size, fmt)
        first = decision.comparisons[0]
        threshold_text = (
            f" (bound {format(threshold, fmt)}, from the paper)"
            if threshold is not None and (control.comparison == "paired" or threshold != first.bound)
            else ""
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
                source=source or (entry.source if entry and entry.source else _default_source(kind)),
                tolerance=tolerance_text,
                note=str(note),
                estimate=estimate.value,
                side=side,
                bound=first.bound,
                control_value=first.bound,
                sequences=estimate.sequences,
                comparison=control.comparison,
                difference=[control.difference.low, control.difference.high] if control.difference else [],
                status=status,
                reading=decision.reading,
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
        if self.special_tokens:  # the claim, its control and its note in the model's own token names
            texts = {
                key: own_token_names(getattr(claim, key), self.special_tokens) for key in ("claim", "control", "note")
            }
            claim = replace(claim, **texts)
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
        records = [asdict(c) for c in self._claims.values()]
        quantity = registered_quantity(self.registry, self.special_tokens)
        return claims_frame(records, self.chapter, quantity).set_index("id")

    def record(self) -> dict:
        record = {
            "chapter": self.chapter,
            "model": self.model,
            "data": self.data,
            "mode": self.mode,
            "claims": [asdict(c) for c in self._claims.values()],
        }
        if self.special_tokens:  # written only where the model's names are not BERT's
            record["special_tokens"] = dict(self.special_tokens)
        return record

    def save(self, folder: str | Path | None = None) -> Path:
        """Write the chapter's record as ``<folder>/<chapter>.json`` (:func:`~helpers.book.records.record_name`)
        and return its path."""
        folder = Path(folder) if folder is not None else records_dir()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / record_name(self.chapter, self.model)
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
        return Scoreboard.of_record(self.record(), self.registry)


def _default_source(kind: str) -> str:
    return "Brunner et al. 2020" if kind == "paper" else "this book"
