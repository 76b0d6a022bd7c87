"""``pacpriv dpsgd bound|sigma|exact|compare``: random-allocation DP-SGD, analytic."""

from __future__ import annotations

import argparse
import sys

import numpy as np

from pacpriv import _json
from pacpriv._numbers import format_bound, format_fixed, format_percent
from pacpriv._validation import check_real
from pacpriv.cli._args import UsageError, number
from pacpriv.cli._specs import add_spec_flags, spec_from_args
from pacpriv.dpsgd import (
    calibrate_noise_multiplier,
    compare_accountants,
    exact_membership_inference_accuracy,
    noise_multiplier_for_accuracy,
)
from pacpriv.dpsgd.epsilon import epsilon_bound
from pacpriv.dpsgd.exact import _checked_grid
from pacpriv.dpsgd.labels import COVERS, ROUNDING, assumes, bound_fields, bound_label, kind_text
from pacpriv.dpsgd.spec import DPSGDSpec


def _common(p: argparse.ArgumentParser, sigma: str = "", *, delta: bool = True,
            helps: dict[str, str] | None = None) -> None:
    """The :class:`~pacpriv.dpsgd.DPSGDSpec` flags from its fields' metadata, ``--delta`` and
    ``--json``. ``sigma``: ``"one"`` (required), ``"sweep"`` (one or more, required),
    ``"optional"`` or ``""`` (no ``--noise-multiplier``)."""
    add_spec_flags(p, DPSGDSpec, only=("steps_per_epoch", "epochs", "k")
                   + (("noise_multiplier",) if sigma else ()),
                   sweep=sigma == "sweep", defaults=True, helps=helps,
                   required=("steps_per_epoch", "epochs")
                   + (("noise_multiplier",) if sigma in ("one", "sweep") else ()))
    if delta:
        p.add_argument("--delta", type=number, default=1e-5,
                       help="delta in (0, 1) at which epsilon (add or remove one record) is "
                            "printed "
                       "beside the accuracy, from the certified privacy-loss distribution "
                       "(default 1e-5)")
    p.add_argument("--json", action="store_true",
                   help="print JSON instead of a table; the counts it echoes (steps_per_epoch, "
                   "epochs, k) are the exact integers given, as JSON integers (any size)")


def _check_common(args) -> None:
    """``--delta`` and ``--k`` checked before any work (the library checks the rest)."""
    if not 0.0 < args.delta < 1.0:
        raise UsageError(f"--delta must be in (0, 1); got {args.delta!r}")
    if args.k < 1 or (args.steps_per_epoch >= 1 and args.k > args.steps_per_epoch):
        raise UsageError(f"--k must be in [1, --steps-per-epoch={args.steps_per_epoch}]; "
                         f"got {args.k!r}")


def _epsilon(args, sigma: float) -> tuple[dict, tuple[str, str]]:
    """ε at ``--delta`` for σ: the smallest sound bound (certified PLD where it can be built,
    else a labelled closed form; see :func:`pacpriv.dpsgd.epsilon.epsilon_bound`)."""
    b = epsilon_bound(sigma, steps_per_epoch=args.steps_per_epoch, epochs=args.epochs,
                      delta=args.delta, k=args.k)
    source = f"{b.source}, add or remove one record"
    kind, detail = _epsilon_kind(b.source)
    payload = {"epsilon": b.epsilon, "delta": args.delta, "source": source,
               **bound_fields(kind, detail=detail)}
    if b.pld_note:
        payload["note"] = b.pld_note
    label = f"epsilon at delta={args.delta!r} ({bound_label(kind, detail=detail)})"
    value = format_bound(b.epsilon, 6, side="up")
    if b.pld_note.startswith("PLD unavailable"):
        value += f" ({b.pld_note})"
    return payload, (label, value)


def _epsilon_kind(source: str) -> tuple[str, str]:
    """(kind, detail) of :mod:`pacpriv.dpsgd.labels` for an ε's ``source``."""
    from pacpriv.dpsgd.epsilon import epsilon_kind

    return epsilon_kind(source)


#: The counts a JSON output echoes: written as the exact integers the user gave.
_COUNTS = ("steps_per_epoch", "epochs", "k")


