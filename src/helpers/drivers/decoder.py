"""Causal heads over a corpus: how much of the attention on one position (the sink) is effective (chapter 9)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import pandas as pd
import torch
from transformers import PreTrainedModel

from ..methods.hidden_tokens import HiddenTokens
from ..methods.logit_lens import lens_hits
from ..methods.probes import NeighbourRows
from ..methods.sink import (
    drain_split,
    effective_and_leverage,
    largest_activations,
    position_terms,
    sink_scores,
    value_norm_ratio,
)
from ..model.capture import capture
from ..model.numbering import head_number, hidden_state_index, layer_number
from ..model.progress import progress_bar
from ..model.text import encode, first_tokens


def _head_columns(L: int, h: int) -> dict[str, list[int]]:
    """The ``layer`` (1..L) and ``head`` (1..h) columns of a table with one row per layer and head."""
    return {
        "layer": [layer_number(k) for k in range(L) for _ in range(h)],
        "head": [head_number(j) for _ in range(L) for j in range(h)],
    }


def sink_sweep(
    model: PreTrainedModel,
    tokenizer,
    texts: Sequence[str],
    position: int = 0,
    from_row: int | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Raw and effective attention on ``position`` for every text, layer and head of a causal model.

    Rows from ``from_row`` on (default d_v, the first row whose prefix can have a null space)
    are summed. One table row per text, layer (1..L) and head (1..h): ``example`` (index into
    ``texts``), ``layer``, ``head``, ``kv_head`` (1..h_kv), ``n``, ``rows``, ``raw`` and
    ``effective`` (sums over those rows), ``own`` (the effective weight position's own raw
    weight keeps, sum a_ik (P_i)_kk), ``leverage`` (mean (P_i)_kk over the rows; see
    ``helpers.methods.sink``), ``sink_score`` (Gu et al.'s alpha: mean attention on the position
    over every query that sees it) and ``value_norm_ratio`` = ||T[position]|| over the median
    ||T[j]|| of the other positions (Guo et al.'s value-state drain).
    """
    if isinstance(texts, str) or len(texts) == 0:
        raise ValueError("texts must be a non-empty sequence of strings.")
    frames = []
    iterator = progress_bar(texts, "texts", progress)
    for index, text in enumerate(iterator):
        internals = capture(model, encode(tokenizer, text, model=model))
        if not internals.causal:
            raise ValueError(f"sink_sweep takes causal models (decoders); {internals.family} is bidirectional.")
        d_v = internals.V.shape[-1]
        first = d_v if from_row is None else from_row
        if internals.n <= max(first, position + 1):
            raise ValueError(f"Text {index} has {internals.n} tokens; it needs more than {max(first, position + 1)}.")
        split, leverage = effective_and_leverage(
            internals.A, internals.V, internals.H, groups=internals.groups, position=position
        )
        drain = drain_split(internals.A, split.effective, leverage, position, first)
        raw, effective = drain.raw, drain.effective
        ratio = value_norm_ratio(internals.T, position)
        L, h = raw.shape
        frames.append(
            pd.DataFrame(
                {
                    "example": index,
                    **_head_columns(L, h),
                    "kv_head": [j // internals.groups + 1 for _ in range(L) for j in range(h)],
                    "n": internals.n,
                    "rows": internals.n - first,
                    "raw": raw.flatten().double().cpu().numpy(),
                    "effective": effective.flatten().double().cpu().numpy(),
                    "own": drain.own.flatten().double().cpu().numpy(),
                    "leverage": drain.leverage.flatten().double().cpu().numpy(),
                    "sink_score": sink_scores(internals.A, position).flatten().double().cpu().numpy(),
                    "value_norm_ratio": ratio.flatten().double().cpu().numpy(),
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


SINK_PROMPT_LENGTH = 64  # Gu et al.'s T


class SinkProfile(NamedTuple):
    """``sink_profile``'s two tables (their columns in its docstring)."""

    heads: pd.DataFrame
    activations: pd.DataFrame


def sink_profile(
    model: PreTrainedModel,
    tokenizer,
    texts: Sequence[str],
    length: int = SINK_PROMPT_LENGTH,
    position: int = 0,
    progress: bool = True,
    control_position: int | None = None,
) -> SinkProfile:
    """The sink in the literature's terms on the first ``length`` tokens of each text (a causal model).

    Returns two tables:

    * ``heads``: one row per text, layer (1..L) and head (1..h): ``example``, ``layer``, ``head``,
      ``sink_score`` (Gu et al.'s alpha on ``position``) and ``value_norm_ratio`` (||T[position]||
      over the median ||T[j]||, Guo et al.'s value-state drain);
    * ``activations``: one row per text and hidden state (0 = the token embeddings, l = block l's
      output): ``example``, ``layer``, ``at_position`` (the largest |entry| at ``position``),
      ``elsewhere`` (the largest |entry| at any other position), ``median`` (the median |entry| of
      the hidden state) and ``channel`` (where the largest entry at ``position`` sits): Sun et al.'s
      massive activations.

    Gu et al.'s Sink_k^eps is ``(heads.sink_score > eps).mean()`` (``helpers.methods.sink.sink_rate``).
    With ``control_position``, ``heads`` also has ``control_score`` and ``control_value_norm_ratio``:
    the same two figures at that position, from the same capture (a control for the sink).
    """
    if isinstance(texts, str) or len(texts) == 0:
        raise ValueError("texts must be a non-empty sequence of strings.")
    heads, activations = [], []
    iterator = progress_bar(texts, "prompts", progress)
    for index, text in enumerate(iterator):
        internals = capture(model, first_tokens(encode(tokenizer, text, model=model), length))
        if not internals.causal:
            raise ValueError(f"sink_profile takes causal models (decoders); {internals.family} is bidirectional.")
        scores = sink_scores(internals.A, position)  # (L, h)
        ratio = value_norm_ratio(internals.T, position)
        L, h = scores.shape
        frame = pd.DataFrame(
            {
                "example": index,
                **_head_columns(L, h),
                "sink_score": scores.flatten().double().cpu().numpy(),
                "value_norm_ratio": ratio.flatten().double().cpu().numpy(),
            }
        )
        if control_position is not None:
            frame["control_score"] = sink_scores(internals.A, control_position).flatten().double().cpu().numpy()
            control_ratio = value_norm_ratio(internals.T, control_position)
            frame["control_value_norm_ratio"] = control_ratio.flatten().double().cpu().numpy()
        heads.append(frame)
        largest = largest_activations(internals.hidden_states)
        others = torch.cat([largest.largest[:, :position], largest.largest[:, position + 1 :]], dim=1)
        activations.append(
            pd.DataFrame(
                {
                    "example": index,
                    "layer": range(internals.num_layers + 1),
                    "at_position": largest.largest[:, position].double().cpu().numpy(),
                    "elsewhere": others.max(dim=1).values.double().cpu().numpy(),
                    "median": largest.median.double().cpu().numpy(),
                    "channel": largest.dimension[:, position].cpu().numpy(),
                }
            )
        )
    return SinkProfile(pd.concat(heads, ignore_index=True), pd.concat(activations, ignore_index=True))


def sink_positions(
    model: PreTrainedModel,
    tokenizer,
    texts: Sequence[str],
    positions: Sequence[int] = (0, 1),
    random_position: bool = True,
    seed: int = 0,
    from_row: int | None = None,
    length: int | None = None,
) -> pd.DataFrame:
    """The sink's terms at position 0 and at control positions, one capture per text (a causal model).

    For each text, layer (1..L) and head (1..h) and each of ``positions`` (and, with
    ``random_position``, one position drawn per text from 2..from_row - 1 with ``seed``): the sums
    over the rows ``from_row``..n-1 (default d_v) of ``helpers.methods.sink.position_terms``
    (``raw``, ``effective``, ``own``, ``bound``, ``expected``; ``leverage`` is the mean over those
    rows), with ``example``, ``layer``, ``head``, ``kv_head``, ``n``, ``rows``, ``position`` and
    ``role`` ("sink" for position 0, "position k", or "random"), and ``sink_score`` and
    ``value_norm_ratio`` at that position. The rows of role "sink" have ``sink_sweep``'s columns.
    ``length``: cut every text to its first ``length`` tokens (None: the whole text).
    """
    if isinstance(texts, str) or len(texts) == 0:
        raise ValueError("texts must be a non-empty sequence of strings.")
    generator = torch.Generator().manual_seed(int(seed))
    frames = []
    for index, text in enumerate(texts):
        encoding = encode(tokenizer, text, model=model)
        internals = capture(model, encoding if length is None else first_tokens(encoding, length))
        if not internals.causal:
            raise ValueError(f"sink_positions takes causal models (decoders); {internals.family} is bidirectional.")
        first = internals.V.shape[-1] if from_row is None else from_row
        if internals.n <= first or first < 3:
            raise ValueError(f"Text {index} has {internals.n} tokens; it needs more than from_row = {first} (>= 3).")
        chosen = [int(k) for k in positions]
        roles = ["sink" if k == 0 else f"position {k}" for k in chosen]
        if random_position:
            chosen.append(int(torch.randint(2, first, (1,), generator=generator)))
            roles.append("random")
        terms = position_terms(internals.A, internals.V, tuple(chosen), groups=internals.groups, from_row=first)
        L, h = internals.A.shape[:2]
        for p, (k, role) in enumerate(zip(chosen, roles, strict=True)):
            frame = pd.DataFrame(
                {
                    "example": index,
                    **_head_columns(L, h),
                    "kv_head": [j // internals.groups + 1 for _ in range(L) for j in range(h)],
                    "n": internals.n,
                    "rows": internals.n - first,
                    "position": k,
                    "role": role,
                    **{name: getattr(terms, name)[..., p].flatten().double().cpu().numpy() for name in terms._fields},
                    "sink_score": sink_scores(internals.A, k).flatten().double().cpu().numpy(),
                    "value_norm_ratio": value_norm_ratio(internals.T, k).flatten().double().cpu().numpy(),
                }
            )
            frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def logit_lens(model: PreTrainedModel):
    """The model's own readout, (M, d) hidden tokens -> (M, V) logits: its final norm, then its output head.

    For a causal language model with an output head (``LlamaForCausalLM``, ``GPT2LMHeadModel``); the final
    norm is found as the base model's ``norm``, ``ln_f`` or ``final_layer_norm``. Hidden tokens go to the
    head's device and dtype; the logits come back as float32 on the CPU.
    """
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    base = getattr(model, "base_model", model)
    norm = next((getattr(base, name) for name in ("norm", "ln_f", "final_layer_norm") if hasattr(base, name)), None)
    if head is None or norm is None:
        raise ValueError(
            f"The logit lens needs a causal language model with its final norm and output head; "
            f"{type(model).__name__} has {'no output head' if head is None else 'no final norm found'}."
        )
    weight = head.weight

    @torch.no_grad()
    def readout(hidden: torch.Tensor) -> torch.Tensor:
        return head(norm(hidden.to(weight.device, weight.dtype))).float().cpu()

    return readout


def lens_identifiability(
    model: PreTrainedModel, tokens: HiddenTokens, hidden_state: int, offset: int = 1, among: str = "sequence"
) -> NeighbourRows:
    """Per token of ``tokens`` (collected with ``helpers.collect_hidden_tokens``): does the logit lens at
    ``hidden_state`` (0..L, block l's output before the final norm) name ``x_{i + offset}``?

    Returns ``sources`` (M,) rows of ``tokens`` and ``targets`` (M,) bool; see
    :func:`helpers.methods.logit_lens.lens_hits` for ``among``. At the last hidden state with ``offset=1``
    and ``among="vocabulary"`` this is the model's own top-1 next-token accuracy.
    """
    state = hidden_state_index(hidden_state, tokens.num_layers)
    return lens_hits(
        logit_lens(model),
        tokens.hidden[state],
        tokens.input_ids,
        tokens.sequence,
        tokens.position,
        offset=offset,
        among=among,
    )
