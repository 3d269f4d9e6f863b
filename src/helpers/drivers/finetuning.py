"""Fine-tuning an encoder on sentence pairs with a classification head on [CLS] (chapter 8).

The paper repeats its analyses on BERT fine-tuned for MRPC (its appendix).
Offline, the book fine-tunes its own model on its own paraphrase pairs:

* ``split_pairs``: a seeded held-out split, whole pairs on either side;
* ``fine_tune``: a copy of the encoder plus a linear head on the last hidden
  state of [CLS], trained with AdamW and cross-entropy, seeded (the order of
  the batches, the head's initial weights and dropout); with ``validation``
  pairs it keeps the epoch that scores best on them (a held-out stopping
  rule); the caller's model is never changed;
* ``accuracy`` and ``majority_baseline``: the held-out accuracy and what
  always answering the training set's most frequent label scores.

The fine-tuned encoder comes back in eval mode with eager attention, so every
other helper (``capture``, ``hidden_token_attribution`` ...) takes it as it is.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import nn
from transformers import PreTrainedModel

from ..methods.probes import nearest_in_sequence
from ..model.checks import LINEARISED_ENCODERS, check_autograd, check_supported
from ..model.corpus import Split, check_records
from ..model.numbering import check_count, check_integer
from ..model.progress import progress_bar, step_bar
from ..model.text import token_limit
from .identifiability import collect_hidden_tokens

# the families fine_tune trains a classifier on: BERT and MPNet (its first token, <s>, in place of [CLS])
FINE_TUNE_FAMILIES = LINEARISED_ENCODERS
FINE_TUNE_LIMIT = "it trains a classifier on the start token of the encoders whose layers the book follows"

__all__ = [
    "PairClassifier",
    "FineTuned",
    "split_pairs",
    "fine_tune",
    "predict",
    "accuracy",
    "majority_baseline",
    "shuffled_labels",
    "naive_identifiability_by_example",
]


class PairClassifier(nn.Module):
    """An encoder and a linear head on the last hidden state of [CLS]: logits (batch, labels)."""

    def __init__(self, encoder: PreTrainedModel, labels: int, dropout: float = 0.1):
        super().__init__()
        self.encoder = encoder
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(encoder.config.hidden_size, labels)

    def forward(self, **batch) -> torch.Tensor:
        hidden = self.encoder(**batch).last_hidden_state  # (batch, n, d)
        return self.head(self.dropout(hidden[:, 0]))


@dataclass
class FineTuned:
    """The result of ``fine_tune``: the classifier (its ``encoder`` is the fine-tuned model,
    in eval mode), the training loss of every step (``history``: epoch, step, loss) and, with
    validation pairs, their accuracy and loss after every epoch (``validation``: epoch, accuracy,
    loss) and the epoch whose weights were kept (``best_epoch``; without validation, the last)."""

    classifier: PairClassifier
    history: pd.DataFrame
    labels: tuple[int, ...]
    validation: pd.DataFrame | None = None
    best_epoch: int | None = None

    @property
    def model(self) -> PreTrainedModel:
        return self.classifier.encoder


def _check_examples(examples: Sequence, what: str) -> list:
    examples = list(examples)
    if not examples:
        raise ValueError(f"{what} is empty.")
    for example in examples:
        for field in ("text_a", "text_b", "label"):
            if not hasattr(example, field):
                raise TypeError(
                    f"{what} must hold Example records (text_a, text_b, label); got {type(example).__name__}."
                )
        if not isinstance(example.text_a, str) or not isinstance(example.text_b, str):
            raise ValueError(f"Example {getattr(example, 'id', '?')} is not a sentence pair (text_a and text_b).")
        check_integer(example.label, f"the label of example {getattr(example, 'id', '?')}", 0)
    return examples


def split_pairs(examples: Sequence, test_fraction: float = 0.25, seed: int = 0) -> Split:
    """Split sentence pairs into (train, test), whole pairs on one side, in a seeded random order.

    The test set holds round(test_fraction * len) pairs (at least one each side).
    """
    examples = _check_examples(examples, "examples")
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1); got {test_fraction}.")
    if len(examples) < 2:
        raise ValueError("Need at least two pairs to split.")
    order = torch.randperm(len(examples), generator=torch.Generator().manual_seed(seed)).tolist()
    size = min(len(examples) - 1, max(1, round(test_fraction * len(examples))))
    test = sorted(order[:size])
    train = sorted(order[size:])
    return Split([examples[i] for i in train], [examples[i] for i in test])


def shuffled_labels(examples: Sequence, seed: int = 0) -> list:
    """The same pairs with their labels permuted (seeded): a control that trains by the same steps
    on a task with nothing to learn. Returns new Example records, the label counts unchanged."""
    examples = _check_examples(examples, "examples")
    order = torch.randperm(len(examples), generator=torch.Generator().manual_seed(seed)).tolist()
    return [dataclasses.replace(e, label=examples[i].label) for e, i in zip(examples, order, strict=True)]


def _batch(tokenizer, examples: Sequence, device) -> dict[str, torch.Tensor]:
    batch = tokenizer(
        [e.text_a for e in examples], [e.text_b for e in examples], padding=True, truncation=False, return_tensors="pt"
    )
    return {key: value.to(device) for key, value in batch.items()}


def _checked_lengths(tokenizer, examples: Sequence, limit: int) -> list[int]:
    """Tokens of each pair; an error if one is longer than ``limit``."""
    lengths = []
    for example in examples:
        n = len(tokenizer(example.text_a, example.text_b)["input_ids"])
        if n > limit:
            raise ValueError(f"Pair {getattr(example, 'id', '?')} has {n} tokens; the model takes at most {limit}.")
        lengths.append(n)
    return lengths


def _length_bucketed_batches(lengths: Sequence[int], batch_size: int, generator: torch.Generator) -> list[list[int]]:
    """One epoch's batches: a seeded shuffle, sorted by length within windows of 8 batches
    (so a batch pads little), the batches then in a seeded random order."""
    order = torch.randperm(len(lengths), generator=generator).tolist()
    window = 8 * batch_size
    batches = []
    for start in range(0, len(order), window):
        part = sorted(order[start : start + window], key=lambda i: lengths[i])
        batches += [part[s : s + batch_size] for s in range(0, len(part), batch_size)]
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


def fine_tune(
    model: PreTrainedModel,
    tokenizer,
    train: Sequence,
    epochs: int = 2,
    batch_size: int = 16,
    learning_rate: float = 5e-5,
    weight_decay: float = 0.01,
    seed: int = 0,
    progress: bool = True,
    validation: Sequence | None = None,
    warmup: float = 0.0,
) -> FineTuned:
    """Fine-tune a copy of ``model`` with a classification head on [CLS] over ``train`` pairs.

    Args:
        model: a BERT or MPNet encoder (``load_model``); it is copied, never changed. The head reads the
            first token's last hidden state: [CLS] in BERT, ``<s>`` in MPNet.
        tokenizer: its tokenizer.
        train: Example records with text_a, text_b and an integer label (at least two labels).
        epochs, batch_size: passes over ``train`` and pairs per step; each epoch shuffles the
            pairs (seeded) and groups pairs of similar length into a batch, so little is padded.
        learning_rate, weight_decay: AdamW's, with the rate decaying linearly to 0.
        warmup: the share of the steps over which the rate first rises linearly from 0.
        seed: seeds the head's initial weights, the batch order and dropout; the same
            seed on the same machine and thread count gives bit-identical weights.
        progress: a progress bar over steps.
        validation: held-out pairs (never the test pairs): after every epoch their accuracy and
            loss are measured, and the weights of the epoch with the best accuracy (ties: the
            lower loss, then the earlier epoch) are the ones returned.

    Returns:
        ``FineTuned``: the classifier (encoder in eval mode), the loss per step and, with
        ``validation``, the per-epoch validation table and the epoch kept.
    """
    check_autograd("fine_tune")
    check_supported(model, FINE_TUNE_FAMILIES, method=f"fine_tune ({FINE_TUNE_LIMIT})")
    train = _check_examples(train, "train")
    check_count(epochs, "epochs")
    check_count(batch_size, "batch_size")
    if not learning_rate > 0:
        raise ValueError(f"learning_rate must be positive; got {learning_rate}.")
    if weight_decay < 0:
        raise ValueError(f"weight_decay must be >= 0; got {weight_decay}.")
    if not 0 <= warmup < 1:
        raise ValueError(f"warmup must be in [0, 1); got {warmup}.")
    if validation is not None:
        validation = _check_examples(validation, "validation")
    labels = tuple(sorted({int(e.label) for e in train}))
    if len(labels) < 2:
        raise ValueError(f"train holds only the label(s) {labels}: a classifier needs at least two.")
    if labels != tuple(range(len(labels))):
        raise ValueError(f"Labels must be 0..k-1; got {labels}.")
    lengths = _checked_lengths(tokenizer, train, token_limit(model.config))

    device = next(model.parameters()).device
    torch.manual_seed(seed)  # the head's initial weights and dropout
    classifier = PairClassifier(copy.deepcopy(model), len(labels), model.config.hidden_dropout_prob).to(device)
    order_generator = torch.Generator().manual_seed(seed)
    steps_per_epoch = -(-len(train) // batch_size)
    total = epochs * steps_per_epoch
    optimiser = torch.optim.AdamW(classifier.parameters(), lr=learning_rate, weight_decay=weight_decay)
    warm = round(warmup * total)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda step: (step + 1) / (warm + 1) if step < warm else (total - step) / max(1, total - warm)
    )
    loss_function = nn.CrossEntropyLoss()
    bar = step_bar(total, "fine-tuning", progress, unit="step")
    rows, scores, best = [], [], None
    classifier.train()
    try:
        for epoch in range(1, epochs + 1):
            for batch_indices in _length_bucketed_batches(lengths, batch_size, order_generator):
                chosen = [train[i] for i in batch_indices]
                targets = torch.tensor([int(e.label) for e in chosen], device=device)
                loss = loss_function(classifier(**_batch(tokenizer, chosen, device)), targets)
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                schedule.step()
                rows.append({"epoch": epoch, "step": len(rows) + 1, "loss": float(loss.detach())})
                if bar is not None:
                    bar.update()
            if validation is not None:
                scores.append({"epoch": epoch, **_scores(classifier, tokenizer, validation, loss_function)})
                key = (-scores[-1]["accuracy"], scores[-1]["loss"])
                if best is None or key < best[0]:
                    best = (key, epoch, {k: v.detach().clone() for k, v in classifier.state_dict().items()})
                classifier.train()
    finally:
        if bar is not None:
            bar.close()
        classifier.eval()
    if best is not None:
        classifier.load_state_dict(best[2])
    table = pd.DataFrame(scores) if validation is not None else None
    return FineTuned(classifier, pd.DataFrame(rows), labels, table, best[1] if best is not None else epochs)


@torch.no_grad()
def _scores(classifier: PairClassifier, tokenizer, examples: list, loss_function, batch_size: int = 32) -> dict:
    """Accuracy and mean loss of ``examples`` (the classifier is put in eval mode)."""
    classifier.eval()
    device = next(classifier.parameters()).device
    logits = torch.cat(
        [
            classifier(**_batch(tokenizer, examples[s : s + batch_size], device))
            for s in range(0, len(examples), batch_size)
        ]
    )
    targets = torch.tensor([int(e.label) for e in examples], device=device)
    return {
        "accuracy": float((logits.argmax(-1) == targets).double().mean()),
        "loss": float(loss_function(logits, targets)),
    }


@torch.no_grad()
def predict(
    classifier: PairClassifier, tokenizer, examples: Sequence, batch_size: int = 32, progress: bool = True
) -> torch.Tensor:
    """Predicted labels of sentence pairs: (len(examples),) integers (classifier in eval mode); ``progress``: a
    bar over batches."""
    examples = _check_examples(examples, "examples")
    check_count(batch_size, "batch_size")
    if classifier.training:
        raise ValueError("The classifier is in training mode (dropout on); call classifier.eval() first.")
    device = next(classifier.parameters()).device
    out = [
        classifier(**_batch(tokenizer, examples[s : s + batch_size], device)).argmax(-1).cpu()
        for s in progress_bar(range(0, len(examples), batch_size), "predicting", progress, unit="batch")
    ]
    return torch.cat(out)


def accuracy(
    classifier: PairClassifier, tokenizer, examples: Sequence, batch_size: int = 32, progress: bool = True
) -> float:
    """Share of ``examples`` whose predicted label is their label."""
    examples = _check_examples(examples, "examples")
    predicted = predict(classifier, tokenizer, examples, batch_size, progress)
    return float((predicted == torch.tensor([int(e.label) for e in examples])).double().mean())


def majority_baseline(train: Sequence, test: Sequence) -> float:
    """Accuracy on ``test`` of always answering the most frequent label of ``train`` (ties: the smallest)."""
    train = _check_examples(train, "train")
    test = _check_examples(test, "test")
    counts = Counter(int(e.label) for e in train)
    majority = min(label for label, count in counts.items() if count == max(counts.values()))  # ties: smallest label
    return float(np.mean([int(e.label) == majority for e in test]))


def naive_identifiability_by_example(
    model: PreTrainedModel, tokenizer, examples: Sequence, distance: str = "cosine", progress: bool = True
) -> pd.DataFrame:
    """Naive identifiability per example and hidden state: ``example, hidden_state, rate``.

    The per-sequence version of ``identifiability.naive_identifiability_table`` (whose pooled
    rate is the token-weighted mean of these), so that a bootstrap can resample sequences. ``progress``: a bar
    over the batches of the forward passes.
    """
    examples = check_records(examples)
    tokens = collect_hidden_tokens(model, tokenizer, examples, progress=progress)
    own = torch.arange(tokens.x.shape[0])
    sequences = tokens.sequence.long()
    counts = torch.bincount(sequences, minlength=len(examples)).double()
    rows = []
    for state in range(tokens.num_layers + 1):
        nearest = nearest_in_sequence(tokens.hidden[state], tokens.sequence, tokens.x, tokens.sequence, distance)
        hits = torch.bincount(sequences, weights=(nearest == own).double(), minlength=len(examples))
        rows.append(
            pd.DataFrame(
                {"example": range(len(examples)), "hidden_state": state, "rate": (hits / counts).cpu().numpy()}
            )
        )
    return pd.concat(rows, ignore_index=True)
