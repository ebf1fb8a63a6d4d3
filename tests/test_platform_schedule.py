"""The Task Scheduler XML of `worker schedule windows`, checked against the structure of
Microsoft's Task Scheduler schema (version 1.2).

The XSD itself is published in the MS-TSCH open specification, whose licence allows copies for
implementing the protocol but not redistribution in another project, so it is not vendored; and
checking an XSD would need a dependency (lxml or xmlschema). Instead the rules that matter are
written down here from the schema: which children each element may have, which are required,
and the type of each value (xs:boolean, xs:duration with the schema's bounds, xs:dateTime,
enumerations, xs:unsignedByte). The workspace path is the seeds' (spaces, accents) and the
arguments must come back intact through the Windows command-line rules.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from worker.config import load_settings
from worker.process.platform.schedule import Kind, Target, render

NS = "{http://schemas.microsoft.com/windows/2004/02/mit/task}"

BOOLEAN = re.compile(r"true|false|1|0")
DURATION = re.compile(r"-?P(?=\d|T\d)(\d+Y)?(\d+M)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?")
DATETIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")
TRIGGER_BASE = {
    "Enabled": BOOLEAN,
    "StartBoundary": DATETIME,
    "EndBoundary": DATETIME,
    "Repetition": None,
    "ExecutionTimeLimit": DURATION,
}
# element -> {child: value pattern, a set of allowed values, or None for an element with
# children of its own}; `REQUIRED` lists the children that must be there.
CHILDREN: dict[str, dict[str, object]] = {
    "Task": dict.fromkeys(
        ["RegistrationInfo", "Triggers", "Settings", "Data", "Principals", "Actions"]
    ),
    "RegistrationInfo": dict.fromkeys(
        [
            "URI",
            "SecurityDescriptor",
            "Source",
            "Date",
            "Author",
            "Version",
            "Description",
            "Documentation",
        ],
        re.compile(r"(?s).*"),
    ),
    "Triggers": dict.fromkeys(
        [
            "BootTrigger",
            "RegistrationTrigger",
            "IdleTrigger",
            "TimeTrigger",
            "EventTrigger",
            "LogonTrigger",
            "SessionStateChangeTrigger",
            "CalendarTrigger",
        ]
    ),
    "TimeTrigger": {**TRIGGER_BASE, "RandomDelay": DURATION},
    "LogonTrigger": {**TRIGGER_BASE, "UserId": re.compile(r".+"), "Delay": DURATION},
    "Repetition": {"Interval": DURATION, "Duration": DURATION, "StopAtDurationEnd": BOOLEAN},
    "Principals": {"Principal": None},
    "Principal": {
        "UserId": re.compile(r".+"),
        "GroupId": re.compile(r".+"),
        "DisplayName": re.compile(r".*"),
        "LogonType": {"S4U", "Password", "InteractiveToken", "InteractiveTokenOrPassword"},
        "RunLevel": {"LeastPrivilege", "HighestAvailable"},
    },
    "Settings": {
        **dict.fromkeys(
            [
                "AllowStartOnDemand",
                "DisallowStartIfOnBatteries",
                "StopIfGoingOnBatteries",
                "AllowHardTerminate",
                "StartWhenAvailable",
                "RunOnlyIfNetworkAvailable",
                "WakeToRun",
                "Enabled",
                "Hidden",
                "RunOnlyIfIdle",
                "UseUnifiedSchedulingEngine",
                "DisallowStartOnRemoteAppSession",
                "Volatile",
            ],
            BOOLEAN,
        ),
        "MultipleInstancesPolicy": {"Parallel", "Queue", "IgnoreNew", "StopExisting"},
        "RestartOnFailure": None,
        "ExecutionTimeLimit": DURATION,
        "DeleteExpiredTaskAfter": DURATION,
        "Priority": {str(n) for n in range(11)},
        "IdleSettings": None,
        "NetworkSettings": None,
        "NetworkProfileName": re.compile(r".*"),
        "MaintenanceSettings": None,
    },
    "RestartOnFailure": {"Interval": DURATION, "Count": re.compile(r"[1-9]\d{0,2}")},
    "Actions": dict.fromkeys(["Exec", "ComHandler", "SendEmail", "ShowMessage"]),
    "Exec": {
        "Command": re.compile(r"\S.*"),
        "Arguments": re.compile(r".*"),
        "WorkingDirectory": re.compile(r".*"),
    },
}
REQUIRED = {"Task": {"Actions"}, "Repetition": {"Interval"}, "Exec": {"Command"}}
REPEATABLE = {"Triggers", "Actions"}  # containers whose children may repeat (48, 32 at most)
LIMITS = {"Triggers": 48, "Actions": 32, "Principals": 1}


def _seconds(duration: str) -> float:
    match = re.fullmatch(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?", duration)
    assert match, f"{duration}: a duration this test can size"
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def check(element: ET.Element, path: str = "Task") -> None:
    name = element.tag.removeprefix(NS)
    allowed = CHILDREN.get(name)
    if allowed is None:
        return  # an element this test does not describe further (Data, IdleSettings, ...)
    seen: list[str] = []
    for child in element:
        assert child.tag.startswith(NS), f"{path}/{child.tag}: outside the task namespace"
        tag = child.tag.removeprefix(NS)
        here = f"{path}/{tag}"
        assert tag in allowed, f"{here}: not allowed in {name}"
        assert name in REPEATABLE or tag not in seen, f"{here}: repeated"
        seen.append(tag)
        rule = allowed[tag]
        text = (child.text or "").strip()
        if isinstance(rule, re.Pattern):
            assert rule.fullmatch(text), f"{here}: {text!r} is not a valid value"
            assert len(child) == 0, f"{here}: a value, not a container"
        elif isinstance(rule, set):
            assert text in rule, f"{here}: {text!r} not one of {sorted(rule)}"
        else:
            check(child, here)
    assert len(seen) <= LIMITS.get(name, len(seen)), f"{path}: too many children"
    missing = REQUIRED.get(name, set()) - set(seen)
    assert not missing, f"{path}: {sorted(missing)} required"
    if name == "Actions":
        assert len(seen) >= 1, f"{path}: at least one action"


def windows_argv(command_line: str) -> list[str]:
    """Split a command line as the Microsoft C runtime does for Python on Windows
    (backslashes are literal unless they precede a quote)."""
    args: list[str] = []
    current, quoted, started, i = "", False, False, 0
    while i < len(command_line):
        ch = command_line[i]
        if ch == "\\":
            run = len(command_line[i:]) - len(command_line[i:].lstrip("\\"))
            i += run
            if i < len(command_line) and command_line[i] == '"':
                current += "\\" * (run // 2)
                if run % 2:
                    current += '"'
                    i += 1
            else:
                current += "\\" * run
            started = True
            continue
        if ch == '"':
            quoted, started = not quoted, True
        elif ch in " \t" and not quoted:
            if started:
                args.append(current)
            current, started = "", False
        else:
            current, started = current + ch, True
        i += 1
    if started:
        args.append(current)
    return args


WORKSPACES = ["Mon Drive/Synchronisation été", 'odd "quoted" & <tagged> folder']


@pytest.mark.parametrize("target", list(Target))
@pytest.mark.parametrize("folder", WORKSPACES)
def test_the_task_xml_follows_the_task_scheduler_schema(
    tmp_path: Path, target: Target, folder: str
) -> None:
    if sys.platform == "win32" and '"' in folder:
        pytest.skip("Windows folder names cannot hold quotes or angle brackets")
    ws = tmp_path / folder
    ws.mkdir(parents=True)
    settings = load_settings(ws)
    python = str(tmp_path / "Python 3.12" / "python.exe")
    (text,) = render(Kind.WINDOWS, target, settings, python).files.values()
    assert text.startswith('<?xml version="1.0" encoding="UTF-16"?>')
    root = ET.fromstring(text.encode("utf-16"))  # saved as UTF-16, as the comment says
    assert root.tag == f"{NS}Task" and root.get("version") in {"1.2", "1.3", "1.4"}
    check(root)

    principals = [p.get("id") for p in root.iter(f"{NS}Principal")]
    actions = root.find(f"{NS}Actions")
    assert actions is not None and actions.get("Context") in principals  # an IDREF
    limits = [root.findtext(f".//{NS}{n}/{NS}Interval") for n in ("Repetition", "RestartOnFailure")]
    for interval in filter(None, limits):
        assert 60 <= _seconds(interval) <= 31 * 86400, f"{interval}: the schema allows PT1M-P31D"

    exec_ = root.find(f"{NS}Actions/{NS}Exec")
    assert exec_ is not None
    assert exec_.findtext(f"{NS}Command") == python
    assert exec_.findtext(f"{NS}WorkingDirectory") == str(settings.workspace)
    args = windows_argv(exec_.findtext(f"{NS}Arguments") or "")
    assert args[args.index("--workspace") + 1] == str(settings.workspace)
    assert target.value in args


def test_the_command_line_splitter_follows_the_c_runtime_rules() -> None:
    """The splitter above, on Microsoft's documented examples ("Parsing C command-line
    arguments"), so that the check it makes can be trusted."""
    assert windows_argv('"abc" d e') == ["abc", "d", "e"]
    assert windows_argv(r'a\\\b d"e f"g h') == [r"a\\\b", "de fg", "h"]
    assert windows_argv(r"a\\\"b c d") == ['a\\"b', "c", "d"]
    assert windows_argv(r'a\\\\"b c" d e') == ["a\\\\b c", "d", "e"]
