"""The few lines every chapter runs first: seeds, quiet progress bars, plot style."""
from __future__ import annotations

import random

import numpy as np
import torch


def setup_notebook(seed: int = 0, threads: int | None = None) -> None:
    """Seed every generator, silence the transformers weight-loading bar, set the plot style.

    The loading bar would be saved into the notebook as a widget; the
    helpers' own progress bars are left on.
    """
    import transformers

    from .plots.style import set_style

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if threads is not None:
        torch.set_num_threads(threads)
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    set_style()
