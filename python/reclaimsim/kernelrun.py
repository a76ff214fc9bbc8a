"""`reclaimsim kernel-run`: run a scenario's workloads on the host kernel, in real memory
cgroups, and set the kernel's counters beside the simulator's for the same scenario and seed.

Each workload process is a fork of this process that joins its cgroup and then replays,
natively (the Rust `reclaimsim-host` crate), exactly the access sequence the simulated
task issues (same generator, same random stream). The kernel side of a rep:

1. create the cgroup tree under ``reclaimsim-<pid>`` (v2 when its memory controller is
   available, else v1) with the scenario's limits and swappiness;
2. drop the page cache (the workloads' files were written and synced before), then read
   any trace files once here, so their cache is not the workloads';
3. snapshot /proc/vmstat, run every workload process at once, wait for all;
4. read /proc/vmstat and each cgroup's memory.stat, remove the cgroups.

The simulator runs the same scenario once per rep, with the memcg flush phase spread over
its period (see `sidebyside.simulate`; the side-by-side report is sidebyside.py's).

Swap: with a scenario swap device and no swap on the host, zram0 is set up (or a swap
file with ``--swapfile``) and torn down afterwards. Everything created is removed on exit,
also after an error or Ctrl-C.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .versions import model_of_kernel
from . import _core, safefs
from .batch import die_with_parent
from .safefs import RunDir, stale_pid
from .sidebyside import KernelRunError, assemble, kernel_counters, per_access, simulate, workload_names
from .term import printable

# ---------------------------------------------------------------------------------------
# cgroups


def _mounts() -> list[tuple[str, str, str]]:
    out = []
    with open("/proc/self/mounts") as f:
        for line in f:
            dev, mnt, fstype, opts, *_ = line.split()
            out.append((mnt, fstype, opts))
    return out


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as e:
        raise KernelRunError(f"cannot write {value.strip()!r} to {path}: {e.strerror}") from None


@dataclass
class Cgroups:
    """A memory-cgroup tree owned by one kernel-run, v1 or v2."""

    version: int
    mount: Path
    root: Path | None = None
    notes: list = field(default_factory=list)

    @staticmethod
    def detect() -> "Cgroups":
        for mnt, fstype, opts in _mounts():
            if fstype == "cgroup2":
                ctl = Path(mnt) / "cgroup.controllers"
                if ctl.exists() and "memory" in ctl.read_text().split():
                    return Cgroups(2, Path(mnt))
        for mnt, fstype, opts in _mounts():
            if fstype == "cgroup" and "memory" in opts.split(","):
                return Cgroups(1, Path(mnt))
        raise KernelRunError(
            "no memory cgroup controller: neither a cgroup2 mount with the memory controller "
            "nor a cgroup v1 memory hierarchy is mounted"
        )

    def path(self, cg: str) -> Path:
        """The directory of scenario cgroup `cg` inside this run's tree (validation refuses
        paths that would leave it; this refuses them again, as the last step before mkdir)."""
        rel = cg.strip("/")
        if rel and any(c in ("", ".", "..") for c in rel.split("/")):
            raise KernelRunError(f"cgroup path {printable(cg)!r}: not inside the run's tree")
        return self.root / rel if rel else self.root

    def create(self, scenario: dict, tag: str) -> None:
        self.root = self.mount / tag
        self.remove()
        self.root.mkdir()
        if self.version == 2:
            _write(self.mount / "cgroup.subtree_control", "+memory")
        kernel = scenario.get("kernel", {})
        for cg in sorted(scenario.get("cgroup", []), key=lambda c: c["path"].count("/")):
            p = self.path(cg["path"])
            p.mkdir(parents=True, exist_ok=True)
            mem = cg.get("memory", {})
            if self.version == 2:
                _write(p.parent / "cgroup.subtree_control", "+memory")
                for k in ("max", "high", "low", "min"):
                    if mem.get(k) not in (None, "max"):
                        _write(p / f"memory.{k}", str(mem[k]))
                if mem.get("swappiness") is not None:
                    self.notes.append(f"{cg['path']}: cgroup v2 has no per-cgroup swappiness; vm.swappiness applies")
            else:
                if mem.get("max") not in (None, "max"):
                    _write(p / "memory.limit_in_bytes", str(mem["max"]))
                for k in ("high", "low", "min"):
                    if mem.get(k) not in (None, "max", 0):
                        self.notes.append(f"{cg['path']}: memory.{k} has no cgroup v1 equivalent; not applied")
                sw = mem.get("swappiness")
                _write(p / "memory.swappiness", str(kernel.get("swappiness", 60) if sw is None else sw))

    def procs_file(self, cg: str) -> Path:
        return self.path(cg) / "cgroup.procs"

    def stat(self, cg: str) -> dict[str, int]:
        out = {}
        for line in (self.path(cg) / "memory.stat").read_text().splitlines():
            k, _, v = line.partition(" ")
            if v.strip().lstrip("-").isdigit():
                out[k] = int(v)
        return out

    def file_anon(self, cg: str) -> tuple[int, int]:
        """Bytes of page cache and anon charged to the cgroup (hierarchically)."""
        s = self.stat(cg)
        if self.version == 2:
            return s.get("file", 0), s.get("anon", 0)
        return (
            s.get("total_inactive_file", 0) + s.get("total_active_file", 0),
            s.get("total_inactive_anon", 0) + s.get("total_active_anon", 0),
        )

    def kernel_bytes(self, cg: str) -> int:
        """Kernel memory (slab, page tables, stacks) charged to the cgroup."""
        if self.version == 2:
            return self.stat(cg).get("kernel", 0)
        return int((self.path(cg) / "memory.kmem.usage_in_bytes").read_text())

    def remove(self) -> None:
        """Remove the tree bottom-up, killing anything left in it."""
        if self.root is None or not self.root.exists():
            return
        dirs = sorted((p for p in self.root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        for d in dirs + [self.root]:
            procs = d / "cgroup.procs"
            if procs.exists():
                for pid in procs.read_text().split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            for _ in range(100):
                try:
                    d.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)


# ---------------------------------------------------------------------------------------
# swap


def active_swaps() -> list[str]:
    lines = Path("/proc/swaps").read_text().splitlines()[1:]
    return [l.split()[0] for l in lines if l.strip()]


def _run(cmd: list[str]) -> None:
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise KernelRunError(f"{' '.join(cmd)}: {p.stderr.strip() or p.returncode}")


# The label kernel-run's swap files carry (mkswap -L): how a later run knows a leftover
# swap file as its own. In the swap header (include/linux/swap.h, swap_header.info) the
# volume label follows the 1024 boot bytes, version, last_page, nr_badpages and the UUID.
SWAP_LABEL = b"reclaimsim-swap"
_LABEL_AT = 1024 + 4 + 4 + 4 + 16
_MAGIC = b"SWAPSPACE2"


def _swapfile_is_ours(fd: int) -> bool:
    """Whether the open file is a swap file kernel-run made (its header's magic and label)."""
    head = os.pread(fd, 4096, 0)
    return head[4096 - len(_MAGIC):] == _MAGIC and head[_LABEL_AT:_LABEL_AT + 16].rstrip(b"\0") == SWAP_LABEL


def check_swapfile(path: str) -> None:
    """Refuse, before anything is written, a --swapfile that names someone's file: an
    existing path is taken only when it is an active swap (then the host's swap is used
    and the file is not touched) or a regular file with kernel-run's swap label (one a
    killed run left); never a link, a directory or a device."""
    p = printable(path)
    if os.path.realpath(path) in {os.path.realpath(a) for a in active_swaps()}:
        return
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise KernelRunError(f"--swapfile {p}: its directory does not exist") from None
        return
    if not stat.S_ISREG(st.st_mode):
        what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
        raise KernelRunError(f"--swapfile {p}: {what}; name a new file (kernel-run creates it and removes it after)")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        ours = st.st_size >= 4096 and _swapfile_is_ours(fd)
    finally:
        os.close(fd)
    if not ours:
        raise KernelRunError(
            f"--swapfile {p}: the file exists and is not a swap file kernel-run made; name a new file "
            "(kernel-run creates it and removes it after), so that nothing of yours is overwritten"
        )


def block_rotational(path: str) -> bool | None:
    """Does the disk that holds `path` report itself rotational (its queue/rotational in
    sysfs, a partition's being its disk's)? None when sysfs does not say."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    dev = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    for d in (dev, dev / ".."):
        try:
            return (d / "queue" / "rotational").read_text().strip() == "1"
        except OSError:
            continue
    return None


def rotational_note(host: bool | None, scenario: bool) -> str | None:
    """A note when the swap file's disk and the scenario disagree on rotational: swap
    readahead goes by slots on a rotational disk and by the faulting VMA otherwise."""
    if host is None or host == scenario:
        return None
    how = {True: "by swap slots", False: "by the faulting VMA"}
    return (
        f"the swap file's disk reports rotational={int(host)} where the scenario says machine.swap.rotational = "
        f"{str(scenario).lower()}: the kernel reads swap ahead {how[host]}, the model {how[scenario]}"
    )


class Swap:
    """The swap the scenario asks for: existing swap, zram0, or a swap file (--swapfile).
    A scenario that swaps to a block device (`machine.swap.device = "ssd"`) needs the
    swap file: zram in its place would be another device, compressing on the faulting
    CPU where the model waits for IO."""

    def __init__(self, size: int, swapfile: str | None, notes: list, device: str = "zram", rotational: bool = False):
        self.dev = None
        self.kind = None
        active = active_swaps()
        if active:
            notes.append(f"using the host's active swap ({', '.join(active)})")
            return
        if device != "zram" and swapfile is None:
            raise KernelRunError(
                f"machine.swap.device = {device!r}: the kernel must swap to a block device too; "
                "pass --swapfile PATH (a file on a disk-backed filesystem)"
            )
        if device == "zram" and swapfile is not None:
            notes.append("machine.swap.device is zram but --swapfile swaps to a file: the kernel's swap IO is a disk's")
        zram = Path("/sys/block/zram0")
        if swapfile is None and not zram.exists():
            subprocess.run(["modprobe", "zram"], capture_output=True)  # may be built in or absent
        if swapfile is None and zram.exists():
            if int((zram / "disksize").read_text()) != 0:
                # Set up by someone else and not swapped on (that would be an active
                # swap, used above): its data is not kernel-run's to reset.
                raise KernelRunError(
                    "/dev/zram0 is set up already (a nonzero disksize) but is no active swap: kernel-run does not "
                    "reset a device it did not set up; free it (echo 1 > /sys/block/zram0/reset) or pass --swapfile PATH"
                )
            _write(zram / "disksize", str(size))
            self.dev, self.kind = "/dev/zram0", "zram"
        elif swapfile is not None:
            check_swapfile(swapfile)
            # New (O_EXCL), or kernel-run's own leftover (checked just now): never through a link.
            flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(swapfile, flags | (0 if os.path.lexists(swapfile) else os.O_EXCL), 0o600)
            with os.fdopen(fd, "wb") as f:
                f.truncate(0)
                chunk = b"\0" * (1 << 20)
                for _ in range(size >> 20):
                    f.write(chunk)
            self.dev, self.kind = swapfile, "file"
            note = rotational_note(block_rotational(swapfile), rotational)
            if note:
                notes.append(note)
        else:
            raise KernelRunError(
                "the scenario has swap, the host has none and zram is not available; "
                "pass --swapfile PATH to swap to a file"
            )
        _run(["mkswap", "-L", SWAP_LABEL.decode(), self.dev] if self.kind == "file" else ["mkswap", self.dev])
        _run(["swapon", self.dev])
        notes.append(f"swap on {self.kind} {self.dev}, {size >> 20} MiB")

    def close(self) -> None:
        if self.dev is None:
            return
        subprocess.run(["swapoff", self.dev], capture_output=True)
        if self.kind == "zram":
            try:
                Path("/sys/block/zram0/reset").write_text("1")
            except OSError:
                pass
        else:
            try:
                os.unlink(self.dev)
            except OSError:
                pass
        self.dev = None


# ---------------------------------------------------------------------------------------
# one rep


def _vmstat() -> dict[str, int]:
    out = {}
    for line in Path("/proc/vmstat").read_text().splitlines():
        k, v = line.split()
        out[k] = int(v)
    out["allocstall"] = sum(v for k, v in out.items() if k.startswith("allocstall_"))
    return out


def _precache_traces(scenario: dict) -> None:
    """Read every trace file once here, so that its page cache is charged to this
    process's cgroup: the workers then read their traces from the cache and only the
    pages they replay are charged to the workload's cgroup (the model does not simulate
    reading the trace itself)."""
    for w in scenario.get("workload", []):
        if w.get("type") == "trace":
            with open(w["path"], "rb") as f:
                while f.read(1 << 20):
                    pass


def _drop_caches(release_text: bool) -> None:
    """Drop the page cache; with `release_text` (a workload's `text` is charged to its
    memcg in the model), the workers' program text too (release_own_text)."""
    if release_text:
        release_own_text()
    os.sync()
    _write(Path("/proc/sys/vm/drop_caches"), "3")


