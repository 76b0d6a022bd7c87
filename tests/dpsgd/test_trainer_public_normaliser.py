"""DP-SGD trainer: a public normaliser (issue 35, F1) and no silent no-op training (F14)."""

import pytest

torch = pytest.importorskip("torch")

from pacpriv.dpsgd import DPSGDSpec  # noqa: E402
from pacpriv.dpsgd import trainer as trainer_mod  # noqa: E402
from pacpriv.dpsgd.trainer import NoOpTrainingError, train_dpsgd  # noqa: E402

_STEP = trainer_mod._private_step
KW = {"noise_multiplier": 1.0, "steps_per_epoch": 4, "epochs": 1, "max_grad_norm": 1.0}


def _data(n):
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, 3, generator=g), torch.randint(0, 2, (n,), generator=g)


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 2))


def _normalisers(monkeypatch, n, **kw):
    seen = []
    real = _STEP

    def spy(*args, **kwargs):
        seen.append(kwargs["expected"])
        return real(*args, **kwargs)

    monkeypatch.setattr(trainer_mod, "_private_step", spy)
    X, y = _data(n)
    r = train_dpsgd(_model(), torch.nn.CrossEntropyLoss(), X, y, rng=0, **kw)
    return seen, r


@pytest.mark.parametrize("declare", ["keyword", "spec"])
def test_neighbours_share_the_normaliser_bit_for_bit(monkeypatch, declare):
    kw = ({**KW, "dataset_size": 40} if declare == "keyword" else
          {"spec": DPSGDSpec(1.0, 4, 1, max_grad_norm=1.0, dataset_size=40)})
    a, ra = _normalisers(monkeypatch, 40, **kw)
    b, rb = _normalisers(monkeypatch, 39, **kw)
    assert a and len(a) == len(b) == 4
    assert {x.hex() for x in a} == {x.hex() for x in b} == {(40 / 4).hex()}
    assert ra.expected_batch_size.hex() == rb.expected_batch_size.hex()


def test_undeclared_size_falls_back_to_the_records_passed(monkeypatch):
    a, _ = _normalisers(monkeypatch, 40, **KW)
    b, _ = _normalisers(monkeypatch, 39, **KW)
    assert set(a) == {10.0} and set(b) == {39 / 4}  # documented: declare dataset_size


def test_conflicting_declarations_are_refused():
    X, y = _data(10)
    with pytest.raises(ValueError, match="dataset_size"):
        train_dpsgd(_model(), torch.nn.CrossEntropyLoss(), X, y, rng=0, dataset_size=10,
                    spec=DPSGDSpec(1.0, 4, 1, max_grad_norm=1.0, dataset_size=11))


def test_a_private_run_that_changes_nothing_is_an_error():
    X, y = _data(20)
    model = _model()
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(NoOpTrainingError, match="no trainable parameter changed"):
        train_dpsgd(model, torch.nn.CrossEntropyLoss(), X, y, rng=0,
                    optimizer=lambda ps: torch.optim.SGD(ps, lr=0.0), **KW)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_an_optimizer_without_the_trainable_parameters_is_refused_before_any_step():
    X, y = _data(20)
    other = torch.nn.Linear(3, 2)
    with pytest.raises(ValueError, match="holds none of the model's trainable parameters"):
        train_dpsgd(_model(), torch.nn.CrossEntropyLoss(), X, y, rng=0,
                    optimizer=torch.optim.SGD(other.parameters(), lr=0.1), **KW)


def test_non_private_runs_and_normal_runs_are_unaffected():
    X, y = _data(20)
    r = train_dpsgd(_model(), torch.nn.CrossEntropyLoss(), X, y, rng=0, **KW)
    assert r.n_steps == 4
