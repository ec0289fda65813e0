"""The size guards: integer powers, shifts and products, and repetitions, refused before they are built.

One ``10 ** 10 ** 8`` or ``"x" * 10 ** 12`` is a single C call no timeout interrupts and no
memory limit stops in time, so the operators the compiler routes here check the result's size
first (multiplication by a small number literal is left to Python: see :mod:`.rewrites`).
"""

from __future__ import annotations

import math
import operator
from typing import Any

from .violations import ResourceLimitError

__all__ = ["MAX_INT_BITS", "MAX_SEQUENCE_ITEMS", "guarded_lshift", "guarded_mul", "guarded_pow"]

MAX_INT_BITS = 1 << 20
"""Largest integer result (in bits, about 315,000 digits) ``**`` / ``<<`` / ``*`` may build; one
multiplication at this size is still a few milliseconds of C time."""

MAX_SEQUENCE_ITEMS = 1 << 26
"""Largest ``str`` / ``list`` / ... repetition result (items) ``*`` may build."""

_INTS = (int, bool)
_SEQUENCES = (str, bytes, bytearray, list, tuple)


def _too_big(what: str, size: float, limit: int) -> ResourceLimitError:
    return ResourceLimitError(
        f"refused: {what} would have about {int(size):,} {'bits' if what != 'repetition' else 'items'}"
        f" (sandbox limit {limit:,})"
    )


def guarded_pow(base: Any, exp: Any, *mod: Any) -> Any:
    """``**`` and ``pow()``: integer powers beyond :data:`MAX_INT_BITS` are refused first."""
    if not mod and type(base) in _INTS and type(exp) in _INTS and exp > 0 and abs(base) > 1:
        bits = exp * math.log2(abs(base))
        if bits > MAX_INT_BITS:
            raise _too_big("power", bits, MAX_INT_BITS)
    return pow(base, exp, *mod)


def guarded_lshift(a: Any, b: Any) -> Any:
    """``<<``: integer shifts beyond :data:`MAX_INT_BITS` are refused first."""
    if type(a) in _INTS and type(b) in _INTS and a and b > 0:
        bits = a.bit_length() + b
        if bits > MAX_INT_BITS:
            raise _too_big("shift", bits, MAX_INT_BITS)
    return operator.lshift(a, b)


def guarded_mul(a: Any, b: Any) -> Any:
    """``*`` (unless by a small number literal): huge repetitions and integers are refused first."""
    ta, tb = type(a), type(b)
    if ta is float or tb is float:
        return a * b
    if ta is int and tb is int:
        if a.bit_length() + b.bit_length() > MAX_INT_BITS:
            raise _too_big("product", a.bit_length() + b.bit_length(), MAX_INT_BITS)
        return a * b
    if ta in _INTS and isinstance(b, _SEQUENCES):
        count, seq = a, b
    elif tb in _INTS and isinstance(a, _SEQUENCES):
        count, seq = b, a
    else:
        if ta in _INTS and tb in _INTS:
            bits = a.bit_length() + b.bit_length()
            if bits > MAX_INT_BITS:
                raise _too_big("product", bits, MAX_INT_BITS)
        return a * b
    size = len(seq) * count
    if size > MAX_SEQUENCE_ITEMS:
        raise _too_big("repetition", size, MAX_SEQUENCE_ITEMS)
    return a * b
