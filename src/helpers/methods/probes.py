"""Token identifiability: maps from hidden tokens back to input tokens (paper section 4).

A map ``g`` sends the hidden token ``e_i^l`` of hidden state ``l`` (0..L, 0 = the embedding output) to input space;
token i is *identified* when, among the input tokens ``x_j`` of its own sequence, the nearest to ``g(e_i^l)`` is
``x_i``. The identifiability rate is the fraction of tokens identified. Three maps, two losses, the distance of
the nearest-neighbour search matching the loss:

    naive    g(e) = e                          (no training)
    linear   g(e) = z W + b,  z = standardised e    L2: closed-form least squares
             cosine: least squares onto unit-length targets, then seeded Adam
    mlp      g(e) = z W + b + relu(z W1 + b1) W2 + b2   (width 256, from the linear fit; seeded mini-batch Adam)

Adam runs fixed epochs, or until a held-out rule stops it (``fit_token_map(validation=...)``,
:mod:`~helpers.methods.probe_training`). Train and test sets are split by sequence, never by token
(``split_by_sequence``). A fit on fewer tokens than dimensions warns (``InputWarning``). The experiments over
hidden states (``probe_layers``, ``generalisation_matrix``, ...) are in :mod:`helpers.drivers.identifiability`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
from torch import nn

from ..model.checks import check_autograd, check_enough_tokens
from ..model.corpus import Split
from ..model.numbering import check_seed, hidden_state_index
from .hidden_tokens import HiddenTokens
from .probe_training import StoppingRule, adam_steps, map_loss

MAP_KINDS = ("naive", "linear", "mlp")
LOSSES = ("l2", "cosine")
COMBINATIONS = tuple((kind, loss) for kind in MAP_KINDS for loss in LOSSES)


# --------------------------------------------------------------------------- checks


def check_choice(value: str, choices: Sequence[str], name: str) -> None:
    if value not in choices:
        raise ValueError(f"Unknown {name} {value!r}; choose one of {list(choices)}.")


def _check_pairs(hidden: torch.Tensor, targets: torch.Tensor) -> None:
    for name, value in (("hidden", hidden), ("targets", targets)):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}.")
        if value.dim() != 2:
            raise ValueError(f"{name} must be (N, d); got shape {tuple(value.shape)}.")
    if hidden.shape[0] != targets.shape[0]:
        raise ValueError(
            f"hidden has {hidden.shape[0]} tokens but targets has {targets.shape[0]}; they must match row for row."
        )
    if hidden.shape[0] == 0:
        raise ValueError("No tokens to fit a map on: the training set is empty.")


def check_hidden_state(tokens: HiddenTokens, hidden_state: int) -> int:
    """The tensor index of ``hidden_state`` (0..L, 0 = the embedding output; no negative numbers)."""
    return hidden_state_index(hidden_state, tokens.num_layers)


# --------------------------------------------------------------------------- maps


class SkipMLP(nn.Module):
    """``z W + b + relu(z W1 + b1) W2 + b2``, ``z = (e - mean) / std`` (training statistics): (..., d) -> (..., d_out)."""

    def __init__(self, d: int, d_out: int, width: int, mean: torch.Tensor, std: torch.Tensor) -> None:
        super().__init__()
        self.linear = nn.Linear(d, d_out)
        self.width = width  # 0: the linear skip connection alone
        self.hidden = nn.Linear(d, max(width, 1))
        self.out = nn.Linear(max(width, 1), d_out)
        nn.init.zeros_(self.out.weight)  # start exactly at the linear map
        nn.init.zeros_(self.out.bias)
        self.register_buffer("mean", mean)
        self.register_buffer("std", std)

    def forward(self, e: torch.Tensor) -> torch.Tensor:
        z = (e - self.mean) / self.std
        return self.linear(z) + self.out(torch.relu(self.hidden(z))) if self.width else self.linear(z)


@dataclass
class TokenMap:
    """A fitted map from hidden tokens (..., d) to input space (..., d_in)."""

    kind: str
    loss: str
    module: nn.Module
    hidden_state: int | None = None  # the hidden state (0..L) it was trained on
    offset: int = 0  # trained to recover x_{i + offset} from e_i
    history: list[float] = field(default_factory=list)  # held-out rate before and after each epoch (a rule)

    @property
    def epochs(self) -> int | None:
        """Epochs of the best state under a stopping rule (None without one)."""
        return max(range(len(self.history)), key=self.history.__getitem__) if self.history else None

    @property
    def distance(self) -> str:
        """The distance used to find the nearest input token: the one the map was trained with."""
        return self.loss

    @torch.no_grad()
    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.module(hidden)


def _least_squares(hidden: torch.Tensor, targets: torch.Tensor, ridge: float) -> tuple[torch.Tensor, ...]:
    """Least squares on standardised inputs: (mean, std, solution), all float64.

    z = (hidden - mean) / std (training statistics; a feature spread under 1e-3 of the widest keeps std 1, since
    on another hidden state it may vary); ``solution`` (d + 1, d_in) = argmin ||z W + b - Y||^2 + ridge N ||W||^2
    (Cholesky of z^T z + ridge N I): b is the targets' mean, and the ridge means the same at every input scale.
    """
    std, mean = torch.std_mean(hidden.double(), dim=0, correction=0)
    std = torch.where(std > 1e-3 * std.max(), std, torch.ones_like(std))  # all but constant: left as is
    z = (hidden.double() - mean) / std
    average = targets.double().mean(dim=0, keepdim=True)
    gram = z.T @ z + ridge * z.shape[0] * torch.eye(z.shape[1], dtype=torch.float64, device=z.device)
    L, info = torch.linalg.cholesky_ex(gram)  # a rounding-level pivot: dependent columns, LAPACK stopped or not
    if info != 0 or bool((L.diagonal() ** 2).min() <= 1e-12 * gram.diagonal().max()):
        raise ValueError("The hidden tokens are linearly dependent (singular normal equations); fit with ridge > 0.")
    weight = torch.cholesky_solve(z.T @ (targets.double() - average), L)  # (d, d_in)
    return mean, std, torch.cat([weight, average])


_loss = map_loss  # the training loss (kept under its old name)


def fit_map(
    hidden: torch.Tensor,
    targets: torch.Tensor,
    kind: str = "linear",
    loss: str = "cosine",
    seed: int = 0,
    ridge: float = 1e-6,
    width: int = 256,
    epochs: int = 4,
    batch_size: int = 512,
    lr: float = 2e-3,
    stopping: StoppingRule | None = None,
) -> TokenMap:
    """Fit ``g`` so that ``g(hidden[i])`` is close to ``targets[i]``.

    Args:
        hidden: (N, d) hidden tokens of one layer (on any device; the map is fit on the CPU).
        targets: (N, d_in) the input tokens they should map to.
        kind: ``"naive"`` (identity; needs d == d_in), ``"linear"`` or ``"mlp"``.
        loss: ``"l2"`` (squared Euclidean) or ``"cosine"`` (1 - cosine similarity).
        seed: seeds the MLP's initialisation and batch order.
        ridge: Tikhonov term relative to the standardised Gram matrix (keeps the
            normal equations well posed; 1e-6 changes nothing else).
        width: the MLP's hidden width.
        epochs, batch_size, lr: the Adam schedule (linear + cosine and MLP).
        stopping: a held-out :class:`~helpers.methods.probe_training.StoppingRule`; with it Adam runs
            until the rule stops it (``epochs`` is ignored) and the map keeps its best state and its
            ``history``. Default None: ``epochs`` epochs, as before.

    Returns:
        A ``TokenMap``. Every fit standardises the hidden tokens (training
        statistics), so their scale cannot matter. Linear + L2 is the exact
        least-squares solution (closed form). Linear + cosine starts at the
        least-squares fit to unit-length targets (cosine ignores lengths),
        the MLP at the matching linear fit (its non-linear branch at zero);
        both then get seeded mini-batch Adam on their loss, in standardised
        coordinates.
    """
    check_choice(kind, MAP_KINDS, "map kind")
    check_choice(loss, LOSSES, "loss")
    _check_pairs(hidden, targets)
    seed = check_seed(seed)
    hidden, targets = hidden.float().cpu(), targets.float().cpu()  # the maps are fit and kept on the CPU
    if kind == "naive":
        if hidden.shape[1] != targets.shape[1]:
            raise ValueError(
                f"The naive map is the identity: it needs hidden and input tokens of one size, got {hidden.shape[1]} and {targets.shape[1]}."
            )
        return TokenMap(kind, loss, nn.Identity())
    check_enough_tokens(hidden.shape[0], hidden.shape[1], f"The {kind} map")
    aim = nn.functional.normalize(targets, dim=-1) if loss == "cosine" else targets  # cosine: directions only
    mean, std, solution = _least_squares(hidden, aim, ridge)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = SkipMLP(hidden.shape[1], targets.shape[1], width if kind == "mlp" else 0, mean.float(), std.float())
    with torch.no_grad():
        module.linear.weight.copy_(solution[:-1].T)
        module.linear.bias.copy_(solution[-1])
    history = []
    if kind == "mlp" or loss == "cosine":
        check_autograd(f"fit_map(kind={kind!r}, loss={loss!r}), which trains with Adam,")
        history = adam_steps(module, hidden, targets, loss, seed, epochs, batch_size, lr, stopping)
    if kind == "mlp":
        return TokenMap(kind, loss, module.eval(), history=history)
    weight = (solution[:-1] if loss == "l2" else module.linear.weight.detach().double().T) / std[:, None]
    bias = solution[-1] if loss == "l2" else module.linear.bias.detach().double()
    linear = nn.Linear(hidden.shape[1], targets.shape[1])  # the standardisation folded into one nn.Linear
    with torch.no_grad():
        linear.weight.copy_(weight.T)
        linear.bias.copy_(bias - mean @ weight)
    return TokenMap(kind, loss, linear.eval(), history=history)


# --------------------------------------------------------------------------- nearest input, rates


def _slots(group: torch.Tensor, groups: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Position of each item within its group, and the group sizes: (K,), (G,)."""
    order = torch.argsort(group, stable=True)
    counts = torch.bincount(group, minlength=groups)
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.empty_like(group)
    slot[order] = torch.arange(group.shape[0], device=group.device) - starts[group[order]]
    return slot, counts


