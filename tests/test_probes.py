import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from torch.nn import functional  # noqa: E402

import helpers  # noqa: E402
from helpers.methods.hidden_tokens import HiddenTokens  # noqa: E402

IDENTITY, ROTATION, NOISY, INDEPENDENT, SHIFTED = range(5)


def synthetic_tokens(sentences: int = 60, d: int = 16, seed: int = 0) -> HiddenTokens:
    """Hidden 'layers' whose relation to the inputs is known.

    0: the inputs; 1: an orthogonal rotation of them; 2: inputs + small noise;
    3: independent of the inputs; 4: the rotated input of the next token
    (the last token of a sequence gets noise).
    """
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(6, 21, (sentences,), generator=g)
    N = int(lengths.sum())
    x = torch.randn(N, d, generator=g)
    Q = torch.linalg.qr(torch.randn(d, d, generator=g))[0]
    sequence = torch.arange(sentences).repeat_interleave(lengths)
    position = torch.cat([torch.arange(int(n)) for n in lengths])
    shifted = torch.randn(N, d, generator=g)
    has_next = torch.cat([sequence[1:] == sequence[:-1], torch.tensor([False])])
    shifted[has_next] = x[1:][has_next[:-1]] @ Q
    hidden = torch.stack([x, x @ Q, x + 0.01 * torch.randn(N, d, generator=g), torch.randn(N, d, generator=g), shifted])
    return HiddenTokens(hidden, x, sequence, position, torch.zeros(N, dtype=torch.long))


@pytest.fixture(scope="module")
def split():
    return helpers.methods.probes.split_by_sequence(synthetic_tokens(), test_fraction=0.4, seed=0)


def rate(split, layer, kind, loss, **options):
    train, test = split
    return helpers.methods.probes.evaluate_map(
        helpers.methods.probes.fit_token_map(train, layer, kind, loss, **options), test
    )


# ------------------------------------------------------------------ known answers


@pytest.mark.parametrize("loss", ["l2", "cosine"])
def test_rotation_is_undone_by_a_linear_map_not_by_the_naive_one(split, loss):
    assert rate(split, ROTATION, "linear", loss) == 1.0
    assert rate(split, ROTATION, "mlp", loss, epochs=2) == 1.0
    assert rate(split, ROTATION, "naive", loss) < 0.4
    assert rate(split, IDENTITY, "naive", loss) == 1.0


@pytest.mark.parametrize("kind", ["naive", "linear"])
def test_small_noise_keeps_tokens_identifiable(split, kind):
    assert rate(split, NOISY, kind, "l2") == 1.0
    assert rate(split, NOISY, kind, "cosine") == 1.0


@pytest.mark.parametrize("kind, loss", [("naive", "cosine"), ("linear", "l2"), ("linear", "cosine"), ("mlp", "l2")])
def test_independent_hidden_tokens_are_at_chance(split, kind, loss):
    chance = helpers.methods.probes.chance_rate(split[1])
    assert 0.05 < chance < 0.15
    assert abs(rate(split, INDEPENDENT, kind, loss) - chance) < 0.05


def test_neighbour_is_recovered_at_its_offset_only(split):
    train, test = split
    table = helpers.drivers.identifiability.neighbour_rates(
        train, test, offsets=[-1, 0, 1], hidden_states=[SHIFTED], kind="linear", loss="l2", progress=False
    )
    by_offset = dict(zip(table["offset"], table["rate"], strict=False))
    assert by_offset[1] == 1.0
    assert by_offset[0] < 0.4 and by_offset[-1] < 0.4


def test_neighbour_joint_least_squares_equals_one_fit_per_offset(split):
    train, test = split
    offsets = [-2, 1]
    table = helpers.drivers.identifiability.neighbour_rates(
        train, test, offsets=offsets, hidden_states=[NOISY], kind="linear", loss="l2", progress=False
    )
    rows, targets = helpers.drivers.identifiability._interior(train, offsets)
    test_rows, test_targets = helpers.drivers.identifiability._interior(test, offsets)
    for k, got in zip(offsets, table["rate"], strict=False):
        fitted = helpers.methods.probes.fit_map(train.hidden[NOISY, rows], train.x[targets[k]], "linear", "l2")
        nearest = helpers.methods.probes.nearest_in_sequence(
            fitted(test.hidden[NOISY, test_rows]), test.sequence[test_rows], test.x, test.sequence, "l2"
        )
        assert got == (nearest == test_targets[k]).float().mean().item()
    # the general path (one fit per offset) finds the shifted neighbour too
    cosine = helpers.drivers.identifiability.neighbour_rates(
        train, test, offsets=[0, 1], hidden_states=[SHIFTED], kind="linear", loss="cosine", progress=False
    )
    assert cosine["rate"].tolist()[1] == 1.0 and cosine["rate"].tolist()[0] < 0.4
    with pytest.raises(ValueError, match="too short"):
        helpers.drivers.identifiability.neighbour_rates(train, test, offsets=[-30, 30], progress=False)


