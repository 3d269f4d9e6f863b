"""Floor 1, the model: getting at a model and its tensors. Imports no other floor.

* :mod:`~helpers.model.loading`: ``load_model`` (encoders, hub names), ``describe``; every loader
  returns a :class:`~helpers.model.loaded.LoadedModel`;
  :mod:`~helpers.model.decoder`: the bundled decoder and its cache.
* :mod:`~helpers.model.families`: where each piece of attention lives in each family.
* :mod:`~helpers.model.capture`: one forward pass -> :class:`~helpers.model.internals.Internals`
  (the BERT fast path and the generic AttentionInterface path); :mod:`~helpers.model.internals`:
  the captured tensors and the identities that rebuild the model from them.
* :mod:`~helpers.model.patching`: run the model with one head's attention replaced.
* :mod:`~helpers.model.text`: encodings; :mod:`~helpers.model.corpus`: the book's corpus and GLUE.
* :mod:`~helpers.model.numbering`: 1-based layers and heads <-> 0-based indices;
  :mod:`~helpers.model.checks`: the input checks every floor shares.
"""

# Each submodule is imported when first read (helpers.model.lazy): ``import helpers`` stays light.
from .lazy import lazy_attributes

__getattr__, __dir__ = lazy_attributes(__name__, __path__)
del lazy_attributes