def nearest_in_sequence(
    queries: torch.Tensor,
    query_sequence: torch.Tensor,
    inputs: torch.Tensor,
    input_sequence: torch.Tensor,
    distance: str = "cosine",
) -> torch.Tensor:
    """For each query, the row of the nearest input token of the same sequence.

    Args:
        queries: (M, d) mapped hidden tokens g(e_i).
        query_sequence: (M,) sequence id of each query.
        inputs: (N, d) input tokens x_j.
        input_sequence: (N,) sequence id of each input token.
        distance: ``"l2"`` or ``"cosine"``.

    Returns:
        (M,) long: row indices into ``inputs``.
    """
    check_choice(distance, LOSSES, "distance")
    if queries.dim() != 2 or inputs.dim() != 2:
        raise ValueError(
            f"queries and inputs must be (M, d) and (N, d); got {tuple(queries.shape)} and {tuple(inputs.shape)}."
        )
    if queries.shape[1] != inputs.shape[1]:
        raise ValueError(
            f"queries have size {queries.shape[1]} but input tokens {inputs.shape[1]}: map to input space first."
        )
    if query_sequence.shape != (queries.shape[0],) or input_sequence.shape != (inputs.shape[0],):
        raise ValueError("Each query and each input token needs exactly one sequence id.")
    if queries.shape[0] == 0 or inputs.shape[0] == 0:
        raise ValueError("No tokens: nearest_in_sequence needs at least one query and one input token.")
    ids, input_group = torch.unique(input_sequence, return_inverse=True)
    query_group = torch.searchsorted(ids, query_sequence).clamp_max(len(ids) - 1)
    if not torch.equal(ids[query_group], query_sequence):
        raise ValueError("Some queries come from sequences that have no input tokens here.")
    G = len(ids)
    in_slot, in_counts = _slots(input_group, G)
    q_slot, q_counts = _slots(query_group, G)
    d, device = inputs.shape[1], inputs.device
    padded_inputs = torch.zeros(G, int(in_counts.max()), d, device=device)
    padded_inputs[input_group, in_slot] = inputs.float()
    rows = torch.full((G, padded_inputs.shape[1]), -1, dtype=torch.long, device=device)
    rows[input_group, in_slot] = torch.arange(inputs.shape[0], device=device)
    padded_queries = torch.zeros(G, int(q_counts.max()), d, device=device)
    padded_queries[query_group, q_slot] = queries.float()
    if distance == "cosine":
        scores = -nn.functional.normalize(padded_queries, dim=-1) @ nn.functional.normalize(
            padded_inputs, dim=-1
        ).transpose(1, 2)
    else:
        # squared distance |q|^2 - 2 q.x + |x|^2 (the |q|^2 term does not change the argmin)
        scores = (padded_inputs**2).sum(-1)[:, None, :] - 2 * padded_queries @ padded_inputs.transpose(1, 2)
    scores = scores.masked_fill(rows[:, None, :] < 0, float("inf"))  # padding is never the nearest
    best = scores.argmin(dim=-1)  # (G, m)
    return rows[query_group, best[query_group, q_slot]]