def _exact_counts(payload, args):
    """``payload`` with every echoed count (:data:`_COUNTS`, at any depth) replaced by the
    exact integer of its flag: the library computes in float64, where ``10**400`` is ``inf``
    (then ``null``) and ``10**30`` a float; a single count flag's value is echoed as given."""
    if isinstance(payload, list):
        return [_exact_counts(v, args) for v in payload]
    if not isinstance(payload, dict):
        return payload
    out = {}
    for key, value in payload.items():
        given = getattr(args, key, None) if key in _COUNTS else None
        if isinstance(given, int) and not isinstance(given, bool):
            out[key] = given
        elif key.removesuffix("_null_reason") in _COUNTS and isinstance(
                getattr(args, key.removesuffix("_null_reason"), None), int):
            continue  # the count is no longer null
        else:
            out[key] = _exact_counts(value, args)
    return out


def _print_json(args, payload) -> None:
    print(_json.dumps(_exact_counts(payload, args), indent=2))


def _count(n: int) -> str:
    """A count flag's value as given (a huge one by its number of digits)."""
    return f"{n}" if abs(n) < 10**15 else f"an integer of {len(str(abs(n)))} digits"


def _setting(args, sigma: float | None = None, sampling: str = "random_allocation") -> str:
    """The setting a text output bounds: σ (where given), M, E and k (k = 1 included, so a
    k-of-t result never reads like a k = 1 one)."""
    head = "" if sigma is None else f"sigma = {sigma!r}, "
    return (f"{head}M = {_count(args.steps_per_epoch)} steps per epoch, "
            f"E = {_count(args.epochs)} epochs, k = {_count(args.k)} "
            + ("(Poisson sampling at rate k/M)" if sampling == "poisson" else
               "of the M steps per record per epoch"))


def _emit(args, payload: dict, rows: list[tuple[str, str]], *,
          sampling: str = "random_allocation", sigma: float | None = None) -> int:
    """``payload`` as JSON, or ``rows`` as a table opened by the ``setting`` it bounds (σ, M,
    E, k) and closed by the ``covers`` and ``assumes`` lines (:mod:`pacpriv.dpsgd.labels`)
    that every bound above them holds under."""
    if args.json:
        _print_json(args, payload)
    else:
        rows = [("setting", _setting(args, sigma, sampling)), *rows, ("covers", COVERS),
                ("assumes", assumes(sampling)), ("rounding", ROUNDING)]
        width = max(len(k) for k, _ in rows)
        for k, v in rows:
            print(f"{k:<{width}}  {v}")
    return 0


def _bound(args) -> int:
    _check_common(args)
    b = spec_from_args(DPSGDSpec, args).membership_inference_accuracy_bound()
    eps, eps_row = _epsilon(args, args.noise_multiplier)
    return _emit(args, {**b.to_dict(), **bound_fields("closed-form", detail="chi-square"),
                        "epsilon": eps}, [
        ("membership-inference accuracy bound ("
         + bound_label("closed-form", detail="chi-square") + ")",
         format_bound(b.accuracy, 6, side="up", vacuous=bool(b.vacuous))),
        ("ln(1 + chi^2) (closed-form upper bound)",
         format_bound(b.log1p_chi_square, 6, side="up")),
        eps_row,
    ], sigma=args.noise_multiplier)


def _epsilon_target_flags(s: argparse.ArgumentParser) -> None:
    """``--target-accuracy`` or ``--target-epsilon`` (exactly one), and ``--sampling``."""
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--target-accuracy", type=number,
                   help="membership-inference accuracy bound in (0.5, 1)")
    g.add_argument("--target-epsilon", type=number,
                   help="epsilon in (0, 50] at --delta (add or remove one record): the "
                   "smallest sigma (within --rtol) whose epsilon from a pessimistic "
                   "privacy-loss distribution is <= it")
    s.add_argument("--sampling", choices=["random_allocation", "poisson"],
                   default="random_allocation",
                   help="batch sampler of --target-epsilon: random allocation (pacpriv's "
                   "trainer; certified) or Poisson at rate k/M (opacus; dp-accounting PLD)")


