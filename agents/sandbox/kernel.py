"""The kernel's locks on the sandbox's child: a seccomp filter, Landlock file-system rules, death with its parent.

Loaded by the worker (`agents.sandbox.worker`) from its file, in the child, before the program's first line
runs; it imports only the standard library (ctypes for the three system calls Python has no binding for).
Unlike the worker's audit hook, these hold against a program that gets past every Python-level guard:

- `seccomp(pid)`: from then on the process may not create a process or a thread (fork, vfork, clone; clone3
  answers ENOSYS so that a C library falls back to clone), exec anything, open a socket of any kind, signal any process but itself, trace or read another process's memory, raise a resource limit, enter
  or make a namespace, mount, load a kernel module or a BPF program, or set up io_uring (whose operations
  seccomp would not see). Such a call kills the process at once (SIGSYS): nothing of it runs, nothing outlives
  it, and its parent sees a signal it records as a violation. x86_64 and aarch64.
- `landlock(scratch)`: from then on the process may open, create or remove files only under `scratch`
  (reads too), and (Landlock ABI 6+) may not signal processes outside it or reach abstract Unix sockets.
  Metadata (`stat` of a path) is not covered by Landlock: a program can learn that a path exists, never read it.
- `die_with_parent()`: the kernel kills the process when the thread that started it ends.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
from typing import Optional

PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP = 1, 38, 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ERRNO, SECCOMP_RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
ENOSYS = 38
SIGKILL = 9

#: per architecture: its AUDIT_ARCH value, the system calls that kill the process, and the numbers of those checked
#: by argument (clone, clone3, kill, tkill, tgkill, prlimit64, setrlimit)
_ARCH = {
    "x86_64": {
        "audit": 0xC000003E,
        "kill_calls": {
            57: "fork", 58: "vfork", 59: "execve", 322: "execveat", 41: "socket", 53: "socketpair", 42: "connect",
            49: "bind", 50: "listen", 43: "accept", 288: "accept4", 101: "ptrace", 310: "process_vm_readv",
            311: "process_vm_writev", 272: "unshare", 308: "setns", 165: "mount", 166: "umount2", 155: "pivot_root",
            161: "chroot", 321: "bpf", 298: "perf_event_open", 323: "userfaultfd", 425: "io_uring_setup",
            426: "io_uring_enter", 427: "io_uring_register", 250: "keyctl", 248: "add_key", 249: "request_key",
            175: "init_module", 313: "finit_module", 176: "delete_module", 246: "kexec_load", 320: "kexec_file_load",
            169: "reboot", 167: "swapon", 168: "swapoff", 163: "acct", 434: "pidfd_open", 424: "pidfd_send_signal",
            438: "pidfd_getfd", 129: "rt_sigqueueinfo", 297: "rt_tgsigqueueinfo", 29: "shmget", 64: "semget",
            68: "msgget", 429: "move_mount", 428: "open_tree", 430: "fsopen", 432: "fsmount", 160: "setrlimit",
            200: "tkill", 135: "personality", 103: "syslog", 139: "sysfs", 156: "_sysctl", 154: "modify_ldt",
        },
        "clone": 56, "clone3": 435, "kill": 62, "tgkill": 234, "prlimit64": 302,
        "x32": True,
    },
    "aarch64": {
        "audit": 0xC00000B7,
        "kill_calls": {
            221: "execve", 281: "execveat", 198: "socket", 199: "socketpair", 203: "connect", 200: "bind",
            201: "listen", 202: "accept", 242: "accept4", 117: "ptrace", 270: "process_vm_readv",
            271: "process_vm_writev", 97: "unshare", 268: "setns", 40: "mount", 39: "umount2", 41: "pivot_root",
            51: "chroot", 280: "bpf", 241: "perf_event_open", 282: "userfaultfd", 425: "io_uring_setup",
            426: "io_uring_enter", 427: "io_uring_register", 219: "keyctl", 217: "add_key", 218: "request_key",
            105: "init_module", 273: "finit_module", 106: "delete_module", 104: "kexec_load", 294: "kexec_file_load",
            142: "reboot", 224: "swapon", 225: "swapoff", 89: "acct", 434: "pidfd_open", 424: "pidfd_send_signal",
            438: "pidfd_getfd", 138: "rt_sigqueueinfo", 240: "rt_tgsigqueueinfo", 194: "shmget", 190: "semget",
            186: "msgget", 429: "move_mount", 428: "open_tree", 430: "fsopen", 432: "fsmount", 164: "setrlimit",
            130: "tkill", 92: "personality", 116: "syslog",
        },
        "clone": 220, "clone3": 435, "kill": 129, "tgkill": 131, "prlimit64": 261,
        "x32": False,
    },
}

# classic BPF
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_NR, _ARCH_OFF, _ARG0, _ARG2 = 0, 4, 16, 32


class KernelLockError(RuntimeError):
    """A lock the sandbox's level needs could not be set (the level is unusable on this machine)."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _call(result: int, what: str) -> int:
    if result < 0:
        raise KernelLockError(f"{what}: {os.strerror(ctypes.get_errno())}")
    return result


