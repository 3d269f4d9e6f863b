"""Every figure is drawn for the width the book shows it at.

The book's content column shows a figure at most about 690 px wide and never scales one up;
figures are saved at 110 dpi. A figure at most 10.6 inches wide (1170 px) whose every text is
10 pt or more (15.3 px) shows that text at 9 px or more. Each public plot function is called
here on synthetic data of realistic size (40-token maps, 6 layers, 14 agreement lines).

``python tests/test_plots_legibility.py OUT`` saves every case as a PNG at the book's dpi
(and a copy scaled to 690 px wide, ``*_690.png``) for looking at by eye.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.text import Text

from helpers.book import paper, plots

MAX_WIDTH_INCHES = 10.6
MIN_FONT_POINTS = 10.0
LAYERS = 6
HEADS = 12

WORDS = (
    "the identifiability of attention weights in transform ##ers is limited by the rank of the value matrix , "
    "so many different attention distributions give one and the same output ; we measure effective attention "
    "and hidden token attribution across layers of the model"
).split()
BERT_TOKENS = ["[CLS]", *WORDS[:38], "[SEP]"]  # 40 tokens
GPT_TOKENS = ["<|endoftext|>", "The"] + [("Ġ" + w if i % 7 else "Ċ") for i, w in enumerate(WORDS[:38])]


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _attention(n: int = 40, seed: int = 0) -> torch.Tensor:
    logits = torch.as_tensor(_rng(seed).normal(0, 2, (n, n)))
    return torch.softmax(logits, dim=-1)


class _Attribution:
    def __init__(self, n: int = 40, samples: int | None = None, seed: int = 0):
        maps = [_attention(n, seed + k).numpy() for k in range(LAYERS)]
        self.contributions = torch.as_tensor(np.stack(maps))
        self.samples = samples
        self.n = n

    def at(self, layer: int) -> torch.Tensor:
        return self.contributions[layer - 1]


def _self_table() -> pd.DataFrame:
    rng = _rng()
    rows = [
        {"layer": layer, "self_contribution": rng.beta(2, 2 + layer), "own_is_largest": rng.random() > 0.1 * layer}
        for layer in range(1, LAYERS + 1)
        for _ in range(80)
    ]
    return pd.DataFrame(rows)


def _distance() -> pd.DataFrame:
    rows = []
    for layer in range(1, LAYERS + 1):
        rows.append({"layer": layer, "group": "self", "per_token": 0.5 / layer, "contribution": 0.5 / layer})
        for side in ("left", "right"):
            for k, name in enumerate(("1-5", "6-10", "11+")):
                rows.append(
                    {"layer": layer, "group": f"{side} {name}", "per_token": 0.05 / (k + 1), "contribution": 0.1}
                )
    return pd.DataFrame(rows)


def _cls():
    parts = ["[CLS]", "sentence 1", "first [SEP]", "sentence 2", "last [SEP]"]
    segments = pd.DataFrame(
        [
            {"segment": p, "layer": layer, "per_token": 0.02 * (k + 1) * layer / 3}
            for k, p in enumerate(parts)
            for layer in range(1, LAYERS + 1)
        ]
    )
    around = pd.DataFrame(
        [
            {"layer": layer, "offset": o, "contribution": 0.01 * (4 - abs(o)) * layer}
            for layer in range(1, LAYERS + 1)
            for o in range(-3, 4)
        ]
    )
    return segments, around


def _sink():
    rng = _rng()
    by_head = pd.DataFrame(
        [
            {"layer": layer, "head": head, "raw": rng.random(), "effective": rng.random() * 0.3}
            for layer in range(1, LAYERS + 1)
            for head in range(1, HEADS + 1)
        ]
    )
    by_head["effective_share"] = by_head["effective"] / by_head["raw"]
    by_layer = by_head.groupby("layer", as_index=False)[["raw", "effective"]].mean()
    return by_head, by_layer


def _correlation_table() -> pd.DataFrame:
    rng = _rng()
    rows = []
    for example in range(60):
        n = int(rng.integers(8, 300))
        for layer in range(1, LAYERS + 1):
            for head in range(1, 4):
                rows.append(
                    {
                        "example": example,
                        "n": n,
                        "layer": layer,
                        "head": head,
                        "correlation": float(np.clip(1 - max(0, n - 64) / 300 + rng.normal(0, 0.05), -1, 1)),
                    }
                )
    return pd.DataFrame(rows)


def _token_classes() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"layer": layer, "token_class": c, "raw": 0.1 * k + 0.02 * layer, "effective": 0.05 * k}
            for k, c in enumerate(("[CLS]", "[SEP]", "punctuation"))
            for layer in range(1, LAYERS + 1)
        ]
    )


AGREEMENT_MEASURES = [
    "attention rollout",
    "attention_norm rollout",
    "attention_norm+eff rollout",
    "norm_residual rollout",
    "norm_residual+eff rollout",
    "norm_residual_ln rollout",
    "norm_residual_ln+eff rollout",
    "globenc rollout",
    "globenc+eff rollout",
    "alti rollout",
    "alti+eff rollout",
    "value_zeroing rollout",
    "grad_input",
    "hta",
]


def _agreement() -> pd.DataFrame:
    rng = _rng()
    rows = [
        {"example": e, "measure": m, "kind": "global", "layer": layer, "rho": float(np.tanh(rng.normal(k / 10, 0.3)))}
        for k, m in enumerate(AGREEMENT_MEASURES)
        for layer in range(1, LAYERS + 1)
        for e in range(12)
    ]
    return pd.DataFrame(rows)


def _loo() -> pd.DataFrame:
    rng = _rng()
    return pd.DataFrame(
        [
            {"measure": m, "rho": float(rng.normal(k / 20, 0.2))}
            for k, m in enumerate(AGREEMENT_MEASURES)
            for _ in range(20)
        ]
    )


def _rank_frame():
    rows, overlay = [], []
    for n in (4, 8, 16, 32, 64, 128, 256, 512):
        for head in range(HEADS):
            rows.append({"n": n, "rank_V": min(n, 64), "rank_V1": min(n, 65), "rank_T": min(n, 64)})
            if head < 2:
                overlay.append({"n": n, "rank_T": min(n, 64), "example": head})
    return pd.DataFrame(rows), pd.DataFrame(overlay)


def _angles() -> pd.DataFrame:
    rng = _rng()
    count = LAYERS * HEADS
    return pd.DataFrame(
        {
            "angle_paper": 10 ** rng.uniform(-14, -12, count),
            "angle_book": 10 ** rng.uniform(-13, -11, count),
            "angle_bias": 10 ** rng.uniform(0, 1, count),
            "angle_bias_second": 10 ** rng.uniform(-14, -12, count),
            "n": 40,
        }
    )


def _layer_rates() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"map": kind, "loss": loss, "hidden_state": h, "test": 1 - 0.1 * h * k / 3}
            for k, kind in enumerate(("naive", "linear", "mlp"))
            for loss in ("cosine", "l2")
            for h in range(LAYERS + 1)
        ]
    )


def _word_classes() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"word_class": c, "layer": layer, "median": 0.5 / layer + 0.02 * k, "mean": 0.5 / layer, "tokens": 300}
            for k, c in enumerate(("content", "function", "punctuation", "special"))
            for layer in range(1, LAYERS + 1)
        ]
    )


def _family():
    A = _attention(40)
    steps = [0.0, 0.25, 0.5, 0.75, 1.0]
    direction = _attention(40, seed=3) - _attention(40, seed=4)
    return A, torch.stack([A + t * 0.2 * direction for t in steps]), steps


def _figure(result) -> plt.Figure:
    if isinstance(result, plt.Figure):
        return result
    return np.atleast_1d(result).ravel()[0].figure


def case_token_heatmap():
    return plots.token_heatmap(_attention(), BERT_TOKENS, title="attention A, layer 2, head 3")


def case_token_heatmap_gpt():
    return plots.token_heatmap(_attention(), GPT_TOKENS, title="attention A, layer 2, head 3")


def case_token_heatmap_in_a_wide_row():
    """Chapter 1 hands in a 13-inch row of two axes: the row is restacked in a column."""
    fig, axes = plt.subplots(1, 2, figsize=(13, 6))
    for k, ax in enumerate(axes):
        plots.token_heatmap(_attention(seed=k), BERT_TOKENS, ax=ax, vmin=0, vmax=1, title=f"layer {k + 1}, head 3")
    fig.tight_layout()
    return fig


def case_contribution_maps():
    return plots.plot_contribution_maps(_Attribution(), BERT_TOKENS, layer_numbers=(1, 3, 6))


def case_estimate_vs_exact():
    return plots.plot_estimate_vs_exact(_Attribution(samples=64, seed=1), _Attribution())


def case_self_contribution():
    return plots.plot_self_contribution(_self_table(), num_layers=LAYERS, paper=paper.HTA)


def case_not_largest_share():
    return plots.plot_not_largest_share(_self_table(), num_layers=LAYERS, paper=paper.HTA)


def case_distance_groups():
    return plots.plot_distance_groups(_distance())


def case_cls():
    return plots.plot_cls(*_cls())


def case_causal_null_dimensions():
    return plots.plot_causal_null_dimensions(torch.clamp(torch.arange(200) + 1 - 64, min=0), 64)


def case_causal_null_dimensions_in_a_wide_row():
    """Chapter 9 hands in a 13-inch row of two axes."""
    fig, axes = plt.subplots(1, 2, figsize=(13, 3.8), sharey=True, layout="constrained")
    for ax in axes:
        plots.plot_causal_null_dimensions(torch.clamp(torch.arange(200) + 1 - 64, min=0), 64, ax=ax)
    return fig


def case_sink():
    return plots.plot_sink(*_sink())


DECODER_LAYERS = 30  # as many as the bundled decoder has


def case_decoder_attribution():
    layers = np.arange(1, DECODER_LAYERS + 1)
    return plots.plot_decoder_attribution(
        pd.DataFrame(
            {
                "layer": layers,
                "own_exact": 0.6 - layers / 100,
                "own_estimate": 0.5 - layers / 100,
                "feeds": 0.25,
                "receives": 0.6,
            }
        )
    )


def case_sink_literature():
    layers = np.arange(0, DECODER_LAYERS + 1)
    return plots.plot_sink_literature(
        pd.DataFrame({"layer": layers[1:], "sink_rate": 0.7}),
        pd.DataFrame({"layer": layers, "at_position": 2e4, "elsewhere": 100.0 + layers, "median": 1.0 + layers / 3}),
        0.3,
    )


def case_interventions():
    kinds = ["zero value", "median value norm", "effective weight"]
    roles = ["sink", "position 1", "random"]
    delta = np.array([0.36, 0.02, 0.01, 4.2, 0.02, 0.001, 0.003, 0.005, 0.011])
    return plots.plot_interventions(
        pd.DataFrame(
            {
                "kind": [k for k in kinds for _ in roles],
                "role": roles * 3,
                "delta": delta,
                "low": delta - 0.05,
                "high": delta + 0.05,
            }
        )
    )


def case_layer_interventions():
    layers = np.arange(1, DECODER_LAYERS + 1)
    rng = np.random.default_rng(0)
    per_layer = pd.concat(
        [
            pd.DataFrame({"kind": kind, "layer": layers, "delta": d, "low": d - 0.02, "high": d + 0.02})
            for kind, d in (
                ("zero value", rng.normal(0, 0.02, len(layers))),
                ("median value norm", rng.uniform(0, 2, len(layers))),
            )
        ]
    )
    readings = pd.DataFrame(
        {
            "layer": layers,
            "raw attention": rng.uniform(0, 0.7, len(layers)),
            "effective attention": rng.uniform(0, 0.2, len(layers)),
            "value-norm ratio": rng.uniform(0.1, 1.3, len(layers)),
            "leverage": rng.uniform(0.1, 0.9, len(layers)),
        }
    )
    return plots.plot_layer_interventions(per_layer, readings)


def case_value_drain():
    rng = np.random.default_rng(0)
    ratio = np.exp(rng.normal(-1, 1, 270))
    return plots.plot_value_drain(
        pd.DataFrame(
            {
                "value_norm_ratio": ratio,
                "leverage": np.clip(ratio, 0.01, 1),
                "sink_score": rng.uniform(0, 1, 270),
                "gap": rng.uniform(0, 0.9, 270),
                "predicted": rng.uniform(0, 0.9, 270),
            }
        ),
        0.3,
    )


def case_distance_groups_causal():
    """A decoder's table: nothing on the right, 30 layers."""
    rows = []
    for layer in range(1, DECODER_LAYERS + 1):
        rows.append({"layer": layer, "group": "self", "per_token": 0.5 / layer, "contribution": 0.5 / layer})
        for side in ("left", "right"):
            for k, name in enumerate(("1-5", "6-10", "11+")):
                value = 0.0 if side == "right" else 0.05 / (k + 1)
                rows.append({"layer": layer, "group": f"{side} {name}", "per_token": value, "contribution": value})
    return plots.plot_distance_groups(pd.DataFrame(rows))


