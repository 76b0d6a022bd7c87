"""Helpers of the ensemble tests (imported as ``from . import _helpers``)."""

from __future__ import annotations

import numpy as np
import torch


def mlp(p: int = 4, h: int = 6, k: int = 3):
    """A small Linear-Tanh-Linear network (torch.func path), the same every call."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(p, h), torch.nn.Tanh(),
                                   torch.nn.Linear(h, k))


def flat(module) -> np.ndarray:
    """A module's parameters as one float64 vector (``parameters()`` order)."""
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()]).double().numpy()
