"""Token identifiability over a corpus: the hidden tokens of every example, the maps per hidden state and the tables of chapter 5."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

import pandas as pd
import torch
from transformers import PreTrainedModel

from ..methods.hidden_tokens import HiddenTokens, InputParts, Text
from ..methods.linearised_decoder import DECODER_FAMILIES
from ..methods.probes import (
    COMBINATIONS,
    LOSSES,
    MAP_KINDS,
    TokenMap,
    check_choice,
    check_disjoint,
    check_hidden_state,
    evaluate_map,
    fit_map,
    fit_token_map,
    identifiability_rate,
    map_hits,
    nearest_in_sequence,
    neighbour_rows,
)
from ..model.capture import capture
from ..model.checks import float32_model
from ..model.corpus import check_records
from ..model.families import family_of
from ..model.numbering import check_count, check_seed
from ..model.post_norm import embedding_parts
from ..model.progress import progress_bar
from ..model.text import encode, first_tokens, text_pair_of


@torch.no_grad()
def collect_hidden_tokens(
    model: PreTrainedModel,
    tokenizer,
    texts: Sequence[Text],
    batch_size: int = 64,
    progress: bool = True,
    max_tokens: int | None = None,
) -> HiddenTokens:
    """Hidden states at every layer and input embeddings of every real token.

    One forward pass per batch of padded sequences; padding tokens are dropped afterwards, so each
    token's states equal those of an unpadded pass over its own sequence (up to float rounding).

    Args:
        model: in eval mode (``load_model``): a post-norm encoder (BERT, RoBERTa, ELECTRA, DistilBERT,
            ALBERT, MPNet) or a decoder (Llama, Qwen2, GPT-2).
        tokenizer: its tokenizer.
        texts: S items, each a string, a ``(text, text_pair)`` tuple or an ``Example`` (a pair
            becomes one sequence ``[CLS] a [SEP] b [SEP]``). Sequence s gets id s.
        batch_size: sequences per forward pass.
        progress: show a progress bar over batches.

    Returns:
        ``HiddenTokens`` with ``hidden: (L+1, N, d)``, ``x: (N, d_x)``: the input of the embedding
        LayerNorm, of the embeddings' width (narrower than d in ELECTRA and ALBERT, whose naive map
        therefore does not apply).

    A decoder (Llama, Qwen2: ``load_decoder``; GPT-2) runs one unpadded sequence at a time through
    ``capture``: ``x`` is then the token embeddings (layer 0 of ``hidden``: no position is added
    before the first block), layer l block l's output before the final norm, and ``batch_size`` is
    unused; ``max_tokens`` (decoders only) keeps the first ``max_tokens`` tokens of each text.

    Raises:
        ValueError: no texts, an empty text, a sequence longer than the model takes, a bad batch
            size or a model in training mode.
    """
    if family_of(model).causal:  # Llama, Qwen2, GPT-2: one capture per text
        return _collect_decoder_tokens(model, tokenizer, texts, progress, max_tokens)
    if max_tokens is not None:
        raise ValueError("max_tokens is for decoders: cutting an encoder's sequence would drop its closing [SEP].")
    embedding_parts(model, "collect_hidden_tokens")  # an encoder whose embedding LayerNorm takes x
    if model.training:
        raise ValueError("The model is in training mode (dropout on); call model.eval() first.")
    if isinstance(texts, (str, tuple)):
        raise TypeError("texts must be a list of texts (or pairs); wrap a single text in a list.")
    pairs = [text_pair_of(item, i) for i, item in enumerate(texts)]
    if not pairs:
        raise ValueError("No texts given: collect_hidden_tokens needs at least one sequence.")
    batch_size = check_count(batch_size, "batch_size")
    if getattr(tokenizer, "padding_side", "right") != "right":
        raise ValueError(
            "The tokenizer pads on the left; BERT's absolute positions need tokenizer.padding_side = 'right'."
        )
    has_pair = [b is not None for _, b in pairs]
    limit = model.config.max_position_embeddings
    segments = "token_type_ids" in getattr(tokenizer, "model_input_names", ["token_type_ids"])
    if any(has_pair) and segments and getattr(model.config, "type_vocab_size", 2) < 2:
        raise ValueError("This model takes one segment (type_vocab_size = 1): give single texts, not sentence pairs.")
    model = float32_model(model)  # bfloat16 / float16 models: the states are computed by a float32 copy

    # batch sequences of similar length (less padding); single texts and pairs apart,
    # since the tokenizer takes a batch of either
    lengths = [len(tokenizer(a, b, truncation=False)["input_ids"]) for a, b in pairs]
    too_long = [i for i, n in enumerate(lengths) if n > limit]
    if too_long:
        i = too_long[0]
        raise ValueError(
            f"Sequence {i} has {lengths[i]} tokens but the model takes at most {limit}; "
            "shorten it (nothing is truncated silently)."
        )
    order = sorted(range(len(pairs)), key=lambda i: (has_pair[i], lengths[i]))
    batches = []
    for flag in (False, True):
        same = [i for i in order if has_pair[i] == flag]
        batches += [same[k : k + batch_size] for k in range(0, len(same), batch_size)]

    raw: list[torch.Tensor] = []
    # the float32 copy's LayerNorm (a half-precision model runs as one): its input is x
    hook = embedding_parts(model).norm.register_forward_hook(lambda m, i, o: raw.append(i[0]))
    hidden, inputs, sequence, position, input_ids = [], [], [], [], []
    try:
        for batch in progress_bar(batches, "hidden states", progress):
            first = [pairs[i][0] for i in batch]
            second = [pairs[i][1] for i in batch] if has_pair[batch[0]] else None
            encoding = tokenizer(first, second, padding=True, truncation=False, return_tensors="pt").to(model.device)
            if int(encoding["input_ids"].max()) >= model.config.vocab_size:
                raise ValueError(
                    f"The tokenizer gives token ids up to {int(encoding['input_ids'].max())} but the model's vocabulary "
                    f"has {model.config.vocab_size}: use the tokenizer that load_model returns with the model."
                )
            raw.clear()
            result = model(**encoding, output_hidden_states=True)
            mask = encoding["attention_mask"].bool()  # (B, n)
            states = torch.stack(result.hidden_states)  # (L+1, B, n, d)
            hidden.append(states[:, mask].cpu())
            inputs.append(raw[0][mask].cpu())
            ids = torch.tensor(batch, device=mask.device)
            sequence.append(ids[:, None].expand_as(mask)[mask].cpu())
            position.append(torch.arange(mask.shape[1], device=mask.device).expand_as(mask)[mask].cpu())
            input_ids.append(encoding["input_ids"][mask].cpu())
    finally:
        hook.remove()
    sequence_all = torch.cat(sequence)
    order = torch.sort(sequence_all, stable=True).indices  # back to the order of ``texts``
    return HiddenTokens(
        hidden=torch.cat(hidden, dim=1)[:, order],
        x=torch.cat(inputs)[order],
        sequence=sequence_all[order],
        position=torch.cat(position)[order],
        input_ids=torch.cat(input_ids)[order],
    )


def _collect_decoder_tokens(
    model: PreTrainedModel, tokenizer, texts: Sequence[Text], progress: bool, max_tokens: int | None
) -> HiddenTokens:
    """``collect_hidden_tokens`` for a decoder: one ``capture`` per text (single texts only)."""
    if isinstance(texts, (str, tuple)):
        raise TypeError("texts must be a list of texts; wrap a single text in a list.")
    pairs = [text_pair_of(item, i) for i, item in enumerate(texts)]
    if not pairs:
        raise ValueError("No texts given: collect_hidden_tokens needs at least one sequence.")
    if any(b is not None for _, b in pairs):
        raise ValueError("A decoder takes single texts here, not sentence pairs: pass example.text_a.")
    hidden, inputs, sequence, position, input_ids = [], [], [], [], []
    for index, (text, _) in enumerate(progress_bar(pairs, "hidden states", progress)):
        encoding = encode(tokenizer, text, model=model)
        if max_tokens is not None and encoding["input_ids"].shape[1] > max_tokens:
            encoding = first_tokens(encoding, max_tokens)
        internals = capture(model, encoding)
        n = internals.n
        hidden.append(internals.hidden_states.cpu())
        inputs.append(internals.x.cpu())
        sequence.append(torch.full((n,), index, dtype=torch.long))
        position.append(torch.arange(n))
        input_ids.append(internals.input_ids.cpu())
    return HiddenTokens(
        hidden=torch.cat(hidden, dim=1),
        x=torch.cat(inputs),
        sequence=torch.cat(sequence),
        position=torch.cat(position),
        input_ids=torch.cat(input_ids),
    )


@dataclass
class LayerProbes:
    """Per-layer identifiability for several (map, loss) combinations.

    ``table``: one row per (map, loss, hidden_state) with the test rate (and the
    training-set rate, column ``train``, when asked for).
    ``maps[(kind, loss)]``: the fitted maps, one per hidden state, in order.
    """

    table: pd.DataFrame
    maps: dict[tuple[str, str], list[TokenMap]] = field(default_factory=dict)


def _hidden_states(tokens: HiddenTokens, hidden_states: Iterable[int] | None) -> list[int]:
    if hidden_states is None:
        return list(range(tokens.hidden.shape[0]))
    chosen = [check_hidden_state(tokens, s) for s in hidden_states]
    if not chosen:
        raise ValueError("No hidden states given.")
    return chosen


def probe_layers(
    train: HiddenTokens,
    test: HiddenTokens,
    combinations: Sequence[tuple[str, str]] = COMBINATIONS,
    hidden_states: Iterable[int] | None = None,
    train_rates: bool = False,
    progress: bool = True,
    **options,
) -> LayerProbes:
    """Fit every (map, loss) combination at every hidden state on ``train``; rate it on ``test``.

    Hidden states default to 0..L (0 = the embedding LayerNorm output). With
    ``train_rates`` the table also gets the rate on the training set (to
    see overfitting). ``options`` go to ``fit_map``.
    """
    check_disjoint(train, test)
    chosen = _hidden_states(train, hidden_states)
    for kind, loss in combinations:
        check_choice(kind, MAP_KINDS, "map kind")
        check_choice(loss, LOSSES, "loss")
    rows, maps = [], {}
    jobs = [(kind, loss, state) for kind, loss in combinations for state in chosen]
    for kind, loss, state in progress_bar(jobs, "probes", progress):
        fitted = fit_token_map(train, state, kind, loss, **options)
        maps.setdefault((kind, loss), []).append(fitted)
        row = {"map": kind, "loss": loss, "hidden_state": state, "test": evaluate_map(fitted, test)}
        if train_rates:
            row["train"] = evaluate_map(fitted, train)
        rows.append(row)
    return LayerProbes(pd.DataFrame(rows), maps)


def generalisation_matrix(
    maps: Sequence[TokenMap], test: HiddenTokens, hidden_states: Iterable[int] | None = None, progress: bool = True
) -> torch.Tensor:
    """Rate of each map (trained on its own hidden state) applied to every test hidden state.

    Returns (len(maps), len(hidden_states)): (i, j) is the rate of ``maps[i]`` on ``hidden_states[j]`` (default 0..L).
    ``progress``: a bar over the maps.
    """
    if len(maps) == 0:
        raise ValueError("No maps given: pass the maps of probe_layers, e.g. probes.maps[('linear', 'cosine')].")
    if any(m.offset != 0 for m in maps):
        raise ValueError("generalisation_matrix takes maps to the token itself (offset 0), not neighbour maps.")
    chosen = _hidden_states(test, hidden_states)
    N, d = test.hidden.shape[1:]
    queries_sequence = test.sequence.repeat(len(chosen))  # all hidden states in one search: (len(chosen) * N,)
    own = torch.arange(N)
    out = torch.empty(len(maps), len(chosen))
    for i, token_map in enumerate(progress_bar(maps, "maps", progress)):
        predicted = token_map(test.hidden[chosen].reshape(-1, d))
        nearest = nearest_in_sequence(predicted, queries_sequence, test.x, test.sequence, token_map.distance)
        out[i] = (nearest.view(len(chosen), N) == own).float().mean(dim=1)
    return out


def fraction_curve(
    train: HiddenTokens,
    test: HiddenTokens,
    fractions: Sequence[float] = (0.5, 0.8, 0.9, 1.0),
    kinds: Sequence[str] = ("linear", "mlp"),
    loss: str = "cosine",
    hidden_state: int | None = None,
    seed: int = 0,
    progress: bool = True,
    **options,
) -> pd.DataFrame:
    """Test rate at ``hidden_state`` (0..L; default None: the last, L) against the fraction of training sequences used.

    The subsets are nested. Returns a table with columns map, fraction, sequences, tokens, rate, identified.
    """
    check_disjoint(train, test)
    seed = check_seed(seed)
    hidden_state = train.num_layers if hidden_state is None else hidden_state
    if not fractions or any(not 0 < f <= 1 for f in fractions):
        raise ValueError(f"fractions must be non-empty and each in (0, 1]; got {list(fractions)}.")
    ids = train.sequence_ids
    permuted = ids[torch.randperm(len(ids), generator=torch.Generator().manual_seed(seed))]
    rows = []
    jobs = [(kind, f) for kind in kinds for f in fractions]
    for kind, f in progress_bar(jobs, "training fractions", progress):
        subset = train.select(permuted[: max(1, math.ceil(f * len(ids)))].sort().values)
        hits = map_hits(fit_token_map(subset, hidden_state, kind, loss, seed=seed, **options), test).targets
        rows.append(
            {
                "map": kind,
                "fraction": f,
                "sequences": len(subset.sequence_ids),
                "tokens": len(subset),
                "rate": hits.float().mean().item(),
                "identified": hits.cpu().numpy(),  # per test token, for intervals over sequences
            }
        )
    return pd.DataFrame(rows)


def _interior(tokens: HiddenTokens, offsets: Sequence[int]) -> tuple[torch.Tensor, dict[int, torch.Tensor]]:
    """Rows of the tokens that have a neighbour at every offset, and those neighbours' rows."""
    keep = torch.ones(len(tokens), dtype=torch.bool)
    for k in offsets:
        has = torch.zeros(len(tokens), dtype=torch.bool)
        has[neighbour_rows(tokens.sequence, tokens.position, k)[0]] = True
        keep &= has
    rows = torch.nonzero(keep).squeeze(1)
    if rows.numel() == 0:
        raise ValueError(f"No token has neighbours at all the offsets {list(offsets)}: the sequences are too short.")
    targets = {}
    for k in offsets:
        sources, found = neighbour_rows(tokens.sequence, tokens.position, k)
        lookup = torch.full((len(tokens),), -1, dtype=torch.long)
        lookup[sources] = found
        targets[k] = lookup[rows]
    return rows, targets


