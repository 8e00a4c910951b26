"""Loading a causal language model from a directory: the one place every step does it.

transformers (from 5.25) swaps layers for kernels fetched from the Hugging Face Hub by default,
on CUDA at a model's first `train()` or `eval()`: code downloaded at run time, outside any
audit, which fails on a machine with no Hub access and can change results between runs. Every
model here is loaded with `use_kernels=False`, so a run computes with the installed torch and
transformers alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def load_causal_lm(path: str | Path, dtype: Any = None, **kwargs: Any) -> Any:
    """`AutoModelForCausalLM.from_pretrained(path, dtype=dtype, **kwargs)` without Hub kernels."""
    from transformers import AutoModelForCausalLM

    if dtype is not None:
        kwargs["dtype"] = dtype
    return AutoModelForCausalLM.from_pretrained(path, use_kernels=False, **kwargs)