def case_attention_split():
    A = _attention()
    A_eff = A - _attention(seed=5) * 0.3
    return plots.plot_attention_split(A, A_eff, A - A_eff, BERT_TOKENS, title="Layer 3, head 7, on a 40-token passage")


def case_attention_split_gpt():
    A = _attention()
    A_eff = A - _attention(seed=5) * 0.3
    return plots.plot_attention_split(A, A_eff, A - A_eff, tokens=GPT_TOKENS, title="layer 6, head 4")


def case_correlation_vs_length():
    return plots.plot_correlation_vs_length(_correlation_table(), 64, source="book corpus")


def case_token_class_attention():
    return plots.plot_token_class_attention(_token_classes(), source="book corpus")


def case_centred_log_spectra():
    rng = _rng()
    spectra = {
        "the model's A": torch.as_tensor(np.sort(10 ** rng.uniform(-16, 0, 100))[::-1].copy()),
        "null-space midpoint (t = 0.5)": torch.as_tensor(np.sort(10 ** rng.uniform(-3, 0, 100))[::-1].copy()),
        "producible alternative found": torch.as_tensor(np.sort(10 ** rng.uniform(-16, 0, 100))[::-1].copy()),
    }
    return plots.plot_centred_log_spectra(spectra, 64)


def case_agreement():
    return plots.plot_agreement(_agreement(), "global")


