"""Flat parameter trees: "module/param" -> array, the params.npz format (no pickle)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def flatten_params(params) -> dict[str, np.ndarray]:
    return {f"{module}/{name}": np.asarray(value) for module, group in params.items() for name, value in group.items()}


def first_non_finite(arrays: dict[str, np.ndarray]) -> str | None:
    """The key of the first floating array holding a NaN or an infinity, or None."""
    return next(
        (
            key
            for key, array in arrays.items()
            if np.issubdtype(array.dtype, np.inexact) and not np.all(np.isfinite(array))
        ),
        None,
    )


def unflatten_params(flat: dict[str, np.ndarray]):
    params: dict[str, dict[str, jax.Array]] = {}
    for key, value in flat.items():
        module, name = key.rsplit("/", 1)
        params.setdefault(module, {})[name] = jnp.asarray(value)
    return params
