"""Context mixing over a corpus: every measure against HTA, the reference check and the cost table (chapter 7)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd
import torch

from ..methods import mixing
from ..methods.decomposition import NORM_MEASURES
from ..methods.linalg import row_spearman, spearman
from ..methods.linearised import linearise
from ..methods.mixing_families import check_mixing_family
from ..methods.rollout import (
    AGGREGATIONS,
    ROLLOUT_AGGREGATION,
    normalise_rows,
    positional_prior,
    rewrite_suffix,
    rollout_label,
)
from ..model.capture import capture
from ..model.checks import UnsupportedModelError, float32_model
from ..model.families import family_of
from ..model.numbering import check_integer, check_seed
from ..model.progress import progress_bar
from ..model.text import encode
from .pair_plan import PairPlan, plan_pairs  # noqa: F401 (callers read them here)
from .timing import best_time, timed

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

PRIOR = "positional prior"  # the sweep's name of ``rollout.positional_prior``


@dataclass
class MixingSweep:
    """Tables of ``context_mixing_sweep``.

    ``agreement``: one row per (example, measure, kind, layer, hidden token) with the
    Spearman correlation ``rho`` of the measure's row with the reference's row (kind
    "global": rollout / global measures against HTA; "local": one layer against
    layer-local HTA). ``loo``: one row per (example, measure): Spearman of the
    measure's last-layer score of each input token (averaged over hidden tokens) with
    the leave-one-out change of the sentence embedding, special tokens left out.
    """

    agreement: pd.DataFrame
    loo: pd.DataFrame
    hta_options: dict
    local_samples: int | None


def _rows(example: str, measure: str, kind: str, rho: torch.Tensor, **extra) -> list[dict]:
    L, n = rho.shape
    return [
        {
            "example": example,
            "measure": measure,
            "kind": kind,
            **extra,
            "layer": k + 1,
            "position": i,
            "rho": float(rho[k, i]),
        }
        for k in range(L)
        for i in range(n)
    ]


# the local measures whose rollout the sweep also computes in the other order than their authors'
# (raw attention only): GlobEnc's Table 1 rolls every norm measure out unnormalised, the toolkit
# normalises first, and chapter 7 compares both
BOTH_ORDERS = NORM_MEASURES


def other_order(measure: str) -> str:
    """The rollout order that is not ``measure``'s authors' (``ROLLOUT_AGGREGATION``)."""
    return next(a for a in AGGREGATIONS if a != ROLLOUT_AGGREGATION[measure])


def _global_measures(model, internals, lin, measures) -> dict[str, mixing.Mixing]:
    """Every measure of ``measures`` after rollout (in both orders for ``BOTH_ORDERS``), and grad_input,
    of one captured, linearised sequence."""
    results = {}
    for local in mixing.local_measures(model, internals, measures):
        orders = [None]
        if local.measure in BOTH_ORDERS and not local.effective:
            orders.append(other_order(local.measure))
        for order in orders:
            rolled = mixing.rolled_out(local, order)
            results[rolled.name] = rolled
    grad = mixing.Mixing(
        scores=normalise_rows(mixing.grad_input_scores(model, internals, lin)),
        measure="grad_input",
        rollout=False,
    )
    results[grad.name] = grad
    return results


def context_mixing_sweep(
    model,
    tokenizer,
    examples: Iterable,
    measures: Sequence[tuple[str, dict]] = MIXING_MEASURES,
    hta_options: dict | None = None,
    local_samples: int | None = 8,
    local_examples: int | None = None,
    seed: int = 0,
    progress: bool = True,
    prior: bool = False,
) -> MixingSweep:
    """Every measure on every example of a post-norm encoder, against HTA (global) and layer-local HTA (local).

    Each example is captured once and its local measures share one decomposition per layer.

    Args:
        examples: records with ``id``, ``text_a`` and optional ``text_b`` (``load_corpus``).
        measures: (measure, options) pairs of local measures; each runs once per layer
            (local) and with rollout (global), in its authors' order and, for the norm
            measures on raw attention (``BOTH_ORDERS``), in the other order too (names
            like "norm_residual rollout (normalise last)"). ``grad_input`` always runs as a
            global measure.
        hta_options: options of the HTA reference (``context_mixing(..., "hta", **options)``),
            default exact.
        local_samples: sample count of the layer-local HTA estimate (None: exact).
        local_examples: compare local measures with layer-local HTA on only the first this
            many examples (None: all); it costs about as much as HTA itself.
        seed: seed of both estimates.
        progress: show a progress bar over the examples.
        prior: add the baseline "positional prior" (``rollout.positional_prior``: weight
            0.5^|i - j|, rows normalised, the same at every layer) beside the global measures.
    """
    if family_of(model).causal:
        raise UnsupportedModelError(
            f"context_mixing_sweep compares the measures on an encoder's sentence pairs, with leave-one-out on its "
            f"mean-pooled embedding; model_type={model.config.model_type!r} is a causal decoder. Call "
            "context_mixing on each text instead."
        )
    for measure in ("globenc", "value_zeroing", "hta"):  # the sweep computes them all
        check_mixing_family(model, measure)
    model = float32_model(model)
    hta = mixing.check_hta_options(model, dict(hta_options or {}))
    if hta.estimator == "estimate" and "seed" not in (hta_options or {}):
        hta = hta._replace(seed=check_seed(seed))
    if local_samples is not None:
        check_integer(local_samples, "local_samples (None: exact)", 1, model.config.hidden_size)
    agreement, loo_rows = [], []
    special = set(tokenizer.all_special_ids)
    examples = list(examples)
    for number, example in enumerate(progress_bar(examples, "context mixing", progress)):
        encoding = encode(tokenizer, example.text_a, getattr(example, "text_b", None), model=model)
        internals = capture(model, encoding)  # one forward pass and one linearisation per example
        lin = linearise(model, internals.x, reference=internals.hidden_states)
        reference = mixing.hta_mixing(lin, encoding, hta)
        loo = mixing.leave_one_out(model, encoding, tokenizer.mask_token_id)
        keep = torch.tensor([int(t) not in special for t in encoding["input_ids"][0]])
        if local_examples is None or number < local_examples:
            local = mixing.local_hta_linearised(lin, samples=local_samples, seed=seed)
            for result in mixing.local_measures(model, internals, measures):
                agreement += _rows(example.id, result.name, "local", row_spearman(result.scores, local.scores))
        results = {"hta": reference, **_global_measures(model, internals, lin, measures)}
        if prior:
            L, n = reference.scores.shape[:2]
            results[PRIOR] = mixing.Mixing(positional_prior(n, L).float(), measure=PRIOR, rollout=False)
        for name, result in results.items():
            if name != "hta":
                agreement += _rows(example.id, name, "global", row_spearman(result.scores, reference.scores))
            received = result.scores[-1].mean(0)  # (n,) each input's share, averaged over hidden tokens
            loo_rows.append({"example": example.id, "measure": name, "rho": spearman(received[keep], loo[keep])})
    return MixingSweep(pd.DataFrame(agreement), pd.DataFrame(loo_rows), hta._asdict(), local_samples)


def agreement_table(sweep, kind: str = "global") -> pd.DataFrame:
    """Median Spearman with the reference, measure x layer (columns 1..L), for one kind.

    ``sweep``: a ``MixingSweep``, or any object whose ``agreement`` has the columns
    kind, measure, layer, rho.
    """
    rows = sweep.agreement[sweep.agreement["kind"] == kind]
    if rows.empty:
        raise ValueError(f"No rows of kind {kind!r}; kinds: {sorted(sweep.agreement['kind'].unique())}.")
    return _median_table(rows)


def example_agreement(sweep, kind: str = "global") -> pd.DataFrame:
    """Each example's median Spearman with the reference, per layer: rows (example, layer), columns measures.

    The unit a 95% interval resamples (``helpers.bootstrap``): one figure per example
    and layer, the median over its hidden tokens.
    """
    rows = sweep.agreement[sweep.agreement["kind"] == kind]
    if rows.empty:
        raise ValueError(f"No rows of kind {kind!r}; kinds: {sorted(sweep.agreement['kind'].unique())}.")
    table = rows.groupby(["example", "layer", "measure"])["rho"].median().unstack("measure")
    return table[sorted(table.columns, key=_measure_order)]


def effective_change(sweep, measures: Sequence[str] = NORM_MEASURES, rewrite: bool | str = True) -> pd.DataFrame:
    """Per example (rows) and measure (columns): how much effective attention in place of A changes the
    measure's rollout's median Spearman with HTA (effective less raw), averaged over layers.

    ``rewrite``: another same-output rewrite of A (``"null_doubled"``, ``"null_random"``: the sweep's
    ``measures`` must hold it, ``{"effective": rewrite}``) gives the same change for that rewrite.
    """
    by_example = example_agreement(sweep)
    swapped = {m: rollout_label(m, None, rewrite) for m in measures}
    missing = [m for m in measures if swapped[m] not in by_example or f"{m} rollout" not in by_example]
    if missing:
        raise ValueError(f"The sweep lacks {missing} with and without {rewrite_suffix(rewrite) or 'raw'} attention.")
    change = {m: by_example[swapped[m]] - by_example[f"{m} rollout"] for m in measures}
    return pd.DataFrame(change).groupby(level="example").mean()


# the controls of effective attention: every norm measure on the two other same-output rewrites of A
REWRITE_CONTROLS = tuple((m, {"effective": r}) for r in ("null_doubled", "null_random") for m in NORM_MEASURES)


def without_rewrites(sweep: MixingSweep) -> MixingSweep:
    """``sweep`` less the rows of the controls' rewrites of A (``REWRITE_CONTROLS``: "+2null", "+rnull"):
    the measures as their authors define them, and effective attention."""
    control = tuple(rewrite_suffix(r) for r in ("null_doubled", "null_random"))

    def kept(frame: pd.DataFrame) -> pd.DataFrame:
        if frame.empty:
            return frame
        first = frame["measure"].str.split(" ").str[0]
        return frame[~first.str.endswith(control)].reset_index(drop=True)

    return MixingSweep(kept(sweep.agreement), kept(sweep.loo), sweep.hta_options, sweep.local_samples)


def _median_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Median ``rho`` per measure (rows) and layer (columns), the measures in a fixed order.

    The order is that of ``mixing.MEASURES``, each measure before its effective-attention
    variant. An order by value would swap two measures whose medians nearly tie, and so
    change the table from one CPU to another.
    """
    table = rows.groupby(["measure", "layer"])["rho"].median().unstack("layer")
    return table.loc[sorted(table.index, key=_measure_order)]