def case_leave_one_out():
    return plots.plot_leave_one_out(
        _loo(),
        paper={
            "attention rollout": {"globenc_table1": -0.24, "alti_sst2": -0.03},
            "globenc rollout": {"globenc_table1": 0.77},
        },
    )


def case_cost():
    cost = pd.DataFrame({"seconds per sentence": 10 ** _rng().uniform(-3, 1, 14)}, index=AGREEMENT_MEASURES)
    return plots.plot_cost(cost)


def case_rank_sweep():
    frame, overlay = _rank_frame()
    return plots.plot_rank_sweep(frame, 64, overlay=overlay, overlay_column="rank_T", source="every layer and head")


def case_null_space_angles():
    return plots.plot_null_space_angles(_angles())


def case_attention_comparison():
    A, family, _ = _family()
    return plots.plot_attention_comparison(
        {
            "the model's attention A (layer 3, head 7)": A,
            r"alternative $A + \tilde A$, same output": family[-1],
            r"the difference $\tilde A$": family[-1] - A,
        },
        BERT_TOKENS,
        signed=[r"the difference $\tilde A$"],
    )


def case_attention_comparison_in_a_wide_row():
    """Chapters 2 and 3 hand in a 16-inch row of three axes: they are restacked in a column."""
    A, family, _ = _family()
    fig, axes = plt.subplots(1, 3, figsize=(16, 5.2))
    plots.plot_attention_comparison(
        {"A": A, "alternative": family[-1], "difference": family[-1] - A}, BERT_TOKENS, signed=["difference"], axes=axes
    )
    fig.tight_layout()
    return fig


