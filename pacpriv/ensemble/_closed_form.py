"""Closed-form gradients of a stacked ``torch.nn.Linear`` with cross-entropy or squared error.

For a linear model ``z_i = W x_i + b`` the gradient of example ``i``'s loss is
``∇_W ℓ_i = δ_i x_iᵀ`` and ``∇_b ℓ_i = δ_i`` with ``δ_i = ∂ℓ_i/∂z_i`` (``softmax(z_i) − e_{y_i}``
for cross-entropy, ``2(z_i − t_i)/m`` for the mean squared error over ``m`` outputs), so

* the weighted sum over a batch is one batched matrix product ``(w ∘ δ)ᵀ X``;
* the per-example norm needs no per-example gradient: ``‖∇ℓ_i‖² = ‖δ_i‖² (‖x_i‖² + 1)``
  ("ghost clipping": Goodfellow, arXiv:1510.01799, 2015; Li et al., ICLR 2022, Sec. 4).

Both equal the ``torch.func`` path of :mod:`pacpriv.ensemble._gradients` to float round-off
and skip its autograd overhead, which dominates for models this small.
"""

from __future__ import annotations

from collections.abc import Callable

from pacpriv.ensemble._gradients import CLIP_EPS, PerExampleLoss, _cross_entropy, _mse
from pacpriv.ensemble._torch import torch

__all__ = ["LinearGradients", "closed_form_for"]

Params = dict[str, torch.Tensor]


class LinearGradients:
    """Gradients of a stacked linear model in closed form (see the module docstring).

    The pool is kept as one matrix ``[X, 1, T, ‖x‖² + 1]`` (features, a ones column for the
    bias, the targets ``T`` -- one-hot classes or regression targets -- and the squared norm
    of the augmented row), so a group needs one gather; the bias rides along as the last column
    of the augmented weight ``[W, b]``, and the logits are laid out ``(g, m, L)`` so every
    reduction runs over a long axis.

    Parameters
    ----------
    delta : callable
        ``delta(z (g, m, L), T (g, m, L)) -> ∂ℓ_i/∂z_i`` of shape ``(g, m, L)``.
    targets : callable
        ``targets(y (n, ...), m) -> T (n, m)`` for the pool.
    n_features, n_outputs : int
        ``p`` and ``m``.
    has_bias : bool
    """

    def __init__(self, delta: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                 targets: Callable[[torch.Tensor, int], torch.Tensor], n_features: int,
                 n_outputs: int, has_bias: bool) -> None:
        self.delta, self.targets = delta, targets
        self.p, self.m, self.has_bias = n_features, n_outputs, has_bias
        self.q = n_features + int(has_bias)  # columns of the augmented features

    def pool(self, X: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``([X, 1, T, ‖[x, 1]‖²],)`` of shape ``(n, q + m + 1)``."""
        cols = [X] + ([torch.ones_like(X[:, :1])] if self.has_bias else [])
        xa = torch.cat(cols, dim=1)
        t = self.targets(y, self.m).to(X.dtype)
        return (torch.cat([xa, t, xa.square().sum(1, keepdim=True)], dim=1),)

    def gather(self, pool: tuple[torch.Tensor, ...], index: torch.Tensor, g: int,
               length: int) -> tuple[torch.Tensor, ...]:
        """``(x_aug (g, L, q), T (g, m, L), sq (g, L))`` of the rows ``index``."""
        rows = pool[0].index_select(0, index).reshape(g, length, -1)
        q, m = self.q, self.m
        return rows[..., :q], rows[..., q:q + m].transpose(1, 2), rows[..., q + m]

    def _augmented(self, params: Params) -> torch.Tensor:
        w = params["weight"]
        return torch.cat([w, params["bias"].unsqueeze(2)], dim=2) if self.has_bias else w

    def _split(self, ga: torch.Tensor) -> Params:
        out = {"weight": ga[..., :self.p]}
        if self.has_bias:
            out["bias"] = ga[..., self.p]
        return out

    def _delta(self, params: Params, data: tuple[torch.Tensor, ...]) -> torch.Tensor:
        # logits (g, L, m) by one batched product, then laid out (g, m, L) (a small copy)
        z = torch.bmm(data[0], self._augmented(params).transpose(1, 2))
        return self.delta(z.transpose(1, 2).contiguous(), data[1])

    def gradients(self, params: Params, data: tuple[torch.Tensor, ...],
                  weight: torch.Tensor) -> Params:
        """``∇ Σ_i w_i ℓ_i`` per model, shapes ``(g, *shape)``."""
        d = self._delta(params, data) * weight.unsqueeze(1)
        return self._split(torch.bmm(d, data[0]))

    def clipped_sums(self, params: Params, data: tuple[torch.Tensor, ...],
                     weight: torch.Tensor, max_grad_norm: float) -> Params:
        """``Σ_i w_i clip_C(∇ℓ_i)`` per model, with the norms in closed form."""
        d = self._delta(params, data)
        norms = (d.square().sum(1) * data[2]).sqrt()
        factor = (max_grad_norm / (norms + CLIP_EPS)).clamp(max=1.0) * weight
        return self._split(torch.bmm(d * factor.unsqueeze(1), data[0]))


def _delta_cross_entropy(z: torch.Tensor, onehot: torch.Tensor) -> torch.Tensor:
    return torch.softmax(z, dim=1) - onehot


def _onehot(y: torch.Tensor, m: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(y, m)


def _delta_mse(z: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return (z - t) * (2.0 / z.shape[1])


def _mse_targets(y: torch.Tensor, m: int) -> torch.Tensor:
    if y.ndim != 2 or y.shape[1] != m:
        raise ValueError(f"with loss='mse', `y` must have the model's output shape per record; "
                         f"got outputs ({m},) and targets {tuple(y.shape[1:])}.")
    return y


def closed_form_for(template: torch.nn.Module, loss: PerExampleLoss,
                    x_example: torch.Tensor) -> LinearGradients | None:
    """The closed form when ``template`` is a bare ``nn.Linear`` on vector inputs with the
    built-in cross-entropy or squared-error loss; None otherwise (use ``torch.func``)."""
    if type(template) is not torch.nn.Linear or x_example.ndim != 2:
        return None
    args = (template.in_features, template.out_features, template.bias is not None)
    if loss is _cross_entropy:
        return LinearGradients(_delta_cross_entropy, _onehot, *args)
    if loss is _mse:
        return LinearGradients(_delta_mse, _mse_targets, *args)
    return None