def _measure_order(name: str) -> tuple[int, bool, bool, str]:
    """Sort key of a measure's name ("globenc+eff rollout"): its measure's place in ``mixing.MEASURES``,
    then raw attention before effective, the authors' rollout order before the other."""
    measure = name.split(" ")[0].partition("+")[0]
    place = mixing.MEASURES.index(measure) if measure in mixing.MEASURES else len(mixing.MEASURES)
    return place, "+" in name.split(" ")[0], "(" in name, name


@dataclass
class ReferenceCheck:
    """Tables of ``check_reference``: exact HTA against its estimate, on a few examples.

    ``agreement``: one row per (example, measure, reference, layer, hidden token): the
    Spearman ``rho`` of a global measure's row with exact HTA (``reference="exact"``)
    or with the estimate (``reference="estimate"``). ``estimate``: one row per
    (example, layer, hidden token): Spearman of the estimate's row with the exact row.
    ``cost``: seconds per example for each measure called on its own through
    ``context_mixing`` (local measures with rollout), exact HTA and the estimate
    included, measured in this run, with the sequence length ``n``: the fastest of three
    calls for every measure but exact HTA and its estimate (one call each).
    """

    agreement: pd.DataFrame
    estimate: pd.DataFrame
    cost: pd.DataFrame
    samples: int


