"""The special tokens named as each model's tokenizer writes them (helpers.model.token_names)."""

import pandas as pd
import pytest

from helpers.book.claims import Claims
from helpers.book.controls import Control
from helpers.book.notebook import glue, name_special_tokens, setup_notebook
from helpers.methods.intervals import bootstrap
from helpers.model.token_names import names_if_not_bert, own_token_names, special_token_names

MPNET = {"[CLS]": "<s>", "[SEP]": "</s>"}


class Tokenizer:
    def __init__(self, cls_token=None, sep_token=None, bos_token=None, eos_token=None):
        self.cls_token, self.sep_token, self.bos_token, self.eos_token = cls_token, sep_token, bos_token, eos_token


def test_the_names_come_from_the_tokenizer_and_fall_back_on_bos_and_eos():
    assert special_token_names(Tokenizer("[CLS]", "[SEP]")) == {"[CLS]": "[CLS]", "[SEP]": "[SEP]"}
    assert special_token_names(Tokenizer("<s>", "</s>")) == MPNET
    assert special_token_names(Tokenizer(bos_token="<|s|>", eos_token="<|e|>")) == {"[CLS]": "<|s|>", "[SEP]": "<|e|>"}
    with pytest.raises(ValueError, match="no start token or no separator"):
        special_token_names(Tokenizer(bos_token="<s>"))


def test_the_bundled_tokenizer_keeps_berts_names(tokenizer):
    assert special_token_names(tokenizer) == {"[CLS]": "[CLS]", "[SEP]": "[SEP]"}


def test_text_tables_and_labels_are_renamed_and_bert_names_leave_them_untouched():
    assert own_token_names("each [SEP] gives [CLS] more", MPNET) == "each </s> gives <s> more"
    assert own_token_names(["first [SEP]", 3], MPNET) == ["first </s>", 3]
    frame = pd.DataFrame(
        {"removed from [SEP]": ["a [CLS]"], "share": [0.5]},
        index=pd.MultiIndex.from_tuples([("[CLS]", 1)], names=["value zeroed at [CLS]", "layer"]),
    )
    renamed = own_token_names(frame, MPNET)
    assert list(renamed.columns) == ["removed from </s>", "share"]
    assert renamed.index[0] == ("<s>", 1) and renamed.index.names[0] == "value zeroed at <s>"
    assert renamed.iloc[0, 0] == "a <s>" and renamed.iloc[0, 1] == 0.5
    assert frame.columns[0] == "removed from [SEP]", "the input is not changed"
    series = pd.Series([1.0], index=["[CLS]"], name="to [SEP]")
    assert own_token_names(series, MPNET).index[0] == "<s>" and own_token_names(series, MPNET).name == "to </s>"
    bert = {"[CLS]": "[CLS]", "[SEP]": "[SEP]"}
    assert own_token_names(frame, bert) is frame and own_token_names(frame, None) is frame
    assert names_if_not_bert(bert) is None and names_if_not_bert(MPNET) == MPNET
    with pytest.raises(ValueError, match="special tokens must map"):
        names_if_not_bert({"<cls>": "<s>"})


def test_a_scoreboard_names_the_models_tokens_in_claim_control_note_and_quantity():
    claims = Claims("08_fine_tuning", model="m", special_tokens=MPNET)
    values = [0.1 * k for k in range(12)]
    claims.finding(
        "fine-tuning-weakens-sink",
        "the raw attention to [CLS] falls",
        bootstrap([-v for v in values]),
        Control.paired("[SEP]'s change", [-v for v in values], [0.0] * 12),
        side="below",
        note="the sink is [CLS]",
    )
    row = claims.table().loc["fine-tuning-weakens-sink"]
    assert "<s>" in row["claim"] and "[CLS]" not in row["claim"]
    assert row["control"].startswith("</s>'s change") and row["note"] == "the sink is <s>"
    assert claims.record()["special_tokens"] == MPNET
    plain = Claims("08_fine_tuning", model="m")
    assert "special_tokens" not in plain.record()


def test_glued_text_uses_the_models_names_once_they_are_set(monkeypatch):
    # setup_notebook without its global plot style (other tests in this process draw)
    monkeypatch.setattr("helpers.book.plots.style.set_style", lambda: None)
    monkeypatch.setattr("helpers.book.plots.panels.show_panels_in_png", lambda: None)
    setup_notebook()
    assert glue("t_bert", "from each [SEP]") == "from each [SEP]"
    name_special_tokens(Tokenizer("<s>", "</s>"))
    assert glue("t_own", "from each [SEP]") == "from each </s>"
    setup_notebook()  # a new chapter starts with BERT's names
    assert glue("t_again", "from each [SEP]") == "from each [SEP]"
