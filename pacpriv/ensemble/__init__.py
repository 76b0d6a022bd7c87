"""Many models at once: a vectorised ensemble trainer for torch models (needs pacpriv[torch]).

Everything expensive in a privacy audit trains the same small model many times on different
subsets: PAC Privacy trials, per-record differences, prediction worlds, LiRA/RMIA reference
models (Carlini et al., Membership Inference Attacks From First Principles, IEEE S&P 2022).
This package trains K copies of a model on K subsets of one pool as one program
(``torch.func.stack_module_state``, ``functional_call``, ``vmap``; PyTorch tutorial "Model
ensembling"), chunked to a memory bound, on the CPU or a CUDA device, and equal to K
sequential trainings (:func:`train_reference`) to float round-off.

``import pacpriv`` does not import this package; importing it imports torch.
"""

from pacpriv.ensemble._convert import loss_from_torch, optimizer_from_torch
from pacpriv.ensemble._ensemble import Ensemble
from pacpriv.ensemble._mechanisms import (
    EnsembleLogisticRegression,
    EnsembleMechanism,
    trial_seed_of,
)
from pacpriv.ensemble._memory import (
    DEFAULT_MEMORY_FRACTION,
    MemoryEstimate,
    available_memory,
    choose_chunk_size,
)
from pacpriv.ensemble._mlp import EnsembleMLP, TanhMLP
from pacpriv.ensemble._reference import train_reference
from pacpriv.ensemble._spec import (
    BATCH_STREAM,
    INIT_STREAM,
    NOISE_STREAM,
    SGD,
    Adam,
    Clipping,
    FullBatch,
    RandomAllocation,
    Shuffled,
    TrainingSpec,
)
from pacpriv.ensemble._torch import torch_generator
from pacpriv.ensemble._train import estimate_memory, train_ensemble

__all__ = [
    # training K models at once, and its sequential definition
    "Ensemble",
    "train_ensemble",
    "train_reference",
    # training settings (seed streams: BATCH_STREAM, NOISE_STREAM, INIT_STREAM)
    "Adam",
    "BATCH_STREAM",
    "Clipping",
    "FullBatch",
    "INIT_STREAM",
    "NOISE_STREAM",
    "RandomAllocation",
    "SGD",
    "Shuffled",
    "TrainingSpec",
    "loss_from_torch",
    "optimizer_from_torch",
    "torch_generator",
    # mechanisms evaluating a block of subsets at once (masks in, one row per subset out)
    "EnsembleLogisticRegression",
    "EnsembleMLP",
    "EnsembleMechanism",
    "TanhMLP",
    "trial_seed_of",
    # memory bound
    "DEFAULT_MEMORY_FRACTION",
    "MemoryEstimate",
    "available_memory",
    "choose_chunk_size",
    "estimate_memory",
]