def check_reference(
    model,
    tokenizer,
    examples: Iterable,
    samples: int,
    measures: Sequence[tuple[str, dict]] = MIXING_MEASURES,
    seed: int = 0,
    progress: bool = True,
) -> ReferenceCheck:
    """Exact HTA and its ``samples``-sample estimate on a few examples: how far the estimate is
    from exact, whether it would change any measure's agreement, and what everything costs.

    Exact HTA costs n d forward-mode tangents per example (minutes for a pair of 40
    tokens on two CPU cores): pass short examples. Every measure is timed as a reader
    would call it, ``context_mixing(model, encoding, measure, rollout=True, **options)``.
    """
    check_seed(seed)
    agreement, estimate_rows, cost = [], [], []
    for example in progress_bar(list(examples), "exact HTA", progress):
        encoding = encode(tokenizer, example.text_a, getattr(example, "text_b", None), model=model)
        n = int(encoding["input_ids"].shape[1])
        seconds, exact = timed(mixing.context_mixing, model, encoding, "hta")
        cost.append({"example": example.id, "n": n, "measure": "hta (exact)", "seconds": seconds})
        seconds, estimate = timed(
            mixing.context_mixing, model, encoding, "hta", estimator="estimate", samples=samples, seed=seed
        )
        cost.append(
            {"example": example.id, "n": n, "measure": f"hta (estimate, {samples} samples)", "seconds": seconds}
        )
        estimate_rows += _rows(example.id, "hta (estimate)", "exact", row_spearman(estimate.scores, exact.scores))
        calls = [(measure, {"rollout": True, **options}) for measure, options in measures]
        calls += [
            (measure, {"rollout": True, "aggregation": other_order(measure)})
            for measure, options in measures
            if measure in BOTH_ORDERS and not options.get("effective", False)
        ]
        calls.append(("grad_input", {}))
        for measure, options in calls:
            seconds, result = timed(mixing.context_mixing, model, encoding, measure, **options)
            # seconds per call of a measure that takes seconds are easily doubled by another process: the
            # fastest of three calls (exact HTA, minutes per call, is timed once)
            again = functools.partial(mixing.context_mixing, model, encoding, measure, **options)
            seconds = min(seconds, best_time(again, 2))
            cost.append({"example": example.id, "n": n, "measure": result.name, "seconds": seconds})
            for name, reference in (("exact", exact), ("estimate", estimate)):
                rho = row_spearman(result.scores, reference.scores)
                agreement += _rows(example.id, result.name, "global", rho, reference=name)
    return ReferenceCheck(pd.DataFrame(agreement), pd.DataFrame(estimate_rows), pd.DataFrame(cost), samples)


