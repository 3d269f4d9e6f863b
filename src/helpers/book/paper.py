"""Every number the paper (and the later work the book tests against) reports.

Plots, prose (glued) and claim checks read these; nothing else types them.
Brunner et al., *On Identifiability in Transformers*, ICLR 2020 (arXiv:1908.04211 v4),
model BERT-Base uncased, data GLUE MRPC unless noted. Layers are numbered
1..L as in the paper (hidden state l = output of layer l).

Sections: the paper's model; identifiability (section 3); token
identifiability (section 4); Hidden Token Attribution (section 5, appendix C);
later work (context mixing, chapter 7).
"""

from __future__ import annotations

from ..model.loading import Architecture

__all__ = [
    "PAPER_MODEL_NAME",
    "PAPER_LAYERS",
    "PAPER_HEADS",
    "PAPER_D",
    "PAPER_D_V",
    "BERT_BASE",
    "EFFECTIVE_ATTENTION",
    "TOKEN_IDENTIFIABILITY",
    "HTA",
    "CONTEXT_MIXING",
    "DECODER_SINK",
    "DECODER_SINK_SOURCES",
    "paper_layer",
]

# --------------------------------------------------------------------------- the paper's model
PAPER_MODEL_NAME = "bert-base-uncased"
PAPER_LAYERS = 12
PAPER_HEADS = 12
PAPER_D = 768
PAPER_D_V = 64  # attention is not identifiable above d_v = 64 tokens
BERT_BASE = Architecture(PAPER_MODEL_NAME, PAPER_LAYERS, PAPER_HEADS, PAPER_D, PAPER_D_V, 512, 30522)

# --------------------------------------------------------------------------- section 3.4 (effective attention)
EFFECTIVE_ATTENTION = {
    # raw vs effective attention: Pearson correlation exactly 1 up to n = d_v tokens, falling beyond
    "correlation_one_up_to_tokens": PAPER_D_V,
    # the special token that receives most raw attention in BERT-Base; most of it lies in the null space
    "sink_token": "[SEP]",
}

# --------------------------------------------------------------------------- section 4
TOKEN_IDENTIFIABILITY = {
    # naive (identity) map: high through this layer, then falling roughly linearly
    "naive_high_through_layer": 4,
    # linear map + cosine distance, last layer (12)
    "last_layer_linear_cosine": 0.93,
    # cross-layer generalisation
    "layer1_map_on_last_layers_below": 0.70,  # map trained on layer 1, tested on layers 11-12
    "last_layer_map_on_last_layers": 0.94,  # map trained on layer 12, tested there
    # training-data fraction -> identifiability (MLP, test set)
    "fraction_curve_mlp": {0.5: 0.74, 0.8: 0.80, 0.9: 0.81, 1.0: 0.82},
}

# --------------------------------------------------------------------------- section 5, appendix C
HTA = {
    "layers": PAPER_LAYERS,
    # median contribution of the token's own input, c_ii^l, after layer l
    "median_self_contribution": {1: 0.306, 6: 0.144, 12: 0.107},
    # share of hidden tokens whose own input is not the largest contributor
    "share_own_input_not_largest": {1: 0.0, 2: 0.0, 3: 0.0, 6: 0.18, 11: 0.30, 12: 0.30},
    # content words keep more of their own input than function words, clearly from this layer on
    "content_vs_function_from_layer": 4,
}

# --------------------------------------------------------------------------- later work (chapter 7)
# Each published figure is stored under the book's label of the measure it was computed for
# (``helpers.methods.mixing.Mixing.name``: the measure, "rollout", and the order of the rollout
# where it is not the measure's authors' own, ``mixing.ROLLOUT_AGGREGATION``).
CONTEXT_MIXING = {
    # GlobEnc Table 1: Spearman vs gradient x input saliency, fine-tuned BERT-Base, [CLS] row of the
    # last layer after rollout. The GlobEnc code rolls every norm measure out unnormalised.
    "globenc_table1": {
        "attention rollout (no residual)": {"sst2": -0.11, "mnli": -0.06},
        "attention rollout": {"sst2": -0.24, "mnli": -0.05},  # 0.5 A + 0.5 I, their "fixed residual"
        "attention_norm rollout (normalise last)": {"sst2": 0.44, "mnli": 0.47},
        "norm_residual rollout (normalise last)": {"sst2": 0.73, "mnli": 0.75},
        "norm_residual_ln rollout (normalise last)": {"sst2": -0.21, "mnli": -0.06},
        "globenc rollout": {"sst2": 0.77, "mnli": 0.78},
    },
    # ALTI's released results: BERT, SST-2, Spearman vs gradient-L2 saliency. Its "norm rollout" is
    # the rollout of ||T_i(x_j)|| with the residual and LN1, rows normalised per layer: this book's
    # norm_residual_ln rollout (equal to 2e-7 on the same input).
    "alti_sst2": {
        "attention": 0.29,
        "attention rollout": -0.03,
        "norm_residual_ln rollout": 0.41,
        "alti rollout": 0.55,
    },
    # Abnar & Zuidema 2020: DistilBERT, SST-2, Spearman vs gradients
    "abnar_zuidema_sst2": {"attention": 0.09, "attention rollout": 0.13, "attention flow": 0.14},
}

