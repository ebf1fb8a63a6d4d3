"""The context window: how full it is, and whether the agent should wrap up, scaled to the
window and to how fast the context has been growing."""

from __future__ import annotations

from worker.models import AgentEvent
from worker.supervision.anomaly import URGENT, WARN, Sighting
from worker.supervision.detect_base import DetectorBase
from worker.supervision.settings import SupervisionSettings

# What a model call adds to the context before the transcript shows its own rate (ours: a
# Claude Code turn with a tool result adds a few thousand tokens, a file read tens).
_TYPICAL_GROWTH = 10_000


class ContextDetector(DetectorBase):
    """The context's fill, its peak, and the `context` finding."""

    def __init__(self, settings: SupervisionSettings, model: str | None = None) -> None:
        super().__init__(settings, model)
        # Settings read for every usage event, as plain attributes (a pydantic model's
        # attribute is three times slower to read).
        self._context_warn, self._context_urgent = settings.context_warn, settings.context_urgent
        self._context_turns = (settings.context_warn_turns, settings.context_urgent_turns)
        self._context_last: int | None = None  # the tokens of the last usage
        self._context_growth: float | None = None  # tokens a turn adds, lately
        self._context: tuple[int, int] | None = None
        self._window_names: tuple[str | None, ...] = ()
        self._window = settings.default_context_window

    def _on_usage(self, event: AgentEvent, found: list[Sighting]) -> None:
        if not self._in_turn:
            self._new_turn(event, found)
        if event.model and self.session_model is None:
            self.model = event.model
        tokens = event.input_tokens
        if not tokens:
            return
        names = (self.session_model, self.model_hint, self.model)  # window(), called only
        window = self._window if names == self._window_names else self.window()  # on a change
        fill = tokens / window
        self.context_tokens, self.context_window, self.context_fill = tokens, window, fill
        if self.peak_context_fill is None or fill > self.peak_context_fill:
            self.peak_context_fill = fill
        last = self._context_last
        if tokens != last:  # a model call since the last usage: how much it added lately
            if last is not None and tokens > last:
                before = self._context_growth
                self._context_growth = (
                    tokens - last if before is None else (before + tokens - last) / 2
                )
            self._context_last = tokens
        if fill < self._context_warn:
            self._context = None  # compaction or a fresh session brought it down
            return
        if self._context is None:
            self._context = (self.seq, event.index)
        # Scaled to the window and to the work: a fill that leaves room for many more model
        # calls at the rate the context has been growing (each call's growth averaged with
        # the ones before; _TYPICAL_GROWTH until one is seen) is no reason to wrap up.
        turns_left = max(0, window - tokens) / (self._context_growth or _TYPICAL_GROWTH)
        if turns_left > self._context_turns[0]:
            return
        urgent = fill >= self._context_urgent and turns_left <= self._context_turns[1]
        level = URGENT if urgent else WARN
        evidence = {
            "tokens": tokens,
            "window": window,
            "fill": fill,
            "model": self.model,
            "turns_left": round(turns_left, 1),
        }
        found.append(
            self._sighting("context", level, "context", self._context, round(fill * 100), evidence)
        )

    def window(self) -> int:
        """The context window: the first configured match among the names we know.

        The session's model (Claude's init says `claude-opus-4-6[1m]`) beats the model of a
        message (`claude-opus-4-6`), which has lost the 1M marker; the mode's model is a hint.
        """
        names = (self.session_model, self.model_hint, self.model)
        if names != self._window_names:
            self._window_names, self._window = names, self.s.default_context_window
            for name in names:
                if name and any(fragment in name for fragment in self.s.context_windows):
                    self._window = self.s.context_window(name)
                    break
        return self._window
