"""The records of the live explorers (helpers.book.explorers), on a tiny random BERT."""

import json

import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402
import torch  # noqa: E402

import helpers  # noqa: E402
from helpers.book import explorers  # noqa: E402

from .conftest import LONG_TEXT  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def test_thousandths_and_float32_lists():
    assert explorers.thousandths(torch.tensor([[0.12345, -0.0004], [1.0, 0.0006]])) == [[123, 0], [1000, 1]]
    values = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    exact = explorers.float32_list(values)
    assert torch.equal(torch.tensor(exact, dtype=torch.float32), values)  # reads back as the same float32
    assert max(len(repr(v)) for row in exact for v in row) <= 16


def test_attention_split_record(tiny_model, tokenizer):
    encoding = helpers.encode(tokenizer, LONG_TEXT, model=tiny_model)
    record = explorers.attention_split_record(tiny_model, tokenizer, encoding, "a text")
    internals = helpers.capture(tiny_model, encoding)
    n, d_v = internals.n, helpers.describe(tiny_model).d_v
    raw, effective = torch.tensor(record["raw"]), torch.tensor(record["effective"])
    assert raw.shape == effective.shape == (2, 4, n, n) and len(record["tokens"]) == n
    assert (raw - internals.A * explorers.SCALE).abs().max() <= 0.5
    split = helpers.effective_attention_of(internals)
    assert (effective - split.effective * explorers.SCALE).abs().max() <= 0.5
    assert record["null_dims"] == [[n - d_v] * 4] * 2
    assert (raw - effective).abs().max() > 10  # the tiny model's input is longer than d_v: a null part shows


@pytest.fixture
def explorer(tiny_model, tokenizer):
    encoding = helpers.encode(tokenizer, LONG_TEXT, model=tiny_model)
    internals = helpers.capture(tiny_model, encoding)
    tokens = helpers.tokens_of(tokenizer, encoding)
    return helpers.NullSpaceExplorer(internals.A[0, 1], internals.T[0, 1], tokens, directions=2, seed=0), tokens


def test_null_space_rows_record_keeps_the_rows_valid_and_the_output(explorer):
    explorer, tokens = explorer
    record = json.loads(json.dumps(explorers.null_space_rows_record(explorer, [1, 5], tokens, "a head")))
    assert [row["query"] for row in record["rows"]] == [1, 5] and len(record["ranges"]) == 2
    assert torch.tensor(record["T"]).shape == explorer.T.shape
    for t1 in record["ranges"][0]:
        for t2 in record["ranges"][1]:
            moved = explorers.moved_rows(record, [t1, t2])
            assert torch.allclose(moved, explorer.alternative([t1, t2])[[1, 5]], atol=1e-7)
            # the vertices come from HiGHS: a weight may end a solver tolerance below zero
            assert float(moved.min()) >= -1e-9 and float((moved.sum(-1) - 1).abs().max()) < 1e-6
            assert float(explorers.row_output_change(record, [t1, t2]).max()) < 1e-5
    far = [2.2 * record["ranges"][0][1], 0.0]  # past the direction's end (twice the slider's) a weight is negative
    assert float(explorer.alternative(far).min()) < 0


def test_null_space_rows_record_rejects_bad_rows(explorer):
    explorer, tokens = explorer
    with pytest.raises(ValueError, match="query indices"):
        explorers.null_space_rows_record(explorer, [len(tokens)], tokens, "a head")
    with pytest.raises(ValueError, match="tokens"):
        explorers.null_space_rows_record(explorer, [0], tokens[:-1], "a head")


def test_write_json_is_compact(tmp_path):
    path = explorers.write_json({"a": [1, 2]}, tmp_path / "sub" / "x.json")
    assert path.read_text() == '{"a":[1,2]}\n'
