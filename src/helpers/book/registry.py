"""The claims registry: every paper claim and finding of the book, defined before it is measured.

The folder ``claims_registry/`` beside this module (shipped with the helpers, so a Colab
edition reads the same one) holds one YAML file per chapter and ``rules.yaml``; it lists
per chapter every claim and finding: its kind, its
source, the statistic in words, the quantity its figure is (a short noun phrase with its unit or
scale, which the scoreboard prints under the figure), the control and how it is compared (paired, fixed or
independent), the side, a threshold from the paper, whether a published size is compared
(its tolerance follows one rule, :meth:`Registry.tolerance`), the minimum sample, and
whether it is confirmatory (posed before its data was seen) or exploratory, and the model property
it presumes (its premise), if any. A chapter's
:class:`~helpers.book.claims.Claims` refuses a record the registry does not define, or one
that departs from its definition. Changing a definition keeps the old one under
``deviations`` with the date and the reason; the report lists them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pandas as pd

from .verdicts import COMPARISONS, MIN_SEQUENCES

__all__ = ["REGISTRY_PATH", "Entry", "Registry", "UnregisteredClaim", "load_registry"]

REGISTRY_PATH = Path(__file__).with_name("claims_registry")
STATUSES = ("confirmatory", "exploratory")
QUANTITY_CHARACTERS = 80  # a quantity is a short line under the figure; the statistic says the rest
_FIELDS = {
    "kind", "source", "statistic", "quantity", "control", "comparison", "side", "threshold", "size", "spread",
    "min_sequences", "status", "registered", "deviations", "premise", "carries",
}  # fmt: skip


class UnregisteredClaim(KeyError):
    """A chapter registered a record the registry does not define, or defines otherwise."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class Entry:
    """One registered claim or finding (the fields of the registry file)."""

    id: str
    chapter: str
    kind: str  # "paper" or "finding"
    statistic: str
    control: str
    comparison: str  # "paired", "fixed" or "independent"
    side: str  # "above" or "below"
    status: str  # "confirmatory" or "exploratory"
    registered: str
    # what the figure is, with its unit or scale ("Spearman correlation", "share of heads"): the scoreboard's line
    quantity: str = ""
    source: str = ""
    threshold: float | None = None
    size: bool = False
    spread: float | None = None  # a tolerance the paper gives (its spread), in place of the rule
    min_sequences: int = MIN_SEQUENCES
    deviations: tuple[dict, ...] = field(default_factory=tuple)
    # a model property the claim presumes, checked before its result (the chapter passes premise=(holds, what));
    # where it is absent the verdict is "premise absent", counted apart
    premise: str = ""
    # the encoder claim ("<chapter>/<id>") that this claim of another model's chapter tests again in that
    # model's terms (chapter 9's decoder claims): the report puts its verdict in that claim's row
    carries: str = ""


@dataclass(frozen=True)
class Registry:
    """The registry's rules and entries, by (chapter, id)."""

    entries: dict[tuple[str, str], Entry]
    size_share: float
    size_floor: float
    path: Path | None = None

    def entry(self, chapter: str, id: str) -> Entry:
        try:
            return self.entries[(chapter, id)]
        except KeyError:
            where = f"the registry ({self.path.name}/{chapter}.yaml)" if self.path else "the registry"
            raise UnregisteredClaim(
                f"claim {id!r} of chapter {chapter!r} is not in {where}: register it first "
                "(statistic, control, comparison, side, threshold, size, status) and then measure it"
            ) from None

    def quantity(self, chapter: str, id: str) -> str:
        """What the figure of claim ``id`` of ``chapter`` is (its registered ``quantity``); "" where the
        registry does not define the claim (a scratch chapter, a check)."""
        entry = self.entries.get((chapter, id))
        return entry.quantity if entry else ""

    def carried(self) -> dict[tuple[str, str], tuple[str, str]]:
        """``(chapter, id)`` of each claim that carries another over, mapped to the ``(chapter, id)`` it carries."""
        return {key: tuple(e.carries.split("/", 1)) for key, e in self.entries.items() if e.carries}

    def chapter(self, chapter: str) -> list[Entry]:
        return [e for (c, _), e in self.entries.items() if c == chapter]

    def tolerance(self, entry: Entry, published: float) -> float:
        """How far a published size may lie outside the interval: the paper's spread where it gives one,
        else ``size_share`` of the published figure's magnitude, at least ``size_floor``."""
        if entry.spread is not None:
            return float(entry.spread)
        return max(self.size_share * abs(float(published)), self.size_floor)

    def deviations(self) -> pd.DataFrame:
        """One row per changed definition: chapter, id, date, reason, what it was."""
        rows = [
            {"chapter": e.chapter, "id": e.id, "date": str(d.get("date", "")), "reason": d.get("reason", ""),
             "was": d.get("was", "")}
            for e in self.entries.values() for d in e.deviations
        ]  # fmt: skip
        return pd.DataFrame(rows, columns=["chapter", "id", "date", "reason", "was"])

    def frame(self) -> pd.DataFrame:
        """Every entry as a row."""
        return pd.DataFrame([{k: v for k, v in e.__dict__.items() if k != "deviations"} for e in self.entries.values()])