def neighbour_rates(
    train: HiddenTokens,
    test: HiddenTokens,
    offsets: Iterable[int] = range(-3, 4),
    hidden_states: Iterable[int] | None = None,
    kind: str = "linear",
    loss: str = "l2",
    progress: bool = True,
    **options,
) -> pd.DataFrame:
    """Test rate of recovering x_{i+k} from e_i^l, one map per (hidden state l, k).

    Only tokens that have a neighbour at *every* offset take part (in
    training and testing), so each offset is scored on the same tokens. For
    linear + L2 the maps of all offsets come from one least-squares solve
    per hidden state (its columns decouple, so this is exact and cheap).

    Returns a table with columns hidden_state, offset, rate; identified and sequence hold, per row,
    the (M,) per-token hits and their sequence ids (for intervals over sequences).
    """
    check_disjoint(train, test)
    check_choice(kind, MAP_KINDS, "map kind")
    check_choice(loss, LOSSES, "loss")
    offsets = list(offsets)
    if not offsets:
        raise ValueError("No offsets given.")
    chosen = _hidden_states(train, hidden_states)
    train_rows, train_targets = _interior(train, offsets)
    test_rows, test_targets = _interior(test, offsets)
    d_in = train.x.shape[1]
    rows = []
    for state in progress_bar(chosen, "neighbours", progress):
        hidden = train.hidden[state, train_rows]
        if kind == "linear" and loss == "l2":
            joint = fit_map(
                hidden, torch.cat([train.x[train_targets[k]] for k in offsets], dim=1), kind, loss, **options
            )
            maps = [joint.module.weight[i * d_in : (i + 1) * d_in] for i in range(len(offsets))]
            biases = [joint.module.bias[i * d_in : (i + 1) * d_in] for i in range(len(offsets))]

            def predict(i, e, maps=maps, biases=biases):
                return e @ maps[i].T + biases[i]
        else:
            fitted = [fit_map(hidden, train.x[train_targets[k]], kind, loss, **options) for k in offsets]

            def predict(i, e, fitted=fitted):
                return fitted[i](e)

        with torch.no_grad():  # one nearest-token search for all offsets of this hidden state
            predicted = torch.cat([predict(i, test.hidden[state, test_rows]) for i in range(len(offsets))])
            query_sequence = test.sequence[test_rows].repeat(len(offsets))
            nearest = nearest_in_sequence(predicted, query_sequence, test.x, test.sequence, loss)
            hits = nearest.view(len(offsets), -1) == torch.stack([test_targets[k] for k in offsets])
        group = test.sequence[test_rows].cpu().numpy()
        rows += [{"hidden_state": state, "offset": k, "rate": hits[i].float().mean().item(),
                  "identified": hits[i].cpu().numpy(), "sequence": group} for i, k in enumerate(offsets)]  # fmt: skip
    return pd.DataFrame(rows)