class NeighbourRows(NamedTuple):
    """Pairs of rows: ``sources[k]``'s neighbour is ``targets[k]``, each (M,)."""

    sources: torch.Tensor
    targets: torch.Tensor


def neighbour_rows(sequence: torch.Tensor, position: torch.Tensor, offset: int) -> NeighbourRows:
    """Rows (i, j) where token j is token i's neighbour ``offset`` places on, in the same sequence.

    sequence, position: (N,). Returns sources (M,) and targets (M,); tokens
    whose neighbour would fall outside their sequence are left out.
    """
    if sequence.shape != position.shape or sequence.dim() != 1:
        raise ValueError("sequence and position must be two (N,) tensors.")
    span = int(position.max()) + abs(offset) + 1
    key = sequence * span + position
    order = torch.argsort(key)
    wanted = key + offset
    found = torch.searchsorted(key[order], wanted).clamp_max(len(key) - 1)
    hit = key[order][found] == wanted
    valid = hit & (position + offset >= 0)
    return NeighbourRows(torch.nonzero(valid).squeeze(1), order[found[valid]])


def token_hits(
    predicted: torch.Tensor,
    inputs: torch.Tensor,
    sequence: torch.Tensor,
    distance: str = "cosine",
    position: torch.Tensor | None = None,
    offset: int = 0,
) -> NeighbourRows:
    """Per-token :func:`identifiability_rate`: ``sources`` (M,) rows scored (all, or those with a neighbour at
    ``offset``) and ``targets`` (M,) bool, True where identified."""
    if predicted.shape[0] != inputs.shape[0]:
        raise ValueError(f"{predicted.shape[0]} predictions for {inputs.shape[0]} input tokens; give one per token.")
    if offset == 0:
        sources = targets = torch.arange(inputs.shape[0], device=inputs.device)
    else:
        if position is None:
            raise ValueError("Neighbour recovery (offset != 0) needs the token positions.")
        sources, targets = neighbour_rows(sequence, position, offset)
        if sources.numel() == 0:
            raise ValueError(f"No token has a neighbour at offset {offset} in its sequence.")
    nearest = nearest_in_sequence(predicted[sources], sequence[sources], inputs, sequence, distance)
    return NeighbourRows(sources, nearest == targets)


