"""Replies read into the closed signal list, with confidences and the RFC's thresholds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.kernel.model import Order
from worker.kernel.replies import (
    THRESHOLDS,
    KeywordClassifier,
    ModelClassifier,
    Signal,
    interpret,
    order_for_signal,
)

READ = KeywordClassifier().classify


@pytest.mark.parametrize(
    ("text", "signal", "acts"),
    [
        ("STOP", Signal.INTERRUPT_EXPLICIT_STOP, True),
        ("Please stop working on this, wrong repo.", Signal.INTERRUPT_EXPLICIT_STOP, True),
        ("cancel it", Signal.INTERRUPT_EXPLICIT_STOP, True),
        ("Can you stop?", Signal.INTERRUPT_EXPLICIT_STOP, False),  # a mention: ask, don't act
        ("Don't stop, keep going", Signal.FLOW_WANTS_RESUME, True),
        ("yes, go ahead", Signal.FLOW_WANTS_RESUME, True),
        ("Approved.", Signal.FLOW_WANTS_RESUME, True),
        ("never mind, not needed any more", Signal.FLOW_DECLINES_RESUME, True),
        ("no", Signal.FLOW_DECLINES_RESUME, True),
        ("please put this on hold", Signal.FLOW_WANTS_PAUSE, True),
        ("thanks, merged", Signal.FLOW_ACK_DONE, True),
        ("emergency: stop everything", Signal.SAFETY_EMERGENCY, True),
        ("Here is the API key location you asked about", Signal.UNKNOWN, False),
        ("> stop\nyes go ahead", Signal.FLOW_WANTS_RESUME, True),  # quoted text is not theirs
    ],
)
def test_examples(text: str, signal: Signal, acts: bool) -> None:
    reading = READ(text)
    assert (reading.signal, reading.acts) == (signal, acts), reading


def test_contradiction_is_below_threshold() -> None:
    """Two strong, incompatible readings: ask instead of guessing."""
    reading = READ("stop this. actually, go ahead")
    assert not reading.acts


def test_thresholds_are_the_rfcs() -> None:
    assert THRESHOLDS[Signal.INTERRUPT_EXPLICIT_STOP] == 0.65
    assert THRESHOLDS[Signal.FLOW_WANTS_RESUME] == THRESHOLDS[Signal.FLOW_DECLINES_RESUME] == 0.60
    assert THRESHOLDS[Signal.SAFETY_EMERGENCY] == 0.75


def test_signals_become_orders() -> None:
    stop = interpret("r1", "t1", "stop it now", "bob")
    assert order_for_signal(stop).order is Order.STOP  # type: ignore[union-attr]
    everything = interpret("r2", "t1", "emergency! stop everything")
    assert order_for_signal(everything).task_id == "*"  # type: ignore[union-attr]
    unsure = interpret("r3", "t1", "should we stop?")
    assert order_for_signal(unsure) is None
    untrusted = interpret("r4", "t1", "go ahead", trusted=False)
    assert untrusted.acts and order_for_signal(untrusted) is None


def test_model_classifier_strict_json_and_fallback() -> None:
    good = ModelClassifier(lambda prompt: '{"signal": "FLOW_WANTS_PAUSE", "confidence": 0.7}')
    assert good.classify("whatever").signal is Signal.FLOW_WANTS_PAUSE
    prompts: list[str] = []
    outside = ModelClassifier(lambda p: prompts.append(p) or '{"signal": "DANCE", "confidence": 1}')
    assert outside.classify("stop").signal is Signal.INTERRUPT_EXPLICIT_STOP  # fallback
    assert "<reply>\nstop\n</reply>" in prompts[0] and "INTERRUPT_EXPLICIT_STOP" in prompts[0]
    prose = ModelClassifier(lambda p: "I think they want to resume")
    assert prose.classify("yes").signal is Signal.FLOW_WANTS_RESUME


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_deterministic_and_bounded(text: str) -> None:
    first, second = READ(text), READ(text)
    assert first == second and 0.0 <= first.confidence <= 1.0
    assert first.signal in set(Signal)


def test_a_stop_reply_from_a_sender_who_may_not_stop_orders_nothing() -> None:
    refused = interpret("r5", "t1", "stop it now", may_stop=False)
    assert refused.acts and order_for_signal(refused) is None
    assert order_for_signal(interpret("r6", "t1", "stop it now")) is not None