# ------------------------------------------------------------------ maps


def test_linear_l2_is_the_least_squares_solution():
    g = torch.Generator().manual_seed(1)
    h, x = torch.randn(200, 8, generator=g), torch.randn(200, 5, generator=g)
    fitted = helpers.methods.probes.fit_map(h, x, "linear", "l2", ridge=0.0)
    X = torch.cat([h, torch.ones(200, 1)], dim=1).double()
    solution = torch.linalg.lstsq(X, x.double()).solution
    assert torch.allclose(fitted(h).double(), X @ solution, atol=1e-5)
    # badly scaled features (like BERT's outlier dimensions) change nothing
    scaled = h * torch.logspace(-3, 3, 8)
    fitted = helpers.methods.probes.fit_map(scaled, x, "linear", "l2", ridge=0.0)
    assert torch.allclose(fitted(scaled).double(), X @ solution, atol=1e-4)
    with pytest.raises(ValueError, match="ridge > 0"):
        helpers.methods.probes.fit_map(torch.cat([h, h[:, :1]], dim=1), x, "linear", "l2", ridge=0.0)


def test_cosine_training_lowers_the_cosine_loss(split):
    train, _ = split
    h, x = train.hidden[INDEPENDENT], train.x
    threads = torch.get_num_threads()
    start = helpers.methods.probes.fit_map(h, x, "linear", "cosine", epochs=0)  # the least-squares start
    assert torch.allclose(  # least squares onto the unit-length targets
        start(h), helpers.methods.probes.fit_map(h, torch.nn.functional.normalize(x, dim=-1), "linear", "l2")(h)
    )
    trained = helpers.methods.probes.fit_map(h, x, "linear", "cosine", epochs=100)  # 100 Adam steps on 500 tokens
    assert isinstance(trained.module, torch.nn.Linear)  # folded back onto the raw hidden tokens
    mlp = helpers.methods.probes.fit_map(h, x, "mlp", "cosine", epochs=100, width=64)
    assert torch.get_num_threads() == threads  # the one-thread training loop restores the setting

    def loss(m):
        return helpers.methods.probes._loss(m(h), x, "cosine").item()

    assert loss(trained) < loss(start) - 1e-3
    assert loss(mlp) < loss(start) - 1e-3


def exact_linear_tokens(scale: float, sentences: int = 40, length: int = 12, d: int = 32) -> HiddenTokens:
    """One hidden state that is an exact affine function of the inputs, times ``scale``."""
    g = torch.Generator().manual_seed(11)
    x = torch.randn(sentences * length, d, generator=g)
    hidden = scale * (x @ (torch.randn(d, d, generator=g) / d**0.5) + torch.randn(d, generator=g))
    sequence = torch.arange(sentences).repeat_interleave(length)
    position = torch.arange(length).repeat(sentences)
    return HiddenTokens(hidden[None], x, sequence, position, torch.zeros(len(x), dtype=torch.long))


