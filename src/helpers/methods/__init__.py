"""Floor 2, the methods: the maths, tensors in and tensors out. Imports only the model floor.

A method never loads a model, runs a corpus or draws.

* :mod:`~helpers.methods.linalg`: numerical rank, null spaces, correlations.
* :mod:`~helpers.methods.heads`: each head's share of its layer's output, and the null of equal heads (chapter 1).
* :mod:`~helpers.methods.nullspace`, :mod:`~helpers.methods.lp_bounds`, :mod:`~helpers.methods.keys`:
  alternative attention with the same output (chapters 2-3).
* :mod:`~helpers.methods.effective`, :mod:`~helpers.methods.causal`, :mod:`~helpers.methods.tokens`:
  effective attention, bidirectional and causal, and attention per token class (chapters 4, 9);
  :mod:`~helpers.methods.captured` splits a capture as its model is, bidirectional or causal.
* :mod:`~helpers.methods.distributions`: the distributions with a head's output nearest to
  effective attention (chapter 4, the critics).
* :mod:`~helpers.methods.hidden_tokens`, :mod:`~helpers.methods.probes`: maps from hidden tokens back
  to input tokens (chapter 5); :mod:`~helpers.methods.probe_training`: their Adam training and stopping rule.
* :mod:`~helpers.methods.jacobians`, :mod:`~helpers.methods.attribution`,
  :mod:`~helpers.methods.word_classes`: Hidden Token Attribution (chapter 6).
* :mod:`~helpers.methods.decomposition`, :mod:`~helpers.methods.rollout`, :mod:`~helpers.methods.mixing`:
  context-mixing measures and their rollouts (chapter 7).
* :mod:`~helpers.methods.reference`: slow, obviously correct versions the tests compare against.
"""

# Each submodule is imported when first read (helpers.model.lazy): ``import helpers`` stays light.
from ..model.lazy import lazy_attributes

__getattr__, __dir__ = lazy_attributes(__name__, __path__)
del lazy_attributes
