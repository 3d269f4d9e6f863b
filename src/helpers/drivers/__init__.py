"""Floor 3, the drivers: run a model over a corpus and tabulate. Imports the methods and the model.

One module per chapter family: :mod:`~helpers.drivers.ranks` (chapter 2),
:mod:`~helpers.drivers.effective` and :mod:`~helpers.drivers.embedding_edits` (4), :mod:`~helpers.drivers.identifiability` (5),
:mod:`~helpers.drivers.attribution` (6), :mod:`~helpers.drivers.mixing` (7),
:mod:`~helpers.drivers.finetuning`, :mod:`~helpers.drivers.sinks` and
:mod:`~helpers.drivers.identifiability_controls` (8), :mod:`~helpers.drivers.decoder` and
:mod:`~helpers.drivers.interventions` (9). Tables are
DataFrames in the book's numbering: ``layer`` 1..L, ``head`` 1..h, ``hidden_state`` 0..L.
"""

# Each submodule is imported when first read (helpers.model.lazy): ``import helpers`` stays light.
from ..model.lazy import lazy_attributes

__getattr__, __dir__ = lazy_attributes(__name__, __path__)
del lazy_attributes
