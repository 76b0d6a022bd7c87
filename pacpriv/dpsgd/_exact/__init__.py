"""Certified grid numerics behind :func:`pacpriv.dpsgd.exact_membership_inference_accuracy`.

Private: linear and logarithmic lattices with their round-off bounds (``lattice``), geometric
grids (``geometric``), the hybrid and mixed grids of the top levels (``hybrid``, ``mixed``), the
geometric-to-linear conversion (``convert``) and cheap certified bounds (``screens``).
"""
