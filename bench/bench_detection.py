"""Supervision quality on the labelled corpus of real transcripts; prints one JSON object.

Two sets, apart: `tune` (the transcripts the detectors' thresholds were chosen on) and
`holdout` (set aside before any detector ran on them, never used to tune). For each:

  recall              stuck transcripts with an alarm (an urgent, stopping finding) / stuck
  recall_on_time      ... whose alarm came within the first third of the turns they wasted
  false_alarms        healthy transcripts with an alarm (the goal is 0)
  healthy_with_nudges healthy transcripts given a warn-level nudge (steering, not a stop),
                      and nudges_per_40_healthy the same per 40 healthy runs
  flagged_on_time     stuck transcripts with a finding of any level within FLAG_WITHIN (3)
                      events of `stuck_at` (issue 41's acceptance: 90 %), flag_delays each
  saved_turns / wasted_turns   turns a stop at the first alarm would have saved, of the
                      turns the stuck runs wasted; saved_usd the same in dollars where the
                      transcript's cost is known
  by_kind             for each labelled kind of stuck run: how many, how many caught on
                      time, and the alarms that caught them
Beside them, `written_edits`: the same figures over tests/fixtures/transcripts_edits/ (runs
written by us of issue 41's failing edits in each format, and healthy look-alikes), never mixed
into the real sets. Then:
  replay_s, read_baseline_s    the time to score the corpus, and to only read its events
                      (same run): their ratio is the detectors' share

The corpus and its labels: tests/fixtures/transcripts/corpus/ (README.md, index.json).

    python bench/bench_detection.py [--corpus DIR] [--details]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from worker.supervision.formats import read_text
from worker.supervision.scoring import by_split, load_index, score, summary

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
CORPUS = FIXTURES / "transcripts" / "corpus"
EDITS = FIXTURES / "transcripts_edits"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--details", action="store_true", help="one line per transcript too")
    args = parser.parse_args()
    entries = load_index(args.corpus)
    t0 = time.perf_counter()
    results = [score(args.corpus, entry) for entry in entries]
    replay_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for entry in entries:
        text = (args.corpus / entry["file"]).read_text(encoding="utf-8", errors="replace")
        for _ in read_text(text, entry.get("format", "auto"))[1]:
            pass
    read_s = time.perf_counter() - t0
    out: dict[str, object] = {"transcripts": len(results), **by_split(results)}
    out["written_edits"] = summary([score(EDITS, entry) for entry in load_index(EDITS)])
    out["replay_s"] = round(replay_s, 4)
    out["read_baseline_s"] = round(read_s, 4)
    out["replay_to_read"] = round(replay_s / read_s, 2) if read_s else None
    if args.details:
        out["details"] = [r.to_dict() for r in results]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