@pytest.mark.parametrize("scale", [1.0, 10.0, 100.0, 1e4])
def test_the_input_scale_cannot_matter(scale):
    train, test = helpers.methods.probes.split_by_sequence(exact_linear_tokens(scale), 0.3, seed=0)
    reference = helpers.methods.probes.split_by_sequence(exact_linear_tokens(1.0), 0.3, seed=0)
    for kind, loss in (("linear", "l2"), ("linear", "cosine"), ("mlp", "l2"), ("mlp", "cosine")):
        fitted = helpers.methods.probes.fit_token_map(train, 0, kind, loss, epochs=2)
        # an L2 fit lands in input space, so either distance finds the token; a cosine fit is
        # fitted to unit-length targets (a direction only), so only the cosine distance applies
        for distance in ("l2", "cosine") if loss == "l2" else ("cosine",):
            rate = helpers.methods.probes.evaluate_map(fitted, test, distance=distance)
            assert rate >= 0.99, (kind, loss, distance, rate)
        if kind == "linear":  # the same predictions as at scale 1: the fit standardises its inputs
            at_one = helpers.methods.probes.fit_token_map(reference[0], 0, kind, loss, epochs=2)
            assert torch.allclose(fitted(test.hidden[0]), at_one(reference[1].hidden[0]), atol=1e-3), loss
    # the L2 map lands in input space: it identifies with either distance
    least_squares = helpers.methods.probes.fit_token_map(train, 0, "linear", "l2")
    for distance in ("l2", "cosine"):
        assert helpers.methods.probes.evaluate_map(least_squares, test, distance=distance) >= 0.99
    hits = helpers.methods.probes.map_hits(least_squares, test, distance="cosine")
    assert torch.equal(hits.sources, torch.arange(len(test))) and hits.targets.all()
    # the naive map is the identity: scale-free with cosine
    naive = helpers.methods.probes.fit_map(scale * test.x, test.x, "naive", "cosine")
    assert helpers.methods.probes.identifiability_rate(naive(scale * test.x), test.x, test.sequence) == 1.0


def test_mlp_is_seeded(split):
    train, _ = split
    h, x = train.hidden[NOISY], train.x
    a, b = (helpers.methods.probes.fit_map(h, x, "mlp", "l2", seed=3, epochs=1) for _ in range(2))
    c = helpers.methods.probes.fit_map(h, x, "mlp", "l2", seed=4, epochs=1)
    assert torch.equal(a(h), b(h))
    assert not torch.equal(a(h), c(h))


def test_bad_map_input():
    h = torch.randn(10, 4)
    with pytest.raises(ValueError, match="map kind"):
        helpers.methods.probes.fit_map(h, h, "quadratic")
    with pytest.raises(ValueError, match="loss"):
        helpers.methods.probes.fit_map(h, h, "linear", "l1")
    with pytest.raises(ValueError, match="training set is empty"):
        helpers.methods.probes.fit_map(torch.zeros(0, 4), torch.zeros(0, 4))
    with pytest.raises(ValueError, match="must match row for row"):
        helpers.methods.probes.fit_map(h, h[:9])
    with pytest.raises(ValueError, match="one size"):
        helpers.methods.probes.fit_map(h, torch.randn(10, 3), "naive")
    with pytest.raises(ValueError, match=r"\(N, d\)"):
        helpers.methods.probes.fit_map(h[0], h[0])
    with pytest.raises(TypeError, match="torch.Tensor"):
        helpers.methods.probes.fit_map(h.numpy(), h)


# ------------------------------------------------------------------ nearest token, rates


def brute_force_nearest(queries, query_sequence, inputs, input_sequence, distance):
    out = []
    for q, s in zip(queries, query_sequence, strict=False):
        rows = torch.nonzero(input_sequence == s).squeeze(1)
        if distance == "l2":
            scores = ((inputs[rows] - q) ** 2).sum(-1)
        else:
            scores = -torch.nn.functional.cosine_similarity(inputs[rows], q[None], dim=-1)
        out.append(rows[scores.argmin()])
    return torch.stack(out)


@pytest.mark.parametrize("distance", ["l2", "cosine"])
def test_nearest_matches_brute_force_and_stays_in_the_sentence(distance):
    tokens = synthetic_tokens(sentences=12, seed=2)
    g = torch.Generator().manual_seed(0)
    shuffle = torch.randperm(len(tokens), generator=g)  # order must not matter
    queries = torch.randn(len(tokens), 16, generator=g)[shuffle]
    query_sequence = tokens.sequence[shuffle]
    found = helpers.methods.probes.nearest_in_sequence(queries, query_sequence, tokens.x, tokens.sequence, distance)
    assert torch.equal(tokens.sequence[found], query_sequence)
    assert torch.equal(found, brute_force_nearest(queries, query_sequence, tokens.x, tokens.sequence, distance))


