"""The sandboxed interpreter of the ``python`` tool: set-up, then a loop running code.

Run as a script (``python -I sandbox_boot.py SETTINGS_JSON``) by
:mod:`agentrl.tools.python_sandbox`, never imported by agentrl itself: it uses the standard
library only, because after set-up it can read nothing but the interpreter's own files
(its frames come from the file beside it, `framing.py`, loaded by path before set-up).

Set-up, in order (a step that fails stops the sandbox with a ``setup_error`` frame):

1. ``unshare`` new mount, PID and (unless network is allowed) network namespaces; as a
   user other than root, in a new user namespace first;
2. ``fork``: the child is PID 1 of the new PID namespace, so when it dies the kernel kills
   every process the code started; the parent only waits for it;
3. a root of its own: a tmpfs holding read-only binds of the system's directories
   (``/usr``, ``/lib``, ``/etc``, ...) and the interpreter's (its venv and base), four
   devices, a size-capped tmpfs ``/tmp`` (the working directory is ``/tmp/work``) and a
   fresh ``/proc``; ``pivot_root`` into it and the old root detached, so nothing else of
   the host's file system is reachable;
4. resource limits: address space, CPU time, processes, file size, open files, no core;
5. as root: a fresh unprivileged uid/gid, no supplementary groups;
6. ``no_new_privs`` and, where the kernel has Landlock, a ruleset: read and execute in
   the new root, write only in ``/tmp`` and two devices; TCP connect/bind refused and
   signals and abstract sockets scoped to the sandbox where the ABI has them.

Then frames (`framing`: a length, then UTF-8 JSON) go both ways on two private
file descriptors: ``{"code": ..., "cpu": seconds}`` in, ``{"status", "stdout", "stderr",
"error", "value"}`` out. Descriptors 1 and 2 write to memory files read back after each
call, so what child processes print is captured too.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import importlib.util
import json
import math
import os
import resource
import signal
import struct
import sys
import traceback
import types

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 0x4000, 0x40000
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, MNT_DETACH = 1, 38, 2
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
SYS_LANDLOCK_CREATE, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT = 444, 445, 446
WORKDIR = "/tmp/work"

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
    return result


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str) -> None:
    _check(
        _libc.mount(
            None if source is None else source.encode(),
            target.encode(),
            None if fstype is None else fstype.encode(),
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


def _load_framing() -> types.ModuleType:
    """`agentrl.tools.framing`, loaded from the file beside this one."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "framing.py")
    spec = importlib.util.spec_from_file_location("_agentrl_framing", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_framing = _load_framing()


def send(fd: int, value: dict) -> None:
    _framing.write_frame(fd, json.dumps(value, ensure_ascii=False).encode("utf-8", "replace"))


def receive(fd: int) -> dict | None:
    """The next request, None when the pipe has ended."""
    try:
        return json.loads(_framing.read_frame(fd))
    except EOFError:
        return None


# ---------------------------------------------------------------- Landlock


def _landlock_abi() -> int:
    return _libc.syscall(SYS_LANDLOCK_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))


_FS_FILE = (1 << 0) | (1 << 1) | (1 << 2)  # execute, write, read (file rights)
_READ_EXEC = (1 << 0) | (1 << 2) | (1 << 3)


def _landlock(read_paths: list[str], write_paths: list[str], network: bool) -> int:
    """Restrict this process (and its children) to the paths given; the ABI applied."""
    abi = _landlock_abi()
    if abi < 1:
        return 0
    handled = (1 << 13) - 1
    if abi >= 2:
        handled |= 1 << 13  # refer
    if abi >= 3:
        handled |= 1 << 14  # truncate
    if abi >= 5:
        handled |= 1 << 15  # ioctl on devices
    net = 0 if network or abi < 4 else 0b11  # bind and connect TCP
    scoped = 0b11 if abi >= 6 else 0  # abstract unix sockets, signals
    fields = [handled] + ([net] if abi >= 4 else []) + ([scoped] if abi >= 6 else [])
    attr = struct.pack(f"<{len(fields)}Q", *fields)
    ruleset = _check(
        _libc.syscall(SYS_LANDLOCK_CREATE, attr, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0)),
        "landlock_create_ruleset",
    )
    file_rights = _FS_FILE | (1 << 14 if abi >= 3 else 0)
    for path, rights in [(p, _READ_EXEC) for p in read_paths] + [(p, handled) for p in write_paths]:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # a path this system lacks
        try:
            allowed = rights if os.path.isdir(path) else rights & file_rights
            rule = struct.pack("<Qi", allowed, fd)
            _check(
                _libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset, 1, rule, ctypes.c_uint32(0)),
                f"landlock_add_rule {path}",
            )
        finally:
            os.close(fd)
    _check(_libc.syscall(SYS_LANDLOCK_RESTRICT, ruleset, ctypes.c_uint32(0)), "landlock")
    os.close(ruleset)
    return abi


