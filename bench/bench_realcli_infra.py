"""How fast an unavailable or refused model API becomes the adapter's decision, with the real
Codex and Gemini CLIs (tests/realcli) against a scripted API on 127.0.0.1; prints one JSON object.

For each CLI and failure: the seconds from the first failed API answer (the CLI's first retry
starts there) to the adapter's result naming the infrastructure failure, and the API requests
made by then. The baseline, measured in the same run and the same way, is the same CLI answering
one text turn (from its request to the adapter's result), so `ratio` means something on any
machine.

    python bench/bench_realcli_infra.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fakes import gemini_api, openai_api  # noqa: E402 - after the path is set
from tests.fakes.scripted_api import Reply, ScriptedAPI  # noqa: E402
from worker.agents.codex import CodexAdapter  # noqa: E402
from worker.agents.gemini import GeminiAdapter  # noqa: E402
from worker.models import AgentRequest, AgentResult  # noqa: E402

BIN = REPO / "tests" / "realcli" / "node_modules" / ".bin"


def codex_env(api: ScriptedAPI, home: Path) -> dict[str, str]:
    (home / "config.toml").write_text(
        'model_provider = "scripted"\n[model_providers.scripted]\nname = "scripted"\n'
        f'base_url = "{api.base}/v1"\nenv_key = "SCRIPTED_OPENAI_KEY"\nwire_api = "responses"\n'
        "request_max_retries = 1\n"
    )
    return {"CODEX_HOME": str(home), "SCRIPTED_OPENAI_KEY": "sk-bench"}


def gemini_env(api: ScriptedAPI, home: Path) -> dict[str, str]:
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    return {
        "GEMINI_CLI_HOME": str(home),
        "GEMINI_API_KEY": "bench",
        "GOOGLE_GEMINI_BASE_URL": api.base,
    }


CLIS: dict[str, dict[str, Any]] = {
    "codex": {
        "api": openai_api.FakeOpenAIAPI,
        "env": codex_env,
        "adapter": lambda: CodexAdapter(str(BIN / "codex")),
        "text": openai_api.text("done"),
        "failures": {
            "auth_401": openai_api.error(401, "Incorrect API key provided", "invalid_api_key"),
            "overloaded_529": openai_api.error(529, "Overloaded", "overloaded"),
        },
        "args": ("--sandbox", "read-only"),
    },
    "gemini": {
        "api": gemini_api.FakeGeminiAPI,
        "env": gemini_env,
        "adapter": lambda: GeminiAdapter(str(BIN / "gemini")),
        "text": gemini_api.text("done"),
        "failures": {
            "auth_401": gemini_api.error(401, "API key not valid."),
            "unavailable_503": gemini_api.error(503, "The model is overloaded."),
        },
        "args": ("--approval-mode", "default"),
    },
}


def once(spec: dict[str, Any], reply: Reply, folder: Path) -> tuple[float, AgentResult, int]:
    """One run: seconds from the first answer of the API to the adapter's result."""
    api: ScriptedAPI = spec["api"](reply).start()
    env: Callable[[ScriptedAPI, Path], dict[str, str]] = spec["env"]
    home = Path(tempfile.mkdtemp(dir=folder))
    saved = dict(os.environ)
    os.environ.update(env(api, home))
    try:
        request = AgentRequest(
            prompt="bench", model="m", cwd=folder, timeout_s=300, extra_args=spec["args"]
        )
        result = spec["adapter"]().run(request)
        ended = time.monotonic()
    finally:
        os.environ.clear()
        os.environ.update(saved)
        api.close()
    first = api.model_requests[0].at if api.model_requests else ended
    return ended - first, result, len(api.model_requests)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    if not (BIN / "codex").exists() or not (BIN / "gemini").exists():
        print(json.dumps({"skipped": f"no real CLIs in {BIN}: run `npm ci` in tests/realcli"}))
        return
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, spec in CLIS.items():
            baseline = statistics.median(
                once(spec, spec["text"], folder)[0] for _ in range(args.repeat)
            )
            row: dict[str, Any] = {"baseline_text_turn_s": round(baseline, 2)}
            for failure, reply in spec["failures"].items():
                runs = [once(spec, reply, folder) for _ in range(args.repeat)]
                seconds = statistics.median(run[0] for run in runs)
                result, requests = runs[-1][1], runs[-1][2]
                row[failure] = {
                    "first_failure_to_decision_s": round(seconds, 2),
                    "ratio": round(seconds / baseline, 1) if baseline else None,
                    "requests": requests,
                    "infra": result.infra.kind.value if result.infra else None,
                }
            out[name] = row
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