def case_hidden_change():
    return plots.plot_hidden_change(
        {
            r"patched with $A + \tilde A$ (rows of $\tilde A$ in LN(T))": torch.tensor(
                [0, 0, 0, 1e-7, 1e-7, 1e-7, 1e-7]
            ),
            "control: same size, rows not in LN(T)": torch.tensor([0, 0, 0, 0.1, 0.3, 0.5, 0.6]),
        },
        patched_layer=3,
    )


def case_family_rows():
    _, family, steps = _family()
    labels = [f"t = {t:.2f}" + (" (the model)" if t == 0 else "") for t in steps]
    return plots.plot_family_rows(family, row=12, tokens=BERT_TOKENS, labels=labels)


def case_lp_ranges():
    A, _, _ = _family()
    return plots.plot_lp_ranges(A * 0.5, torch.clamp(A * 2, max=1), A, row=12, tokens=BERT_TOKENS)


def case_null_step():
    A, family, _ = _family()
    return plots.plot_null_step(A, family[-1], 1e-9, BERT_TOKENS, steps=[0.1, 0.2])


def case_null_grid():
    from helpers.book.plots.nullspace import plot_null_grid

    A, family, _ = _family()
    grid = [[family[k] for k in (0, 2, 4)] for _ in range(3)]
    labels = [[f"$t_1$={c / 2:.2g}, $t_2$={r / 2:.2g}" for c in range(3)] for r in range(3)]
    return plot_null_grid(A, grid, labels)


def case_layer_rates():
    return plots.plot_layer_rates(_layer_rates(), chance=0.05, title="Token identifiability by layer (book corpus)")