# ---------------------------------------------------------------- set-up


def _namespaces(settings: dict) -> list[str]:
    """New namespaces for this process: mount and PID (in a user namespace when not root),
    then network, unshared on its own so that its failure is named as such."""
    applied = ["mount", "pid"]
    if os.geteuid() != 0:
        uid, gid = os.geteuid(), os.getegid()
        flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID
        _check(_libc.unshare(flags), "unshare (user, mount and PID namespaces)")
        with open("/proc/self/setgroups", "w") as handle:
            handle.write("deny")
        with open("/proc/self/uid_map", "w") as handle:
            handle.write(f"0 {uid} 1")
        with open("/proc/self/gid_map", "w") as handle:
            handle.write(f"0 {gid} 1")
        applied.insert(0, "user")
    else:
        _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWPID), "unshare (mount and PID namespaces)")
    if not settings["network"]:
        _check(_libc.unshare(CLONE_NEWNET), "unshare (network namespace)")
        applied.append("network")
    return applied


_SYSTEM = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc")
_DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")


def _interpreter_dirs() -> list[str]:
    """The interpreter's own directories (a venv and its base), outside the system's."""
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    found.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
    out = set()
    for path in found:
        for one in {path, os.path.realpath(path)}:
            if one and one != "/" and not one.startswith(tuple(p + "/" for p in _SYSTEM)):
                out.add(one)
    return sorted(out)


def _new_root(settings: dict, guarantees: dict) -> None:
    """A root of our own: a tmpfs holding read-only binds of the system's and the
    interpreter's directories, a few devices, a private /tmp and /proc; then chroot.

    The sources are opened before the tmpfs covers /tmp, so a venv under /tmp still binds.
    """
    _mount(None, "/", None, MS_REC | MS_PRIVATE, "")
    sources: list[tuple[str, int | str]] = []
    for path in [*_SYSTEM, *_interpreter_dirs()]:
        if os.path.islink(path):
            sources.append((path, os.readlink(path)))
        elif os.path.isdir(path):
            sources.append((path, os.open(path, os.O_PATH | os.O_CLOEXEC)))
    devices = [(d, os.open(d, os.O_PATH | os.O_CLOEXEC)) for d in _DEVICES if os.path.exists(d)]
    root = "/tmp"
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    # The private /tmp first: a source under /tmp (a venv or checkout there) is bound
    # inside it, read-only, instead of being covered by it.
    os.mkdir(root + "/tmp")
    size = f"size={settings['disk_mb']}m"
    _mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"{size},mode=1777")
    ro = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
    for path, source in sources:
        target = root + path
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        if isinstance(source, str):
            os.symlink(source, target)
            continue
        os.makedirs(target, mode=0o755, exist_ok=True)
        _mount(f"/proc/self/fd/{source}", target, None, MS_BIND | MS_REC, "")
        _mount(None, target, None, ro, "")
        os.close(source)
    os.makedirs(root + "/dev", mode=0o755)
    for path, source in devices:
        with open(root + path, "w"):
            pass
        _mount(f"/proc/self/fd/{source}", root + path, None, MS_BIND, "")
        os.close(source)
    os.mkdir(root + WORKDIR, 0o700)
    if settings["uid"] is not None:
        os.chown(root + WORKDIR, settings["uid"], settings["uid"])
    os.mkdir(root + "/proc")
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "")
    _enter(root, guarantees)
    guarantees["root"] = "private: " + ", ".join(p for p, _ in sources)


def _enter(root: str, guarantees: dict) -> None:
    """Make ``root`` the root: pivot_root, then detach the old root, so not even a chroot
    escape reaches the host's files (chroot only where pivot_root has no known number)."""
    os.chdir(root)
    number = _PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        os.chroot(".")
        os.chdir("/")
        guarantees["root_switch"] = "chroot"
        return
    os.mkdir(".old")
    _check(_libc.syscall(number, b".", b".old"), "pivot_root")
    os.chdir("/")
    _check(_libc.umount2(b"/.old", MNT_DETACH), "umount the old root")
    os.rmdir("/.old")
    guarantees["root_switch"] = "pivot_root"