def identifiability_rate(
    predicted: torch.Tensor,
    inputs: torch.Tensor,
    sequence: torch.Tensor,
    distance: str = "cosine",
    position: torch.Tensor | None = None,
    offset: int = 0,
) -> float:
    """Fraction of tokens whose mapped hidden state is nearest to their own input token.

    Args:
        predicted: (N, d) g(e_i), row i for token i.
        inputs: (N, d) x_i, row i for token i.
        sequence: (N,) sequence ids; the search runs within a sequence.
        distance: ``"l2"`` or ``"cosine"``.
        position: (N,) positions, needed when ``offset != 0``.
        offset: score against x_{i + offset} instead of x_i (neighbour recovery).
    """
    hits = token_hits(predicted, inputs, sequence, distance, position, offset).targets
    return hits.float().mean().item()


def chance_rate(tokens: HiddenTokens) -> float:
    """Expected rate of a map that picks a token of the sequence at random: mean of 1 / length."""
    lengths = tokens.lengths
    return (1 / lengths.float()).repeat_interleave(lengths).mean().item()


# --------------------------------------------------------------------------- splits and fits on HiddenTokens


def split_by_sequence(tokens: HiddenTokens, test_fraction: float = 0.3, seed: int = 0) -> Split:
    """Random train/test split of whole sequences (no sequence in both).

    Returns ``(train, test)``; the test set gets ``round(test_fraction * S)``
    sequences, at least one, and the training set at least one.
    """
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must lie strictly between 0 and 1, got {test_fraction}.")
    seed = check_seed(seed)
    ids = tokens.sequence_ids
    if len(ids) < 2:
        raise ValueError(f"Splitting needs at least two sequences, got {len(ids)}.")
    permuted = ids[torch.randperm(len(ids), generator=torch.Generator().manual_seed(seed)).to(ids.device)]
    n_test = min(max(1, round(test_fraction * len(ids))), len(ids) - 1)
    return Split(tokens.select(permuted[n_test:].sort().values), tokens.select(permuted[:n_test].sort().values))


