"""Figures. A plot never computes a method: it draws what the method modules return."""
from .heatmaps import token_heatmap
from .style import EFFECTIVE, NULL, PAPER, RAW, set_style
