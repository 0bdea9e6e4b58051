"""What a number given to foxc's library may be: one definition of a whole number and a finite one, for every
argument check below the CLI (the data layer, the simulator, replay, the evaluator)."""
from __future__ import annotations

import math

import numpy as np


def whole(value) -> bool:
    """An integer, or a float without a fraction (not a bool): what a count or a money setting may be."""
    if isinstance(value, (bool, np.bool_)):
        return False
    return isinstance(value, (int, np.integer)) or (
        isinstance(value, (float, np.floating)) and float(value).is_integer())


def finite(value) -> bool:
    """A finite number (not a bool): what a float setting may be; NaN, ±inf and an int past a float's range are not."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
