"""The held-out stopping rule of the token maps (helpers.methods.probe_training, fit_token_map(validation=...))."""

import numpy as np
import pytest
import torch

import helpers
from helpers.drivers.identifiability_controls import seed_hits
from helpers.methods.hidden_tokens import HiddenTokens
from helpers.methods.probe_training import StoppingRule, adam_steps, map_loss
from helpers.methods.probes import SkipMLP, evaluate_map, fit_map, fit_token_map, split_by_sequence

FIT = dict(validation=0.25, patience=2)


def bent_tokens(sentences: int = 40, d: int = 12, seed: int = 0) -> HiddenTokens:
    """One hidden state, a bent and noisy function of the inputs: a map has to be trained to read it."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(5, 13, (sentences,), generator=g)
    N = int(lengths.sum())
    x = torch.randn(N, d, generator=g)
    Q = torch.linalg.qr(torch.randn(d, d, generator=g))[0]
    hidden = torch.tanh(1.5 * x @ Q) + 0.3 * torch.randn(N, d, generator=g)
    sequence = torch.arange(sentences).repeat_interleave(lengths)
    position = torch.cat([torch.arange(int(n)) for n in lengths])
    return HiddenTokens(hidden[None], x, sequence, position, torch.zeros(N, dtype=torch.long))


@pytest.fixture(scope="module")
def split():
    return split_by_sequence(bent_tokens(), test_fraction=0.3, seed=0)


@pytest.mark.parametrize("kind", ["linear", "mlp"])
def test_the_rule_keeps_the_best_held_out_epoch_and_stops_after_its_patience(split, kind):
    train, _ = split
    fitted = fit_token_map(train, 0, kind, "cosine", width=16, **FIT)
    history = fitted.history
    assert len(history) >= 2 and fitted.epochs == int(np.argmax(history))
    ran = len(history) - 1
    assert ran - fitted.epochs == FIT["patience"]  # stopped by the rule, not by the budget of 40
    # the map returned is the best one seen: its rate on the held-out pairs is the history's best
    _, held = split_by_sequence(train, FIT["validation"], seed=0)
    assert evaluate_map(fitted, held) == pytest.approx(max(history), abs=1e-6)


def test_doubling_the_budget_changes_no_fit_the_rule_stopped(split):
    train, test = split
    for kind in ("linear", "mlp"):
        short = fit_token_map(train, 0, kind, "cosine", width=16, max_epochs=40, **FIT)
        assert len(short.history) - 1 < 40  # the rule stopped it
        long = fit_token_map(train, 0, kind, "cosine", width=16, max_epochs=80, **FIT)
        assert long.history == short.history
        assert evaluate_map(long, test) == evaluate_map(short, test)
    # a budget that binds stops the run at the budget
    bound = fit_token_map(train, 0, "mlp", "cosine", width=16, max_epochs=1, **FIT)
    assert len(bound.history) == 2


def test_without_validation_the_old_fixed_epochs_are_kept(split):
    train, _ = split
    old = fit_map(train.hidden[0], train.x, "linear", "cosine", epochs=3)
    new = fit_token_map(train, 0, "linear", "cosine", epochs=3)
    assert new.history == [] and new.epochs is None
    assert torch.equal(old(train.hidden[0]), new(train.hidden[0]))
    # maps without Adam ignore the rule and use every training pair
    exact = fit_token_map(train, 0, "linear", "l2")
    assert torch.equal(fit_token_map(train, 0, "linear", "l2", **FIT)(train.x), exact(train.x))
    assert fit_token_map(train, 0, "linear", "l2", **FIT).history == []


def test_adam_steps_restores_the_best_state_and_validates_the_rule():
    g = torch.Generator().manual_seed(0)
    h, x = torch.randn(64, 4, generator=g), torch.randn(64, 4, generator=g)
    module = SkipMLP(4, 4, 0, torch.zeros(4), torch.ones(4))
    start = {k: v.clone() for k, v in module.state_dict().items()}
    # a score that only falls: the start is the best state and comes back
    scores = iter(range(0, -100, -1))
    history = adam_steps(module, h, x, "l2", 0, 0, 16, 0.1, StoppingRule(lambda m: next(scores), patience=3))
    assert history == [0, -1, -2, -3]
    assert all(torch.equal(start[k], v) for k, v in module.state_dict().items())
    assert map_loss(h, h, "cosine").item() == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError):
        StoppingRule(lambda m: 0.0, patience=0)


def test_seed_hits_tabulate_each_seeds_map_token_by_token(split):
    train, test = split
    maps = [fit_token_map(train, 0, "mlp", "cosine", width=16, seed=s, **FIT) for s in (0, 1, 2)]
    each = [helpers.drivers.identifiability.identified(m, test).numpy() for m in maps]
    assert np.array_equal(seed_hits(maps, test), np.stack(each, axis=1))
    with pytest.raises(ValueError, match="differ"):
        seed_hits([maps[0], fit_token_map(train, 0, "linear", "cosine", **FIT)], test)
    with pytest.raises(ValueError, match="No maps"):
        seed_hits([], test)
