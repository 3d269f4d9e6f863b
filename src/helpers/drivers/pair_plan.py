"""Chapter 7's sample of sentence pairs: how many, which ones, and which get exact HTA, scaled by the model's cost."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..model.numbering import check_count


class PairPlan(NamedTuple):
    """Which pairs chapter 7 runs on, scaled to the model's cost (``plan_pairs``)."""

    pairs: list  # the sweep's pairs: the first longer than d_v and at most d_v + 4 tokens
    validation: list  # the pairs that exact HTA checks the estimate on
    local_pairs: int  # how many of ``pairs`` the layer-local comparison uses
    rule: str  # how ``validation`` was chosen, in words


def plan_pairs(
    tokenizer,
    pairs: Sequence,
    d_v: int,
    scale: float = 1.0,
    exact_scale: float = 1.0,
    validation: int = 2,
    minimum: int = 10,
) -> PairPlan:
    """Chapter 7's pairs for a model costing ``scale`` times the bundled one per token (L d^2), ``exact_scale`` (L d^3).

    The sweep takes the first pairs longer than d_v tokens (so attention has a null
    space) and at most d_v + 4 long: 30 at scale 1, fewer in proportion, at least ``minimum`` (the
    sample a verdict needs, ``helpers.book.verdicts.MIN_SEQUENCES``); the
    layer-local comparison 3 of them, at least 1. Exact HTA checks the estimate on the
    first ``validation`` of them at ``exact_scale`` <= 1, else on the longest pairs of the
    corpus that cost no more than the first does on the bundled model (or the shortest).
    """
    check_count(d_v, "d_v")
    check_count(validation, "validation", 2)
    check_count(minimum, "minimum", 2)
    length = {p.id: len(tokenizer(p.text_a, getattr(p, "text_b", None))["input_ids"]) for p in pairs}
    count = max(minimum, min(30, round(30 / scale)))
    chosen = [p for p in pairs if d_v < length[p.id] <= d_v + 4][:count]
    if len(chosen) < 2:
        raise ValueError(f"Fewer than 2 pairs of {d_v + 1} to {d_v + 4} tokens: no interval over pairs.")
    if exact_scale <= 1:
        checked, rule = chosen[:validation], f"the first {validation} pairs of the sweep"
    else:
        max_tokens = int(length[chosen[0].id] / exact_scale**0.5)
        affordable = sorted((p for p in pairs if length[p.id] <= max_tokens), key=lambda p: -length[p.id])
        if len(affordable) >= validation:
            checked = affordable[:validation]
            rule = (
                f"the {validation} longest pairs of the corpus whose exact HTA costs no more than the first "
                "pair's on the bundled model"
            )
        else:
            checked = sorted(pairs, key=lambda p: length[p.id])[:validation]
            rule = f"the {validation} shortest pairs of the corpus"
        rule += f" (exact HTA costs {exact_scale:.0f} times as much per token)"
    return PairPlan(chosen, checked, max(1, min(3, round(3 / scale))), rule)