def own_text_range(maps: str = "/proc/self/maps") -> tuple[int, int] | None:
    """(file offset, length) of the compiled core's code (its r-xp mapping), or None."""
    so = os.path.realpath(_core.__file__)
    for line in Path(maps).read_text().splitlines():
        f = line.split(None, 5)
        if len(f) == 6 and f[1] == "r-xp" and f[5] == so:
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            return int(f[2], 16), hi - lo
    return None


def cached_bytes(path: str, offset: int = 0, length: int | None = None) -> int:
    """Bytes of the file `path` (of `length` bytes from `offset`, page-aligned) in the page
    cache: mincore(2) over a fresh mapping."""
    import ctypes
    import mmap

    size = os.path.getsize(path) - offset if length is None else length
    if size <= 0:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
    page = mmap.PAGESIZE
    vec = (ctypes.c_ubyte * ((size + page - 1) // page))()
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, offset)
        if addr in (None, ctypes.c_void_p(-1).value):
            return 0
        try:
            if libc.mincore(addr, size, vec) != 0:
                return 0
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)
    return sum(v & 1 for v in vec) * page


def release_own_text(maps: str = "/proc/self/maps") -> int:
    """Unmap this process's pages of the compiled core's code (the r-xp mapping of
    `_core`'s file) and return how many bytes were released.

    The workers are forks of this process and run the access loop from that file. A
    workload's program text is charged to the memcg of the process that first faults it
    after the cache is dropped (the model's usemem `text`), but drop_caches keeps every page
    some process maps, and this process maps the pages it ran, and, by fault-around, the
    cached pages near them: whether the loop's pages stayed cached, charged outside the
    workload's memcg, depended on the build's code layout (a memcg with no file page
    then runs its inactive anon list empty and is OOM-killed, docs/fidelity.md). Zapping
    the mapping (MADV_DONTNEED: the text is never written, so nothing is lost; a later
    call refaults it) lets drop_caches take those pages as well, so the workers fault
    their loop in, charged to their memcg, whatever the layout."""
    import ctypes

    so = os.path.realpath(_core.__file__)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    madv_dontneed = 4
    released = 0
    for line in Path(maps).read_text().splitlines():
        f = line.split(None, 5)
        if len(f) == 6 and f[1] == "r-xp" and f[5] == so:
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            if libc.madvise(lo, hi - lo, madv_dontneed) == 0:
                released += hi - lo
    return released