def case_identifiability_controls():
    rng = _rng()
    rows = [
        {"model": model, "example": e, "hidden_state": state, "target": target, "tokens": tokens,
         "rate": float(np.clip(1 - 0.1 * state * rng.uniform(0.2, 1.5), 0, 1))}
        for model in ("before", "after")
        for e in range(5)
        for state in range(LAYERS + 1)
        for target in ("x", "position", "word")
        for tokens in ("all", "unique")
    ]  # fmt: skip
    return plots.plot_identifiability_controls(
        pd.DataFrame(rows), titles={"before": "pre-trained", "after": "fine-tuned"}
    )


def case_generalisation():
    values = torch.as_tensor(_rng().random((LAYERS + 1, LAYERS + 1)))
    return plots.plot_generalisation(values, title="Linear map, cosine: trained on one layer, tested on another")


def case_fraction_curve():
    table = pd.DataFrame(
        [
            {"map": m, "fraction": f, "rate": f ** (0.3 + k)}
            for k, m in enumerate(("linear", "mlp"))
            for f in (0.1, 0.5, 1)
        ]
    )
    return plots.plot_fraction_curve(table, paper=paper.TOKEN_IDENTIFIABILITY["fraction_curve_mlp"])


def case_neighbour_rates():
    table = pd.DataFrame(
        [
            {"hidden_state": h, "offset": o, "rate": 1 / (1 + abs(o) + h)}
            for h in range(LAYERS + 1)
            for o in (-3, -2, -1, 1, 2, 3)
        ]
    )
    return plots.plot_neighbour_rates(table, chance=0.05)


def case_distribution_distances():
    rng = _rng()
    frame = pd.DataFrame(
        {
            "raw A to effective": rng.uniform(0.5, 3, 12),
            "nearest distribution to effective": rng.uniform(0.1, 2.5, 12),
            "nearest distribution to raw A": rng.uniform(0.05, 0.7, 12),
            "maximum entropy to effective": rng.uniform(0.5, 3, 12),
        },
        index=range(1, 13),
    )
    return plots.plot_distribution_distances(frame, title="Layer 3, on passage-029 (105 tokens)")


def case_self_contribution_by_class():
    return plots.plot_self_contribution_by_class(_word_classes(), paper_from_layer=2.5)


CASES = {name[len("case_") :]: f for name, f in sorted(globals().items()) if name.startswith("case_")}


def _texts(fig: plt.Figure) -> list[Text]:
    fig.canvas.draw()
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def _overlaps(labels: list[Text], renderer) -> list[tuple[str, str]]:
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in labels]
    return [(a, b) for (a, box_a), (b, box_b) in zip(boxes, boxes[1:], strict=False) if box_a.overlaps(box_b)]


@pytest.fixture(autouse=True)
def _book_style():
    plots.set_style()
    yield
    plt.close("all")


def test_every_public_plot_function_has_a_case():
    public = {name for name in plots.__all__} if hasattr(plots, "__all__") else set(dir(plots))
    functions = {name for name in public if name.startswith(("plot_", "token_heatmap"))}
    covered = {f.__name__ for f in CASES.values()}
    sources = "\n".join(inspect.getsource(f) for f in CASES.values())
    missing = [name for name in functions if f"plots.{name}(" not in sources]
    assert covered and not missing, f"no legibility case calls {missing}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_figure_is_drawn_for_the_column(name):
    fig = _figure(CASES[name]())
    texts = _texts(fig)
    width, _ = fig.get_size_inches()
    saved = fig.get_tightbbox(fig.canvas.get_renderer()).width  # inches, as the notebook saves it
    assert max(width, saved) <= MAX_WIDTH_INCHES, f"{name}: {max(width, saved):.1f} inches wide, scaled down too far"
    small = sorted(
        {(round(t.get_fontsize(), 1), t.get_text()[:30]) for t in texts if t.get_fontsize() < MIN_FONT_POINTS}
    )
    assert not small, f"{name}: texts under {MIN_FONT_POINTS} pt: {small[:8]}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_tick_labels_do_not_overlap(name):
    fig = _figure(CASES[name]())
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            labels = [t for t in axis.get_ticklabels() if t.get_visible() and t.get_text().strip()]
            assert not _overlaps(labels, renderer), f"{name}: overlapping tick labels {_overlaps(labels, renderer)[:3]}"


