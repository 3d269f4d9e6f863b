"""The special tokens named as each model's tokenizer writes them.

The book's tables, figures and registry lines name the special tokens as BERT, the paper's model,
writes them: ``[CLS]`` (the start token) and ``[SEP]`` (the separator). On another vocabulary
:func:`own_token_names` rewrites those names to the model's own (MPNet's ``<s>`` and ``</s>``), so a
table or a scoreboard made on that model names the tokens it actually has. On a BERT vocabulary the
mapping is the identity and nothing changes.
"""

from __future__ import annotations

import re

import pandas as pd

BERT_NAMES = {"[CLS]": "[CLS]", "[SEP]": "[SEP]"}


def special_token_names(tokenizer) -> dict[str, str]:
    """{"[CLS]": the model's start token, "[SEP]": its separator}, as its tokenizer writes them.

    The start token is the tokenizer's ``cls_token`` (``bos_token`` where it has none), the separator its
    ``sep_token`` (else ``eos_token``). Raises ValueError for a tokenizer with neither.
    """
    start = getattr(tokenizer, "cls_token", None) or getattr(tokenizer, "bos_token", None)
    separator = getattr(tokenizer, "sep_token", None) or getattr(tokenizer, "eos_token", None)
    if not start or not separator:
        raise ValueError(
            f"{type(tokenizer).__name__} has no start token or no separator (cls/bos: {start!r}, sep/eos: "
            f"{separator!r}): the book's special-token tables apply to encoders that have both"
        )
    return {"[CLS]": str(start), "[SEP]": str(separator)}


def _pattern(names: dict[str, str]) -> re.Pattern | None:
    changed = {bert: own for bert, own in names.items() if bert != own}
    if not changed:
        return None
    unknown = set(changed) - set(BERT_NAMES)
    if unknown:
        raise ValueError(f"names maps BERT's {sorted(BERT_NAMES)} only, not {sorted(unknown)}")
    return re.compile("|".join(re.escape(bert) for bert in changed))


def own_token_names(obj, names: dict[str, str] | None):
    """``obj`` with BERT's ``[CLS]`` and ``[SEP]`` written as ``names`` gives (:func:`special_token_names`).

    obj: a string, a list or tuple of strings, or a pandas Series or DataFrame, whose index and column
    labels (every level) and string cells are rewritten. ``names`` None or BERT's own: ``obj`` unchanged
    (the same object). Other objects are returned as they are.
    """
    pattern = _pattern(names or BERT_NAMES)
    if pattern is None:
        return obj

    def rename(value):
        return pattern.sub(lambda m: names[m.group(0)], value) if isinstance(value, str) else value

    if isinstance(obj, str):
        return rename(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(rename(v) for v in obj)
    if isinstance(obj, (pd.Series, pd.DataFrame)):
        renamed = obj.copy()
        renamed.index = _renamed_index(renamed.index, rename)
        if isinstance(renamed, pd.DataFrame):
            renamed.columns = _renamed_index(renamed.columns, rename)
            for column in renamed.columns:
                if not pd.api.types.is_numeric_dtype(renamed[column]):
                    renamed[column] = renamed[column].map(rename)
        else:
            if not pd.api.types.is_numeric_dtype(renamed):
                renamed = renamed.map(rename)
            renamed.name = rename(renamed.name)
        return renamed
    return obj


def _renamed_index(index: pd.Index, rename) -> pd.Index:
    if isinstance(index, pd.MultiIndex):
        return index.set_levels([level.map(rename) for level in index.levels]).set_names(
            [rename(n) for n in index.names]
        )
    return index.map(rename).rename(rename(index.name))


def names_if_not_bert(names: dict[str, str] | None) -> dict[str, str] | None:
    """``names`` where they rename a token (checked: BERT's two names, mapped to strings), else None."""
    if names is None:
        return None
    if (
        not isinstance(names, dict)
        or set(names) - set(BERT_NAMES)
        or not all(isinstance(v, str) for v in names.values())
    ):
        raise ValueError(
            f"special tokens must map {sorted(BERT_NAMES)} to the model's names, e.g. {{'[CLS]': '<s>'}}; "
            f"got {names!r} (helpers.model.token_names.special_token_names(tokenizer))"
        )
    return dict(names) if _pattern(names) is not None else None
