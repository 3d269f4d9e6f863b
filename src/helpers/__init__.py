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

# ---- Beyond BERT: other families through the AttentionInterface, causal heads, the bundled decoder ----
from . import attention_capture, causal, claims, families, numbering, paper, reference, sweeps
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
from .causal import attention_on_position, causal_effective_attention, causal_null_dimensions, future_mass
from .claims import ClaimFailed, Claims
from .data import DataUnavailableError, Example, load_corpus, load_glue
from .effective import EffectiveAttention, effective_attention, effective_attention_of
from .families import (
    CHAPTER_NEEDS,
    UnsupportedFamilyError,
    chapter_applies,
    chapter_default_model,
    family_of,
    load_for_chapter,
)
from .hidden_tokens import HiddenTokens, collect_hidden_tokens
from .internals import (
    Internals,
    attention_block_output,
    attention_from_qk,
    capture,
    capture_generic,
    finish_layer,
    head_weights,
    rebuild_hidden_states,
)
from .linalg import left_null_space, numerical_rank, pearson, range_basis, relative_output_change
from .lp_bounds import AttentionBounds, attention_bounds, extreme_alternative
from .models import (
    DECODER_MODEL,
    DEFAULT_MODEL,
    Architecture,
    ModelLoadError,
    UnsupportedModelError,
    check_supported,
    describe,
    load_decoder,
    load_model,
)
from .notebook import glue, residual_text, setup_notebook
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
from .paper import BERT_BASE
from .patching import AttentionPatch, hidden_state_change, patch_attention, run_patched
from .plots import token_heatmap
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
from .sweeps import attribute_examples, effective_attention_sweep, rank_sweep, sink_sweep, summarise_sink
from .text import encode, prefix_encoding, tokens_of
from .tokens import attention_to, summarise_token_classes, token_classes
from .widgets import NullSpaceExplorer

__version__ = "0.1.0"

# ---- chapters 3 (keys), 6 (word classes), 7 (context mixing), 8 (fine-tuning)
from . import finetune, keys, mixing, word_classes
from .finetune import FineTuned, PairClassifier, accuracy, fine_tune, majority_baseline, split_pairs
from .keys import (
    ProducibleAlternative,
    dimension_count,
    logit_rank_distance,
    producible_alternative,
    producible_dimension,
    same_keys_freedom,
)
from .mixing import (
    LayerDecomposition,
    Mixing,
    context_mixing,
    decompose_layer,
    leave_one_out,
    local_hta,
    local_measures,
    row_spearman,
)
from .sweeps import (
    MixingSweep,
    ReferenceCheck,
    agreement_table,
    check_reference,
    context_mixing_sweep,
    cost_table,
    naive_identifiability_table,
    reference_shift,
    reference_tables,
    sink_attention_table,
)
from .word_classes import (
    WORD_CLASSES,
    class_summary,
    content_keeps_more_from,
    function_words,
    self_contribution_by_class,
    word_classes_of,
)