def _sigma_for_epsilon(args) -> int:
    """``sigma --target-epsilon``: :func:`pacpriv.dpsgd.calibrate_epsilon`."""
    import math

    from pacpriv.dpsgd.epsilon_calibration import calibrate_epsilon

    if not (math.isfinite(args.target_epsilon) and 0.0 < args.target_epsilon <= 50.0):
        raise UsageError(f"--target-epsilon must be in (0, 50]; got {args.target_epsilon!r}")
    if args.tolerance is not None and args.tolerance < _DEFAULT_TOLERANCE:
        from pacpriv.dpsgd.epsilon_calibration import _check

        # every value checked before the note: a refused one never follows a promise of work
        _check(args.target_epsilon, args.delta, args.steps_per_epoch, args.epochs, args.k,
               args.sampling, args.rtol, args.tolerance)
        print(f"pacpriv: note: searching sigma on dp-accounting's PLD at --tolerance "
              f"{args.tolerance:g}; this can take minutes (about 1/tolerance: the default "
              f"{_DEFAULT_TOLERANCE:g} takes seconds)", file=sys.stderr, flush=True)
    r = calibrate_epsilon(args.target_epsilon, args.delta, steps_per_epoch=args.steps_per_epoch,
                          epochs=args.epochs, k=args.k, sampling=args.sampling, rtol=args.rtol,
                          **({} if args.tolerance is None else {"tolerance": args.tolerance}))
    kind, detail = r.label()  # the ε the σ was calibrated against (PLD, Chernoff, closed form)
    return _emit(args, {**r.to_dict(), **bound_fields(kind, detail=detail,
                                                      sampling=args.sampling)}, [
        (f"noise multiplier ({bound_label(kind, detail=detail)})",
         format_bound(r.noise_multiplier, 8, side="up")),
        (f"epsilon at sigma, delta={r.delta:g} ({bound_label(kind, detail=detail)})",
         format_bound(r.epsilon, 6, side="up")),
        ("sampling", r.sampling["scheme"]),
        ("privacy-loss distribution", r.method),
    ], sampling=args.sampling)


def _check_sigma_flags(args) -> None:
    """``--rtol``, ``--method`` and ``--sampling`` against the target, before any work:
    ``--rtol`` is checked whenever it is given and refused where there is no search."""
    if args.rtol is not None and not 1e-6 <= args.rtol <= 0.1:
        raise UsageError(f"--rtol must be in [1e-6, 0.1]; got {args.rtol!r}")
    if args.tolerance is not None and not (args.target_epsilon is not None
                                           and args.sampling == "poisson"):
        raise UsageError("--tolerance applies to --target-epsilon with --sampling poisson "
                         "only (the PLD discretisation of dp-accounting)")
    if args.target_epsilon is not None:
        if args.method is not None:
            raise UsageError("--method applies to --target-accuracy only (--target-epsilon "
                             "always searches sigma on a privacy-loss distribution)")
        return
    if args.sampling != "random_allocation":
        raise UsageError("--sampling poisson applies to --target-epsilon only (the accuracy "
                         "targets are for random allocation)")
    if args.rtol is not None and args.method != "exact":
        raise UsageError("--rtol applies to --method exact and --target-epsilon only (the "
                         "closed-form sigma has no search tolerance)")


def _sigma(args) -> int:
    _check_common(args)
    _check_sigma_flags(args)
    if args.rtol is None:
        args.rtol = 1e-3
    if args.target_epsilon is not None:
        return _sigma_for_epsilon(args)
    kw = {"steps_per_epoch": args.steps_per_epoch, "epochs": args.epochs, "k": args.k}
    if args.method != "exact":
        s = noise_multiplier_for_accuracy(args.target_accuracy, **kw)
        eps, eps_row = _epsilon(args, s)
        return _emit(args, {"noise_multiplier": s, "method": "closed-form",
                            **bound_fields("closed-form", detail="chi-square inverse"),
                            "epsilon": eps},
                     [("noise multiplier (" + bound_label("closed-form",
                                                          detail="chi-square inverse") + ")",
                       format_bound(s, 8, side="up")),
                      eps_row])
    r = calibrate_noise_multiplier(args.target_accuracy, **kw, rtol=args.rtol)
    eps, eps_row = _epsilon(args, r.noise_multiplier)
    # two sigmas are printed: say which one the accuracy and epsilon rows are of
    eps_row = (eps_row[0].replace("epsilon at", "epsilon of the exact sigma at", 1), eps_row[1])
    conf = r.accuracy.lower_confidence
    lower_note = "" if conf == 1.0 else f"; lower end with confidence {conf:g}"
    payload = r.to_dict()
    payload["accuracy"] = {**payload["accuracy"], **_exact_fields(r.accuracy)}
    # the σ itself is deterministic: the confidence belongs to the accuracy's lower end only
    return _emit(args, {**payload, **bound_fields("certified", detail="exact"),
                        "epsilon": eps}, [
        # a sigma is shown rounded up (more noise is the safe side), an interval outward
        ("noise multiplier (" + bound_label("certified", detail="exact") + ")",
         format_bound(r.noise_multiplier, 8, side="up")),
        ("noise multiplier (" + bound_label("closed-form", detail="chi-square inverse") + ")",
         format_bound(r.closed_form_noise_multiplier, 8, side="up")),
        ("noise saving", format_percent(r.noise_saving, 1, side="down")),
        ("accuracy at the exact sigma (" + bound_label("certified", detail="exact interval")
         + lower_note + ")",
         f"[{format_bound(r.accuracy.lower, 6, side='down')}, "
         f"{format_bound(r.accuracy.upper, 6, side='up')}]"),
        eps_row,
    ])