LIVE_FIELDS = ("accesses", "hits", "misses", "major_faults", "minor_faults", "elapsed_ns")


class Workspace:
    """Where one kernel-run keeps its files (safefs: private directories, every file
    recorded before it is made, nothing else ever removed): the workloads' data files and
    perf's record in a private directory under `parent` (/var/tmp, or --workdir), the
    workers' live counter files in one under /dev/shm (tmpfs: written here first, so their
    pages are charged to this process, not to a workload's cgroup)."""

    def __init__(self, parent: Path, shm: Path = Path("/dev/shm")):
        self.files = RunDir(parent, "kernel-run")
        try:
            self.live = RunDir(shm, "kernel-run live counters") if shm.is_dir() else self.files
        except OSError:
            self.live = self.files
        self.path = self.files.path
        # Bytes of the compiled core still cached after each rep's drop_caches (release_own_text).
        self.core_cached: list[int] = []

    def create_files(self, scenario_json: str) -> None:
        """The file_read workloads' files, each name recorded before it is made."""
        for name in _core.host_file_names_json(scenario_json):
            self.files.file(name)
        _core.host_create_files_json(scenario_json, str(self.files.path))

    def live_file(self, wi: int, proc: int, threads: int) -> Path:
        """A zeroed file the worker's threads publish their counters into."""
        return self.live.create(f"w{wi}-p{proc}", b"\0" * max(threads * len(LIVE_FIELDS) * 8, 8))

    def remove(self) -> None:
        self.files.remove()
        self.live.remove()


