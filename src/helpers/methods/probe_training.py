"""Gradient training of the token maps (chapter 5): seeded mini-batch Adam, with or without a held-out stopping rule.

:func:`~helpers.methods.probes.fit_map` calls :func:`adam_steps`. Without a rule it runs a fixed number of
epochs (the book's old recipe). With a :class:`StoppingRule` it scores the map on held-out
sequences before the first epoch and after each one, keeps the best state, and stops when
``patience`` epochs in a row bring no gain on the held-out score (or at ``max_epochs``, the
budget): the map returned is the best one seen, and the scores are its convergence history.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from ..model.numbering import check_count

__all__ = ["StoppingRule", "adam_steps", "map_loss", "one_thread"]


@dataclass(frozen=True)
class StoppingRule:
    """Train until the held-out score stops rising.

    score: module -> float, higher is better (e.g. the identifiability rate on held-out sequences);
    patience: epochs in a row without a gain before stopping; max_epochs: the budget.
    """

    score: Callable[[nn.Module], float]
    patience: int = 3
    max_epochs: int = 40

    def __post_init__(self):
        check_count(self.patience, "patience")
        check_count(self.max_epochs, "max_epochs")


def map_loss(predicted: torch.Tensor, targets: torch.Tensor, loss: str) -> torch.Tensor:
    """Mean loss of (B, d) predictions: ``"l2"`` the squared distance, ``"cosine"`` 1 - cosine similarity."""
    if loss == "l2":
        return ((predicted - targets) ** 2).sum(dim=-1).mean()
    return (1 - nn.functional.cosine_similarity(predicted, targets, dim=-1)).mean()


@contextmanager
def one_thread():
    """Run many small mini-batch steps on one thread (with several, each small product ends in a
    synchronisation: 10-20x slower on a busy machine); the previous setting is restored afterwards."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def adam_steps(
    module: nn.Module,
    hidden: torch.Tensor,
    targets: torch.Tensor,
    loss: str,
    seed: int,
    epochs: int,
    batch_size: int,
    lr: float,
    stopping: StoppingRule | None = None,
) -> list[float]:
    """Seeded mini-batch Adam on ``loss`` over (N, d) ``hidden`` -> (N, d_out) ``targets``, in place.

    Without ``stopping``: ``epochs`` passes in about ``batch_size``-token batches; returns [].
    With it: up to ``stopping.max_epochs`` passes (``epochs`` is ignored), stopping after ``patience``
    epochs without a gain on ``stopping.score``; the module is left at its best state. Returns the
    held-out scores, one before training (index 0) and one after each epoch run.
    """
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.Adam(module.parameters(), lr=lr)
    N = hidden.shape[0]
    batches = max(1, round(N / batch_size))  # equal batches: no tiny, noisy last batch

    def epoch() -> None:
        for rows in torch.tensor_split(torch.randperm(N, generator=generator).to(hidden.device), batches):
            optimiser.zero_grad()
            map_loss(module(hidden[rows]), targets[rows], loss).backward()
            optimiser.step()

    with one_thread():
        if stopping is None:
            for _ in range(epochs):
                epoch()
            return []
        history = [float(stopping.score(module))]
        best, best_state, since = history[0], copy.deepcopy(module.state_dict()), 0
        while len(history) <= stopping.max_epochs and since < stopping.patience:
            epoch()
            history.append(float(stopping.score(module)))
            if history[-1] > best:
                best, best_state, since = history[-1], copy.deepcopy(module.state_dict()), 0
            else:
                since += 1
        module.load_state_dict(best_state)
    return history