def naive_identifiability_table(
    model: PreTrainedModel, tokenizer, examples: Sequence, distance: str = "cosine", progress: bool = True
) -> pd.DataFrame:
    """Naive (identity map) token identifiability per hidden state 0..L over ``examples``: ``hidden_state, rate``.

    Token i is identified at hidden state l when e_i^l is nearest (``distance``) to x_i among its sequence's inputs.
    ``progress``: a bar over the batches of the forward passes.
    """
    examples = check_records(examples)
    tokens = collect_hidden_tokens(model, tokenizer, examples, progress=progress)
    rates = [
        identifiability_rate(tokens.hidden[i], tokens.x, tokens.sequence, distance)
        for i in range(tokens.num_layers + 1)
    ]
    return pd.DataFrame({"hidden_state": range(tokens.num_layers + 1), "rate": rates})


def input_parts(model: PreTrainedModel, tokens: HiddenTokens) -> InputParts:
    """x = word + (position + segment) of an encoder: the word-piece embeddings and x less them, each (N, d)."""
    embeddings = getattr(getattr(model, "embeddings", None), "word_embeddings", None)
    if embeddings is None or model.config.model_type in DECODER_FAMILIES:
        raise ValueError("input_parts needs an encoder whose x is word + position + segment (a BERT model).")
    word = embeddings.weight.detach().float().cpu()[tokens.input_ids]
    return InputParts(word=word, position=tokens.x - word)