def _read_live(p: Path) -> list[dict]:
    data = p.read_bytes()
    n = len(LIVE_FIELDS)
    vals = [int.from_bytes(data[i : i + 8], "little") for i in range(0, len(data) - 7, 8)]
    return [dict(zip(LIVE_FIELDS, vals[i : i + n])) for i in range(0, len(vals) - n + 1, n)]


def pin_plan(process_cpus: list[list[list[int]]], allowed: set[int]) -> tuple[dict, list[str]]:
    """Where each worker process is born: {(workload, process): its threads' CPUs as the
    simulator places them} for every process whose CPUs this host lets us use, and a note
    for each workload left to the host's scheduler (crates/host/src/affinity.rs says why
    kernel-run pins)."""
    plan, notes = {}, []
    for wi, procs in enumerate(process_cpus):
        missing = sorted({c for cpus in procs for c in cpus} - allowed)
        if missing:
            notes.append(
                f"workload[{wi}] is not pinned: the model places its tasks on CPUs {_cpu_list(missing)}, "
                f"which this host does not offer (it runs on {_cpu_list(sorted(allowed))}); the kernel's scheduler places them"
            )
            continue
        for p, cpus in enumerate(procs):
            plan[(wi, p)] = set(cpus)
    return plan, notes


def _cpu_list(cpus: list[int]) -> str:
    """CPUs as a list of ranges (0-3,8)."""
    runs: list[list[int]] = []
    for c in cpus:
        if runs and runs[-1][1] == c - 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _spawn(
    scenario_json: str, wi: int, proc: int, workdir: str, procs_file: Path, live: Path, prepared=None,
    cpus: set[int] | None = None,
):
    """Fork a worker: join the cgroup, replay, send the statistics back through a pipe.
    A worker dies with its parent (a parent killed outright cannot remove it). With
    `cpus` (kernel-run --pin), the worker is born on those CPUs: this thread's affinity is
    narrowed to them for the fork and restored after, and the worker pins each of its
    threads to its own CPU (crates/host/src/affinity.rs)."""
    r, w = os.pipe()
    parent = os.getpid()
    before = os.sched_getaffinity(0) if cpus else None
    if cpus:
        os.sched_setaffinity(0, cpus)
    pid = -1
    try:
        pid = os.fork()
    finally:
        if before is not None and pid != 0:
            os.sched_setaffinity(0, before)
    if pid == 0:  # child
        code = 0
        try:
            os.close(r)
            die_with_parent(parent)
            procs_file.write_text(str(os.getpid()))
            out = _core.host_run_process_json(scenario_json, wi, proc, workdir, str(live), prepared, bool(cpus))
        except BaseException as e:  # report anything to the parent, never unwind into it
            out = json.dumps({"error": str(e)})
            code = 1
        try:
            os.write(w, out.encode())
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        b = os.read(fd, 1 << 16)
        if not b:
            break
        chunks.append(b)
    os.close(fd)
    return b"".join(chunks)