def _program(arch: dict, pid: int) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) with jumps resolved; labels are strings resolved to relative offsets."""
    kill, allow = "KILL", "ALLOW"
    body: list[tuple] = [
        (_LD_W_ABS, 0, 0, _ARCH_OFF),
        (_JEQ_K, 0, kill, arch["audit"]),
        (_LD_W_ABS, 0, 0, _NR),
    ]
    if arch["x32"]:
        body.append((_JGE_K, kill, 0, 0x40000000))
    for nr in sorted(arch["kill_calls"]):
        body.append((_JEQ_K, kill, 0, nr))
    body += [
        (_JEQ_K, kill, 0, arch["clone"]),  # (threads too: the program runs in one thread, only inside its steps)
        (_JEQ_K, "ENOSYS", 0, arch["clone3"]),
        (_JEQ_K, "SELF0", 0, arch["kill"]),
        (_JEQ_K, "SELF", 0, arch["tgkill"]),
        (_JEQ_K, "PRLIMIT", 0, arch["prlimit64"]),
        (_RET_K, 0, 0, SECCOMP_RET_ALLOW),
        "SELF0", (_LD_W_ABS, 0, 0, _ARG0), (_JEQ_K, allow, 0, 0), (_JEQ_K, allow, kill, pid),
        "SELF", (_LD_W_ABS, 0, 0, _ARG0), (_JEQ_K, allow, kill, pid),
        "PRLIMIT", (_LD_W_ABS, 0, 0, _ARG2), (_JEQ_K, 0, kill, 0), (_LD_W_ABS, 0, 0, _ARG2 + 4),
        (_JEQ_K, allow, kill, 0),
        "ENOSYS", (_RET_K, 0, 0, SECCOMP_RET_ERRNO | ENOSYS),
        "ALLOW", (_RET_K, 0, 0, SECCOMP_RET_ALLOW),
        "KILL", (_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
    ]
    where: dict[str, int] = {}
    code: list[tuple] = []
    for item in body:
        if isinstance(item, str):
            where[item] = len(code)
        else:
            code.append(item)
    out = []
    for i, (op, jt, jf, k) in enumerate(code):
        jt = where[jt] - i - 1 if isinstance(jt, str) else jt
        jf = where[jf] - i - 1 if isinstance(jf, str) else jf
        if not (0 <= jt < 256 and 0 <= jf < 256):
            raise KernelLockError("seccomp: the filter's jumps are too long")
        out.append((op, jt, jf, k))
    return out


def seccomp(pid: Optional[int] = None) -> None:
    """Install the filter (see the module's docstring) on this process; KernelLockError where it cannot be."""
    arch = _ARCH.get(platform.machine())
    if arch is None:
        raise KernelLockError(f"seccomp: no filter for the {platform.machine()} architecture (x86_64 and aarch64 have one)")
    program = _program(arch, os.getpid() if pid is None else pid)
    raw = b"".join(struct.pack("HBBI", *ins) for ins in program)
    buf = ctypes.create_string_buffer(raw, len(raw))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = SockFprog(len(program), ctypes.cast(buf, ctypes.c_void_p))
    libc = _libc()
    _call(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _call(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp")


# ----- Landlock ---------------------------------------------------------------------------------------------------
_LL_CREATE, _LL_ADD, _LL_RESTRICT = 444, 445, 446  # the same numbers on x86_64 and aarch64
_LL_VERSION = 1
_LL_PATH_BENEATH = 1
_FS_BITS = {1: 13, 2: 14, 3: 15, 4: 15, 5: 16}  # access rights per ABI: bits 0..n-1


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: none)."""
    if platform.machine() not in _ARCH:
        return 0
    version = _libc().syscall(_LL_CREATE, None, 0, _LL_VERSION)
    return max(0, int(version))


def landlock(scratch: str) -> int:
    """Restrict this process's file access to `scratch` (see the module's docstring); returns the ABI used.
    KernelLockError where the kernel has no Landlock."""
    abi = landlock_abi()
    if abi < 1:
        raise KernelLockError("Landlock is not enabled in this kernel (Linux 5.13 or later, with landlock in its LSMs)")
    fs = (1 << _FS_BITS.get(abi, 16)) - 1
    net = 0b11 if abi >= 4 else 0  # TCP bind and connect: none allowed
    scoped = 0b11 if abi >= 6 else 0  # abstract Unix sockets and signals: none outside
    attr = struct.pack("QQQ", fs, net, scoped) if abi >= 6 else struct.pack("QQ", fs, net) if abi >= 4 else struct.pack("Q", fs)
    libc = _libc()
    buf = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _call(libc.syscall(_LL_CREATE, buf, len(attr), 0), "landlock ruleset")
    try:
        folder = os.open(scratch, os.O_PATH | os.O_CLOEXEC)
        try:
            rule = ctypes.create_string_buffer(struct.pack("=Qi", fs, folder), 12)
            _call(libc.syscall(_LL_ADD, ruleset, _LL_PATH_BENEATH, rule, 0), "landlock rule")
        finally:
            os.close(folder)
        _call(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _call(libc.syscall(_LL_RESTRICT, ruleset, 0), "landlock restrict")
    finally:
        os.close(ruleset)
    return abi


def die_with_parent() -> None:
    """SIGKILL this process when its parent goes (and now, if it went before the request took hold)."""
    ppid = os.getppid()
    _call(_libc().prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "pdeathsig")
    if os.getppid() != ppid:
        os._exit(1)
