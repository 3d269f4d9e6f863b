"""Interventions on a causal model's attention, scored by the next-token loss (chapter 9).

:func:`intervention_losses` runs a decoder on a batch of texts, cut to one length, once as
it is and once per intervention (``helpers.methods.interventions``), control position and
(optionally) edited layer, and returns the change in next-token loss per text.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import pandas as pd
import torch
from scipy.stats import spearmanr
from torch import nn
from torch.nn import functional
from transformers import BatchEncoding, PreTrainedModel

from ..methods.intervals import bootstrap
from ..methods.interventions import EDITS, INTERVENTIONS, PositionEdit
from ..methods.linalg import numerical_rank
from ..model.capture import capture, editing
from ..model.numbering import layer_index, layer_number
from ..model.progress import progress_bar
from ..model.text import encode, first_tokens

__all__ = ["intervention_losses", "reading_correlations", "summarise_interventions"]


def _batch(model: PreTrainedModel, tokenizer, texts: Sequence[str], length: int) -> torch.Tensor:
    """(N, length) token ids: every text cut to its first ``length`` tokens (no padding)."""
    if isinstance(texts, str) or len(texts) == 0:
        raise ValueError("texts must be a non-empty sequence of strings.")
    return torch.cat([first_tokens(encode(tokenizer, text, model=model), length)["input_ids"] for text in texts])


def _roles(
    count: int, positions: Sequence[int], random_position: bool, first_row: int, seed: int
) -> dict[str, torch.Tensor]:
    """Role -> (count,) positions: ``"sink"`` for 0, ``"position k"``, and ``"random"`` (2..first_row - 1, seeded)."""
    roles = {("sink" if k == 0 else f"position {k}"): torch.full((count,), int(k)) for k in positions}
    if random_position:
        if first_row < 3:
            raise ValueError(f"A random position is drawn from 2..first_row - 1; first_row = {first_row} is too small.")
        generator = torch.Generator().manual_seed(int(seed))
        roles["random"] = torch.randint(2, first_row, (count,), generator=generator)
    return roles


def _losses(
    model: PreTrainedModel, ids: torch.Tensor, first_row: int, edit=None, start: _Resume | None = None
) -> torch.Tensor:
    """(N,) mean next-token cross-entropy of the predictions made at rows first_row..n-2.

    ``start``: run only the layers from ``start.layer`` on, from the hidden states the unedited
    run fed that layer (the edit touches no earlier layer, so they are the same).
    """
    ids = ids.to(model.device)
    mask = torch.ones_like(ids)
    scored = ids.shape[1] - first_row  # rows first_row..n-1; the last one predicts nothing scored
    # the language-model head only on the scored rows, where the family allows it (a fifth of SmolLM2's forward)
    keep = {"logits_to_keep": scored} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
    with torch.no_grad(), contextlib.ExitStack() as stack:
        if edit is not None:
            stack.enter_context(editing(model, edit))
        if start is None:
            logits = model(input_ids=ids, attention_mask=mask, **keep).logits
        else:
            stack.enter_context(_from_layer(model, start.layer))
            logits = model(inputs_embeds=start.states, attention_mask=mask, **keep).logits
    predicted = logits[:, -scored:-1].float()  # (N, rows, vocab)
    loss = functional.cross_entropy(predicted.transpose(1, 2), ids[:, first_row + 1 :], reduction="none")
    return loss.mean(dim=1).cpu().double()


class _Resume(NamedTuple):
    layer: int  # 0-based: the first layer run
    states: torch.Tensor  # (N, n, d) the hidden states that enter it


def _identity(module, A, values):
    return A, values


def _layer_inputs(model: PreTrainedModel, ids: torch.Tensor) -> list[torch.Tensor] | None:
    """The hidden states entering each decoder layer, (N, n, d) per layer, from one run through the edits'
    attention function with no edit; None where the model's layers are not a ``layers`` list of its base."""
    layers = getattr(model.base_model, "layers", None)
    if not isinstance(layers, nn.ModuleList):
        return None
    states = []

    def record(module, args, kwargs):
        states.append((args[0] if args else kwargs["hidden_states"]).detach())

    hooks = [layer.register_forward_pre_hook(record, with_kwargs=True) for layer in layers]
    try:
        ids = ids.to(model.device)
        with torch.no_grad(), editing(model, _identity):
            model(input_ids=ids, attention_mask=torch.ones_like(ids))
    finally:
        for hook in hooks:
            hook.remove()
    return states if len(states) == len(layers) else None