def _entry(chapter: str, id: str, spec: dict) -> Entry:
    where = f"registry: {chapter}/{id}"
    unknown = set(spec) - _FIELDS
    if unknown:
        raise ValueError(f"{where}: unknown fields {sorted(unknown)}")
    for key in ("kind", "statistic", "control", "comparison", "side", "status", "registered"):
        if not str(spec.get(key, "")).strip():
            raise ValueError(f"{where}: '{key}' is missing")
    quantity_problem(where, spec.get("quantity"))
    if spec["kind"] not in ("paper", "finding"):
        raise ValueError(f"{where}: kind must be paper or finding, got {spec['kind']!r}")
    if spec["comparison"] not in COMPARISONS:
        raise ValueError(f"{where}: comparison must be one of {COMPARISONS}, got {spec['comparison']!r}")
    if spec["side"] not in ("above", "below"):
        raise ValueError(f"{where}: side must be above or below, got {spec['side']!r}")
    if spec["status"] not in STATUSES:
        raise ValueError(f"{where}: status must be one of {STATUSES}, got {spec['status']!r}")
    if spec.get("spread") is not None and not spec.get("size"):
        raise ValueError(f"{where}: a spread without a compared size")
    deviations = tuple(spec.get("deviations") or ())
    for d in deviations:
        if not {"date", "reason", "was"} <= set(d):
            raise ValueError(f"{where}: each deviation needs a date, a reason and what it was")
    return Entry(
        id=id,
        chapter=chapter,
        kind=spec["kind"],
        statistic=str(spec["statistic"]).strip(),
        control=str(spec["control"]).strip(),
        comparison=spec["comparison"],
        side=spec["side"],
        status=spec["status"],
        registered=str(spec["registered"]),
        quantity=str(spec["quantity"]).strip(),
        source=str(spec.get("source", "")),
        threshold=None if spec.get("threshold") is None else float(spec["threshold"]),
        size=bool(spec.get("size", False)),
        spread=None if spec.get("spread") is None else float(spec["spread"]),
        min_sequences=int(spec.get("min_sequences", MIN_SEQUENCES)),
        deviations=deviations,
        premise=str(spec.get("premise", "") or "").strip(),
        carries=str(spec.get("carries", "") or "").strip(),
    )


def quantity_problem(where: str, quantity) -> None:
    """Raise unless ``quantity`` is a short noun phrase: every paper claim and finding names what its figure is."""
    text = str(quantity or "").strip()
    if not text:
        raise ValueError(
            f"{where}: 'quantity' is missing: name what the figure is, with its unit or scale "
            "(e.g. 'Spearman correlation', 'share of heads', 'identifiability rate (fraction of tokens)')"
        )
    if len(text) > QUANTITY_CHARACTERS or "\n" in text:
        raise ValueError(
            f"{where}: 'quantity' is one line of at most {QUANTITY_CHARACTERS} characters "
            f"(the statistic says the rest), got {len(text)}: {text!r}"
        )


def parse_registry(data: dict, path: Path | None = None) -> Registry:
    """A :class:`Registry` from the registry file's content (``rules`` and ``chapters``)."""
    rules = data.get("rules") or {}
    entries = {}
    for chapter, claims in (data.get("chapters") or {}).items():
        for id, spec in (claims or {}).items():
            entries[(chapter, id)] = _entry(chapter, id, spec or {})
    for (chapter, id), entry in entries.items():
        if entry.carries:
            _carries_problem(f"registry: {chapter}/{id}", entry, entries)
    return Registry(entries, float(rules.get("size_share", 0.10)), float(rules.get("size_floor", 0.01)), path)


def _carries_problem(where: str, entry: Entry, entries: dict[tuple[str, str], Entry]) -> None:
    """Raise unless ``entry.carries`` names another chapter's paper claim and ``entry`` is a paper claim too."""
    target = tuple(entry.carries.split("/", 1))
    if len(target) != 2 or not all(target):
        raise ValueError(f"{where}: 'carries' is '<chapter>/<id>', got {entry.carries!r}")
    if entry.kind != "paper":
        raise ValueError(f"{where}: only a paper claim carries another over, this one is a {entry.kind}")
    if target[0] == entry.chapter:
        raise ValueError(f"{where}: 'carries' names a claim of another chapter, not of {entry.chapter}")
    carried = entries.get(target)
    if carried is None:
        raise ValueError(f"{where}: 'carries' names {entry.carries!r}, which the registry does not define")
    if carried.kind != "paper":
        raise ValueError(f"{where}: 'carries' names {entry.carries!r}, a {carried.kind}, not a paper claim")


@lru_cache(maxsize=4)
def _load(path: str, stamp: tuple) -> Registry:
    import yaml

    path = Path(path)
    if path.is_file():
        return parse_registry(yaml.safe_load(path.read_text()) or {}, path)
    data: dict = {"rules": {}, "chapters": {}}
    for file in sorted(path.glob("*.yaml")):
        content = yaml.safe_load(file.read_text()) or {}
        data["rules"].update(content.pop("rules", None) or {})
        for chapter, claims in content.items():
            if chapter in data["chapters"]:
                raise ValueError(f"registry: chapter {chapter!r} is defined twice (in {file.name})")
            data["chapters"][chapter] = claims
    return parse_registry(data, path)


def load_registry(path: str | Path | None = None) -> Registry:
    """The registry at ``path``: a folder of YAML files or one file (default: the book's, :data:`REGISTRY_PATH`)."""
    path = Path(path) if path is not None else REGISTRY_PATH
    if not path.exists():
        raise FileNotFoundError(f"no claims registry at {path}")
    files = [path] if path.is_file() else sorted(path.glob("*.yaml"))
    return _load(str(path), tuple((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in files))
