"""Helpers for the book *On Identifiability in Transformers, reproduced*.

Data flows one way: text -> models -> internals -> method modules -> sweeps
(corpus drivers) -> plots.

One numbering convention, everywhere a reader sees a number (tables, plot
labels, docstrings, prose), as in the paper:

* hidden states are numbered 0..L: 0 is the embedding output, l is the output
  of layer l (table column ``hidden_state``);
* layers are numbered 1..L and heads 1..h (table columns ``layer`` and
  ``head``); functions a reader calls with a layer or head
  (``patch_attention(model, layer=3, head=1, ...)``) take these numbers;
* tensors keep Python's 0-based index (``internals.A[l - 1, h - 1]`` is layer
  l, head h); only ``helpers.numbering`` converts.

One name per thing: the input embeddings (token + segment + position, before
the embedding LayerNorm) are ``x``; the sequence length is ``n`` (the paper's
d_s); randomness is ``seed: int``; the Hidden Token Attribution estimator's
sample count is ``samples`` (the word "probe" belongs to chapter 5's maps).
"""
from . import claims, numbering, paper, reference, sweeps
from .claims import Claims, ClaimFailed
from .notebook import book_model, glue
from .data import DataUnavailableError, Example, load_corpus, load_glue
from .internals import (
    Internals,
    attention_block_output,
    attention_from_qk,
    capture,
    finish_layer,
    head_weights,
    rebuild_hidden_states,
)
from .effective import EffectiveAttention, effective_attention, effective_attention_of
from .tokens import attention_to, summarise_token_classes, token_classes
from .linalg import left_null_space, numerical_rank, pearson, range_basis, relative_output_change
from .models import (
    DEFAULT_MODEL,
    Architecture,
    ModelLoadError,
    UnsupportedModelError,
    check_supported,
    describe,
    load_model,
)
from .paper import BERT_BASE
from .lp_bounds import AttentionBounds, attention_bounds, extreme_alternative
from .nullspace import (
    AlternativeFamily,
    alternative_family,
    compare_null_spaces,
    null_direction,
    null_projection,
    null_space_dimensions,
    principal_angles,
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
    cls_around_separator,
    cls_segments,
    cls_table,
    compare_attributions,
    contributions_from_norms,
    distance_groups,
    distance_table,
    hidden_token_attribution,
    own_input_is_largest,
    self_contribution,
    self_contribution_table,
    share_own_input_not_largest,
)
from .sweeps import attribute_examples, effective_attention_sweep, rank_sweep
from .widgets import NullSpaceExplorer
from .notebook import setup_notebook
from .plots import token_heatmap
from .text import encode, prefix_encoding, tokens_of

# ---- Beyond BERT: other families through the AttentionInterface, causal heads, the bundled decoder ----
from . import attention_capture, causal, families
from .families import CHAPTER_NEEDS, UnsupportedFamilyError, chapter_applies, family_of
from .internals import capture_generic
from .causal import attention_on_position, causal_effective_attention, causal_null_dimensions, future_mass
from .sweeps import sink_sweep, summarise_sink
from .models import DECODER_MODEL, load_decoder

__version__ = "0.1.0"

# ---- issue 12: content vs function words (chapter 6)
from . import word_classes
from .word_classes import (
    WORD_CLASSES,
    class_summary,
    content_keeps_more_from,
    function_words,
    self_contribution_by_class,
    word_classes_of,
)

# ---- issue 12: do the keys allow the alternatives? (chapter 3)
from . import keys
from .keys import (
    ProducibleAlternative,
    dimension_count,
    logit_rank_distance,
    producible_alternative,
    producible_dimension,
    same_keys_freedom,
)

# ---- issue 12: fine-tuning (chapter 8)
from . import finetune
from .finetune import FineTuned, PairClassifier, accuracy, fine_tune, majority_baseline, split_pairs

# ---- issue 12: before/after drivers (chapter 8)
from .sweeps import naive_identifiability_table, sink_attention_table

# --------------------------------------------------------------------------- chapter 7: context mixing
from . import mixing, reference, sweeps
from .mixing import LayerDecomposition, Mixing, context_mixing, decompose_layer, leave_one_out, local_hta, row_spearman
from .sweeps import MixingSweep, agreement_table, context_mixing_sweep, cost_table
