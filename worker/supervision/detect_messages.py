"""What the agent says and what its CLI reports: the same message again and again, the same
error of the CLI across sessions (an infrastructure failure when it lasts), a person's
rejection repeated, and the model the session names."""

from __future__ import annotations

from functools import partial
from typing import Any

from worker.agents.claude_stream import SYNTHETIC_MODEL
from worker.models import AgentEvent, InfraFailure
from worker.supervision.anomaly import Sighting
from worker.supervision.detect_base import DetectorBase, threshold_level
from worker.supervision.repeats import CliErrors, Rejections
from worker.supervision.settings import SupervisionSettings
from worker.supervision.signals import message_signature, short
from worker.supervision.streaks import Streak


class MessageDetectors(DetectorBase):
    """Repeated message, CLI error and rejection."""

    def __init__(self, settings: SupervisionSettings, model: str | None = None) -> None:
        super().__init__(settings, model)
        self._cli = CliErrors()
        self._reject = Rejections()
        self._message = Streak()

    def _on_session(self, event: AgentEvent, found: list[Sighting]) -> None:
        self._cli.new_session()
        if event.model:
            self.model = self.session_model = event.model

    def _on_end(self, event: AgentEvent, found: list[Sighting]) -> None:
        if event.is_error:
            self._on_cli_error(event, found)

    def _on_other(self, event: AgentEvent, found: list[Sighting]) -> None:
        if event.raw_type == "user" and event.text:
            self._on_user_text(event, found)

    def _on_error(self, event: AgentEvent, found: list[Sighting]) -> None:
        self.errors += 1
        self._on_cli_error(event, found)

    def _on_cli_error(self, event: AgentEvent, found: list[Sighting]) -> None:
        text = event.error or event.text or event.subtype or ""
        limit = self.s.thresholds["cli_error"]
        anomaly = self._cli.observe(text, self.seq, event.index, limit)
        if anomaly is not None:
            found.append(Sighting.of(anomaly))

    def _on_user_text(self, event: AgentEvent, found: list[Sighting]) -> None:
        limit = self._threshold("repeated_error", "user")
        anomaly = self._reject.observe(
            event.text or "", self.seq, event.index, limit, self.s.min_message_chars
        )
        if anomaly is not None:
            found.append(Sighting.of(anomaly))

    @property
    def infra(self) -> InfraFailure | None:
        """A CLI error that came back in consecutive sessions until urgent, else None."""
        return self._cli.infra

    def _on_text(self, event: AgentEvent, found: list[Sighting]) -> None:
        if not self._in_turn:
            self._new_turn(event, found)
        if event.model == SYNTHETIC_MODEL:  # the CLI's words (a limit, an API error)
            return
        sig = message_signature(event.text, self.s.min_message_chars)
        if sig is None:
            return
        count = self._message.push(sig, self.seq, event.index)
        limit = self.s.thresholds["repeated_message"]
        if count >= limit.warn:
            found.append(
                self._sighting(
                    "repeated_message",
                    threshold_level(count, limit),
                    sig[:60],
                    (self._message.start, self._message.line),
                    count,
                    partial(_message_evidence, sig),
                )
            )


def _message_evidence(text: str) -> dict[str, Any]:
    return {"text": short(text, 80)}