@contextlib.contextmanager
def _from_layer(model: PreTrainedModel, layer: int):
    """Within the block, the model's base runs its decoder layers from ``layer`` on (inputs_embeds: their input)."""
    base = model.base_model
    layers = base.layers
    base.layers = nn.ModuleList(list(layers)[layer:])
    try:
        yield
    finally:
        base.layers = layers


def _resumable(model: PreTrainedModel, ids: torch.Tensor, first_row: int) -> list[torch.Tensor] | None:
    """The layer inputs of ``ids`` when resuming from a middle layer reproduces the unedited losses (to 1e-6);
    else None, and every edit runs the whole model (a family whose forward rescales inputs_embeds, say)."""
    states = _layer_inputs(model, ids)
    if states is None:
        return None
    middle = len(states) // 2
    whole = _losses(model, ids, first_row, _identity)
    resumed = _losses(model, ids, first_row, _identity, _Resume(middle, states[middle]))
    return states if torch.allclose(whole, resumed, rtol=0, atol=1e-6) else None


def _checked(model: PreTrainedModel, ids: torch.Tensor, kinds: Sequence[str]) -> tuple[int, int, int]:
    """(L, query heads per key/value head, d_v) of a causal model, after the method's checks."""
    if model.training:
        raise ValueError("The model is in training mode; call model.eval() first.")
    unknown = [k for k in kinds if k not in EDITS]
    if unknown or len(kinds) == 0:
        raise ValueError(f"kinds must be a non-empty subset of {EDITS}; got {list(kinds)!r}.")
    internals = capture(model, BatchEncoding({"input_ids": ids[:1], "attention_mask": torch.ones_like(ids[:1])}))
    if not internals.causal:
        raise ValueError(
            f"Interventions on the sink take causal models (decoders); {internals.family} is bidirectional."
        )
    if {"effective weight", "null weight, rows shuffled"} & set(kinds) and not bool(
        (numerical_rank(internals.H) == internals.H.shape[-2]).all()
    ):
        raise ValueError("Some H_h lacks full row rank, so range(V_h) is not range(T_h); the effective edit needs it.")
    return internals.num_layers, internals.groups, internals.V.shape[-1]


