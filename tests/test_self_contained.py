"""The repository stands on its own: a clone anywhere passes its tests.

Nothing in the project may point outside it (the developers' folder beside the checkout is not
part of a clone), and the recorded fixtures the tests read travel with their licences.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "transcripts"
# A path built with operators: a slash, then the name in quotes.
_SHARED_PATH = re.compile(r"/ [\"']" + "shared" + r"[\"']")


# Installed, not ours: a virtual environment, the npm-installed agent CLIs (whose bundles
# name their own sibling folders), git's own files.
_INSTALLED = frozenset({".git", ".venv", "node_modules"})


def _tracked_files() -> list[Path]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
        ).stdout.decode()
        names = [name for name in out.split("\0") if name]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: walk the tree
        names = []
        for folder, dirs, files in os.walk(REPO):
            dirs[:] = [d for d in dirs if d not in _INSTALLED]
            names += [str((Path(folder) / f).relative_to(REPO)) for f in files]
    return [REPO / name for name in names if (REPO / name).is_file()]


def test_no_file_points_outside_the_repository() -> None:
    """No code, comment, test or document refers to the folder beside the checkout."""
    needle = "../" + "shared"  # split so that this file does not match itself
    offenders = []
    for path in _tracked_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if needle in text or ("shared" + "/fixtures") in text or _SHARED_PATH.search(text):
            offenders.append(str(path.relative_to(REPO)))
    assert offenders == []


def test_recorded_transcripts_travel_with_their_licence() -> None:
    assert (FIXTURES / "README.md").is_file()
    assert (FIXTURES / "LICENSE-agentcmd.txt").is_file()
    recorded = sorted(p.name for p in FIXTURES.glob("*.json*"))
    assert len(recorded) >= 9
    readme = (FIXTURES / "README.md").read_text(encoding="utf-8")
    for name in recorded:
        assert f"`{name}`" in readme, f"{name} has no source and licence in README.md"
