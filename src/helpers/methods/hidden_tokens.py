"""Every token's hidden state at every layer, with its input embedding and its sequence.

Token identifiability (paper section 4) needs, for many sequences, the
hidden token ``e_i^l`` at each layer ``l`` next to the input token ``x_i`` it
came from. ``helpers.collect_hidden_tokens`` (:mod:`helpers.drivers.identifiability`) runs one batched forward pass per batch
of padded sequences and keeps only the real (unpadded) tokens, concatenated
sequence after sequence.

Input space: ``x_i`` is the input embedding, token + segment + position,
*before* the embedding LayerNorm (``Internals.x``). It is the same
``x`` that Hidden Token Attribution differentiates with respect to, so the
identifiability and attribution chapters talk about the same inputs; the
embedding LayerNorm output is then layer 0 of ``hidden``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

Text = str | tuple[str, str | None]


@dataclass
class HiddenTokens:
    """Hidden and input tokens of S sequences, N real tokens in all, L layers.

    Tokens of one sequence are contiguous and in order; sequences keep the
    ids they were given (``select`` does not renumber them). ``collect_hidden_tokens`` keeps them on the CPU.
    """

    hidden: torch.Tensor  # (L + 1, N, d)  layer 0: embedding output (after LayerNorm); layer l: output of layer l
    x: torch.Tensor  # (N, d)  x: token + segment + position embeddings, before the embedding LayerNorm
    sequence: torch.Tensor  # (N,) long  id of the sequence each token belongs to
    position: torch.Tensor  # (N,) long  position of the token in its sequence (0 = [CLS])
    input_ids: torch.Tensor  # (N,) long  vocabulary id

    def __post_init__(self) -> None:
        N = self.x.shape[0]
        if self.hidden.dim() != 3 or self.x.dim() != 2:
            raise ValueError(
                f"hidden must be (L+1, N, d) and x (N, d); got {tuple(self.hidden.shape)} and {tuple(self.x.shape)}."
            )
        for name in ("sequence", "position", "input_ids"):
            if getattr(self, name).shape != (N,):
                raise ValueError(f"{name} must have shape ({N},), got {tuple(getattr(self, name).shape)}.")
        if self.hidden.shape[1] != N:
            raise ValueError(f"hidden has {self.hidden.shape[1]} tokens but x has {N}.")

    @property
    def num_layers(self) -> int:
        """L: number of transformer layers (``hidden`` holds L + 1 states)."""
        return self.hidden.shape[0] - 1

    @property
    def sequence_ids(self) -> torch.Tensor:
        """(S,) the distinct sequence ids, in order of appearance."""
        return torch.unique_consecutive(self.sequence)

    @property
    def lengths(self) -> torch.Tensor:
        """(S,) number of tokens of each sequence, aligned with ``sequence_ids``."""
        return torch.unique_consecutive(self.sequence, return_counts=True)[1]

    def __len__(self) -> int:
        return self.x.shape[0]

    def select(self, sequence_ids: torch.Tensor | Sequence[int]) -> HiddenTokens:
        """The tokens of the given sequences only (whole sequences, never single tokens)."""
        ids = torch.as_tensor(sequence_ids, dtype=torch.long, device=self.sequence.device)
        if ids.numel() == 0:
            raise ValueError("No sequence ids given: select at least one sequence.")
        unknown = ids[~torch.isin(ids, self.sequence)]
        if unknown.numel():
            raise ValueError(f"Unknown sequence ids {unknown[:5].tolist()}; valid ids come from .sequence_ids.")
        keep = torch.isin(self.sequence, ids)
        return HiddenTokens(
            hidden=self.hidden[:, keep],
            x=self.x[keep],
            sequence=self.sequence[keep],
            position=self.position[keep],
            input_ids=self.input_ids[keep],
        )


@dataclass(frozen=True)
class InputParts:
    """An encoder's input tokens split as x = word + position, each (N, d).

    ``word`` is the word-piece embedding; ``position`` the position + segment
    embeddings (x less the word). ``parts["word"]`` reads a part by name.
    """

    word: torch.Tensor
    position: torch.Tensor

    def __getitem__(self, name: str) -> torch.Tensor:
        if name not in ("word", "position"):
            raise KeyError(f"no input part {name!r}; the parts are 'word' and 'position'.")
        return getattr(self, name)
