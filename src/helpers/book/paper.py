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
CONTEXT_MIXING = {
    # GlobEnc Table 1: Spearman vs gradient x input saliency, fine-tuned BERT-Base, [CLS] row after rollout
    "globenc_table1": {
        "attention": {"sst2": -0.11, "mnli": -0.06},
        "rollout_fixed_residual": {"sst2": -0.24, "mnli": -0.05},
        "attention_norm": {"sst2": 0.44, "mnli": 0.47},
        "norm_residual": {"sst2": 0.73, "mnli": 0.75},
        "norm_residual_ln": {"sst2": -0.21, "mnli": -0.06},
        "globenc": {"sst2": 0.77, "mnli": 0.78},
    },
    # ALTI's released results: BERT, SST-2, Spearman vs gradient-L2 saliency
    "alti_sst2": {"attention": 0.29, "rollout": -0.03, "norm_rollout": 0.41, "alti": 0.55},
    # Abnar & Zuidema 2020: DistilBERT, SST-2, Spearman vs gradients
    "abnar_zuidema_sst2": {"attention": 0.09, "rollout": 0.13, "flow": 0.14},
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


# The book's labels for the published rows it compares with (leave-one-out ranking, last layer, after rollout)
CONTEXT_MIXING_LABELS = {
    "attention rollout": ("alti_sst2", "rollout"),
    "attention_norm rollout": ("alti_sst2", "norm_rollout"),
    "alti rollout": ("alti_sst2", "alti"),
    "norm_residual rollout": ("globenc_table1", "norm_residual"),
    "norm_residual_ln rollout": ("globenc_table1", "norm_residual_ln"),
    "globenc rollout": ("globenc_table1", "globenc"),
}
__all__ += ["GLOBENC_COST", "globenc_seconds_per_example", "CONTEXT_MIXING_LABELS"]


def published_mixing(label: str) -> float | None:
    """The published Spearman (SST-2) for one of the book's measure labels, or None."""
    if label not in CONTEXT_MIXING_LABELS:
        return None
    table, key = CONTEXT_MIXING_LABELS[label]
    value = CONTEXT_MIXING[table][key]
    return value["sst2"] if isinstance(value, dict) else value


__all__ += ["published_mixing"]
