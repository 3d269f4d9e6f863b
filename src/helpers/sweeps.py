"""Drivers that run the model over a corpus and collect a chapter's tables."""
from __future__ import annotations

# --------------------------------------------------------------------------- chapter 7: context mixing
import time
from dataclasses import dataclass
from typing import Iterable, Sequence

import pandas as pd
import torch

from . import mixing
from .text import encode

MIXING_MEASURES = (
    ("attention", {}),
    ("attention_norm", {}),
    ("attention_norm", {"effective": True}),
    ("norm_residual", {}),
    ("norm_residual", {"effective": True}),
    ("norm_residual_ln", {}),
    ("norm_residual_ln", {"effective": True}),
    ("globenc", {}),
    ("globenc", {"effective": True}),
    ("alti", {}),
    ("alti", {"effective": True}),
    ("value_zeroing", {}),
)


@dataclass
class MixingSweep:
    """Tables of ``context_mixing_sweep``.

    ``agreement``: one row per (example, measure, kind, layer, hidden token) with the
    Spearman correlation ``rho`` of the measure's row with the reference's row (kind
    "global": rollout / global measures against HTA; "local": one layer against
    layer-local HTA). ``loo``: one row per (example, measure): Spearman of the
    measure's last-layer score of each input token (averaged over hidden tokens) with
    the leave-one-out change of the sentence embedding, special tokens left out.
    ``cost``: seconds per example and measure, measured in this run.
    """

    agreement: pd.DataFrame
    loo: pd.DataFrame
    cost: pd.DataFrame
    hta_options: dict
    local_samples: int | None


def _timed(function, *args, **kwargs):
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return time.perf_counter() - start, result


def _rows(example: str, measure: str, kind: str, rho: torch.Tensor) -> list[dict]:
    L, n = rho.shape
    return [
        {"example": example, "measure": measure, "kind": kind, "layer": l + 1, "token": i, "rho": float(rho[l, i])}
        for l in range(L)
        for i in range(n)
    ]


def context_mixing_sweep(
    model,
    tokenizer,
    examples: Iterable,
    measures: Sequence[tuple[str, dict]] = MIXING_MEASURES,
    hta_options: dict | None = None,
    local_samples: int | None = 8,
    local_examples: int | None = None,
    seed: int = 0,
) -> MixingSweep:
    """Every measure on every example, against HTA (global) and layer-local HTA (local).

    Args:
        examples: records with ``id``, ``text_a`` and optional ``text_b`` (``load_corpus``).
        measures: (method, options) pairs of local measures; each runs once per layer
            (local) and with rollout (global). ``grad_input`` always runs as a global measure.
        hta_options: options of the HTA reference (``context_mixing(..., "hta", **options)``),
            default exact.
        local_samples: sample count of the layer-local HTA estimate (None: exact).
        local_examples: compare local measures with layer-local HTA on only the first this
            many examples (None: all); it costs about as much as HTA itself.
        seed: seed of both estimates.
    """
    hta_options = {"estimator": "exact", **(hta_options or {})}
    if hta_options["estimator"] == "estimate":
        hta_options.setdefault("seed", seed)
    agreement, loo_rows, cost = [], [], []
    special = set(tokenizer.all_special_ids)
    for number, example in enumerate(examples):
        with_local = local_examples is None or number < local_examples
        encoding = encode(tokenizer, example.text_a, getattr(example, "text_b", None), model=model)
        seconds, hta = _timed(mixing.context_mixing, model, encoding, "hta", **hta_options)
        cost.append({"example": example.id, "measure": "hta", "seconds": seconds})
        if with_local:
            seconds, local = _timed(mixing.local_hta, model, encoding, samples=local_samples, seed=seed)
            cost.append({"example": example.id, "measure": "hta_local", "seconds": seconds})
        seconds, loo = _timed(mixing.leave_one_out, model, encoding, tokenizer.mask_token_id)
        cost.append({"example": example.id, "measure": "leave_one_out", "seconds": seconds})
        keep = torch.tensor([int(t) not in special for t in encoding["input_ids"][0]])
        results = {"hta": hta}
        for method, options in measures:
            # the local scores once; rollout composes them (its own cost is a few small products)
            seconds, result = _timed(mixing.context_mixing, model, encoding, method, **options)
            cost.append({"example": example.id, "measure": result.name, "seconds": seconds})
            if with_local:
                agreement += _rows(example.id, result.name, "local", mixing.row_spearman(result.scores, local.scores))
            rolled = mixing.rolled_out(result)
            agreement += _rows(example.id, rolled.name, "global", mixing.row_spearman(rolled.scores, hta.scores))
            results[rolled.name] = rolled
        seconds, result = _timed(mixing.context_mixing, model, encoding, "grad_input")
        cost.append({"example": example.id, "measure": result.name, "seconds": seconds})
        agreement += _rows(example.id, result.name, "global", mixing.row_spearman(result.scores, hta.scores))
        results[result.name] = result
        for name, result in results.items():
            received = result.scores[-1].mean(0)  # (n,) each input's share, averaged over hidden tokens
            loo_rows.append({"example": example.id, "measure": name,
                             "rho": mixing.spearman(received[keep], loo[keep])})
    return MixingSweep(pd.DataFrame(agreement), pd.DataFrame(loo_rows), pd.DataFrame(cost), hta_options, local_samples)


def agreement_table(sweep: MixingSweep, kind: str = "global") -> pd.DataFrame:
    """Median Spearman with the reference, measure x layer (columns 1..L), for one kind."""
    rows = sweep.agreement[sweep.agreement["kind"] == kind]
    if rows.empty:
        raise ValueError(f"No rows of kind {kind!r}; kinds: {sorted(sweep.agreement['kind'].unique())}.")
    table = rows.groupby(["measure", "layer"])["rho"].median().unstack("layer")
    return table.sort_values(table.columns[-1], ascending=False)


def cost_table(sweep: MixingSweep) -> pd.DataFrame:
    """Median seconds per example per measure, and the ratio to exact-or-estimated HTA."""
    table = sweep.cost.groupby("measure")["seconds"].median().to_frame("seconds per sentence")
    table["fraction of HTA"] = table["seconds per sentence"] / table.loc["hta", "seconds per sentence"]
    return table.sort_values("seconds per sentence")