def test_rates_of_exact_and_shifted_predictions():
    tokens = synthetic_tokens(sentences=10, seed=3)
    x, s, p = tokens.x, tokens.sequence, tokens.position
    for distance in ("l2", "cosine"):
        assert helpers.methods.probes.identifiability_rate(x, x, s, distance) == 1.0
        assert helpers.methods.probes.identifiability_rate(3 * x, x, s, "cosine") == 1.0
    # predicting x_{i+1} from token i: perfect at offset +1, never right at offset 0
    sources, targets = helpers.methods.probes.neighbour_rows(s, p, 1)
    predicted = torch.zeros_like(x)
    predicted[sources] = x[targets]
    assert helpers.methods.probes.identifiability_rate(predicted, x, s, "l2", position=p, offset=1) == 1.0
    assert helpers.methods.probes.identifiability_rate(predicted[sources], x[sources], s[sources], "l2") == 0.0


def test_neighbour_rows_by_brute_force():
    tokens = synthetic_tokens(sentences=5, seed=4)
    for offset in (-3, -1, 2):
        sources, targets = helpers.methods.probes.neighbour_rows(tokens.sequence, tokens.position, offset)
        expected = [
            (i, j)
            for i in range(len(tokens))
            for j in range(len(tokens))
            if tokens.sequence[i] == tokens.sequence[j] and tokens.position[j] == tokens.position[i] + offset
        ]
        assert list(zip(sources.tolist(), targets.tolist(), strict=False)) == expected


def test_chance_rate_is_mean_inverse_length():
    tokens = synthetic_tokens(sentences=7, seed=5)
    # each token is right with probability 1 / (its sequence's length): the mean is S / N
    assert helpers.methods.probes.chance_rate(tokens) == pytest.approx(len(tokens.sequence_ids) / len(tokens))
    # and a map that guesses uniformly at random scores that on average
    g = torch.Generator().manual_seed(0)
    guesses = [
        helpers.methods.probes.identifiability_rate(
            torch.randn(len(tokens), 16, generator=g), tokens.x, tokens.sequence
        )
        for _ in range(200)
    ]
    assert sum(guesses) / len(guesses) == pytest.approx(helpers.methods.probes.chance_rate(tokens), abs=0.01)


def test_bad_rate_input():
    x, s = torch.randn(6, 4), torch.tensor([0, 0, 0, 1, 1, 1])
    with pytest.raises(ValueError, match="map to input space"):
        helpers.methods.probes.nearest_in_sequence(torch.randn(6, 3), s, x, s)
    with pytest.raises(ValueError, match="No tokens"):
        helpers.methods.probes.nearest_in_sequence(torch.zeros(0, 4), s[:0], x, s)
    with pytest.raises(ValueError, match="no input tokens"):
        helpers.methods.probes.nearest_in_sequence(x, torch.tensor([0, 0, 0, 2, 2, 2]), x, s)
    with pytest.raises(ValueError, match="distance"):
        helpers.methods.probes.nearest_in_sequence(x, s, x, s, "manhattan")
    with pytest.raises(ValueError, match="one per token"):
        helpers.methods.probes.identifiability_rate(x[:5], x, s)
    with pytest.raises(ValueError, match="positions"):
        helpers.methods.probes.identifiability_rate(x, x, s, offset=1)
    with pytest.raises(ValueError, match="No token has a neighbour"):
        helpers.methods.probes.identifiability_rate(x, x, s, position=torch.tensor([0, 1, 2, 0, 1, 2]), offset=5)


# ------------------------------------------------------------------ splits and experiments


def test_split_is_by_whole_sentences():
    tokens = synthetic_tokens(sentences=30, seed=6)
    train, test = helpers.methods.probes.split_by_sequence(tokens, test_fraction=0.3, seed=1)
    assert not torch.isin(train.sequence_ids, test.sequence_ids).any()
    assert torch.equal(torch.cat([train.sequence_ids, test.sequence_ids]).sort().values, tokens.sequence_ids)
    assert len(test.sequence_ids) == 9 and len(train) + len(test) == len(tokens)
    for part in (train, test):
        assert torch.equal(part.lengths, tokens.lengths[part.sequence_ids])  # no sequence cut in two
    again, _ = helpers.methods.probes.split_by_sequence(tokens, test_fraction=0.3, seed=1)
    other, _ = helpers.methods.probes.split_by_sequence(tokens, test_fraction=0.3, seed=2)
    assert torch.equal(again.sequence_ids, train.sequence_ids)
    assert not torch.equal(other.sequence_ids, train.sequence_ids)