def run_rep(
    scenario: dict, scenario_json: str, nprocs: list[int], cg: Cgroups, ws: Workspace, tag: str, prepared=None,
    locks=None, pins: dict | None = None,
) -> dict:
    """One rep on the host kernel; with `locks` (a perflock.Recorder), `perf lock record`
    runs while the workloads do; `pins` ({(workload, process): CPUs}, pin_plan) says
    where each worker is born."""
    cg.create(scenario, tag)
    kids = []
    lock_rows = []
    try:
        text = any(w.get("text") for w in scenario["workload"])
        _drop_caches(text)
        code = own_text_range() if text else None
        if code:
            ws.core_cached.append(cached_bytes(os.path.realpath(_core.__file__), *code))
        _precache_traces(scenario)
        if locks:
            locks.start()
        v0 = _vmstat()
        t0 = time.monotonic()
        kids = []
        for wi, w in enumerate(scenario["workload"]):
            threads = w.get("threads", 1)
            for p in range(nprocs[wi]):
                live = ws.live_file(wi, p, threads)
                pid, fd = _spawn(
                    scenario_json, wi, p, str(ws.path), cg.procs_file(w.get("cgroup", "/")), live, prepared,
                    (pins or {}).get((wi, p)),
                )
                kids.append((wi, pid, fd, live))
        results = []
        errors = []
        for wi, pid, fd, live in kids:
            data = _read_all(fd)
            _, status = os.waitpid(pid, 0)
            if os.WIFSIGNALED(status):
                # Killed (the OOM killer sends SIGKILL): keep what its threads published.
                results.append({"workload": wi, "killed": os.WTERMSIG(status), "threads": _read_live(live)})
            else:
                d = json.loads(data or b"{}")
                if "error" in d:
                    errors.append(f"workload {wi}: {d['error']}")
                results.append(d)
            ws.live.discard(live.name)
        if errors:
            raise KernelRunError("; ".join(errors))
        wall = time.monotonic() - t0
        v1 = _vmstat()
        if locks:
            lock_rows = locks.stop()
        settled = {c["path"]: (*cg.file_anon(c["path"]), cg.kernel_bytes(c["path"])) for c in scenario.get("cgroup", [])}
    finally:
        if locks:
            locks.stop_quietly()
        cg.remove()
        for *_, live in kids:
            ws.live.discard(live.name)
    vm_delta = {k: v - v0.get(k, 0) for k, v in v1.items()}
    counters = kernel_counters(results, vm_delta, settled, names=workload_names(scenario))
    return {"wall_s": wall, "counters": counters, "locks": lock_rows}


