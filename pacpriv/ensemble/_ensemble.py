"""A trained ensemble: K stacked parameter sets of one architecture, evaluated in one call."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from pacpriv._validation import check_int
from pacpriv.ensemble._init import parameter_names, prepare_template
from pacpriv.ensemble._stacked import stacked_forward
from pacpriv.ensemble._torch import resolve_device, resolve_dtype, torch

__all__ = ["Ensemble"]

functional_call = torch.func.functional_call
vmap = torch.func.vmap


@dataclass(frozen=True, eq=False)
class Ensemble:
    """K models of one architecture with their parameters stacked on a leading model axis.

    Returned by :func:`pacpriv.ensemble.train_ensemble`; :meth:`from_flat` rebuilds one from
    stored parameter vectors. :meth:`forward` evaluates all K models on a query batch in one
    ``vmap`` of ``functional_call`` (PyTorch tutorial "Model ensembling").

    Attributes
    ----------
    template : torch.nn.Module
        The architecture; its own parameters are not those of any model.
    parameters : dict of str to torch.Tensor
        ``parameters[name]`` has shape ``(K, *shape)``, keyed and ordered as
        ``template.named_parameters()``.
    chunk_size : int
        Models trained together (memory bound); results do not depend on it.
    """

    template: torch.nn.Module
    parameters: dict[str, torch.Tensor]
    chunk_size: int

    @property
    def n_models(self) -> int:
        """K."""
        return int(next(iter(self.parameters.values())).shape[0])

    @property
    def n_parameters(self) -> int:
        """Scalars per model, ``d``."""
        return int(sum(t[0].numel() for t in self.parameters.values()))

    @property
    def dtype(self) -> torch.dtype:
        """The floating dtype of the parameters."""
        return next(iter(self.parameters.values())).dtype

    @property
    def device(self) -> torch.device:
        """Where the parameters live."""
        return next(iter(self.parameters.values())).device

    def flat_parameters(self) -> np.ndarray:
        """All parameters as one float64 array of shape ``(K, d)``.

        Row ``k`` is ``concat(p.reshape(-1) for p in model_k.parameters())``, the layout of
        :class:`pacpriv._adapters.TorchMechanism` outputs.
        """
        k = self.n_models
        parts = [t.detach().reshape(k, -1) for t in self.parameters.values()]
        return torch.cat(parts, dim=1).to(torch.float64).cpu().numpy()

    @classmethod
    def from_flat(cls, template: torch.nn.Module, flat, *, dtype: str | torch.dtype = "float32",
                  device: str | torch.device = "cpu") -> Ensemble:
        """Rebuild from parameter vectors, the inverse of :meth:`flat_parameters`.

        Parameters
        ----------
        template : torch.nn.Module
            The architecture.
        flat : array-like of shape (K, d)
            One parameter vector per model (``d`` = the template's parameter count).
        dtype : {"float32", "float64"}, default "float32"
        device : {"cpu", "cuda"} or torch.device, default "cpu"

        Raises
        ------
        ValueError
            If ``flat`` is not 2-D with ``d`` columns, or not finite.
        """
        tmpl = prepare_template(template, dtype=resolve_dtype(dtype),
                                device=resolve_device(device))
        values = torch.as_tensor(np.array(flat, dtype=np.float64, copy=True))
        d = sum(p.numel() for p in tmpl.parameters())
        if values.ndim != 2 or values.shape[1] != d or values.shape[0] < 1:
            raise ValueError(f"`flat` must have shape (K >= 1, {d}); got {tuple(values.shape)}.")
        if not bool(torch.isfinite(values).all()):
            raise ValueError("`flat` must be finite; it contains NaN or inf.")
        params, start = {}, 0
        for name, p in tmpl.named_parameters():
            stop = start + p.numel()
            params[name] = values[:, start:stop].reshape(-1, *p.shape).to(
                dtype=p.dtype, device=p.device).contiguous()
            start = stop
        return cls(template=tmpl, parameters=params, chunk_size=int(values.shape[0]))

    @classmethod
    def from_modules(cls, modules, *, dtype: str | torch.dtype = "float32",
                     device: str | torch.device = "cpu") -> Ensemble:
        """Stack K trained modules of one architecture (``torch.func.stack_module_state``).

        Parameters
        ----------
        modules : sequence of torch.nn.Module
            K >= 1 modules with the same parameter names and shapes (the first is the
            template); they are copied, never modified.
        dtype, device
            As :meth:`from_flat`.

        Raises
        ------
        ValueError
            If ``modules`` is empty or the modules' parameters differ in names or shapes.
        """
        modules = list(modules)
        if not modules:
            raise ValueError("`modules` must hold at least one torch.nn.Module.")
        dt, dev = resolve_dtype(dtype), resolve_device(device)
        copies = [prepare_template(m, dtype=dt, device=dev) for m in modules]
        shapes = [[(n, tuple(p.shape)) for n, p in m.named_parameters()] for m in copies]
        bad = [k for k, s in enumerate(shapes) if s != shapes[0]]
        if bad:
            raise ValueError(f"module {bad[0]} has other parameter names or shapes than module "
                             "0: every module must have the same architecture.")
        params, _ = torch.func.stack_module_state(copies)
        return cls(template=copies[0], parameters={n: p.detach() for n, p in params.items()},
                   chunk_size=len(copies))

    def module(self, k: int) -> torch.nn.Module:
        """A standalone copy of the template holding model ``k``'s parameters."""
        k = check_int(k, "k", low=0, high=self.n_models - 1)
        model = copy.deepcopy(self.template)
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(self.parameters[name][k])
        return model

    def forward(self, X) -> torch.Tensor:
        """Outputs of every model on every row of ``X``: shape ``(K, n, *out)``, no gradients.

        One batched product per layer for linear layers, sequences of them with element-wise
        activations and :class:`~pacpriv.ensemble.TanhMLP` (:mod:`pacpriv.ensemble._stacked`);
        a ``vmap`` of ``functional_call`` for any other architecture.

        Parameters
        ----------
        X : array-like or torch.Tensor of shape (n, ...)
            Query rows; cast to the ensemble's dtype and device.
        """
        x = X if isinstance(X, torch.Tensor) else torch.from_numpy(np.asarray(X))
        x = x.to(dtype=self.dtype, device=self.device)
        with torch.inference_mode():
            out = stacked_forward(self.template, self.parameters, x)
            if out is not None:
                return out
            buffers = dict(self.template.named_buffers())
            template = self.template

            def one(p: dict[str, torch.Tensor], xb: torch.Tensor) -> torch.Tensor:
                return functional_call(template, (p, buffers), (xb,))

            return vmap(one, in_dims=(0, None))(self.parameters, x)

    def evaluate(self, X) -> np.ndarray:
        """:meth:`forward` as a float64 numpy array of shape ``(K, n, *out)``."""
        return self.forward(X).to(torch.float64).cpu().numpy()

    def to_dict(self) -> dict:
        """Public facts of the ensemble (no parameter value)."""
        return {"n_models": self.n_models, "n_parameters": self.n_parameters,
                "parameter_names": parameter_names(self.template), "chunk_size": self.chunk_size,
                "dtype": str(self.dtype).replace("torch.", ""), "device": str(self.device)}