# who published each table, as a figure's legend names it
CONTEXT_MIXING_SOURCES = {
    "globenc_table1": "GlobEnc, Table 1 (vs gradient x input)",
    "alti_sst2": "ALTI (vs gradient L2)",
    "abnar_zuidema_sst2": "Abnar & Zuidema (DistilBERT, vs gradients)",
}


def paper_layer(layer: int, num_layers: int, paper_layers: int = PAPER_LAYERS) -> float:
    """The paper's layer at the same relative depth as ``layer`` of a ``num_layers``-layer model."""
    if num_layers < 1 or not 0 <= layer <= num_layers:
        raise ValueError(f"layer must be in 0..{num_layers}, got {layer}")
    return layer / num_layers * paper_layers


# --------------------------------------------------------------------------- chapter 7: context mixing (more)
# GlobEnc's reported cost (Modarressi et al. 2022), seconds for all of its 256 SST-2 examples: HTA's
# Jacobian (2 hours) and the norm-based measures (5 s); ``globenc_seconds_per_example`` divides.
GLOBENC_COST = {"examples": 256, "jacobian": 2 * 3600, "norm_based": 5}


def globenc_seconds_per_example(kind: str = "jacobian") -> float:
    """GlobEnc's reported seconds per example for ``"jacobian"`` or ``"norm_based"``."""
    if kind not in ("jacobian", "norm_based"):
        raise ValueError(f"kind must be 'jacobian' or 'norm_based'; got {kind!r}.")
    return GLOBENC_COST[kind] / GLOBENC_COST["examples"]


__all__ += ["GLOBENC_COST", "globenc_seconds_per_example", "CONTEXT_MIXING_SOURCES"]


def published_mixing(label: str, task: str = "sst2") -> dict[str, float]:
    """The published Spearman correlations for one of the book's measure labels: {table: value}.

    ``label`` is a ``Mixing.name`` ("globenc rollout", "norm_residual rollout (normalise
    last)"); a table appears only if it reports that measure, aggregated that way, on
    BERT (Abnar & Zuidema's DistilBERT figures are left out). BERT-Base tables give
    ``task`` ("sst2" or "mnli"). Empty when nobody published the measure.
    """
    found = {}
    for table, rows in CONTEXT_MIXING.items():
        if table == "abnar_zuidema_sst2" or label not in rows:
            continue
        value = rows[label]
        if isinstance(value, dict):
            found[table] = value[task]
        elif task == "sst2":  # a table of one task, SST-2
            found[table] = value
    return found


__all__ += ["published_mixing"]


# --------------------------------------------------------------------------- later work on decoders (chapter 9)
DECODER_SINK = {
    # Gu et al. 2025: Sink_1^eps, the share of heads whose mean attention on the first token exceeds eps,
    # on prompts of this many tokens
    "sink_epsilon": 0.3,
    "sink_prompt_tokens": 64,
    "sink_rate_llama2_7b": 0.9247,  # LLaMA2-7B base, natural text (their Table 1)
    "sink_rate_llama_60m": 0.1818,  # their own ~60M LLaMA-style model (RoPE, default training)
    # Sun et al. 2024: "very few activations ... e.g. 100,000 times larger than others"
    "massive_activation_factor": 100_000,
}
DECODER_SINK_SOURCES = {
    "sink_rate_llama2_7b": "Gu et al. 2025, Table 1",
    "sink_rate_llama_60m": "Gu et al. 2025, Table 3",
    "massive_activation_factor": "Sun et al. 2024, abstract",
    "value_drain": "Guo et al. 2024",
}