def remove_stale(cg: Cgroups, parents: tuple[Path, ...] = (Path("/var/tmp"), Path("/dev/shm"))) -> list[str]:
    """Remove what kernel-runs killed outright left behind (SIGKILL gives no chance to clean
    up): for each such run whose process is gone, its cgroup tree and its private
    directories under `parents` (safefs.remove_stale: only directories with the run's
    marker, only the files it recorded, never through a link). Returns one note per run
    cleaned."""
    cleaned: dict[int, list[str]] = {}
    for root in sorted(cg.mount.glob("reclaimsim-*")):
        pid = stale_pid(root.name)
        if pid is not None and root.is_dir() and not root.is_symlink():
            Cgroups(cg.version, cg.mount, root).remove()
            cleaned.setdefault(pid, []).append(str(root))
    for parent in dict.fromkeys(parents):
        for d in safefs.remove_stale(parent):
            cleaned.setdefault(stale_pid(Path(d).name) or 0, []).append(d)
    return [
        f"removed what reclaimsim {pid} (killed outright) left: {', '.join(paths)}" for pid, paths in cleaned.items()
    ]


def check_workdir(workdir: str | None, file_reads: bool) -> Path:
    """The directory kernel-run makes its private directory in: --workdir, which must
    exist (kernel-run creates nothing outside its own directory), else /var/tmp; a
    scenario that reads files needs it on a disk filesystem."""
    parent = Path(workdir) if workdir is not None else Path("/var/tmp")
    if not parent.is_dir():
        raise KernelRunError(f"--workdir {printable(str(parent))}: not a directory; give an existing directory "
                             "(kernel-run makes a private directory of its own in it)")
    if file_reads and fstype(str(parent)) in ("tmpfs", "ramfs"):
        raise KernelRunError(
            f"--workdir {printable(str(parent))} is on {fstype(str(parent))}: its pages are shmem (anon LRU), "
            "not page cache; choose a directory on a disk filesystem"
        )
    return parent


