"""Token classes and the attention they receive (helpers.methods.tokens)."""

import pytest
import torch

from helpers.methods.tokens import attention_to, is_punctuation, token_classes


def test_token_classes_partition_the_sequence():
    tokens = ["[CLS]", "the", "cat", ",", "sat", "##.", "...", "[SEP]", "it", "'", "s", "[SEP]"]
    masks = token_classes(tokens)
    assert masks["[CLS]"].nonzero().ravel().tolist() == [0]
    assert masks["[SEP]"].nonzero().ravel().tolist() == [7, 11]
    assert masks["punctuation"].nonzero().ravel().tolist() == [3, 5, 6, 9]
    total = sum(mask.long() for mask in masks.values())
    assert total.eq(1).all()
    with pytest.raises(ValueError, match="empty"):
        token_classes([])
    with pytest.raises(TypeError):
        token_classes("[CLS] the")


def test_attention_to_classes_sums_to_one_for_raw_attention():
    A = torch.softmax(
        torch.randn(2, 3, 12, 12, generator=torch.Generator().manual_seed(0), dtype=torch.float64), dim=-1
    )
    tokens = ["[CLS]"] + ["w", ","] * 5 + ["[SEP]"]
    masks = token_classes(tokens)
    total = sum(attention_to(A, mask) for mask in masks.values())
    assert torch.allclose(total, torch.ones(2, 3, dtype=torch.float64))
    # attention to [CLS] is the mean of column 0
    assert torch.allclose(attention_to(A, masks["[CLS]"]), A[..., 0].mean(-1))
    with pytest.raises(ValueError, match="mask"):
        attention_to(A, masks["[CLS]"][:-1])
    with pytest.raises(ValueError, match="mask"):
        attention_to(A, masks["[CLS]"].long())


def test_is_punctuation_ignores_the_wordpiece_prefix_only():
    assert is_punctuation(",") and is_punctuation("##.") and is_punctuation("...") and is_punctuation("«")
    assert not is_punctuation("##") and not is_punctuation("a.") and not is_punctuation("")