#: ``dpsgd exact --tolerance`` default; a smaller one announces the wait on stderr first.
_DEFAULT_TOLERANCE = 1e-4


def _exact(args) -> int:
    _check_common(args)
    sigmas = args.noise_multiplier
    kw = {"steps_per_epoch": args.steps_per_epoch, "epochs": args.epochs,
          "tolerance": args.tolerance, "k": args.k}
    # every flag checked before the note: a refused value never follows a promise of work
    check_real(args.tolerance, "tolerance", low=1e-8, high=0.5)
    _checked_grid(sigmas, args.steps_per_epoch, args.epochs)
    if 0 < args.tolerance < _DEFAULT_TOLERANCE:
        print(f"pacpriv: note: computing the certified exact interval at tolerance "
              f"{args.tolerance:g}; this can take minutes (the default "
              f"{_DEFAULT_TOLERANCE:g} takes seconds)", file=sys.stderr, flush=True)
    if len(sigmas) == 1 or args.k != 1:
        results = [exact_membership_inference_accuracy(s, **kw) for s in sigmas]
    else:
        results = [exact_membership_inference_accuracy(sigmas, **kw)]
    epsilons = [_epsilon(args, s) for s in sigmas]
    if len(sigmas) == 1:
        r = results[0]
        lower = (f"exact accuracy lower ("
                 f"{bound_label('certified', confidence=r.lower_confidence)})")
        return _emit(args, {**r.to_dict(), **_exact_fields(r), "epsilon": epsilons[0][0]}, [
            (lower, f"{_down(r.lower)}"),
            (f"exact accuracy upper ({bound_label('certified')})", f"{_up(r.upper)}"),
            ("width", f"{r.width:.2e}"),
            epsilons[0][1],
        ], sigma=sigmas[0])
    if args.json:
        eps_list = [e[0] for e in epsilons]
        payload = ({**results[0].to_dict(), **_exact_fields(results[0]), "epsilon": eps_list}
                   if len(results) == 1 else
                   {"results": [{**r.to_dict(), **_exact_fields(r)} for r in results],
                    "epsilon": eps_list})
        _print_json(args, payload)
        return 0
    lows = np.concatenate([np.atleast_1d(r.lower) for r in results])
    ups = np.concatenate([np.atleast_1d(r.upper) for r in results])
    # each row's lower-end confidence (one result may hold every σ, k = 1): a row whose lower
    # end is a Monte-Carlo bound is marked, whatever the other rows are
    confs = np.concatenate([np.full(np.atleast_1d(r.lower).shape, r.lower_confidence)
                            for r in results])
    marked = sorted({float(c) for c in confs if c != 1.0})
    print(f"setting: {_setting(args)}; sigma per row")
    print("exact membership-inference accuracy (" + bound_label("certified") + "; lower "
          "rounded down, upper up" + "".join(
              f"; {'*' * (i + 1)} lower end with confidence {c:g} (Monte Carlo)"
              for i, c in enumerate(marked)) + ")")
    print(f"{'noise multiplier':>16}  {'lower':>9}  {'upper':>9}  {'width':>8}  "
          f"epsilon at delta={args.delta:g} (upper bound)")
    for s, lo, up, c, (payload, (_, eps)) in zip(sigmas, lows, ups, confs, epsilons,
                                                 strict=True):
        kind, detail = _epsilon_kind(payload["source"])
        short = kind_text(kind, detail=detail)
        star = "" if c == 1.0 else "*" * (marked.index(float(c)) + 1)
        print(f"{s:>16g}  {_down(lo)}{star}  {_up(up)}  {up - lo:8.1e}  {eps} ({short})")
    print(f"covers: {COVERS}; assumes {assumes()}; {ROUNDING}")
    return 0


def _exact_fields(r) -> dict:
    """The label fields of an exact interval (its lower end's confidence where below 1)."""
    conf = r.lower_confidence
    return bound_fields("certified", detail="exact interval" + (
        "" if conf == 1.0 else f", lower end with confidence {conf:g} (Monte Carlo)"))


def _down(x) -> str:
    """Seven decimals rounded toward −∞ (a lower bound stays a lower bound)."""
    return format_fixed(x, 7, side="down")


def _up(x) -> str:
    """Seven decimals rounded toward +∞ (risk is never understated)."""
    return format_fixed(x, 7, side="up")