def check_host() -> Cgroups:
    if os.geteuid() != 0:
        raise KernelRunError(
            "kernel-run needs root (it creates memory cgroups, drops caches and sets up swap); run it as root"
        )
    return Cgroups.detect()


def fstype(path: str) -> str:
    """The filesystem type under `path` (longest mount-point prefix)."""
    real = os.path.realpath(path)
    best, fstype = "", ""
    for mnt, ft, _opts in _mounts():
        if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
            best, fstype = mnt, ft
    return fstype


def _has_file_reads(scenario: dict) -> bool:
    return any(w.get("type") == "file_read" for w in scenario.get("workload", []))


def _has_anon(scenario: dict) -> bool:
    return any(w.get("type") == "usemem" for w in scenario.get("workload", []))


LRU_GEN_ENABLED = Path("/sys/kernel/mm/lru_gen/enabled")


def check_lru(norm: dict) -> None:
    """Refuse, before the host is touched, what the host kernel cannot run or kernel-run does
    not replay: MGLRU without CONFIG_LRU_GEN, and [[lru_gen]] debugfs schedules."""
    if norm["kernel"].get("lru") == "mglru" and not LRU_GEN_ENABLED.exists():
        what = '[[lru_gen]] schedules and kernel.lru = "mglru" need' if norm.get("lru_gen") else 'kernel.lru = "mglru" needs'
        raise KernelRunError(
            f"the scenario's {what} the multi-gen LRU, but this host kernel "
            f"({os.uname().release}) has no {LRU_GEN_ENABLED}: kernel-run needs a kernel with CONFIG_LRU_GEN "
            "(or run it with --vm, in a VM with Debian's 6.12)"
        )
    if norm.get("lru_gen"):
        raise KernelRunError(
            "the scenario has [[lru_gen]] (/sys/kernel/debug/lru_gen) schedules, which kernel-run does not replay"
        )


