"""Tests for pacpriv.dpsgd.spec.DPSGDSpec."""

from __future__ import annotations

import dataclasses
import json

import pytest

from pacpriv.dpsgd import (
    DPSGDSpec,
    exact_membership_inference_accuracy,
    membership_inference_accuracy_bound,
    noise_multiplier_for_accuracy,
)


def test_spec_agrees_with_functions():
    """Spec methods return exactly what the pure functions return."""
    spec = DPSGDSpec(noise_multiplier=2.0, steps_per_epoch=10, epochs=10)
    assert spec.membership_inference_accuracy_bound().accuracy == (
        membership_inference_accuracy_bound(2.0, steps_per_epoch=10, epochs=10).accuracy
    )
    assert spec.exact_membership_inference_accuracy().upper == pytest.approx(
        exact_membership_inference_accuracy(2.0, steps_per_epoch=10, epochs=10).upper
    )
    assert spec.noise_multiplier_for_accuracy(0.6) == noise_multiplier_for_accuracy(
        0.6, steps_per_epoch=10, epochs=10
    )


def test_frozen_and_dict():
    """The spec is frozen and to_dict is JSON-serialisable."""
    spec = DPSGDSpec(1.0, 100, 5, dataset_size=6000, max_grad_norm=1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.epochs = 3
    json.dumps(spec.to_dict())
    assert spec.expected_batch_size == 60 and spec.total_steps == 500


def test_report_section_and_markdown():
    """report_section carries the threat model and both numbers; to_markdown renders them."""
    spec = DPSGDSpec(2.0, 10, 10, dataset_size=1000)
    sec = spec.report_section()
    json.dumps(sec)
    assert "Worst case over datasets" in sec["threat_model"]
    assert "added to or removed" in sec["threat_model"] and "½" in sec["threat_model"]
    e = sec["exact_membership_inference_accuracy"]
    assert e["lower"] <= e["upper"] <= sec["membership_inference_accuracy_bound"]["accuracy"]
    md = spec.to_markdown()
    assert "Threat model" in md and "chi-square" in md and "certified" in md


def test_with_noise_multiplier():
    """with_noise_multiplier copies the other fields."""
    spec = DPSGDSpec(1.0, 100, 5, dataset_size=10)
    assert spec.with_noise_multiplier(3.0) == DPSGDSpec(3.0, 100, 5, dataset_size=10)


def test_error_sigma():
    """σ ≤ 0 is rejected at construction."""
    with pytest.raises(ValueError, match="noise_multiplier"):
        DPSGDSpec(-1.0, 10, 1)


def test_error_steps():
    """Non-integer steps_per_epoch is a TypeError."""
    with pytest.raises(TypeError, match="steps_per_epoch"):
        DPSGDSpec(1.0, 10.5, 1)


def test_error_dataset_size():
    """dataset_size < 1 is rejected."""
    with pytest.raises(ValueError, match="dataset_size"):
        DPSGDSpec(1.0, 10, 1, dataset_size=0)


def test_error_grad_norm():
    """max_grad_norm ≤ 0 is rejected."""
    with pytest.raises(ValueError, match="max_grad_norm"):
        DPSGDSpec(1.0, 10, 1, max_grad_norm=0.0)
