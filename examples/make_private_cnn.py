"""Your own CNN and your own training loop, made private in one call (``make_private``).

A small convolutional network (user code, nothing from pacpriv) on scikit-learn's digits
(1797 8×8 images, bundled: no download), trained with the user's own loop. One call,
``pacpriv.dpsgd.make_private``, turns the model, optimizer and data loader into DP-SGD with
random allocation at a target ε = 3 at δ = 1e-5: the loader yields random-allocation batches,
``private.step(x, y)`` clips every example's gradient, adds Gaussian noise and steps the
optimizer, and the accountant advances with every step. The script prints the test accuracy,
the certified membership-inference bound and ε after each epoch, and writes them to
``--out/summary.json``.

Usage::

    python examples/make_private_cnn.py [--epochs 4] [--target-epsilon 3] [--out DIR]

``--trials`` is accepted for the examples' smoke test and unused (no Monte-Carlo here).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from pacpriv._numbers import format_bound
from pacpriv.dpsgd import make_private

DELTA = 1e-5


class SmallCNN(torch.nn.Module):
    """The user's model: conv 3×3 → ReLU → max-pool → linear (no BatchNorm: it mixes
    examples, and make_private would refuse it)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 8, kernel_size=3)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc = torch.nn.Linear(8 * 3 * 3, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.pool(torch.relu(self.conv(x))).flatten(1))


def _data(seed: int):
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=seed, stratify=y)
    train = torch.utils.data.TensorDataset(torch.as_tensor(Xtr), torch.as_tensor(ytr))
    return train, torch.as_tensor(Xte), torch.as_tensor(yte)


def _accuracy(model, X, y) -> float:
    model.eval()
    with torch.no_grad():
        acc = float((model(X).argmax(1) == y).float().mean())
    model.train()
    return acc


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=4, help="training epochs (the budget)")
    p.add_argument("--target-epsilon", type=float, default=3.0, help="epsilon at delta=1e-5")
    p.add_argument("--seed", type=int, default=0, help="model init and data split")
    p.add_argument("--trials", type=int, default=0, help="unused (smoke-test flag)")
    p.add_argument("--out", default="make_private_cnn", help="output directory")
    args = p.parse_args(argv)
    torch.set_num_threads(1)  # a model this small runs fastest on one thread
    torch.manual_seed(args.seed)
    train, Xte, yte = _data(args.seed)

    # --- the user's usual setup ---
    model = SmallCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=2.0, momentum=0.5)
    loader = torch.utils.data.DataLoader(train, batch_size=64, shuffle=True)
    loss_fn = torch.nn.CrossEntropyLoss()

    # --- one call: random-allocation batches, per-sample clipping, noise, accountant ---
    private = make_private(model, optimizer, loader, loss_fn=loss_fn, max_grad_norm=1.0,
                           epochs=args.epochs, target_epsilon=args.target_epsilon,
                           delta=DELTA)  # rng=None: secret allocation and noise
    print(f"noise multiplier {format_bound(private.noise_multiplier, 6, side='up')} for "
          f"epsilon <= {args.target_epsilon:g} at delta={DELTA:g} "
          f"({private.steps_per_epoch} steps per epoch, {args.epochs} epochs)")

    history = []
    for epoch in range(args.epochs):  # --- the user's own loop ---
        total = 0.0
        for x, y in private.data_loader:
            total += private.step(x, y)  # instead of loss.backward(); optimizer.step()
        row = {
            "epoch": epoch + 1,
            "train_loss": total / private.n_records,
            "test_accuracy": _accuracy(model, Xte, yte),
            "membership_inference_accuracy_bound": private.membership_inference_accuracy_bound(),
            "epsilon": private.get_epsilon(DELTA),
        }
        history.append(row)
        print(f"epoch {row['epoch']}: test accuracy {row['test_accuracy']:.3f}, certified "
              "membership-inference accuracy <= "
              f"{format_bound(row['membership_inference_accuracy_bound'], 4, side='up')} "
              f"(every record, equal priors), epsilon <= "
              f"{format_bound(row['epsilon'], 4, side='up')} at delta={DELTA:g}")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = {"noise_multiplier": private.noise_multiplier, "delta": DELTA,
               "targets": private.targets, "steps_per_epoch": private.steps_per_epoch,
               "epochs": args.epochs, "history": history,
               "bound": "certified upper bound (exact, random allocation), every record"}
    (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