def check_disjoint(train: HiddenTokens, test: HiddenTokens) -> None:
    shared = torch.isin(train.sequence_ids, test.sequence_ids)
    if shared.any():
        raise ValueError(
            f"{int(shared.sum())} sequences appear in both the training and the test set "
            f"(ids {train.sequence_ids[shared][:5].tolist()}...): split by sequence with split_by_sequence."
        )


def fit_token_map(
    tokens: HiddenTokens,
    hidden_state: int,
    kind: str = "linear",
    loss: str = "cosine",
    offset: int = 0,
    validation: float | None = None,
    patience: int = 3,
    max_epochs: int = 40,
    **options,
) -> TokenMap:
    """Fit a map from hidden state ``hidden_state``'s tokens (0..L) to the input tokens ``offset`` places on.

    ``options`` go to ``fit_map`` (seed, width, epochs ...). With ``validation`` (a share, e.g. 0.2) a map
    trained by Adam (linear + cosine, MLP) holds out that share of ``tokens``' sequences (split by
    sequence with the map's seed), trains on the rest and stops when its identifiability rate on the
    held-out sequences has not risen for ``patience`` epochs (at most ``max_epochs``): the map keeps
    its best state and its ``history``. Maps without Adam (naive, linear + L2) use every sequence.
    Default None: ``options["epochs"]`` epochs on every sequence, as before.
    """
    hidden_state = check_hidden_state(tokens, hidden_state)
    stopping = None
    if validation is not None and (kind == "mlp" or (kind == "linear" and loss == "cosine")):
        tokens, held = split_by_sequence(tokens, validation, seed=options.get("seed", 0))
        check_choice(loss, LOSSES, "loss")

        def score(module: nn.Module) -> float:
            with torch.no_grad():
                predicted = module(held.hidden[hidden_state])
            return (
                token_hits(predicted, held.x, held.sequence, loss, held.position, offset).targets.float().mean().item()
            )

        stopping = StoppingRule(score, patience, max_epochs)
    if offset == 0:
        sources = targets = torch.arange(len(tokens), device=tokens.x.device)
    else:
        sources, targets = neighbour_rows(tokens.sequence, tokens.position, offset)
    fitted = fit_map(tokens.hidden[hidden_state, sources], tokens.x[targets], kind, loss, stopping=stopping, **options)
    fitted.hidden_state, fitted.offset = hidden_state, offset
    return fitted


def map_hits(
    token_map: TokenMap, tokens: HiddenTokens, hidden_state: int | None = None, distance: str | None = None
) -> NeighbourRows:
    """Per-token :func:`evaluate_map`: ``sources`` (M,) rows of ``tokens``, ``targets`` (M,) bool, True if identified.

    Another ``distance`` than the map's own separates the effect of the distance from that of the loss.
    """
    hidden_state = token_map.hidden_state if hidden_state is None else hidden_state
    if hidden_state is None:
        raise ValueError("The map has no training hidden state; say which hidden_state to evaluate.")
    hidden_state = check_hidden_state(tokens, hidden_state)
    distance = token_map.distance if distance is None else distance
    check_choice(distance, LOSSES, "distance")
    predicted = token_map(tokens.hidden[hidden_state])
    return token_hits(predicted, tokens.x, tokens.sequence, distance, tokens.position, token_map.offset)


def evaluate_map(
    token_map: TokenMap, tokens: HiddenTokens, hidden_state: int | None = None, distance: str | None = None
) -> float:
    """Identifiability rate of ``token_map`` on ``tokens`` at ``hidden_state``, by ``distance`` (defaults: the map's own)."""
    return map_hits(token_map, tokens, hidden_state, distance).targets.float().mean().item()