def test_bad_splits_and_leaks():
    tokens = synthetic_tokens(sentences=10, seed=7)
    for fraction in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="test_fraction"):
            helpers.methods.probes.split_by_sequence(tokens, fraction)
    with pytest.raises(ValueError, match="at least two sequences"):
        helpers.methods.probes.split_by_sequence(tokens.select([0]))
    train, test = helpers.methods.probes.split_by_sequence(tokens, 0.3)
    leaky = tokens.select(torch.cat([test.sequence_ids, train.sequence_ids[:1]]))
    for run in (
        lambda: helpers.drivers.identifiability.probe_layers(train, leaky, progress=False),
        lambda: helpers.drivers.identifiability.fraction_curve(train, leaky, progress=False),
        lambda: helpers.drivers.identifiability.neighbour_rates(train, leaky, progress=False),
    ):
        with pytest.raises(ValueError, match="both the training and the test set"):
            run()


def test_probe_layers_table_maps_and_generalisation(split):
    train, test = split
    combos = [("naive", "cosine"), ("linear", "l2")]
    result = helpers.drivers.identifiability.probe_layers(
        train, test, combos, hidden_states=[IDENTITY, ROTATION, INDEPENDENT], train_rates=True, progress=False
    )
    assert list(result.table.columns) == ["map", "loss", "hidden_state", "test", "train"]
    assert (result.table.query("hidden_state == @ROTATION and map == 'linear'")[["test", "train"]] == 1.0).all().all()
    assert len(result.table) == 6 and set(result.maps) == set(combos)
    assert [m.hidden_state for m in result.maps[("linear", "l2")]] == [IDENTITY, ROTATION, INDEPENDENT]
    matrix = helpers.drivers.identifiability.generalisation_matrix(
        result.maps[("linear", "l2")], test, hidden_states=[IDENTITY, ROTATION, INDEPENDENT]
    )
    rates = result.table.query("map == 'linear'")["test"].to_numpy()
    assert torch.allclose(matrix.diagonal().double(), torch.tensor(rates))  # the diagonal is the per-layer rate
    assert matrix[0, 1] < 0.4  # a map for the identity layer does not undo the rotation
    with pytest.raises(ValueError, match="No maps"):
        helpers.drivers.identifiability.generalisation_matrix([], test)
    with pytest.raises(ValueError, match="offset 0"):
        helpers.drivers.identifiability.generalisation_matrix(
            [helpers.methods.probes.fit_token_map(train, SHIFTED, "linear", "l2", offset=1)], test
        )
    with pytest.raises(ValueError, match="must be between 0"):
        helpers.drivers.identifiability.probe_layers(train, test, combos, hidden_states=[9], progress=False)
    with pytest.raises(ValueError, match="map kind"):
        helpers.drivers.identifiability.probe_layers(train, test, [("cubic", "l2")], progress=False)


def test_hidden_state_is_the_index_0_to_L_and_bad_values_are_refused(split):
    train, test = split
    last = train.hidden.shape[0] - 1  # hidden states 0..L
    with pytest.raises(ValueError, match="must be between 0"):  # no negative numbers: -1 is not "the last"
        helpers.methods.probes.fit_token_map(train, -1, "linear", "l2")
    assert helpers.methods.probes.fit_token_map(train, last, "linear", "l2").hidden_state == last
    fitted = helpers.methods.probes.fit_token_map(train, ROTATION, "linear", "l2")
    assert fitted.hidden_state == ROTATION
    assert helpers.methods.probes.evaluate_map(fitted, test) == helpers.methods.probes.evaluate_map(
        fitted, test, hidden_state=ROTATION
    )
    with pytest.raises(ValueError, match="embedding output"):
        helpers.methods.probes.fit_token_map(train, last + 1)
    with pytest.raises(TypeError, match="must be an integer"):
        helpers.methods.probes.fit_token_map(train, 1.0)
    with pytest.raises(ValueError, match="must be between 0"):
        helpers.drivers.identifiability.neighbour_rates(
            train, test, offsets=[0], hidden_states=[last + 1], progress=False
        )


def test_fraction_curve_uses_nested_growing_subsets(split):
    train, test = split
    table = helpers.drivers.identifiability.fraction_curve(
        train, test, fractions=(0.5, 1.0), kinds=("linear",), loss="l2", hidden_state=ROTATION, progress=False
    )
    assert table["sequences"].tolist() == [round(0.5 * len(train.sequence_ids) + 0.49), len(train.sequence_ids)]
    assert (table["rate"] == 1.0).all()
    with pytest.raises(ValueError, match="fractions"):
        helpers.drivers.identifiability.fraction_curve(train, test, fractions=(0.0, 1.0), progress=False)


