"""A Windows Job Object with kill-on-close, through ctypes.

Windows has no process-group kill. A Job Object is its tool for a process tree: every process
started inside the job joins it (and nested jobs, Windows 8 and later), `TerminateJobObject`
ends them all at once, and with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE the system ends them when the
last handle to the job closes, which happens when worker itself exits or is killed.

ctypes rather than pywin32: six kernel32 calls with fixed, documented signatures do not justify a
dependency that ships compiled wheels per Python version, lags new Pythons and needs a
post-install step in some set-ups; ctypes is in the standard library. The structures below are
JOBOBJECT_BASIC_LIMIT_INFORMATION, IO_COUNTERS and JOBOBJECT_EXTENDED_LIMIT_INFORMATION from
Microsoft's Win32 documentation (winnt.h), field for field.

The kernel32 object is a parameter so that tests on other systems can pass a fake that records
the calls; on Windows it is `ctypes.WinDLL("kernel32", use_last_error=True)`.
"""

from __future__ import annotations

import ctypes
import weakref
from typing import Any

# winnt.h / learn.microsoft.com "JOBOBJECT_BASIC_LIMIT_INFORMATION" and "Process Security and
# Access Rights".
JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000
JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS = 9  # JobObjectExtendedLimitInformation
PROCESS_TERMINATE = 0x0001
PROCESS_SET_QUOTA = 0x0100


class BasicLimits(ctypes.Structure):
    _fields_ = (
        ("PerProcessUserTimeLimit", ctypes.c_int64),
        ("PerJobUserTimeLimit", ctypes.c_int64),
        ("LimitFlags", ctypes.c_uint32),
        ("MinimumWorkingSetSize", ctypes.c_size_t),
        ("MaximumWorkingSetSize", ctypes.c_size_t),
        ("ActiveProcessLimit", ctypes.c_uint32),
        ("Affinity", ctypes.c_size_t),
        ("PriorityClass", ctypes.c_uint32),
        ("SchedulingClass", ctypes.c_uint32),
    )


class IoCounters(ctypes.Structure):
    _fields_ = tuple(
        (name, ctypes.c_uint64)
        for name in (
            "ReadOperationCount",
            "WriteOperationCount",
            "OtherOperationCount",
            "ReadTransferCount",
            "WriteTransferCount",
            "OtherTransferCount",
        )
    )


class ExtendedLimits(ctypes.Structure):
    _fields_ = (
        ("BasicLimitInformation", BasicLimits),
        ("IoInfo", IoCounters),
        ("ProcessMemoryLimit", ctypes.c_size_t),
        ("JobMemoryLimit", ctypes.c_size_t),
        ("PeakProcessMemoryUsed", ctypes.c_size_t),
        ("PeakJobMemoryUsed", ctypes.c_size_t),
    )


def kernel32() -> Any:
    """The real kernel32 with the argument types of the calls used here (Windows only)."""
    dll = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined,unused-ignore]
    handle, dword, boolean = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int
    signatures = {
        "CreateJobObjectW": ((ctypes.c_void_p, ctypes.c_wchar_p), handle),
        "SetInformationJobObject": ((handle, ctypes.c_int, ctypes.c_void_p, dword), boolean),
        "OpenProcess": ((dword, boolean, dword), handle),
        "AssignProcessToJobObject": ((handle, handle), boolean),
        "TerminateJobObject": ((handle, ctypes.c_uint), boolean),
        "CloseHandle": ((handle,), boolean),
    }
    for name, (argtypes, restype) in signatures.items():
        function = getattr(dll, name)
        function.argtypes, function.restype = argtypes, restype
    return dll


def _last_error(what: str) -> OSError:
    code = ctypes.get_last_error() if hasattr(ctypes, "get_last_error") else 0
    return OSError(code, f"{what} failed (Windows error {code})")


class Job:
    """A kill-on-close job. Its handle closes with `close()`, or when the object is collected,
    or when the process exits: the system then ends every process still in the job."""

    def __init__(self, api: Any | None = None) -> None:
        self._api = api if api is not None else kernel32()
        handle = self._api.CreateJobObjectW(None, None)
        if not handle:
            raise _last_error("CreateJobObjectW")
        self.handle: int | None = handle
        self._closer = weakref.finalize(self, self._api.CloseHandle, handle)
        limits = ExtendedLimits()
        limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
        if not self._api.SetInformationJobObject(
            handle,
            JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS,
            ctypes.addressof(limits),
            ctypes.sizeof(limits),
        ):
            error = _last_error("SetInformationJobObject")
            self.close()
            raise error

    def assign(self, pid: int) -> None:
        """Put process `pid` in the job (before it starts children: see process.py)."""
        process = self._api.OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE, False, pid)
        if not process:
            raise _last_error(f"OpenProcess({pid})")
        try:
            if not self._api.AssignProcessToJobObject(self.handle, process):
                raise _last_error(f"AssignProcessToJobObject({pid})")
        finally:
            self._api.CloseHandle(process)

    def terminate(self, exit_code: int = 1) -> None:
        """End every process in the job now."""
        if self.handle is not None and not self._api.TerminateJobObject(self.handle, exit_code):
            raise _last_error("TerminateJobObject")

    def close(self) -> None:
        """Close the handle: whatever still runs in the job is ended by the system."""
        self.handle = None
        self._closer()