def with_targets(tokens: HiddenTokens, targets: torch.Tensor) -> HiddenTokens:
    """The same hidden tokens with other input-space targets in place of x ((N, d_in), e.g. ``input_parts``)."""
    if targets.dim() != 2 or targets.shape[0] != len(tokens):
        raise ValueError(f"targets must be ({len(tokens)}, d_in); got {tuple(targets.shape)}.")
    return replace(tokens, x=targets)


def _copies(tokens: HiddenTokens) -> torch.Tensor:  # (N,) tokens of the sequence with the token's piece
    key = tokens.sequence * (int(tokens.input_ids.max()) + 1) + tokens.input_ids
    _, inverse, counts = torch.unique(key, return_inverse=True, return_counts=True)
    return counts[inverse]


def unique_pieces(tokens: HiddenTokens) -> torch.Tensor:
    """(N,) bool: the token's word piece occurs once in its sequence (no other token of it ties with it)."""
    return _copies(tokens) == 1


def piece_chance(tokens: HiddenTokens) -> torch.Tensor:
    """(N,) the chance that a random token of the sequence has the token's word piece (share of its copies)."""
    return _copies(tokens).float() / tokens.lengths.float().repeat_interleave(tokens.lengths)


def identified(
    token_map: TokenMap,
    tokens: HiddenTokens,
    hidden_state: int | None = None,
    distance: str | None = None,
    same_piece: bool = False,
) -> torch.Tensor:
    """(N,) bool: is each token identified by ``token_map`` (offset 0) at ``hidden_state`` (default: its own)?

    With ``same_piece`` a token counts when the nearest target carries its word piece (word-only targets).
    """
    if token_map.offset != 0:
        raise ValueError("identified scores maps to the token itself (offset 0).")
    state = check_hidden_state(tokens, token_map.hidden_state if hidden_state is None else hidden_state)
    distance = token_map.distance if distance is None else distance
    check_choice(distance, LOSSES, "distance")
    predicted = token_map(tokens.hidden[state])
    nearest = nearest_in_sequence(predicted, tokens.sequence, tokens.x, tokens.sequence, distance)
    return tokens.input_ids[nearest] == tokens.input_ids if same_piece else nearest == torch.arange(len(tokens))