#: Largest count and per-row time limit ``dpsgd compare`` accepts: its rows run the exact and
#: published accountants, which are bounded in time only in this range (checked before work).
COMPARE_MAX_COUNT = 10**8
COMPARE_MAX_TIMEOUT_S = 3600.0


def _check_compare(args) -> None:
    """Every ``dpsgd compare`` argument checked before any accountant runs (one line each)."""
    if args.noise_multiplier is None and args.target_accuracy is None:
        raise UsageError("give --noise-multiplier and/or --target-accuracy")
    for flag, value in (("--steps-per-epoch", args.steps_per_epoch),
                        ("--epochs", args.epochs)):
        if not 1 <= value <= COMPARE_MAX_COUNT:
            got = f"{value}" if abs(value) < 10**12 else f"an integer of {len(str(value))} digits"
            raise UsageError(f"{flag} must be in [1, 1e8] for compare (its accountants run "
                             f"in time only there; 'dpsgd bound' answers at any count); got "
                             f"{got}")
    t = args.comparator_timeout
    if not 0.0 < t <= COMPARE_MAX_TIMEOUT_S:  # NaN fails too
        raise UsageError(f"--comparator-timeout must be in (0, {COMPARE_MAX_TIMEOUT_S:g}] "
                         f"seconds; got {t!r}")
    _check_common_k(args)


def _check_common_k(args) -> None:
    if args.k < 1 or args.k > args.steps_per_epoch:
        raise UsageError(f"--k must be in [1, --steps-per-epoch={args.steps_per_epoch}]; "
                         f"got {args.k!r}")


def _compare(args) -> int:
    _check_compare(args)
    t = compare_accountants(
        steps_per_epoch=args.steps_per_epoch, epochs=args.epochs,
        noise_multiplier=args.noise_multiplier, target_accuracy=args.target_accuracy,
        search_published=args.search_published, timeout=args.comparator_timeout, k=args.k,
    )
    if args.json:
        _print_json(args, t.to_dict())
    else:
        print(t.to_markdown(), end="")
    return 0


def add_parser(subparsers, name: str) -> None:
    """Register ``pacpriv dpsgd`` and its subcommands."""
    p = subparsers.add_parser(name, help="DP-SGD with random allocation (analytic bounds)")
    sub = p.add_subparsers(dest="command", metavar="{bound,sigma,exact,compare}")
    sub.required = True
    b = sub.add_parser("bound", help="chi-square closed-form accuracy bound")
    _common(b, "one")
    b.set_defaults(handler=_bound)
    s = sub.add_parser("sigma", help="noise multiplier for a target accuracy or epsilon")
    _common(s)
    _epsilon_target_flags(s)
    s.add_argument("--method", choices=["closed-form", "exact"], default=None,
                   help="with --target-accuracy: closed-form chi-square inverse (instant) or "
                   "the smallest sigma whose certified exact accuracy is <= target (seconds; "
                   "default closed-form)")
    s.add_argument("--rtol", type=number, default=None,
                   help="relative tolerance in [1e-6, 0.1] of the sigma search of --method "
                   "exact or --target-epsilon (default 1e-3)")
    s.add_argument("--tolerance", type=number, default=None,
                   help="with --target-epsilon and --sampling poisson: dp-accounting's PLD "
                   "discretisation interval in [1e-6, 1e-2] (default 1e-4; smaller is tighter "
                   "and slower)")
    s.set_defaults(handler=_sigma)
    e = sub.add_parser("exact", help="certified exact accuracy interval (one or more sigma)")
    _common(e, "sweep")
    e.add_argument("--tolerance", type=number, default=_DEFAULT_TOLERANCE,
                   help="largest width of the certified interval, in [1e-8, 0.5] (default 1e-4)")
    e.set_defaults(handler=_exact)
    c = sub.add_parser("compare", help="all accountants on the accuracy axis")
    _common(c, "optional", delta=False, helps={
        "noise_multiplier": "sigma > 0 at which to evaluate every method (default: the exact "
        "sigma for --target-accuracy)",
        "k": "steps per record per epoch, in [1, M] (k out of t; Poisson rows at rate k/t)"})
    c.add_argument("--target-accuracy", type=number, default=None,
                   help="target accuracy in (0.5, 1): each method's sigma for it")
    c.add_argument("--search-published", action="store_true",
                   help="also search sigma with the published accountants (slow)")
    c.add_argument("--comparator-timeout", type=number, default=60.0, metavar="SECONDS",
                   help="time limit in seconds, in (0, 3600], of each accountant row; a row "
                        "over it is stopped and "
                   "marked 'timed out' (default 60)")
    c.set_defaults(handler=_compare)
