"""Drivers that run the model over a corpus and tabulate a method's results.

Every table here follows the book's numbering (``helpers.numbering``):
``layer`` 1..L, ``head`` 1..h, ``hidden_state`` 0..L; ``n`` is the sequence
length. The maths lives in the method modules; this module only loops.
"""

from __future__ import annotations

import numbers
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pandas as pd
import torch
from tqdm.auto import tqdm
from transformers import BatchEncoding, PreTrainedModel

from . import mixing
from .attribution import Attribution, hidden_token_attribution
from .causal import attention_on_position, causal_effective_attention
from .effective import effective_attention_and_rank, effective_attention_of
from .hidden_tokens import collect_hidden_tokens
from .internals import capture
from .linalg import DEFAULT_RTOL, numerical_rank, pearson
from .nullspace import check_matrices, ranks_of
from .numbering import check_seed, head_number, layer_number
from .probes import identifiability_rate
from .text import check_single_sequence, encode, prefix_encoding, text_pair_of, tokens_of
from .tokens import attention_to, token_classes

__all__ = ["rank_sweep", "effective_attention_sweep", "attribute_examples"]


def rank_sweep(
    model: PreTrainedModel,
    encodings: Sequence[BatchEncoding],
    lengths: Iterable[int],
    matrices: Sequence[str] = ("V",),
    rtol: float = DEFAULT_RTOL,
    per_text: int | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Numerical ranks of every head's V / T (and [., 1]) on prefixes of each encoding.

    For every encoding and every length it is long enough for, the model runs
    on ``prefix_encoding(encoding, length)``. With ``per_text=k`` each text
    contributes only k of the lengths it is long enough for, spread evenly
    and rotated from text to text, so a large corpus covers every length at
    a fraction of the cost. rank(V) is cheap (n x d_v);
    rank(T) (n x d) is the paper's quantity and equals rank(V) whenever H
    has full row rank.

    Returns one row per (text, n, layer, head) with columns ``text, n,
    layer, head, rank_<name>`` for each requested matrix, and
    ``null_dim_<name> = n - rank_<name>``. ``n`` is the prefix length, layers
    count 1..L and heads 1..h.
    """
    lengths = list(lengths)
    if any(isinstance(length, bool) or not isinstance(length, numbers.Integral) for length in lengths):
        raise TypeError(f"lengths must be integers (token counts); got {lengths!r}.")
    lengths = sorted({int(length) for length in lengths})
    if not lengths or lengths[0] < 2:
        raise ValueError(f"lengths must be integers >= 2; got {lengths}.")
    if not encodings:
        raise ValueError("encodings is empty: give at least one encoded text.")
    check_matrices(matrices)
    if per_text is not None and (
        isinstance(per_text, bool) or not isinstance(per_text, numbers.Integral) or per_text < 1
    ):
        raise ValueError(f"per_text must be a positive int or None; got {per_text!r}.")
    jobs = []
    for t, enc in enumerate(encodings):
        usable = [length for length in lengths if length <= check_single_sequence(enc)]
        if per_text is not None and len(usable) > per_text:
            stride = len(usable) / per_text
            usable = [usable[(int(k * stride) + t) % len(usable)] for k in range(per_text)]
        jobs += [(t, length) for length in sorted(set(usable))]
    if not jobs:
        raise ValueError(f"No encoding is as long as the shortest requested length ({lengths[0]}).")
    rows = []
    for text, length in tqdm(jobs, disable=not progress, desc="rank sweep"):
        internals = capture(model, prefix_encoding(encodings[text], length))
        ranks = ranks_of(internals, matrices, rtol)
        L, h = internals.layers, internals.heads
        for layer in range(L):
            for head in range(h):
                row = {"text": text, "n": length, "layer": layer_number(layer), "head": head_number(head)}
                for name, value in ranks.items():
                    row[f"rank_{name}"] = int(value[layer, head])
                    row[f"null_dim_{name}"] = length - int(value[layer, head])
                rows.append(row)
    return pd.DataFrame(rows)


def _records(examples) -> list:
    """The records of a corpus as a list: Examples, strings or (text, text_pair) tuples; never one bare text."""
    if isinstance(examples, (str, tuple)) or hasattr(examples, "text_a"):
        raise TypeError("examples must be a list of records (Examples, strings or pairs); wrap a single one in a list.")
    records = list(examples)
    if not records:
        raise ValueError("No examples given: pass at least one record.")
    for index, record in enumerate(records):
        text_pair_of(record, index)  # a clear error for a bad record before any model runs
    return records


def effective_attention_sweep(
    model,
    tokenizer,
    examples: Sequence,
    rtol: float = DEFAULT_RTOL,
    progress: bool = True,
):
    """Effective attention over a corpus: one row per (example, layer, head).

    Args:
        model, tokenizer: from ``helpers.load_model``.
        examples: ``helpers.Example`` records (text_a, optional text_b), strings or
            ``(text, text_pair)`` tuples.
        rtol: rank tolerance, relative to the largest singular value.
        progress: show a tqdm bar.

    Returns:
        A pandas DataFrame with columns ``id, source, n, layer, head, rank,
        null_dim, correlation`` (Pearson, raw vs effective) and, for each token
        class ``c`` of ``helpers.tokens.token_classes``, ``raw_c`` and ``effective_c``
        (``helpers.tokens.attention_to``). Layers and heads count from 1.
    """
    records = _records(examples)
    rows = []
    full_row_rank = None  # the weights, hence the ranks of H, are the same for every example
    for index, example in enumerate(tqdm(records, disable=not progress, desc="effective attention")):
        text_a, text_b = text_pair_of(example, index)
        encoding = encode(tokenizer, text_a, text_b, model=model)
        internals = capture(model, encoding)
        A = internals.A
        if full_row_rank is None:
            full_row_rank = numerical_rank(internals.H.mT, rtol) == internals.H.shape[-2]
        split, rank = effective_attention_and_rank(A, None, internals.V, internals.H, rtol, full_row_rank)
        columns = {
            "rank": rank,
            "null_dim": internals.n - rank,
            "correlation": pearson(A, split.effective),
        }
        masks = token_classes(tokens_of(tokenizer, encoding), tokenizer.cls_token, tokenizer.sep_token)
        for name, mask in masks.items():
            columns[f"raw_{name}"] = attention_to(A, mask)
            columns[f"effective_{name}"] = attention_to(split.effective, mask)
        L, h = A.shape[:2]
        frame = {
            "layer": [layer_number(i) for i in range(L) for _ in range(h)],
            "head": [head_number(k) for _ in range(L) for k in range(h)],
        }
        frame.update({key: value.reshape(-1).double().cpu().numpy() for key, value in columns.items()})
        part = pd.DataFrame(frame)
        part.insert(0, "n", internals.n)
        part.insert(0, "source", getattr(example, "source", "given text"))
        part.insert(0, "id", getattr(example, "id", str(index)))
        rows.append(part)
    table = pd.concat(rows, ignore_index=True)
    table["rank"] = table["rank"].astype(int)
    table["null_dim"] = table["null_dim"].astype(int)
    return table


def attribute_examples(
    model: PreTrainedModel,
    tokenizer,
    examples: Iterable,
    method: str = "estimate",
    samples: int = 32,
    seed: int = 0,
    progress: bool = True,
) -> list[Attribution]:
    """``hidden_token_attribution`` for each example (``text_a``, optional ``text_b``).

    Example k uses seed ``seed + k``, so estimates are reproducible and independent.
    """
    examples = _records(examples)
    seed = check_seed(seed)
    iterator = examples
    if progress:
        iterator = tqdm(examples, desc=f"attribution ({method})", unit="example")
    results = []
    for index, example in enumerate(iterator):
        encoding = encode(tokenizer, *text_pair_of(example, index), model=model)
        results.append(
            hidden_token_attribution(model, encoding, method=method, samples=samples, seed=seed + index, progress=False)
        )
    return results


# ---- chapter 8 (fine-tuning): before/after tables

__all__ += ["sink_attention_table", "naive_identifiability_table"]


def sink_attention_table(model: PreTrainedModel, tokenizer, examples: Sequence) -> pd.DataFrame:
    """Raw and effective attention to each sequence's sink token, per layer, averaged over examples.

    The sink of a sequence is the token that receives the most raw attention
    (summed over layers, heads and queries), chosen by data. For each layer:
    ``raw`` = mean over heads and queries of A[i, sink] (a share of 1) and
    ``effective`` = the same of A_eff. Returns ``layer, raw, effective, sink,
    sink_share``: the most common sink token and the share of examples whose sink it is.
    """
    examples = _records(examples)
    raw, effective, sinks = [], [], []
    for index, example in enumerate(examples):
        encoding = encode(tokenizer, *text_pair_of(example, index), model=model)
        internals = capture(model, encoding)
        sink = int(internals.A.sum(dim=(0, 1, 2)).argmax())
        mask = torch.zeros(internals.n, dtype=torch.bool)
        mask[sink] = True
        split = effective_attention_of(internals)
        raw.append(attention_to(internals.A, mask).mean(dim=-1))  # (L,)
        effective.append(attention_to(split.effective, mask).mean(dim=-1))
        sinks.append(tokenizer.convert_ids_to_tokens(int(internals.input_ids[sink])))
    common = max(sorted(set(sinks)), key=sinks.count)
    raw_mean, effective_mean = torch.stack(raw).mean(0), torch.stack(effective).mean(0)
    return pd.DataFrame(
        {
            "layer": [layer_number(i) for i in range(len(raw_mean))],
            "raw": raw_mean.double().numpy(),
            "effective": effective_mean.double().numpy(),
            "sink": common,
            "sink_share": sinks.count(common) / len(sinks),
        }
    )


def naive_identifiability_table(
    model: PreTrainedModel, tokenizer, examples: Sequence, distance: str = "cosine"
) -> pd.DataFrame:
    """Naive (identity map) token identifiability per hidden state 0..L over ``examples``.

    Token i of a sequence is identified at hidden state l when its hidden vector is
    nearest (``distance``) to its own input embedding x_i among the inputs of its sequence.
    Returns ``hidden_state, rate``.
    """
    examples = _records(examples)
    tokens = collect_hidden_tokens(model, tokenizer, examples, progress=False)
    rates = [
        identifiability_rate(tokens.hidden[i], tokens.x, tokens.sentence, distance) for i in range(tokens.layers + 1)
    ]
    return pd.DataFrame({"hidden_state": range(tokens.layers + 1), "rate": rates})


# --------------------------------------------------------------------------- chapter 7: context mixing


__all__ += [
    "MIXING_MEASURES",
    "MixingSweep",
    "context_mixing_sweep",
    "agreement_table",
    "ReferenceCheck",
    "check_reference",
    "reference_shift",
    "reference_tables",
    "cost_table",
]

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
    """

    agreement: pd.DataFrame
    loo: pd.DataFrame
    hta_options: dict
    local_samples: int | None


def _timed(function, *args, **kwargs):
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return time.perf_counter() - start, result


def _rows(example: str, measure: str, kind: str, rho: torch.Tensor, **extra) -> list[dict]:
    L, n = rho.shape
    return [
        {
            "example": example,
            "measure": measure,
            "kind": kind,
            **extra,
            "layer": k + 1,
            "token": i,
            "rho": float(rho[k, i]),
        }
        for k in range(L)
        for i in range(n)
    ]


def _global_measures(model, internals, measures) -> dict[str, mixing.Mixing]:
    """Every measure of ``measures`` after rollout, and grad_input, of one captured sequence."""
    results = {}
    for local in mixing.local_measures(model, internals, measures):
        rolled = mixing.rolled_out(local)
        results[rolled.name] = rolled
    grad = mixing.Mixing(
        scores=mixing.normalise_rows(mixing.grad_input_scores(model, internals)), method="grad_input", rollout=False
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
) -> MixingSweep:
    """Every measure on every example, against HTA (global) and layer-local HTA (local).

    Each example is captured once and its local measures share one decomposition per
    layer (``mixing.local_measures``); ``check_reference`` times each measure on its own.

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
        progress: show a progress bar over the examples.
    """
    hta_options = {"estimator": "exact", **(hta_options or {})}
    if hta_options["estimator"] == "estimate":
        hta_options.setdefault("seed", seed)
    agreement, loo_rows = [], []
    special = set(tokenizer.all_special_ids)
    examples = list(examples)
    for number, example in enumerate(tqdm(examples, desc="context mixing", disable=not progress)):
        encoding = encode(tokenizer, example.text_a, getattr(example, "text_b", None), model=model)
        internals = capture(model, encoding)
        hta = mixing.context_mixing(model, encoding, "hta", **hta_options)
        loo = mixing.leave_one_out(model, encoding, tokenizer.mask_token_id)
        keep = torch.tensor([int(t) not in special for t in encoding["input_ids"][0]])
        if local_examples is None or number < local_examples:
            local = mixing.local_hta(model, encoding, samples=local_samples, seed=seed)
            for result in mixing.local_measures(model, internals, measures):
                agreement += _rows(example.id, result.name, "local", mixing.row_spearman(result.scores, local.scores))
        results = {"hta": hta, **_global_measures(model, internals, measures)}
        for name, result in results.items():
            if name != "hta":
                agreement += _rows(example.id, name, "global", mixing.row_spearman(result.scores, hta.scores))
            received = result.scores[-1].mean(0)  # (n,) each input's share, averaged over hidden tokens
            loo_rows.append({"example": example.id, "measure": name, "rho": mixing.spearman(received[keep], loo[keep])})
    return MixingSweep(pd.DataFrame(agreement), pd.DataFrame(loo_rows), hta_options, local_samples)


def agreement_table(sweep, kind: str = "global") -> pd.DataFrame:
    """Median Spearman with the reference, measure x layer (columns 1..L), for one kind.

    ``sweep``: a ``MixingSweep``, or any object whose ``agreement`` has the columns
    kind, measure, layer, rho.
    """
    rows = sweep.agreement[sweep.agreement["kind"] == kind]
    if rows.empty:
        raise ValueError(f"No rows of kind {kind!r}; kinds: {sorted(sweep.agreement['kind'].unique())}.")
    return _median_table(rows)


def _median_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Median ``rho`` per measure (rows) and layer (columns), the measures in a fixed order.

    The order is that of ``mixing.METHODS``, each measure before its effective-attention
    variant. An order by value would swap two measures whose medians nearly tie, and so
    change the table from one CPU to another.
    """
    table = rows.groupby(["measure", "layer"])["rho"].median().unstack("layer")
    return table.loc[sorted(table.index, key=_measure_order)]


def _measure_order(measure: str) -> tuple[int, bool, str]:
    """Sort key of a measure's name ("globenc+eff rollout"): its method's place in ``mixing.METHODS``."""
    method, _, _ = measure.split(" ")[0].partition("+")
    place = mixing.METHODS.index(method) if method in mixing.METHODS else len(mixing.METHODS)
    return place, "+eff" in measure, measure


@dataclass
class ReferenceCheck:
    """Tables of ``check_reference``: exact HTA against its estimate, on a few examples.

    ``agreement``: one row per (example, measure, reference, layer, hidden token): the
    Spearman ``rho`` of a global measure's row with exact HTA (``reference="exact"``)
    or with the estimate (``reference="estimate"``). ``estimate``: one row per
    (example, layer, hidden token): Spearman of the estimate's row with the exact row.
    ``cost``: seconds per example for each measure called on its own through
    ``context_mixing`` (local measures with rollout), exact HTA and the estimate
    included, measured in this run, with the sequence length ``n``.
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
    would call it, ``context_mixing(model, encoding, method, rollout=True, **options)``.
    """
    check_seed(seed)
    agreement, estimate_rows, cost = [], [], []
    for example in tqdm(list(examples), desc="exact HTA", disable=not progress):
        encoding = encode(tokenizer, example.text_a, getattr(example, "text_b", None), model=model)
        n = int(encoding["input_ids"].shape[1])
        seconds, exact = _timed(mixing.context_mixing, model, encoding, "hta")
        cost.append({"example": example.id, "n": n, "measure": "hta (exact)", "seconds": seconds})
        seconds, estimate = _timed(
            mixing.context_mixing, model, encoding, "hta", estimator="estimate", samples=samples, seed=seed
        )
        cost.append(
            {"example": example.id, "n": n, "measure": f"hta (estimate, {samples} samples)", "seconds": seconds}
        )
        estimate_rows += _rows(
            example.id, "hta (estimate)", "exact", mixing.row_spearman(estimate.scores, exact.scores)
        )
        calls = [(method, {"rollout": True, **options}) for method, options in measures] + [("grad_input", {})]
        for method, options in calls:
            seconds, result = _timed(mixing.context_mixing, model, encoding, method, **options)
            cost.append({"example": example.id, "n": n, "measure": result.name, "seconds": seconds})
            for name, reference in (("exact", exact), ("estimate", estimate)):
                rho = mixing.row_spearman(result.scores, reference.scores)
                agreement += _rows(example.id, result.name, "global", rho, reference=name)
    return ReferenceCheck(pd.DataFrame(agreement), pd.DataFrame(estimate_rows), pd.DataFrame(cost), samples)


def reference_tables(check: ReferenceCheck) -> dict[str, pd.DataFrame]:
    """The agreement tables of ``check`` (as ``agreement_table``: measure x layer, median Spearman)
    against exact HTA and against the estimate: ``{"exact": table, "estimate": table}``."""
    return {reference: _median_table(rows) for reference, rows in check.agreement.groupby("reference")}


def reference_shift(check: ReferenceCheck) -> pd.DataFrame:
    """How much the estimate moves each measure's agreement: measure x layer (columns 1..L).

    The median Spearman of a measure's rows with the estimate, minus the same with
    exact HTA, over the hidden tokens of ``check``'s examples.
    """
    tables = reference_tables(check)
    return tables["estimate"] - tables["exact"].loc[tables["estimate"].index]


def cost_table(check: ReferenceCheck) -> pd.DataFrame:
    """Median seconds per example per measure, and the ratio to exact HTA, from ``check_reference``."""
    table = check.cost.groupby("measure")["seconds"].median().to_frame("seconds per sentence")
    table["fraction of exact HTA"] = table["seconds per sentence"] / table.loc["hta (exact)", "seconds per sentence"]
    return table.sort_values("seconds per sentence")


# ---- Causal heads: how much of the attention on one position (the sink) is effective ----


__all__ += ["sink_sweep", "summarise_sink"]


def sink_sweep(
    model: PreTrainedModel,
    tokenizer,
    texts: Sequence[str],
    position: int = 0,
    from_row: int | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Raw and effective attention on ``position`` for every text, layer and head of a causal model.

    Rows from ``from_row`` on (default d_v, the first row whose prefix can have a null space)
    are summed. One table row per text, layer (1..L) and head (1..h): ``text`` (index into
    ``texts``), ``layer``, ``head``, ``kv_head`` (1..h_kv), ``n``, ``rows``, ``raw`` and
    ``effective`` (sums over those rows), and ``value_norm_ratio`` = ||T[position]|| over the
    mean ||T[j]|| of the other positions.
    """
    if isinstance(texts, str) or len(texts) == 0:
        raise ValueError("texts must be a non-empty sequence of strings.")
    frames = []
    iterator = texts
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(texts, desc="texts")
    for index, text in enumerate(iterator):
        internals = capture(model, encode(tokenizer, text, model=model))
        if not internals.causal:
            raise ValueError(f"sink_sweep takes causal models (decoders); {internals.family} is bidirectional.")
        d_v = internals.V.shape[-1]
        first = d_v if from_row is None else from_row
        if internals.n <= max(first, position + 1):
            raise ValueError(f"Text {index} has {internals.n} tokens; it needs more than {max(first, position + 1)}.")
        split = causal_effective_attention(internals.A, V=internals.V, H=internals.H, groups=internals.groups)
        raw, effective = attention_on_position(internals.A, split.effective, position, first)
        norms = internals.T.norm(dim=-1)  # (L, h, n)
        others = torch.cat([norms[..., :position], norms[..., position + 1 :]], dim=-1).mean(dim=-1)
        ratio = norms[..., position] / others
        L, h = raw.shape
        frames.append(
            pd.DataFrame(
                {
                    "text": index,
                    "layer": [layer_number(k) for k in range(L) for _ in range(h)],
                    "head": [head_number(j) for _ in range(L) for j in range(h)],
                    "kv_head": [j // internals.groups + 1 for _ in range(L) for j in range(h)],
                    "n": internals.n,
                    "rows": internals.n - first,
                    "raw": raw.flatten().double().numpy(),
                    "effective": effective.flatten().double().numpy(),
                    "value_norm_ratio": ratio.flatten().double().numpy(),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def summarise_sink(table: pd.DataFrame, by: Sequence[str] = ("layer", "head")) -> pd.DataFrame:
    """Pool a ``sink_sweep`` table over texts: mean raw and effective attention per row, and the effective share.

    Returns one row per group of ``by`` with ``raw`` and ``effective`` (attention on the position per
    row, averaged over all rows of all texts) and ``effective_share`` = effective / raw.
    """
    missing = {"raw", "effective", "rows", *by} - set(table.columns)
    if missing:
        raise ValueError(f"table lacks the columns {sorted(missing)}; pass the output of sink_sweep.")
    grouped = table.groupby(list(by))
    out = pd.DataFrame(
        {
            "raw": grouped["raw"].sum() / grouped["rows"].sum(),
            "effective": grouped["effective"].sum() / grouped["rows"].sum(),
        }
    )
    out["effective_share"] = out["effective"] / out["raw"]
    return out.reset_index()