def test_readable_token_drops_space_markers():
    from helpers.book.plots.heatmaps import readable_token

    assert readable_token("Ġdawn") == "dawn"
    assert readable_token("▁dawn") == "dawn"
    assert readable_token("Ċ") == "\\n"
    assert readable_token("ĊĊ") == "\\n\\n"
    assert readable_token("Ġ") == "␣"
    assert readable_token("##ing") == "##ing"  # WordPiece continuation stays: it means something
    assert readable_token("[CLS]") == "[CLS]"
    assert readable_token("$5") == r"\$5"  # not mathematics


def test_drawn_tokens_have_no_markers():
    fig = _figure(CASES["attention_split_gpt"]())
    shown = [t.get_text() for t in _texts(fig)]
    assert not [t for t in shown if "Ġ" in t or "Ċ" in t or "▁" in t]
    assert "\\n" in shown  # sanity: the cleaned labels are drawn


def test_heatmaps_have_axis_labels():
    ax = plots.token_heatmap(_attention(12), BERT_TOKENS[:12])
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("key token", "query token")
    ax = plots.token_heatmap(_attention(12), BERT_TOKENS[:12], xlabel="input token j", ylabel="hidden token i")
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("input token j", "hidden token i")
    ax = plots.token_heatmap(_attention(12), xlabel="", ylabel="")
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("", "")
    # not token by token (layers by heads, tokens by dimensions): no guessed labels
    ax = plots.token_heatmap(np.ones((6, 12)), [f"layer {k}" for k in range(6)], [str(h) for h in range(12)])
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("", "")
    for name in ("attention_split", "contribution_maps", "attention_comparison", "null_step", "lp_ranges", "cls"):
        fig = _figure(CASES[name]())
        maps = [ax for ax in fig.axes if ax.get_images() or (ax.collections and ax.get_label() != "<colorbar>")]
        maps = [ax for ax in maps if len(ax.get_xticklabels()) and ax.get_label() != "<colorbar>"]
        assert maps and all(ax.get_xlabel() and ax.get_ylabel() for ax in maps), name


def test_agreement_draws_families_in_panels_of_at_most_five_lines():
    from matplotlib.colors import to_hex

    from helpers.methods.rollout import measure_name, measure_parts

    axes = [ax for ax in np.atleast_1d(CASES["agreement"]()).ravel() if ax.get_visible()]
    named = {measure_name(m): m for m in AGREEMENT_MEASURES}
    drawn = []
    for ax in axes:
        lines = {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}
        assert 0 < len(lines) <= 5, f"{ax.get_title()}: {len(lines)} lines"
        assert ax.get_title() and ax.get_legend() is not None
        assert min(t.get_fontsize() for t in ax.get_legend().get_texts()) >= 10
        colour = {name: to_hex(line.get_color()) for name, line in lines.items()}
        bases = {}
        for name, line in lines.items():
            base, effective = measure_parts(named[name])[:2]
            bases.setdefault(base, colour[name])
            assert colour[name] == bases[base], "a measure and its effective variant share a colour"
            assert line.get_linestyle() == ("--" if effective else "-")
        assert len(set(bases.values())) == len(bases), "two measures of a panel share a colour"
        drawn += list(lines)
    assert sorted(drawn) == sorted(named), "every measure drawn once, named as a reader names it"


def test_a_panel_is_titled_by_the_measures_it_holds():
    frame = _agreement()
    local = frame[frame.measure.isin(["value_zeroing rollout", "alti rollout"])].assign(kind="local")
    titles = [ax.get_title() for ax in np.atleast_1d(plots.plot_agreement(local, "local")).ravel() if ax.get_visible()]
    assert titles == ["ALTI", "value zeroing"]


def test_measure_names_read_as_a_reader_names_them():
    from helpers.methods.rollout import measure_name

    assert measure_name("alti rollout") == "ALTI rollout"
    assert measure_name("globenc+eff rollout (normalise first)") == (
        "GlobEnc rollout (effective attention, normalised first)"
    )
    assert measure_name("grad_input") == "gradient × input" and measure_name("hta (exact)") == "HTA (exact)"
    with pytest.raises(ValueError, match="Unknown measure"):
        measure_name("globenc rollout (normalise sideways)")


def save_all(folder: Path) -> None:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    plots.set_style()
    for name, case in CASES.items():
        fig = _figure(case())
        path = folder / f"{name}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        image = Image.open(path)
        if image.width > 690:
            image = image.resize((690, round(image.height * 690 / image.width)), Image.LANCZOS)
        image.save(folder / f"{name}_690.png")
        print(f"{name}: {Image.open(path).size}")


if __name__ == "__main__":
    save_all(Path(sys.argv[1] if len(sys.argv) > 1 else "_build/legibility"))
