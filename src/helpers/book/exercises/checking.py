"""The shared core of the chapters' exercise checks: a function for the reader to complete, and a check that says what is wrong.

Each chapter's module (``helpers.book.exercises.ch04`` ...) holds its ``check_...``
functions. A check calls the reader's function on fresh inputs (drawn with a seed,
so a failure can be reproduced), compares with the book's own implementation and:

* prints one line and returns False when the function is still a stub (raises
  ``NotImplementedError``): the executed book shows the exercise unanswered;
* raises ``AssertionError`` naming the input, the expected and the received value
  (shape first) when the answer is wrong;
* prints what it checked and returns True when every case agrees.

``compare`` is the shared core the chapter modules call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

__all__ = ["ExerciseNotDone", "compare"]


class ExerciseNotDone(Exception):
    """The reader's function is still the stub."""


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"tensor of shape {tuple(value.shape)}"
    return f"{type(value).__name__} {value!r}"[:120]


def compare(
    name: str,
    function: Callable,
    reference: Callable,
    cases: Iterable[tuple[str, tuple]],
    atol: float = 1e-6,
    rtol: float = 1e-5,
) -> bool:
    """Check ``function`` against ``reference`` on each ``(label, arguments)`` case (see the module docstring)."""
    if not callable(function):
        raise TypeError(f"{name}: pass your function itself (e.g. check({name})), got {type(function).__name__}.")
    checked = 0
    for label, arguments in cases:
        expected = reference(*arguments)
        try:
            got = function(*arguments)
        except NotImplementedError:
            print(f"{name}: not implemented yet.")
            return False
        if isinstance(expected, torch.Tensor):
            if not isinstance(got, torch.Tensor):
                raise AssertionError(
                    f"{name} on {label}: expected a tensor of shape {tuple(expected.shape)}, got {_describe(got)}."
                )
            if got.shape != expected.shape:
                raise AssertionError(
                    f"{name} on {label}: expected shape {tuple(expected.shape)}, got {tuple(got.shape)}."
                )
            got64, expected64 = got.detach().double().cpu(), expected.detach().double().cpu()
            if not torch.allclose(got64, expected64, atol=atol, rtol=rtol):
                worst = (got64 - expected64).abs().argmax()
                index = tuple(int(i) for i in torch.unravel_index(worst, expected64.shape))
                raise AssertionError(
                    f"{name} on {label}: entry {index} is {float(got64[index]):.6g}, "
                    f"expected {float(expected64[index]):.6g} (largest difference)."
                )
        elif got != expected:
            raise AssertionError(f"{name} on {label}: expected {_describe(expected)}, got {_describe(got)}.")
        checked += 1
    print(f"{name}: correct on all {checked} checks.")
    return True
