"""Top-k principal components, aligned to remove sign and rotation ambiguity.

Output
------
``ndarray`` of shape ``(n_components * p,)``, float64: ``k = n_components`` orthonormal
directions (rows, flattened row by row) spanning the top-k principal subspace of the centred
subset, from :func:`numpy.linalg.svd`.

Canonicalisation (superficial randomness removed)
-------------------------------------------------
A principal direction is defined only up to sign, and a subspace with (near-)equal eigenvalues
only up to rotation; both flip between subsets for no reason tied to membership and would inflate
the output covariance [1]_, [2]_.

* No ``reference`` (default): each component's sign is chosen so that its largest-magnitude
  coordinate is positive (the first one on ties).
* ``reference`` (a public ``(k, p)`` basis, e.g. components of public data) with
  ``alignment="procrustes"`` (default): the basis ``W`` is rotated within its span by the
  orthogonal ``Q`` minimising ``||Q W - R||_F`` (:func:`scipy.linalg.orthogonal_procrustes`), so
  the output is the basis of the fitted subspace closest to the reference. With
  ``alignment="sign"`` only the signs are fixed: ``W_i . R_i >= 0``.

``rng`` is ignored (the SVD is deterministic).

Fallback
--------
With fewer than 2 records the subspace is undefined; the first ``k`` coordinate axes stand in
for it (then aligned as above). When the subset has fewer than ``k`` non-trivial directions, the
remaining rows come from the full SVD (an orthonormal completion), also aligned.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458.
.. [2] M. Sridhar, H. Xiao, S. Devadas. PAC-Private Algorithms. IEEE S&P 2025.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._common import split_unsupervised

__all__ = ["PCAComponents", "align_components", "make_pca", "pca_components"]


def align_components(
    W: np.ndarray, reference: np.ndarray | None = None, *, alignment: str = "procrustes"
) -> np.ndarray:
    """Fix the sign (and, with a reference and ``"procrustes"``, the rotation) of rows of ``W``."""
    if reference is not None and alignment == "procrustes":
        from scipy.linalg import orthogonal_procrustes

        Q, _ = orthogonal_procrustes(W.T, reference.T)
        return Q.T @ W
    W = W.copy()
    rows = np.arange(W.shape[0])
    largest = W[rows, np.argmax(np.abs(W), axis=1)]
    if reference is not None:
        dots = np.einsum("ij,ij->i", W, reference)
        sign = np.where(dots != 0, np.sign(dots), np.sign(largest))
    else:
        sign = np.sign(largest)
    return W * np.where(sign == 0, 1.0, sign)[:, None]


@dataclass(frozen=True, eq=False)
class PCAComponents:
    """Aligned top-k principal components (picklable callable).

    Parameters
    ----------
    n_components : int
        Number of components ``k`` (1 <= k <= p).
    reference : ndarray of shape (k, p) or None
        Public reference basis for alignment (stored read-only).
    alignment : {"procrustes", "sign"}
        Alignment to the reference (ignored without one: largest-coordinate sign rule).
    """

    n_components: int = 2
    reference: np.ndarray | None = None
    alignment: str = "procrustes"

    def __post_init__(self) -> None:
        k = self.n_components
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"`n_components` must be an integer >= 1; got {k!r}.")
        if self.alignment not in ("procrustes", "sign"):
            raise ValueError(
                f"`alignment` must be 'procrustes' or 'sign'; got {self.alignment!r}."
            )
        if self.reference is not None:
            R = np.array(self.reference, dtype=np.float64)
            if R.ndim != 2 or R.shape[0] != k or not np.all(np.isfinite(R)):
                raise ValueError(
                    f"`reference` must be a finite array of shape (n_components={k}, p); "
                    f"got shape {R.shape}."
                )
            R.setflags(write=False)
            object.__setattr__(self, "reference", R)

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """Aligned components, flattened to shape ``(n_components * p,)``."""
        X = split_unsupervised(subset)
        n, p = X.shape
        k = int(self.n_components)
        if k > p:
            raise ValueError(f"`n_components`={k} exceeds the number of features p={p}.")
        if self.reference is not None and self.reference.shape[1] != p:
            raise ValueError(
                f"`reference` has {self.reference.shape[1]} columns; the subset has p={p}."
            )
        if n < 2:
            W = np.eye(k, p)
        else:
            Xc = X - X.mean(axis=0)
            full = min(n, p) < k
            _, _, Vt = np.linalg.svd(Xc, full_matrices=full)
            W = Vt[:k]
        return align_components(W, self.reference, alignment=self.alignment).ravel()

    def to_dict(self) -> dict:
        """JSON-serialisable configuration."""
        return {
            "mechanism": "pca",
            "n_components": int(self.n_components),
            "reference": None if self.reference is None else self.reference.tolist(),
            "alignment": self.alignment,
        }


def make_pca(
    *, n_components: int = 2, reference=None, alignment: str = "procrustes"
) -> PCAComponents:
    """Build a PCA mechanism; see :class:`PCAComponents`."""
    return PCAComponents(n_components=n_components, reference=reference, alignment=alignment)


def pca_components(subset, *, rng=None) -> np.ndarray:
    """Default: top-2 components, sign rule (largest coordinate positive); shape ``(2 p,)``."""
    return _DEFAULT(subset)


_DEFAULT = PCAComponents()
