"""The one figure factory and PNG encoder of :mod:`pacpriv.plotting` (lazy matplotlib)."""

from __future__ import annotations

import base64
import io

from pacpriv._validation import check_int

__all__ = ["figure_to_data_uri"]


def _figure(n_axes: int = 1, *, width: float = 6.4, height: float = 4.0):
    """A pyplot-free Figure with ``n_axes`` side-by-side axes (lazy matplotlib import)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as err:  # pragma: no cover - exercised with a monkeypatched import
        raise ImportError(
            "pacpriv figures need matplotlib: pip install pacpriv[plot]"
        ) from err
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = [fig.add_subplot(1, n_axes, i + 1) for i in range(n_axes)]
    return fig, axes


def figure_to_data_uri(fig, *, dpi: int = 100) -> str:
    """Encode a figure as a ``data:image/png;base64,...`` URI (for ``<img src=...>``).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    dpi : int, default 100
        Resolution of the PNG (``>= 10``).

    Returns
    -------
    str
    """
    dpi = check_int(dpi, "dpi", low=10)
    if not hasattr(fig, "savefig"):
        raise TypeError(f"`fig` must be a matplotlib Figure; got {type(fig).__name__}.")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