# ------------------------------------------------------------------ figures


def test_plots_draw_and_reject_bad_tables(split):
    train, test = split
    result = helpers.drivers.identifiability.probe_layers(
        train, test, [("naive", "l2"), ("linear", "cosine")], hidden_states=[0, 1], progress=False
    )
    ax = helpers.plots.plot_layer_rates(result.table, chance=0.1)
    assert len(ax.lines) == 3
    helpers.plots.plot_generalisation(torch.eye(2), train_layers=[0, 1], test_layers=[0, 1])
    helpers.plots.plot_fraction_curve(
        pd.DataFrame({"map": ["mlp"], "fraction": [1.0], "rate": [0.8]}),
        paper=helpers.paper.TOKEN_IDENTIFIABILITY["fraction_curve_mlp"],
    )
    helpers.plots.plot_neighbour_rates(pd.DataFrame({"hidden_state": [1, 1], "offset": [-1, 1], "rate": [0.2, 0.3]}))
    plt.close("all")
    with pytest.raises(ValueError, match="missing"):
        helpers.plots.plot_layer_rates(result.table.drop(columns="loss"))
    with pytest.raises(ValueError, match="layer labels"):
        helpers.plots.plot_generalisation(torch.eye(2), train_layers=[0])
    with pytest.raises(TypeError, match="DataFrame"):
        helpers.plots.plot_neighbour_rates({"hidden_state": [1]})


# ------------------------------------------------------------------ controls: position-only and word-only targets


def test_input_parts_add_up_to_x_and_position_alone_identifies_at_hidden_state_0(tiny_model, tokenizer, one_thread):
    texts = [
        ("The river carried sand to the plain.", "Sand came down the river to the plain."),
        ("A storm closed the harbour.", "The port shut in the storm, the storm."),
        ("Prices rose again in May.", "In May the prices rose again."),
        ("He wrote the letter twice.", "The letter was written twice by him."),
    ]
    tokens = helpers.collect_hidden_tokens(tiny_model, tokenizer, texts, progress=False)
    parts = helpers.drivers.identifiability.input_parts(tiny_model, tokens)
    assert isinstance(parts, helpers.methods.hidden_tokens.InputParts)
    assert torch.allclose(parts["word"] + parts["position"], tokens.x, atol=1e-6)
    word_table = tiny_model.embeddings.word_embeddings.weight.detach()
    assert torch.equal(parts["word"], word_table[tokens.input_ids])
    # the position part of two tokens at the same place and segment is the same vector
    same = (tokens.position == 1).nonzero().squeeze(1)
    assert torch.allclose(parts["position"][same[0]], parts["position"][same[1]])
    with pytest.raises(ValueError, match="targets must be"):
        helpers.drivers.identifiability.with_targets(tokens, parts["word"][:3])
    # a naive 'map' at the position targets themselves identifies every token (positions are distinct)
    on_position = helpers.drivers.identifiability.with_targets(tokens, parts["position"])
    assert torch.equal(on_position.x, parts["position"]) and torch.equal(on_position.hidden, tokens.hidden)
    naive = helpers.methods.probes.fit_map(parts["position"], parts["position"], "naive", "l2")
    naive.hidden_state = 0
    moved = helpers.drivers.identifiability.with_targets(tokens, parts["position"])
    moved.hidden = parts["position"][None]
    assert helpers.drivers.identifiability.identified(naive, moved).all()
    # word-only targets tie on repeated pieces: scored by the piece they find
    word = helpers.drivers.identifiability.with_targets(tokens, parts["word"])
    word.hidden = parts["word"][None]
    by_row = helpers.drivers.identifiability.identified(naive, word)
    by_piece = helpers.drivers.identifiability.identified(naive, word, same_piece=True)
    unique = helpers.drivers.identifiability.unique_pieces(tokens)
    assert by_piece.all() and by_row[unique].all() and not by_row[~unique].all()


