"""Every token's hidden state at every layer, with its input embedding and its sentence.

Token identifiability (paper section 4) needs, for many sequences, the
hidden token ``e_i^l`` at each layer ``l`` next to the input token ``x_i`` it
came from. ``collect_hidden_tokens`` runs one batched forward pass per batch
of padded sequences and keeps only the real (unpadded) tokens, concatenated
sequence after sequence.

Input space: ``x_i`` is the input embedding, token + segment + position,
*before* the embedding LayerNorm (``Internals.x``). It is the same
``x`` that Hidden Token Attribution differentiates with respect to, so the
identifiability and attribution chapters talk about the same inputs; the
embedding LayerNorm output is then layer 0 of ``hidden``.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from .models import check_supported, float32_model
from .text import text_pair_of

Text = str | tuple[str, str | None]


@dataclass
class HiddenTokens:
    """Hidden and input tokens of S sequences, N real tokens in all, L layers.

    Tokens of one sequence are contiguous and in order; sequences keep the
    ids they were given (``select`` does not renumber them).
    """

    hidden: torch.Tensor  # (L + 1, N, d)  layer 0: embedding output (after LayerNorm); layer l: output of layer l
    x: torch.Tensor  # (N, d)  x: token + segment + position embeddings, before the embedding LayerNorm
    sentence: torch.Tensor  # (N,) long  id of the sequence each token belongs to
    position: torch.Tensor  # (N,) long  position of the token in its sequence (0 = [CLS])
    input_ids: torch.Tensor  # (N,) long  vocabulary id

    def __post_init__(self) -> None:
        N = self.x.shape[0]
        if self.hidden.dim() != 3 or self.x.dim() != 2:
            raise ValueError(
                f"hidden must be (L+1, N, d) and x (N, d); got {tuple(self.hidden.shape)} and {tuple(self.x.shape)}."
            )
        for name in ("sentence", "position", "input_ids"):
            if getattr(self, name).shape != (N,):
                raise ValueError(f"{name} must have shape ({N},), got {tuple(getattr(self, name).shape)}.")
        if self.hidden.shape[1] != N:
            raise ValueError(f"hidden has {self.hidden.shape[1]} tokens but x has {N}.")

    @property
    def layers(self) -> int:
        """L: number of transformer layers (``hidden`` holds L + 1 states)."""
        return self.hidden.shape[0] - 1

    @property
    def sentence_ids(self) -> torch.Tensor:
        """(S,) the distinct sequence ids, in order of appearance."""
        return torch.unique_consecutive(self.sentence)

    @property
    def lengths(self) -> torch.Tensor:
        """(S,) number of tokens of each sequence, aligned with ``sentence_ids``."""
        return torch.unique_consecutive(self.sentence, return_counts=True)[1]

    def __len__(self) -> int:
        return self.x.shape[0]

    def select(self, sentence_ids: torch.Tensor | Sequence[int]) -> HiddenTokens:
        """The tokens of the given sequences only (whole sequences, never single tokens)."""
        ids = torch.as_tensor(sentence_ids, dtype=torch.long)
        if ids.numel() == 0:
            raise ValueError("No sentence ids given: select at least one sequence.")
        unknown = ids[~torch.isin(ids, self.sentence)]
        if unknown.numel():
            raise ValueError(f"Unknown sentence ids {unknown[:5].tolist()}; valid ids come from .sentence_ids.")
        keep = torch.isin(self.sentence, ids)
        return HiddenTokens(
            hidden=self.hidden[:, keep],
            x=self.x[keep],
            sentence=self.sentence[keep],
            position=self.position[keep],
            input_ids=self.input_ids[keep],
        )


def _as_pair(item, index: int) -> tuple[str, str | None]:
    return text_pair_of(item, index)


@torch.no_grad()
def collect_hidden_tokens(
    model: PreTrainedModel,
    tokenizer,
    texts: Sequence[Text],
    batch_size: int = 64,
    progress: bool = True,
) -> HiddenTokens:
    """Hidden states at every layer and input embeddings of every real token.

    One forward pass per batch of padded sequences; padding tokens are
    dropped afterwards, so each token's states equal those of an unpadded
    pass over its own sequence (up to float rounding).

    Args:
        model: a BERT encoder in eval mode (``load_model``).
        tokenizer: its tokenizer.
        texts: S items, each a string, a ``(text, text_pair)`` tuple or an
            ``Example`` (a pair becomes one sequence ``[CLS] a [SEP] b [SEP]``).
            Sequence s gets id s.
        batch_size: sequences per forward pass.
        progress: show a progress bar over batches.

    Returns:
        ``HiddenTokens`` with ``hidden: (L+1, N, d)``, ``x: (N, d)``.

    Raises:
        ValueError: no texts, an empty text, a sequence longer than the model
            takes, a bad batch size or a model in training mode.
    """
    check_supported(model)
    if model.training:
        raise ValueError("The model is in training mode (dropout on); call model.eval() first.")
    if isinstance(texts, (str, tuple)):
        raise TypeError("texts must be a list of texts (or pairs); wrap a single text in a list.")
    pairs = [_as_pair(item, i) for i, item in enumerate(texts)]
    if not pairs:
        raise ValueError("No texts given: collect_hidden_tokens needs at least one sequence.")
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}.")
    batch_size = int(batch_size)
    if getattr(tokenizer, "padding_side", "right") != "right":
        raise ValueError(
            "The tokenizer pads on the left; BERT's absolute positions need tokenizer.padding_side = 'right'."
        )
    has_pair = [b is not None for _, b in pairs]
    limit = model.config.max_position_embeddings
    if any(has_pair) and getattr(model.config, "type_vocab_size", 2) < 2:
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

    from tqdm.auto import tqdm

    raw: list[torch.Tensor] = []
    hook = model.embeddings.LayerNorm.register_forward_hook(lambda m, i, o: raw.append(i[0]))
    hidden, inputs, sentence, position, input_ids = [], [], [], [], []
    try:
        for batch in tqdm(batches, desc="hidden states", disable=not progress):
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
            sentence.append(ids[:, None].expand_as(mask)[mask].cpu())
            position.append(torch.arange(mask.shape[1], device=mask.device).expand_as(mask)[mask].cpu())
            input_ids.append(encoding["input_ids"][mask].cpu())
    finally:
        hook.remove()
    sentence_all = torch.cat(sentence)
    order = torch.sort(sentence_all, stable=True).indices  # back to the order of ``texts``
    return HiddenTokens(
        hidden=torch.cat(hidden, dim=1)[:, order],
        x=torch.cat(inputs)[order],
        sentence=sentence_all[order],
        position=torch.cat(position)[order],
        input_ids=torch.cat(input_ids)[order],
    )
