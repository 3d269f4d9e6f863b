from pathlib import Path

import pytest

import helpers
from helpers.model.corpus import DataUnavailableError

GLUE_DIR = Path(__file__).parent / "data" / "glue"


def test_pairs_corpus_meets_its_spec(tokenizer):
    pairs = helpers.load_corpus("pairs")
    assert len(pairs) >= 300
    assert len({p.id for p in pairs}) == len(pairs)
    for pair in pairs:
        assert pair.text_b is not None and pair.label in (0, 1)
        for text in (pair.text_a, pair.text_b):
            assert 5 <= len(text.split()) <= 60, text
    assert len({p.topic for p in pairs}) >= 10
    assert 0.5 < sum(p.label for p in pairs) / len(pairs) < 0.8  # mostly paraphrases, like MRPC
    assert pairs[0].source == "book corpus (pairs)"


def test_passages_span_100_to_400_tokens(tokenizer):
    passages = helpers.load_corpus("passages")
    assert len(passages) >= 40
    lengths = [len(tokenizer(p.text_a)["input_ids"]) for p in passages]
    assert min(lengths) >= 100 and max(lengths) <= 400
    assert max(lengths) - min(lengths) > 250  # they spread over the range, for length sweeps
    assert all(p.text_b is None for p in passages)


def test_unknown_corpus():
    with pytest.raises(ValueError, match="pairs"):
        helpers.load_corpus("tweets")


def test_glue_mrpc_from_a_local_folder():
    rows = helpers.model.corpus.load_glue("mrpc", "validation", data_dir=GLUE_DIR)
    assert [r.label for r in rows] == [1, 0]
    assert rows[0].text_a.startswith("The river") and rows[0].text_b.startswith("Overnight")
    assert rows[0].source == "GLUE MRPC (validation)"


def test_glue_cola_and_mnli_from_a_local_folder():
    cola = helpers.model.corpus.load_glue("cola", "validation", data_dir=GLUE_DIR)
    assert [r.label for r in cola] == [1, 0] and cola[0].text_b is None
    mnli = helpers.model.corpus.load_glue("mnli", "validation_matched", data_dir=GLUE_DIR)
    assert [r.label for r in mnli] == [0, 2]
    assert mnli[1].text_b == "The shop is open all day today."


def test_glue_records_share_the_corpus_record_type():
    assert type(helpers.model.corpus.load_glue("mrpc", data_dir=GLUE_DIR)[0]) is type(helpers.load_corpus("pairs")[0])


def test_missing_glue_file_is_a_clear_error(tmp_path):
    with pytest.raises(DataUnavailableError, match="MRPC/dev.tsv"):
        helpers.model.corpus.load_glue("mrpc", "validation", data_dir=tmp_path)


def test_bad_task_and_split():
    with pytest.raises(ValueError, match="mrpc"):
        helpers.model.corpus.load_glue("sst2", data_dir=GLUE_DIR)
    with pytest.raises(ValueError, match="split"):
        helpers.model.corpus.load_glue("mrpc", "dev", data_dir=GLUE_DIR)


def test_glue_from_the_hub_offline_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    import huggingface_hub.constants as hub_constants

    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    try:
        import datasets.config as datasets_config

        monkeypatch.setattr(datasets_config, "HF_HUB_OFFLINE", True, raising=False)
    except ImportError:
        pass
    with pytest.raises(DataUnavailableError, match="load_corpus"):
        helpers.model.corpus.load_glue("mrpc", "validation")