class ReferenceTables(NamedTuple):
    """The agreement tables of a ``ReferenceCheck`` (measure x layer, median Spearman)."""

    exact: pd.DataFrame  # against exact HTA
    estimate: pd.DataFrame  # against the estimate


def reference_tables(check: ReferenceCheck) -> ReferenceTables:
    """The agreement tables of ``check`` (as ``agreement_table``) against exact HTA and against the estimate."""
    tables = {reference: _median_table(rows) for reference, rows in check.agreement.groupby("reference")}
    return ReferenceTables(exact=tables["exact"], estimate=tables["estimate"])


def reference_shift(check: ReferenceCheck) -> pd.DataFrame:
    """How much the estimate moves each measure's agreement: measure x layer (columns 1..L).

    The median Spearman of a measure's rows with the estimate, minus the same with
    exact HTA, over the hidden tokens of ``check``'s examples.
    """
    tables = reference_tables(check)
    return tables.estimate - tables.exact.loc[tables.estimate.index]


def cost_table(check: ReferenceCheck) -> pd.DataFrame:
    """Median seconds per example per measure, and the ratio to exact HTA, from ``check_reference``."""
    table = check.cost.groupby("measure")["seconds"].median().to_frame("seconds per sentence")
    table["fraction of exact HTA"] = table["seconds per sentence"] / table.loc["hta (exact)", "seconds per sentence"]
    return table.sort_values("seconds per sentence")


def rollout_order_gap(model, tokenizer, examples: Iterable, measure: str = "globenc") -> pd.DataFrame:
    """How far the two rollout orders of one measure differ, per example (rows: example ids).

    Columns 1..L: the largest |difference| between the scores rolled out
    "normalise_last" and "normalise_first" after each layer (a share of a row's
    mass); "first-token row Spearman": the Spearman correlation of the two orders' last
    rows for the first token, the row GlobEnc's Table 1 scores.
    """
    rows, index = [], []
    for example in examples:
        encoding = encode(tokenizer, example.text_a, getattr(example, "text_b", None), model=model)
        last, first = (
            mixing.context_mixing(model, encoding, measure, rollout=True, aggregation=order)
            for order in ("normalise_last", "normalise_first")
        )
        gap = (last.scores - first.scores).abs().amax(dim=(1, 2))
        rows.append([*map(float, gap), spearman(last.scores[-1, 0], first.scores[-1, 0])])
        index.append(example.id)
    layers = list(range(1, len(rows[0]))) if rows else []
    table = pd.DataFrame(rows, index=index, columns=[*layers, "first-token row Spearman"])
    return table.rename_axis(index="example", columns="layer")


def orders_table(sweep: MixingSweep, measures: Sequence[str] = BOTH_ORDERS) -> pd.DataFrame:
    """Each measure's last-layer median agreement with HTA and median Spearman with leave-one-out,
    in both rollout orders: rows ``measures``, columns (target, "first" | "last")."""
    last = agreement_table(sweep, "global")
    last = last[last.columns[-1]]
    loo = sweep.loo.groupby("measure")["rho"].median()
    return pd.DataFrame(
        {
            (target, order.split("_")[1]): [float(scores[rollout_label(m, order)]) for m in measures]
            for target, scores in (("vs HTA (last layer)", last), ("vs leave-one-out", loo))
            for order in AGGREGATIONS
        },
        index=list(measures),
    )