def _limits(settings: dict) -> None:
    mb = 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (settings["memory_mb"] * mb,) * 2)
    hard_cpu = int(settings["cpu_budget"])
    resource.setrlimit(resource.RLIMIT_CPU, (hard_cpu, hard_cpu + 1))
    resource.setrlimit(resource.RLIMIT_NPROC, (settings["max_processes"],) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (settings["disk_mb"] * mb,) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def setup(settings: dict) -> dict:
    """Everything after the fork, in PID 1: mounts, limits, identity, Landlock."""
    guarantees: dict = {}
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    _new_root(settings, guarantees)
    _limits(settings)
    if settings["uid"] is not None:
        os.setgroups([])
        os.setgid(settings["uid"])
        os.setuid(settings["uid"])
        guarantees["uid"] = settings["uid"]
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    writable = ["/tmp", "/dev/null", "/dev/zero"]
    guarantees["landlock_abi"] = _landlock(["/"], writable, settings["network"])
    os.chdir(WORKDIR)
    os.environ.clear()
    os.environ.update(HOME=WORKDIR, TMPDIR=WORKDIR, PATH="/usr/bin:/bin", LANG="C.UTF-8")
    # Threads count against the process cap: numeric libraries start one, not one per core.
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = "1"
    return guarantees


# ---------------------------------------------------------------- the loop


class _CpuLimit(Exception):
    pass


def _on_xcpu(signum: int, frame: object) -> None:
    raise _CpuLimit("CPU time limit reached")


def _output(fd: int, cap: int) -> str:
    size = os.lseek(fd, 0, os.SEEK_END)
    os.lseek(fd, 0, os.SEEK_SET)
    data = os.read(fd, min(size, cap * 4))
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    text = data.decode("utf-8", "replace")
    if len(text) > cap or size > len(data):
        text = text[:cap] + f"\n[... output cut at {cap} characters]"
    return text


def _run(code: str, scope: dict) -> tuple[str, str | None, str | None]:
    """(status, error line, repr of the last expression's value)."""
    try:
        tree = ast.parse(code, "<python>", "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, "<python>", "exec"), scope)
        value = None
        if last is not None:
            result = eval(compile(last, "<python>", "eval"), scope)
            value = None if result is None else repr(result)[:2000]
        return "ok", None, value
    except _CpuLimit as exc:
        return "cpu_limit", str(exc), None
    except MemoryError:
        return "error", "MemoryError: the memory limit was reached", None
    except BaseException as exc:  # the code's own failure, SystemExit included
        lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
        keep = [lines[0]] + [
            line for line in lines[1:] if '"<python>"' in line or line is lines[-1]
        ]
        sys.stderr.write("".join(dict.fromkeys(keep)))
        last_line = lines[-1].strip() if lines else type(exc).__name__
        return "error", last_line, None


def serve(requests: int, replies: int, settings: dict, guarantees: dict) -> None:
    out_fd, err_fd = os.memfd_create("stdout"), os.memfd_create("stderr")
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    text = {"closefd": False, "encoding": "utf-8", "errors": "replace"}
    sys.stdin = open(0, **text)  # noqa: SIM115 - the streams live as long as the process
    sys.stdout = open(1, "w", **text)  # noqa: SIM115
    sys.stderr = open(2, "w", **text)  # noqa: SIM115
    signal.signal(signal.SIGXCPU, _on_xcpu)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    cap = settings["max_output_chars"]
    send(replies, {"ready": True, "guarantees": guarantees})
    scope: dict = {"__name__": "__main__", "__builtins__": __builtins__}
    while True:
        request = receive(requests)
        if request is None:
            return
        used = resource.getrusage(resource.RUSAGE_SELF)
        spent = used.ru_utime + used.ru_stime
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        soft = min(math.ceil(spent + request["cpu"]), hard)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
        status, error, value = _run(request["code"], scope)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError):
                stream.flush()
        reply = {"status": status, "error": error, "value": value}
        reply["stdout"], reply["stderr"] = _output(1, cap), _output(2, cap)
        send(replies, reply)


def main() -> None:
    settings = json.loads(sys.argv[1])
    requests, replies = os.dup(0), os.dup(1)
    os.set_inheritable(requests, False)
    os.set_inheritable(replies, False)
    try:
        applied = _namespaces(settings)
    except OSError as exc:
        send(replies, {"setup_error": str(exc), "step": "namespaces"})
        return
    child = os.fork()
    if child:
        os.close(requests)
        os.close(replies)
        # SIGTERM (the sandbox's close) kills PID 1, and with it the whole namespace; the
        # wait below then reaps it, so nothing is left behind, not even a zombie.
        signal.signal(signal.SIGTERM, lambda *_: os.kill(child, signal.SIGKILL))
        _, status = os.waitpid(child, 0)
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    try:
        guarantees = setup(settings)
        guarantees["namespaces"] = applied
    except OSError as exc:
        send(replies, {"setup_error": str(exc), "step": "setup"})
        os._exit(1)
    serve(requests, replies, settings, guarantees)
    os._exit(0)


if __name__ == "__main__":
    main()
