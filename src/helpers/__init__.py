"""Helpers for the book *On Identifiability in Transformers, reproduced*.

Data flows one way: text -> models -> internals -> method modules -> plots.
"""
from . import claims, numbering, paper
from .claims import Claims, ClaimFailed
from .notebook import book_model, glue
from .data import DataUnavailableError, Example, load_corpus, load_glue
from .internals import Internals, attention_from_qk, capture, finish_layer, head_weights, rebuild_hidden_states
from .effective import (
    EffectiveAttention,
    attention_to,
    effective_attention,
    effective_attention_of,
    effective_attention_sweep,
    pearson,
    summarise_token_classes,
    token_classes,
)
from .linalg import left_null_space, numerical_rank, range_basis
from .models import (
    BERT_BASE,
    DEFAULT_MODEL,
    PAPER_MODEL,
    Architecture,
    ModelLoadError,
    UnsupportedModelError,
    check_supported,
    describe,
    load_model,
)
from .lp_bounds import AttentionBounds, attention_bounds, extreme_alternative
from .nullspace import (
    AlternativeFamily,
    alternative_family,
    compare_null_spaces,
    null_direction,
    null_projection,
    null_space_dimensions,
    prefix_encoding,
    principal_angles,
    rank_sweep,
    same_output_towards,
    simplex_null_space,
    step_range,
    validity,
)
from .patching import AttentionPatch, hidden_state_change, patch_attention, run_patched
from .hidden_tokens import HiddenTokens, collect_hidden_tokens
from .probes import (
    COMBINATIONS,
    LayerProbes,
    TokenMap,
    chance_rate,
    evaluate_map,
    fit_map,
    fit_token_map,
    fraction_curve,
    generalisation_matrix,
    identifiability_rate,
    nearest_in_sentence,
    neighbour_rates,
    probe_layers,
    split_by_sentence,
)
from .attribution import (
    Attribution,
    attribute_examples,
    cls_around_separator,
    cls_segments,
    cls_table,
    compare_attributions,
    contributions_from_norms,
    distance_groups,
    distance_table,
    hidden_token_attribution,
    own_input_is_largest,
    paper_layer,
    self_contribution,
    self_contribution_table,
)
from .widgets import NullSpaceExplorer
from .notebook import setup_notebook
from .plots import token_heatmap
from .text import encode, tokens_of

# ---- Beyond BERT: other families through the AttentionInterface, causal heads, the bundled decoder ----
from . import attention_capture, causal, families
from .families import CHAPTER_NEEDS, UnsupportedFamilyError, chapter_applies, family_of
from .internals import capture_generic
from .causal import attention_on_position, causal_effective_attention, causal_null_dimensions, future_mass
from .sweeps import sink_sweep, summarise_sink
from .models import DECODER_MODEL, load_decoder

__version__ = "0.1.0"