def kernel_run(
    scenario: dict, reps: int, workdir: str | None = None, swapfile: str | None = None, progress=None,
    perf_lock: bool = False, pin: bool = False, kernel_version: str | None = None,
) -> dict:
    """Run `scenario` `reps` times on the host kernel and `reps` times in the simulator
    (flush phases spread, unless pinned); return the side-by-side report. The run's files
    go into a private directory it makes under `workdir` (default /var/tmp; Workspace).
    With `perf_lock`, `perf lock contention` per caller beside the model's lock table; with
    `pin`, each workload thread runs on the CPU the simulator gives it (pin_plan). The
    model runs as the host kernel's version, or as `kernel_version` (model_of_kernel)."""
    scenario_json = json.dumps(scenario)
    nprocs = _core.host_processes_json(scenario_json)
    norm = json.loads(_core.validate_json(scenario_json))
    if norm.get("reclaim"):
        raise KernelRunError(
            "the scenario has [[reclaim]] (memory.reclaim) schedules, which kernel-run replays only with --vm "
            "(cgroup v2 in a VM); a cgroup v1 host has no memory.reclaim at all"
        )
    check_lru(norm)
    parent = check_workdir(workdir, _has_file_reads(norm))
    swap_spec = norm["machine"].get("swap")
    if swap_spec and swapfile is not None:
        check_swapfile(swapfile)
    cg = check_host()
    notes = cg.notes
    model = model_of_kernel(scenario, os.uname().release, notes, kernel_version)
    model = json.loads(_core.validate_json(json.dumps(per_access(model, notes))))
    notes.extend(remove_stale(cg, (Path("/var/tmp"), Path("/dev/shm"), parent)))
    pins: dict = {}
    if pin:
        pins, pin_notes = pin_plan(_core.host_process_cpus_json(scenario_json), os.sched_getaffinity(0))
        notes.extend(pin_notes)
        notes.append("--pin: each workload thread ran on the CPU the simulator gives it")
    if any(w.get("start", 0) for w in norm["workload"]):
        notes.append("workload start times are not replayed: every workload starts at once")
    swap = None
    sysctl = Path("/proc/sys/vm/swappiness")
    old_swappiness = sysctl.read_text().strip()
    tag = f"reclaimsim-{os.getpid()}"
    reps_out = []
    recorder = None
    if perf_lock:
        from . import perflock

        why = perflock.unavailable()
        if why:
            raise KernelRunError(f"--perf-lock: {why}")
    ws = Workspace(parent)
    try:
        if perf_lock:
            ws.files.file("perf-lock.data.old")  # perf record renames an earlier output so
            recorder = perflock.Recorder(ws.files.file("perf-lock.data"))
            notes.append("perf lock record ran during the reps: the kernel's time rows include its tracepoint overhead")
        if swap_spec:
            swap = Swap(swap_spec["size"], swapfile, notes, swap_spec.get("device", "zram"), swap_spec.get("rotational", False))
        elif active_swaps() and _has_anon(norm):
            notes.append("the scenario has no swap but the host does: the kernel may swap where the model cannot")
        _write(sysctl, str(norm["kernel"]["swappiness"]))
        ws.create_files(scenario_json)
        # Trace id tables are built here, not in the workers (their memory would be
        # charged to the workload's cgroup; the model has no such table).
        prepared = _core.host_prepare_json(scenario_json)
        for i in range(reps):
            if progress:
                progress(f"rep {i + 1}/{reps} on the kernel")
            reps_out.append(run_rep(norm, scenario_json, nprocs, cg, ws, tag, prepared, recorder, pins))
        if ws.core_cached and max(ws.core_cached) > 0:
            notes.append(
                f"{max(ws.core_cached) >> 10} KiB of the compiled core's code ({_core.__file__}) stayed cached after the cache "
                "was dropped: another process maps it, so part of the workers' code was not theirs to fault in "
                "(a usemem `text` is charged to its memcg in the model)"
            )
    finally:
        cg.remove()
        try:
            sysctl.write_text(old_swappiness)
        except OSError:
            pass
        if swap:
            swap.close()
        ws.remove()
    sim_locks: list = []
    if perf_lock:
        # The model observed as the kernel was: perf lock record's samples cost its traced
        # waiters what they cost the kernel's (engine/perf_lock.rs).
        model["observe"] = "perf-lock"
        notes.append("the model ran observed by perf lock record as the kernel was (observe = perf-lock)")
        if perflock.paravirt_spinlocks():
            # A KVM guest's __pv_queued_spin_lock_slowpath traces its first waiter too.
            model["machine"]["paravirt_spinlocks"] = True
            notes.append("this kernel uses paravirtual spinlocks (KVM guest): every waiter is traced, on both sides")
    sims = simulate(model, reps, progress, locks=sim_locks)
    extra = {}
    if perf_lock:
        from .perflock import side_by_side

        extra["locks"] = side_by_side([r["locks"] for r in reps_out], sim_locks)
    return assemble(norm, reps_out, sims, notes, cg.version, os.uname().release, model_version=model["kernel"]["version"], **extra)
