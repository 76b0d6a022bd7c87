"""Benchmark: σ for a target (ε, δ) against opacus and dp-accounting at the same points.

For each (q, steps, ε, δ), Poisson subsampling at rate q = 1/t over steps = t·E:

* pacpriv ``noise_multiplier_for_epsilon(..., sampling="poisson")`` (dp-accounting's
  pessimistic PLD, interval ``--interval``, bisection in log σ to rtol 1e-3);
* opacus ``get_noise_multiplier(target_epsilon=, target_delta=, sample_rate=, epochs=)`` with
  its default accountant (RDP) and default ``epsilon_tolerance``: the σ an opacus user gets;
* dp-accounting's own ``calibrate_dp_mechanism`` with ``PLDAccountant`` at the same interval
  (bracket [σ_opacus/2, σ_opacus], absolute tolerance 1e-4·σ_opacus): the reference.

Printed per point: the three σ, ``ours/opacus`` (done when ≤ 1.001), ``|ours/dp-acc − 1|``
(done when ≤ 1e-3), the wall times and the time ratio ``ours/opacus``; then pacpriv's certified
random-allocation σ at the same (t, E, ε, δ) for context. Timings are wall-clock on a shared
machine: the load average is printed beside them. ``--quick`` uses interval 1e-3.
``--random-allocation-package`` also prints the ε that the ``random-allocation`` package
(Feldman & Shenfeld's reference code, the comparators table's row; direction BOTH, RDP orders
2–60) gives at pacpriv's random-allocation σ: pacpriv's certified chain reaches the target
there, the package's (looser) bound says how much more ε it would report (tens of seconds per
point).

Run: ``python benchmarks/epsilon_calibration.py [--quick] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

#: (t = 1/q, epochs E, target ε, δ)
POINTS = [(100, 10, 1.0, 1e-5), (200, 5, 3.0, 1e-5), (50, 20, 8.0, 1e-6)]


def _timed(fn, *args, **kwargs):
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return value, time.perf_counter() - start


def _dp_accounting_sigma(eps, delta, t, e, interval, hi):
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    def event(sigma):
        return dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(1.0 / t, dp_accounting.GaussianDpEvent(sigma)),
            t * e)

    return dp_accounting.calibrate_dp_mechanism(
        lambda: pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval),
        event, eps, delta, dp_accounting.ExplicitBracketInterval(hi / 2.0, hi), tol=1e-4 * hi)


def _package_epsilon(sigma, t, e, delta):
    import contextlib
    import io
    import sys
    from pathlib import Path

    # this folder's coverage.py would shadow the `coverage` package that numba imports
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    from random_allocation.comparisons.definitions import Direction, PrivacyParams, SchemeConfig
    from random_allocation.random_allocation_scheme.combined import allocation_epsilon_combined

    with contextlib.redirect_stdout(io.StringIO()):  # the package prints search diagnostics
        return float(allocation_epsilon_combined(
            PrivacyParams(sigma=sigma, num_steps=t, num_epochs=e, delta=delta),
            SchemeConfig(allocation_direct_alpha_orders=list(range(2, 61))), Direction.BOTH))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="interval 1e-3 (faster, looser)")
    p.add_argument("--json", default=None, help="write the rows to this JSON file")
    p.add_argument("--random-allocation-package", action="store_true",
                   help="also the random-allocation package's epsilon at our sigma (slow)")
    args = p.parse_args(argv)
    interval = 1e-3 if args.quick else 1e-4

    from opacus.accountants.utils import get_noise_multiplier

    from pacpriv.dpsgd import calibrate_epsilon, noise_multiplier_for_epsilon

    print(f"load average before: {os.getloadavg()}; dp-accounting interval {interval:g}")
    rows = []
    for t, e, eps, delta in POINTS:
        ours, t_ours = _timed(noise_multiplier_for_epsilon, eps, delta, steps_per_epoch=t,
                              epochs=e, sampling="poisson", tolerance=interval)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # RDP's "optimal order is the largest alpha"
            theirs, t_opacus = _timed(get_noise_multiplier, target_epsilon=eps,
                                      target_delta=delta, sample_rate=1.0 / t, epochs=e)
        ref, t_ref = _timed(_dp_accounting_sigma, eps, delta, t, e, interval, theirs)
        cal, t_ra = _timed(calibrate_epsilon, eps, delta, steps_per_epoch=t, epochs=e)
        ra = cal.noise_multiplier
        row = {
            "q": 1.0 / t, "steps": t * e, "epsilon": eps, "delta": delta,
            "sigma_pacpriv_poisson": ours, "sigma_opacus_rdp": theirs,
            "sigma_dp_accounting_pld": ref, "sigma_pacpriv_random_allocation": ra,
            "ours_over_opacus": ours / theirs, "ours_vs_dp_accounting": abs(ours / ref - 1.0),
            "time_pacpriv_s": t_ours, "time_opacus_s": t_opacus, "time_dp_accounting_s": t_ref,
            "time_ratio_pacpriv_over_opacus": t_ours / t_opacus, "time_random_allocation_s": t_ra,
        }
        if args.random_allocation_package:
            row["epsilon_random_allocation_package"], row["time_package_s"] = _timed(
                _package_epsilon, ra, t, e, delta)
            print(f"    random-allocation package at that sigma: epsilon "
                  f"{row['epsilon_random_allocation_package']:.4f} (pacpriv certified "
                  f"{cal.epsilon:.4f}) in {row['time_package_s']:.1f} s")
        rows.append(row)
        print(f"q={1 / t:g} steps={t * e} eps={eps:g} delta={delta:g}: "
              f"sigma pacpriv {ours:.5f} | opacus(RDP) {theirs:.5f} | dp-accounting {ref:.5f}"
              f" | ours/opacus {ours / theirs:.4f} (<= 1.001: {ours <= 1.001 * theirs})"
              f" | |ours/dp-acc - 1| {abs(ours / ref - 1):.2e} (<= 1e-3: "
              f"{abs(ours / ref - 1) <= 1e-3})")
        print(f"    time pacpriv {t_ours:.2f} s, opacus {t_opacus:.2f} s (ratio "
              f"{t_ours / t_opacus:.1f}x), dp-accounting search {t_ref:.2f} s; random "
              f"allocation (certified) sigma {ra:.5f} in {t_ra:.2f} s")
    print(f"load average after: {os.getloadavg()}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"interval": interval, "rows": rows}, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
