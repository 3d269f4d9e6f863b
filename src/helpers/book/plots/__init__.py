"""Figures. A plot never computes a method: it draws what the method modules return."""

from .attribution import (
    plot_cls,
    plot_contribution_maps,
    plot_distance_groups,
    plot_estimate_vs_exact,
    plot_not_largest_share,
    plot_self_contribution,
)

# ---- chapter 9: decoders ----
from .decoder import (
    plot_causal_null_dimensions,
    plot_decoder_attribution,
    plot_interventions,
    plot_layer_interventions,
    plot_sink,
    plot_sink_literature,
    plot_value_drain,
)
from .effective import (
    plot_attention_split,
    plot_correlation_vs_length,
    plot_distribution_distances,
    plot_token_class_attention,
)
from .heatmaps import token_heatmap

# ---- chapter 3: do the keys allow the alternatives?
from .keys import plot_centred_log_spectra
from .mixing import plot_agreement, plot_cost, plot_leave_one_out
from .nullspace import (
    plot_attention_comparison,
    plot_family_rows,
    plot_hidden_change,
    plot_lp_ranges,
    plot_null_space_angles,
    plot_null_step,
    plot_rank_sweep,
)
from .probes import (
    plot_fraction_curve,
    plot_generalisation,
    plot_identifiability_controls,
    plot_layer_rates,
    plot_neighbour_rates,
)
from .style import EFFECTIVE, NULL, PAPER, RAW, set_style

# ---- chapter 6: word classes
from .word_classes import plot_self_contribution_by_class