def intervention_losses(
    model: PreTrainedModel,
    tokenizer,
    texts: Sequence[str],
    length: int,
    kinds: Sequence[str] = INTERVENTIONS,
    positions: Sequence[int] = (0, 1),
    random_position: bool = True,
    layers: Iterable[int] | None = None,
    each_layer: bool = False,
    first_row: int | None = None,
    seed: int = 0,
    batch_size: int = 8,
    progress: bool = True,
) -> pd.DataFrame:
    """The change in next-token loss when each intervention edits each position, per text.

    Args:
        model, tokenizer: a causal model (eval mode) and its tokenizer.
        texts: N texts of at least ``length`` tokens; each is cut to its first ``length``.
        kinds: edits from ``helpers.methods.interventions.EDITS`` (default: ``INTERVENTIONS``).
        positions: the edited positions (0, the sink, and its controls); with
            ``random_position`` also one position per text drawn from 2..first_row - 1 (``seed``,
            which also seeds ``"null weight, rows shuffled"``).
        layers: layer numbers (1..L) to edit; None: every layer.
        each_layer: edit those layers one at a time (a ``layer`` column) instead of all together.
        first_row: the loss is the mean cross-entropy of the predictions made at rows
            first_row..length - 2 (default d_v: rows whose prefix can have a null space; every
            edited position lies in their prefix).
        batch_size: texts per forward pass.

    Returns:
        One row per text, kind and role (and edited layer): ``example`` (index into ``texts``),
        ``kind``, ``role`` ("sink", "position k", "random"), ``position``, (``layer``,)
        ``clean`` (the loss without an edit), ``loss`` and ``delta`` = loss - clean.
    """
    ids = _batch(model, tokenizer, texts, length)
    kinds = list(kinds)
    num_layers, groups, d_v = _checked(model, ids, kinds)
    first_row = d_v if first_row is None else int(first_row)
    if not 3 <= first_row <= length - 2:
        raise ValueError(f"first_row must lie in 3..length - 2 = {length - 2}; got {first_row}.")
    chosen = range(num_layers) if layers is None else sorted({layer_index(k, num_layers) for k in layers})
    edited = [frozenset([k]) for k in chosen] if each_layer else [frozenset(chosen)]
    roles = _roles(len(texts), positions, random_position, first_row, seed)
    if any(int(p.max()) >= first_row for p in roles.values()):
        raise ValueError(f"Every edited position must lie before first_row = {first_row}; got {list(positions)}.")
    batches = [slice(start, start + batch_size) for start in range(0, len(texts), batch_size)]
    clean = torch.cat([_losses(model, ids[b], first_row) for b in batches])
    # one layer edited at a time: the layers below it run as unedited, so each edit starts at its layer
    inputs = [_resumable(model, ids[b], first_row) if each_layer else None for b in batches]
    frames = []
    runs = [(layer_set, kind, role) for layer_set in edited for kind in kinds for role in roles]
    for layer_set, kind, role in progress_bar(runs, "interventions", progress):
        first = min(layer_set)
        loss = torch.cat(
            [
                _losses(
                    model,
                    ids[b],
                    first_row,
                    PositionEdit(kind, roles[role][b], layer_set, groups, seed=seed),
                    None if states is None else _Resume(first, states[first]),
                )
                for b, states in zip(batches, inputs, strict=True)
            ]
        )
        frame = pd.DataFrame(
            {
                "example": range(len(texts)),
                "kind": kind,
                "role": role,
                "position": roles[role].cpu().numpy(),
                "clean": clean.cpu().numpy(),
                "loss": loss.cpu().numpy(),
                "delta": (loss - clean).cpu().numpy(),
            }
        )
        if each_layer:
            frame.insert(4, "layer", layer_number(next(iter(layer_set))))
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def summarise_interventions(table: pd.DataFrame, by: Sequence[str] = ("kind", "role")) -> pd.DataFrame:
    """Mean change in loss per group of ``by``, with a bootstrap interval over the texts.

    table: ``intervention_losses``' output. Returns one row per group: the ``by`` columns,
    ``delta`` (mean over texts), ``low`` and ``high`` (the interval) and ``texts``.
    """
    missing = {"example", "delta", *by} - set(table.columns)
    if missing:
        raise ValueError(f"table lacks the columns {sorted(missing)}; pass the output of intervention_losses.")
    rows = []
    for key, group in table.groupby(list(by), sort=False):
        estimate = bootstrap(group.sort_values("example")["delta"].to_numpy())
        rows.append({**dict(zip(by, key, strict=True)), "delta": estimate.value, "low": estimate.low,
                     "high": estimate.high, "texts": estimate.sequences})  # fmt: skip
    return pd.DataFrame(rows)


def reading_correlations(table: pd.DataFrame, readings: pd.DataFrame) -> pd.DataFrame:
    """How well each reading of a position ranks the layers by the loss change of editing them.

    table: ``intervention_losses(..., each_layer=True)`` at one position; readings: one row per
    layer with ``layer`` and one column per reading. Returns one row per kind and reading:
    ``kind``, ``reading``, ``rho`` (Spearman's rank correlation over the layers between the
    reading and the mean change in loss), ``low`` and ``high`` (a bootstrap interval over the
    texts; the readings stay fixed) and ``texts``.
    """
    if "layer" not in table.columns or "layer" not in readings.columns:
        raise ValueError("Pass intervention_losses(..., each_layer=True) and readings with a layer column.")
    if table.groupby(["kind", "layer", "example"]).size().max() > 1:
        raise ValueError("table has more than one row per kind, layer and text: edit one position (one role).")
    names = [c for c in readings.columns if c != "layer"]
    rows = []
    for kind, group in table.groupby("kind", sort=False):
        deltas = group.pivot(index="example", columns="layer", values="delta")  # (texts, layers)
        aligned = readings.set_index("layer").reindex(deltas.columns)
        if aligned[names].isna().any().any():
            raise ValueError(f"readings lack some of the edited layers {list(deltas.columns)}.")
        for name in names:
            reading = aligned[name].to_numpy()
            estimate = bootstrap(deltas.to_numpy(), lambda a, r=reading: spearmanr(r, a.mean(axis=0)).statistic)
            rows.append({"kind": kind, "reading": name, "rho": estimate.value, "low": estimate.low,
                         "high": estimate.high, "texts": estimate.sequences})  # fmt: skip
    return pd.DataFrame(rows)