def test_unique_pieces_and_piece_chance_by_brute_force():
    tokens = synthetic_tokens(sentences=6, seed=8)
    g = torch.Generator().manual_seed(0)
    tokens.input_ids = torch.randint(0, 5, (len(tokens),), generator=g)
    unique = helpers.drivers.identifiability.unique_pieces(tokens)
    chance = helpers.drivers.identifiability.piece_chance(tokens)
    for i in range(len(tokens)):
        mine = tokens.sequence == tokens.sequence[i]
        copies = int((mine & (tokens.input_ids == tokens.input_ids[i])).sum())
        assert bool(unique[i]) == (copies == 1)
        assert chance[i].item() == pytest.approx(copies / int(mine.sum()))
    with pytest.raises(ValueError, match="offset 0"):
        shifted = helpers.methods.probes.fit_token_map(tokens, SHIFTED, "linear", "l2", offset=1)
        helpers.drivers.identifiability.identified(shifted, tokens)


@pytest.mark.parametrize("noise", [1e-30, 1e-5])  # float noise; all-mpnet-base-v2's last layer has 7.7e-6
def test_a_feature_constant_in_training_does_not_blow_up_elsewhere(noise):
    # a channel all but constant at one hidden state (its spread under a thousandth of the widest) must not
    # get a weight of 1 / std there: applied to another hidden state, where it varies, the map would
    # predict garbage
    generator = torch.Generator().manual_seed(0)
    targets = torch.randn(400, 16, generator=generator, dtype=torch.float64)
    hidden = torch.cat(
        [
            targets @ torch.randn(16, 16, generator=generator, dtype=torch.float64),
            torch.full((400, 1), 3.0, dtype=torch.float64),
        ],
        dim=1,
    )
    hidden[:, -1] += noise * hidden[:, :-1].std() * torch.randn(400, generator=generator, dtype=torch.float64)
    fitted = helpers.methods.probes.fit_map(hidden.float(), targets.float(), "linear", "l2")
    elsewhere = hidden.clone()
    elsewhere[:, -1] = torch.randn(400, generator=generator, dtype=torch.float64)  # varies here
    moved = (fitted(elsewhere.float()) - fitted(hidden.float())).abs().max()
    assert moved < 1.0, f"a feature constant in training moved the prediction by {float(moved):.3g}"


def test_naive_control_rates_agree_with_the_naive_table_and_brute_force(tiny_model, tokenizer, one_thread):
    texts = [
        ("The river carried sand to the plain.", "Sand came down the river to the plain."),
        ("A storm closed the harbour.", "The port shut in the storm, the storm."),
        ("Prices rose again in May.", "In May the prices rose again."),
    ]
    identifiability = helpers.drivers.identifiability
    rates = helpers.drivers.identifiability_controls.naive_control_rates(tiny_model, tokenizer, texts, progress=False)
    states = tiny_model.config.num_hidden_layers + 1
    assert len(rates) == len(texts) * states * 3 * 2
    # the paper's measure, pooled over every token, is the naive table's rate
    tokens = helpers.collect_hidden_tokens(tiny_model, tokenizer, texts, progress=False)
    table = identifiability.naive_identifiability_table(tiny_model, tokenizer, texts, progress=False)
    lengths = tokens.lengths.double().numpy()
    for state in range(states):
        paper = rates.query("target == 'x' and tokens == 'all' and hidden_state == @state").rate.to_numpy()
        assert abs((paper * lengths).sum() / lengths.sum() - table.rate[state]) < 1e-6  # the table is float32
    # brute force at the last hidden state, one sequence at a time
    parts = identifiability.input_parts(tiny_model, tokens)
    unique = identifiability.unique_pieces(tokens)
    last = states - 1
    for example in range(len(texts)):
        rows = (tokens.sequence == example).nonzero().squeeze(1)
        hidden = functional.normalize(tokens.hidden[last][rows], dim=1)
        for target, vectors in (("x", tokens.x), ("position", parts.position), ("word", parts.word)):
            nearest = (hidden @ functional.normalize(vectors[rows], dim=1).T).argmax(dim=1)
            if target == "word":
                hit = tokens.input_ids[rows][nearest] == tokens.input_ids[rows]
            else:
                hit = nearest == torch.arange(len(rows))
            got = rates.query("example == @example and hidden_state == @last and target == @target")
            got = got.set_index("tokens").rate
            assert abs(got["all"] - hit.double().mean()) < 1e-12
            chosen = unique[rows]
            assert abs(got["unique"] - hit[chosen].double().mean()) < 1e-12
    with pytest.raises(ValueError, match="distance"):
        helpers.drivers.identifiability_controls.naive_control_rates(
            tiny_model, tokenizer, texts, distance="dot", progress=False
        )
