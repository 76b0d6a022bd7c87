"""The certificate checks of a calibrated σ, shared by the calibration tests."""

from __future__ import annotations

from pacpriv.dpsgd import calibrate_noise_multiplier, exact_membership_inference_accuracy


def calibrate_and_check_certified(target: float, steps: int, epochs: int, *,
                                  rtol: float = 1e-3):
    """``calibrate_noise_multiplier(target, ...)`` at ``rtol``, checked against the public
    interval evaluated afresh; returns the result.

    Asserts: the upper end is at most the target; re-evaluating at σ with the search's
    tolerance gives exactly the returned interval (warm grids only locate the root); at the
    default tolerance (what a user checks with) the upper end is still at most the target;
    and at σ/1.001 the lower end is above the target (the exact root lies within 0.1%).
    """
    r = calibrate_noise_multiplier(target, steps_per_epoch=steps, epochs=epochs, rtol=rtol)
    assert r.accuracy.upper <= target
    again = exact_membership_inference_accuracy(r.noise_multiplier, steps_per_epoch=steps,
                                                epochs=epochs, tolerance=r.accuracy.tolerance,
                                                progress=False)
    assert (again.lower, again.upper) == (r.accuracy.lower, r.accuracy.upper)
    default = exact_membership_inference_accuracy(r.noise_multiplier, steps_per_epoch=steps,
                                                  epochs=epochs, progress=False)
    assert default.upper <= target
    below = exact_membership_inference_accuracy(
        r.noise_multiplier / 1.001, steps_per_epoch=steps, epochs=epochs,
        tolerance=max(1e-7, (target - 0.5) * 2e-4), progress=False)
    assert below.lower > target
    return r
