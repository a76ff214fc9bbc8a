"""`reclaimsim kernel-run --vm`: the scenario's workloads on a kernel booted under QEMU.

The host kernel is one kernel with one configuration; a virtual machine runs any kernel
(Debian's 6.12 with MGLRU and cgroup v2, or one `kernel-build` made, patched or not) and
changes nothing on the host. A run:

1. the kernel: `--kernel IMAGE`, one of Debian's cloud kernels pinned by package version
   and checksum (`--kernel debian-6.1|debian-6.12|debian-7.3`, debkernels.py: fetched,
   checked, `dpkg-deb -x` into the cache; nothing is installed), by default debian-6.12.
   The cloud flavour has ext4 and virtio built in and a small module tree; it has
   CONFIG_LRU_GEN (enabled by default) and CONFIG_MEMCG. The modules the runner needs (zram, virtio_blk, zram's default
   compressor) are taken from its tree with their dependencies (modules.dep);
2. the initramfs: a newc cpio archive with the guest runner (`crates/guest`, a static
   Rust binary built and embedded with the package's Rust core, so a wheel has it; as
   /init) and those modules, cached per kernel and runner; a second small
   archive, appended, carries this run's plan (`guest_plan`);
3. a data disk (an ext4 image made with mkfs.ext4 in a temporary directory) when the
   scenario reads files, since tmpfs pages would be shmem, not page cache;
4. QEMU with the scenario's CPUs, memory (one guest NUMA node per scenario node) and the
   plan; the console goes to a file (its tail is shown when the guest fails) and the
   result comes back as one framed JSON document on the second serial port.

Everything is in a temporary directory removed afterwards; QEMU is killed on a timeout,
an error or Ctrl-C.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import _core
from .versions import model_of_kernel
from . import debkernels
from .debpkg import cache_dir
from .sidebyside import (
    KernelRunError, assemble, cgroup_time_rows, inc_max_seq_rows, kernel_counters, parse_lru_gen, per_access, simulate, workload_names,
)
from . import safefs
from .batch import child_of_this_process
from .tracehist import add_model_rows, hist_entries, hist_rows, kprobe_lines, split_by_model
from .safefs import RunDir, replace_atomically
from .term import printable

# Guest memory the kernel and the initramfs need beside the scenario's machine [bytes].
GUEST_OVERHEAD = 256 << 20
# QEMU's pc machine without an IOMMU: at most 255 vCPUs (x2APIC IDs above need one).
MAX_GUEST_CPUS = 255
# A guest may use at most this share of the host's available memory.
HOST_MEMORY_SHARE = 0.75
DATA_BEGIN = b"RECLAIMSIM-BEGIN "
# What the guest runner prints on the console first (crates/guest/src/main.rs).
STARTED = b"reclaimsim-guest: started"
# Boots again after a kernel crash before the runner started.
BOOT_RETRIES = 2
DATA_END = b"\nRECLAIMSIM-END"


# ---------------------------------------------------------------------------------------
# the kernel


@dataclass
class Kernel:
    image: Path
    release: str
    modules: Path | None = None  # lib/modules/RELEASE, when the kernel has modules
    config: Path | None = None


def _need(tool: str, package: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise KernelRunError(f"{tool} not found: install Debian's {package} package (apt-get install {package})")
    return path


def debian_kernel(name: str = debkernels.DEFAULT, progress=None) -> Kernel:
    """One of Debian's pinned cloud kernels (debkernels.py), fetched and unpacked once."""
    try:
        return _unpacked_kernel(debkernels.unpacked(name, progress))
    except debkernels.DebKernelError as e:
        raise KernelRunError(str(e)) from None


def resolve_kernel(spec: str | None, progress=None) -> Kernel:
    """The kernel `--kernel` names: a pinned Debian kernel (debian-6.1, debian-6.12,
    debian-7.3; "debian" or nothing is debian-6.12), else a bzImage file."""
    if spec is None or spec == "debian":
        return debian_kernel(debkernels.DEFAULT, progress)
    if spec in debkernels.KERNELS:
        return debian_kernel(spec, progress)
    return user_kernel(spec)


def _unpacked_kernel(d: Path) -> Kernel:
    """The kernel in an unpacked package tree: 6.x's /boot/vmlinuz-R with /lib/modules/R,
    or 7.x's usr/lib/modules/R/{vmlinuz,config} with the modules beside them."""
    boot = sorted((d / "boot").glob("vmlinuz-*"))
    if boot:
        image = boot[0]
        release = image.name.removeprefix("vmlinuz-")
        config = d / "boot" / f"config-{release}"
        mods = d / "lib" / "modules" / release
    else:
        found = sorted((d / "usr" / "lib" / "modules").glob("*/vmlinuz"))
        if not found:
            raise KernelRunError(f"{d}: no kernel image (boot/vmlinuz-* or usr/lib/modules/*/vmlinuz)")
        image = found[0]
        release = image.parent.name
        config = image.parent / "config"
        mods = image.parent
    has_mods = (mods / "kernel").is_dir()
    return Kernel(image, release, mods if has_mods else None, config if config.exists() else None)


def check_kernel_file(spec: str | None) -> None:
    """Refuse a `--kernel` file that is not a bzImage before anything else is checked or
    fetched (bad input first, then missing tools); Debian's names are checked when fetched."""
    if spec not in (None, "debian") and spec not in debkernels.KERNELS:
        user_kernel(spec)


def user_kernel(image: str) -> Kernel:
    """A bzImage given with --kernel; its .config beside it (IMAGE.config, as kernel-build
    writes it) if there is one. Such a kernel must have what the runner needs built in."""
    p = Path(image)
    if not p.is_file():
        raise KernelRunError(
            f"--kernel {image}: no such file; allowed: a bzImage file or {', '.join(debkernels.KERNELS)}"
        )
    with open(p, "rb") as f:
        head = f.read(0x300)
    if len(head) < 0x206 or head[0x202:0x206] != b"HdrS":
        raise KernelRunError(f"--kernel {image}: not an x86 bzImage (no 'HdrS' boot header)")
    cfg = Path(str(p) + ".config")
    release = bzimage_release(p) or p.name
    return Kernel(p, release, None, cfg if cfg.exists() else None)


def bzimage_release(p: Path) -> str | None:
    """The release string from the bzImage's header (the kernel_version field)."""
    with open(p, "rb") as f:
        data = f.read(0x10000)
    off = int.from_bytes(data[0x20E:0x210], "little") + 0x200
    if 0x200 <= off < len(data):
        s = data[off:off + 128].split(b"\0")[0].decode(errors="replace")
        # Text from the image: shown escaped (an image can hold any bytes here).
        return printable(s.split()[0]) if s.split() else None
    return None


def config_value(kernel: Kernel, option: str) -> str | None:
    """CONFIG_<option> of the kernel's .config: "y", "m", a value, or None (unset/unknown)."""
    if kernel.config is None:
        return None
    for line in kernel.config.read_text().splitlines():
        if line.startswith(f"CONFIG_{option}="):
            return line.split("=", 1)[1].strip('"')
    return None


# ---------------------------------------------------------------------------------------
# modules


def module_paths(kernel: Kernel, names: list[str]) -> list[Path]:
    """The module files for `names` and everything they depend on, dependencies first.
    A kernel package carries no modules.dep (depmod makes it on install), so the
    dependencies are read from each module's own .modinfo `depends=` entry."""
    if kernel.modules is None or not names:
        return []
    files = {_module_name(p.name): p for p in (kernel.modules / "kernel").rglob("*.ko*")}
    order: list[Path] = []

    def visit(name: str, stack: tuple) -> None:
        key = name.replace("-", "_")
        if key not in files:
            raise KernelRunError(f"kernel {kernel.release}: no module {name} under {kernel.modules}")
        p = files[key]
        if p in order or key in stack:
            return
        for d in _modinfo(p).get("depends", "").split(","):
            if d:
                visit(d, stack + (key,))
        order.append(p)

    for n in names:
        visit(n, ())
    return order


def _modinfo(p: Path) -> dict[str, str]:
    """The key=value strings of a module's .modinfo section (found by their keys: each
    module has `name=`, `vermagic=` and `depends=`)."""
    data = p.read_bytes()
    if p.name.endswith(".xz"):
        data = lzma.decompress(data)
    elif p.name.endswith(".zst"):
        raise KernelRunError(f"{p}: zstd-compressed modules are not supported")
    out = {}
    for m in re.finditer(rb"(?<=\0)(name|depends|vermagic)=([^\0]*)", data):
        out.setdefault(m.group(1).decode(), m.group(2).decode(errors="replace"))
    return out


def _module_name(filename: str) -> str:
    return filename.split(".ko")[0].replace("-", "_")


def needed_modules(kernel: Kernel, swap: bool, disk: bool) -> list[str]:
    """Modules to load: those of zram (and its default compressor), virtio_pci and
    virtio_blk that the kernel built as modules."""
    want = []
    if swap and config_value(kernel, "ZRAM") == "m":
        want.append("zram")
    if swap:
        comp = config_value(kernel, "ZRAM_DEF_COMP")
        # The compressor's crypto module; lzo-rle (6.1's default) is built by CRYPTO_LZO.
        option = f"CRYPTO_{comp.upper().replace('-', '_')}" if comp else None
        if option == "CRYPTO_LZO_RLE":
            option = "CRYPTO_LZO"
        if option and config_value(kernel, option) == "m":
            want.append(comp)
    if disk and config_value(kernel, "VIRTIO_PCI") == "m":
        # The PCI transport the disk's virtio device sits on (6.1's cloud kernel builds
        # it as a module); not a dependency of virtio_blk, which any transport serves.
        want.append("virtio_pci")
    if disk and config_value(kernel, "VIRTIO_BLK") == "m":
        want.append("virtio_blk")
    return want


# ---------------------------------------------------------------------------------------
# initramfs


def cpio_newc(entries: list[tuple[str, int, bytes]]) -> bytes:
    """A cpio archive in the "newc" format the kernel unpacks into its initramfs
    (Documentation/driver-api/early-userspace/buffer-format.rst): each entry a 110-byte
    ASCII header (magic 070701, 13 eight-digit hex fields), the name with its NUL, padded
    to 4 bytes, then the data, padded to 4 bytes; a "TRAILER!!!" entry ends it.
    `entries` are (path, mode, data); directories have mode 0o040xxx and no data."""
    out = bytearray()
    ino = 1

    def entry(name: str, mode: int, data: bytes, nlink: int) -> None:
        nonlocal ino
        nb = name.encode() + b"\0"
        fields = [ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(nb), 0]
        out.extend(b"070701" + b"".join(b"%08X" % f for f in fields) + nb)
        out.extend(b"\0" * (-len(out) % 4))
        out.extend(data)
        out.extend(b"\0" * (-len(out) % 4))
        ino += 1

    for name, mode, data in entries:
        is_dir = (mode & 0o170000) == 0o040000
        entry(name.lstrip("/"), mode, b"" if is_dir else data, 2 if is_dir else 1)
    entry("TRAILER!!!", 0, b"", 1)
    return bytes(out)


def _with_parents(files: list[tuple[str, int, bytes]]) -> list[tuple[str, int, bytes]]:
    """Add the directory entries the files need, parents first."""
    dirs: list[str] = []
    for name, _, _ in files:
        parts = name.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d not in dirs:
                dirs.append(d)
    return [(d, 0o040755, b"") for d in dirs] + files


def check_prerequisites() -> None:
    """Refuse, before any download, what this machine lacks for a VM run: QEMU. (The guest
    runner comes with the package: guest_runner.)"""
    _need("qemu-system-x86_64", "qemu-system-x86")


def guest_runner() -> bytes:
    """The guest runner (crates/guest, a static executable that is the VM's /init), as
    built and embedded with this package's Rust core (crates/py/build.rs): a wheel carries
    it, and it always matches the installed core's replay code."""
    return _core.guest_runner()


def base_initramfs(kernel: Kernel, modules: list[Path], runner: bytes) -> Path:
    """The cached archive with /init (the guest runner) and the modules (under /modules,
    in load order)."""
    h = hashlib.sha256()
    h.update(runner)
    for m in modules:
        h.update(str(m).encode())
        h.update(str(m.stat().st_mtime_ns).encode())
    out = cache_dir() / "initramfs" / f"{h.hexdigest()[:20]}.cpio"
    if out.exists():
        return out
    files = [("init", 0o100755, runner)]
    for i, m in enumerate(modules):
        files.append((f"modules/{i:02d}-{m.name}", 0o100644, m.read_bytes()))
    out.parent.mkdir(parents=True, exist_ok=True)
    replace_atomically(out, lambda f: f.write(cpio_newc(_with_parents(files))))
    return out


def plan_initramfs(base: Path, plan: dict, dest: Path) -> Path:
    """The base archive with this run's /plan.json appended (the kernel unpacks
    concatenated archives in order)."""
    dest.write_bytes(base.read_bytes() + cpio_newc([("plan.json", 0o100644, json.dumps(plan).encode())]))
    return dest


# ---------------------------------------------------------------------------------------
# the plan


def _cg_files(mem: dict) -> list[tuple[str, str]]:
    files = []
    for k in ("max", "high", "low", "min"):
        v = mem.get(k)
        if v not in (None, "max"):
            files.append((f"memory.{k}", str(v)))
    swap_max = (mem.get("swap") or {}).get("max")
    if swap_max not in (None, "max"):
        files.append(("memory.swap.max", str(swap_max)))
    return files


def check_scenario(norm: dict, host_mem_available: int) -> list[str]:
    """Refuse what the VM cannot run; return notes on what it runs differently."""
    notes = []
    for i, cg in enumerate(norm.get("cgroup", [])):
        if cg.get("memory", {}).get("swappiness") is not None:
            raise KernelRunError(
                f"scenario.cgroup[{i}].memory.swappiness = {cg['memory']['swappiness']} ({cg['path']}): "
                "cgroup v2 has no per-cgroup swappiness, so kernel-run --vm cannot apply it; "
                "remove it (kernel.swappiness sets vm.swappiness for all)"
            )
    for i, w in enumerate(norm["workload"]):
        if w.get("type") == "trace":
            raise KernelRunError(
                f"scenario.workload[{i}]: type = \"trace\" is not replayed in the VM yet "
                "(usemem and file_read are); run it with kernel-run on the host"
            )
    if norm.get("lru_gen"):
        raise KernelRunError(
            "the scenario has [[lru_gen]] (/sys/kernel/debug/lru_gen) schedules, which kernel-run does not replay"
        )
    m = norm["machine"]
    need = m["memory_per_node"] * m["nodes"] + GUEST_OVERHEAD
    if need > host_mem_available * HOST_MEMORY_SHARE:
        raise KernelRunError(
            f"machine: {m['nodes']} x {m['memory_per_node'] >> 20} MiB needs a {need >> 20} MiB guest, "
            f"more than {int(HOST_MEMORY_SHARE * 100)}% of this host's available memory "
            f"({host_mem_available >> 20} MiB); run a smaller scale of the scenario"
        )
    if m["cpus"] > MAX_GUEST_CPUS:
        raise KernelRunError(
            f"machine.cpus = {m['cpus']}: QEMU's pc machine takes at most {MAX_GUEST_CPUS} vCPUs; "
            "run a smaller scale of the scenario"
        )
    swap = m.get("swap")
    if swap and swap.get("device") != "zram":
        notes.append(f"swap: the guest swaps to zram, the scenario's device is {swap.get('device')}")
    if any(w.get("start", 0) for w in norm["workload"]):
        notes.append("workload start times are not replayed: every workload starts at once")
    return notes


def reclaim_progress(norm: dict, sim: dict) -> list[list[int]]:
    """For each [[reclaim]] write, the accesses the workloads had done, all together, when
    it started in the simulator's run `sim` (a result: its write log's `accesses`). The
    guest makes the write when its workloads reach that count, so a write meets them at
    the same point of their run although TCG runs them several times slower than virtual
    time. A write the run did not make (it ended first) is due when the workloads are
    done."""
    total = sum(w["accesses"] for w in sim["workloads"])
    logs = (sim.get("proactive") or {}).get("schedules", [])
    out = []
    for i, r in enumerate(norm.get("reclaim", [])):
        made = []
        if i < len(logs):
            col = logs[i]["log_columns"].index("accesses")
            made = [row[col] for row in logs[i]["log"]]
        times = r.get("times", 1)
        out.append((made + [total] * times)[:times])
    return out


def guest_plan(
    norm: dict, reps: int, nprocs: list[int], modules: list[str], disk: bool, after_accesses: list | None = None,
    hists: list[dict] | None = None, kprobes: list[str] | None = None,
) -> dict:
    """What the guest runner does (crates/guest/src/plan.rs); `hists` and `kprobes` from
    tracehist.py."""
    k = norm["kernel"]
    writes = [("/proc/sys/vm/swappiness", str(k["swappiness"]))]
    if k.get("min_free_kbytes") is not None:
        writes.append(("/proc/sys/vm/min_free_kbytes", str(k["min_free_kbytes"])))
    writes.append(("/proc/sys/vm/watermark_scale_factor", str(k["watermark_scale_factor"])))
    lru_gen = None
    if k.get("lru") == "mglru":
        enabled = (k.get("lru_gen") or {}).get("enabled")
        lru_gen = "y" if enabled is None else hex(enabled)
        writes.append(("/sys/kernel/mm/lru_gen/min_ttl_ms", str((k.get("lru_gen") or {}).get("min_ttl_ms", 0))))
    else:
        lru_gen = "n"
    cgroups = sorted(norm.get("cgroup", []), key=lambda c: c["path"].count("/"))
    procs = [
        {"workload": wi, "count": nprocs[wi], "threads": w.get("threads", 1), "cgroup": w.get("cgroup", "/")}
        for wi, w in enumerate(norm["workload"])
    ]
    reclaim = []
    for i, r in enumerate(norm.get("reclaim", [])):
        buf = str(r["bytes"])
        if r.get("swappiness") is not None:
            buf += f" swappiness={r['swappiness']}"
        reclaim.append({
            "cgroup": r.get("cgroup", "/"), "at_ns": r["at"], "every_ns": r.get("every") or 0,
            "times": r.get("times", 1), "buffer": buf,
            "after_accesses": after_accesses[i] if after_accesses else None,
        })
    swap = norm["machine"].get("swap")
    return {
        "scenario": json.dumps(norm),
        "reps": reps,
        "modules": modules,
        "writes": writes,
        "lru_gen": lru_gen,
        "swap_bytes": swap["size"] if swap else 0,
        "disk": "/dev/vda" if disk else None,
        "cgroups": [{"path": c["path"], "files": _cg_files(c.get("memory", {}))} for c in cgroups],
        "procs": procs,
        "reclaim": reclaim,
        "kprobes": list(kprobes or []),
        "hists": [{"event": h["event"], "trigger": h["trigger"]} for h in hists or []],
    }


def _file_bytes(norm: dict) -> int:
    return sum(sum(w.get("files", [])) for w in norm["workload"] if w.get("type") == "file_read")


def make_disk(path: Path, data_bytes: int) -> None:
    """A sparse raw image with an empty ext4 filesystem for the workloads' files."""
    mkfs = _need("mkfs.ext4", "e2fsprogs")
    size = data_bytes + data_bytes // 8 + (64 << 20)
    with open(path, "wb") as f:
        f.truncate(size)
    p = subprocess.run([mkfs, "-q", "-F", "-m", "0", str(path)], capture_output=True, text=True)
    if p.returncode != 0:
        raise KernelRunError(f"mkfs.ext4 {path}: {p.stderr.strip()}")


# ---------------------------------------------------------------------------------------
# QEMU


def qemu_command(kernel: Kernel, initrd: Path, norm: dict, accel: str, console: Path, data: Path, disk: Path | None) -> list[str]:
    m = norm["machine"]
    nodes, cpus = m["nodes"], m["cpus"]
    per_node = (m["memory_per_node"] >> 20)
    total = per_node * nodes + (GUEST_OVERHEAD >> 20)
    cmd = [
        _need("qemu-system-x86_64", "qemu-system-x86"),
        "-accel", "kvm" if accel == "kvm" else "tcg,thread=single",
        "-cpu", "host" if accel == "kvm" else "qemu64,-cx16",
        "-m", f"{total}M", "-smp", str(cpus),
        "-kernel", str(kernel.image), "-initrd", str(initrd),
        "-append", "console=ttyS0 panic=-1 loglevel=4 rdinit=/init transparent_hugepage=madvise",
        "-display", "none", "-monitor", "none", "-no-reboot", "-nodefaults",
        "-serial", f"file:{console}", "-serial", f"file:{data}",
    ]
    if nodes > 1:
        # One guest node per scenario node; the kernel and initramfs overhead on node 0.
        for n in range(nodes):
            size = per_node + ((GUEST_OVERHEAD >> 20) if n == 0 else 0)
            lo, hi = n * cpus // nodes, (n + 1) * cpus // nodes - 1
            cmd += ["-object", f"memory-backend-ram,id=m{n},size={size}M",
                    "-numa", f"node,nodeid={n},cpus={lo}-{hi},memdev=m{n}"]
    if disk is not None:
        cmd += ["-drive", f"file={disk},if=virtio,format=raw,cache=unsafe"]
    return cmd


def _tail(p: Path, lines: int = 8) -> str:
    """The console's last lines, and where the whole console was kept."""
    try:
        text = p.read_text(errors="replace")
    except OSError:
        return "(no console output)"
    keep = cache_dir() / "last-console.log"
    keep.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(p, keep)
    tail = [l for l in text.splitlines() if l.strip()][-lines:]
    return (" | ".join(tail) or "(no console output)") + f" (whole console: {keep})"


# The files boot() writes in its work directory.
BOOT_FILES = ("console.log", "data.out")


def scratch_dir() -> RunDir:
    """A private directory for one boot's files under the temporary directory (safefs:
    made by mkdtemp, each file recorded before it is made, removed with the directory
    also by a later run if this one is killed outright)."""
    rd = RunDir(Path(tempfile.gettempdir()), "kernel-run --vm")
    for name in BOOT_FILES:
        rd.file(name)
    return rd


def remove_stale_scratch() -> list[str]:
    """Notes on the scratch directories of VM runs killed outright, now removed."""
    return [f"removed what a reclaimsim run killed outright left: {d}" for d in safefs.remove_stale(Path(tempfile.gettempdir()))]


def _boot_once(kernel, initrd, norm, accel, console, data, disk, timeout) -> tuple[dict | None, str, int]:
    """One QEMU run: (the document or None, QEMU's stderr, its exit code)."""
    cmd = qemu_command(kernel, initrd, norm, accel, console, data, disk)
    # QEMU dies with this process, also when it is killed outright (kill -9).
    proc = subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        preexec_fn=child_of_this_process(),
    )
    t0 = time.monotonic()
    try:
        while proc.poll() is None:
            if time.monotonic() - t0 > timeout:
                raise KernelRunError(
                    f"the guest did not finish within --timeout; console: {_tail(console)}"
                )
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    err = proc.stderr.read().decode(errors="replace").strip()
    doc = parse_data(data.read_bytes()) if data.exists() else None
    return doc, err, proc.returncode


def parse_data(raw: bytes) -> dict | None:
    """The framed JSON document from the data port, or None when it is missing or cut."""
    i = raw.find(DATA_BEGIN)
    if i < 0:
        return None
    head_end = raw.find(b"\n", i)
    try:
        n = int(raw[i + len(DATA_BEGIN):head_end])
    except ValueError:
        return None
    body = raw[head_end + 1:head_end + 1 + n]
    if len(body) != n or not raw[head_end + 1 + n:].startswith(DATA_END):
        return None
    return json.loads(body)


def boot(kernel: Kernel, initrd: Path, norm: dict, accel: str, workdir: Path, disk: Path | None, timeout: float, progress=None) -> dict:
    """Boot the guest, wait for it to power off (or the timeout), return its document.

    A kernel that crashes before its init runs (the console has no STARTED line) hit an
    emulation fault, not the scenario: it is booted again, up to BOOT_RETRIES times, and
    the document says how often ("boot_retries")."""
    t0 = time.monotonic()
    for attempt in range(BOOT_RETRIES + 1):
        console, data = workdir / "console.log", workdir / "data.out"
        for f in (console, data):
            f.unlink(missing_ok=True)
        doc, err, rc = _boot_once(kernel, initrd, norm, accel, console, data, disk, timeout - (time.monotonic() - t0))
        out = console.read_bytes() if console.exists() else b""
        crashed = doc is None and out.strip() != b"" and STARTED not in out
        if not crashed or attempt == BOOT_RETRIES:
            break
        if progress:
            progress(f"the guest kernel crashed before its init ran (an emulation fault); booting again ({attempt + 1}/{BOOT_RETRIES})")
    if doc is None:
        why = f"qemu: {err.splitlines()[-1]}" if rc != 0 and err else "no result from the guest"
        raise KernelRunError(f"{why}; console: {_tail(console)}")
    if "error" in doc:
        raise KernelRunError(f"in the guest ({kernel.release}): {doc['error']}")
    # The guest's own strings (its uname, /proc/version) are shown escaped.
    for k in ("kernel", "version"):
        if isinstance(doc.get(k), str):
            doc[k] = printable(doc[k])
    doc["boot_retries"] = attempt
    doc["boot_s"] = time.monotonic() - t0
    return doc


# ---------------------------------------------------------------------------------------
# acceleration


def _kvm_usable() -> bool:
    return os.path.exists("/dev/kvm") and os.access("/dev/kvm", os.R_OK | os.W_OK)


def resolve_accel(accel: str, kernel: Kernel, initrd_base: Path, progress=None) -> tuple[str, str]:
    """(accel to use, how it was chosen). `auto` boots the kernel once under KVM with a
    probe plan and a short timeout, and caches the answer per host kernel, QEMU and guest
    kernel."""
    if accel == "tcg":
        return "tcg", "tcg (asked)"
    if accel == "kvm":
        if not _kvm_usable():
            raise KernelRunError("--accel kvm: /dev/kvm is missing or not accessible")
        return "kvm", "kvm (asked)"
    if not _kvm_usable():
        return "tcg", "tcg (no usable /dev/kvm)"
    qemu = _need("qemu-system-x86_64", "qemu-system-x86")
    qv = subprocess.run([qemu, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    key = hashlib.sha256(f"{os.uname().release}|{qv}|{kernel.image}|{kernel.image.stat().st_size}".encode()).hexdigest()[:16]
    cache = cache_dir() / "accel" / key
    if cache.exists():
        got, _, why = cache.read_text().partition("\n")
        return got, f"{got} (probed before: {why.strip()}; {cache})"
    if progress:
        progress("probing KVM with a short boot (once; the answer is cached)")
    with scratch_dir() as rd:
        t = rd.path
        initrd = plan_initramfs(initrd_base, {"probe": True}, rd.file("probe.cpio"))
        probe_norm = {"machine": {"nodes": 1, "cpus": 1, "memory_per_node": 256 << 20}}
        try:
            boot(kernel, initrd, probe_norm, "kvm", t, None, 30.0)
            got, why = "kvm", "KVM boots this kernel"
        except KernelRunError as e:
            got, why = "tcg", "KVM did not boot this kernel: " + str(e).split("; console:")[0]
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(f"{got}\n{why}\n")
    return got, f"{got} (probed: {why})"


# ---------------------------------------------------------------------------------------
# the guest's own costs

# What the calibration boot measures: calibrate's anonymous region and file (its full
# sizes), five repetitions each (the median is kept), on zram swap and an ext4 disk.
GUEST_CALIBRATION = {"anon_pages": 65536, "file_pages": 8192, "reps": 5}
# The calibration guest: 2 vCPUs (one busy: the benchmarks run on one thread), 1G.
CALIBRATION_MACHINE = {"nodes": 1, "cpus": 2, "memory_per_node": 1 << 30}
CALIBRATION_SWAP = 512 << 20


def calibration_key(kernel: Kernel, accel: str, runner: bytes) -> str:
    """What a guest's costs depend on: the host's CPU and kernel, QEMU, the guest kernel,
    the accelerator and the runner that timed them (its benchmarks)."""
    from .calibrate import cpu_model

    qemu = _need("qemu-system-x86_64", "qemu-system-x86")
    qv = subprocess.run([qemu, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    parts = [cpu_model(), os.uname().release, qv, str(kernel.image), str(kernel.image.stat().st_size), accel,
             hashlib.sha256(runner).hexdigest(), json.dumps(GUEST_CALIBRATION, sort_keys=True)]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def guest_profile(figs: dict, kernel: Kernel, accel: str) -> dict:
    """The cost profile (calibrate's format) of the figures timed in a guest: each
    entry measured there, or derived by calibrate's subtractions from the table's values."""
    from .calibrate import cpu_model, derive, table_costs

    costs, checks = derive(figs, table_costs())
    desc = (
        f"measured in a {accel.upper()} guest of {kernel.release} on {cpu_model()} by kernel-run --vm's "
        f"calibration boot, {time.strftime('%Y-%m-%d')}; the entries not listed keep the table's values"
    )
    return {"name": f"guest-{kernel.release}-{accel}", "description": desc, "costs": costs, "checks": checks}


def guest_costs(kernel: Kernel, accel: str, timeout: float, progress=None) -> tuple[Path, str]:
    """(cost profile file, how it was had) of `kernel` in this machine's VM under `accel`.

    A guest under TCG runs its CPUs several times slower than hardware while its clock
    keeps the host's pace, so the kernel's timed work (the 2 s periodic memcg statistics
    flush, kswapd's and writeback's timeouts) comes several times more often per page of
    work than in the model run with the table's costs. The model beside a guest therefore
    runs with the guest's own costs, timed there by the same benchmarks as `reclaimsim
    calibrate` on a host (one boot without reps; the profile is cached per host CPU, host
    kernel, QEMU, guest kernel, accelerator and runner)."""
    import tomli_w

    runner = guest_runner()
    key = calibration_key(kernel, accel, runner)
    cache = cache_dir() / "guest-costs" / f"{key}.toml"
    if cache.exists():
        return cache, f"the guest's costs, timed before ({cache})"
    if progress:
        progress(f"timing the guest's costs with one boot of {kernel.release} (once; the profile is cached)")
    mods = module_paths(kernel, needed_modules(kernel, True, True))
    base = base_initramfs(kernel, mods, runner)
    plan = {
        "calibrate": GUEST_CALIBRATION,
        "modules": [f"/modules/{i:02d}-{m.name}" for i, m in enumerate(mods)],
        "writes": [],
        "swap_bytes": CALIBRATION_SWAP,
        "disk": "/dev/vda",
    }
    norm = {"machine": CALIBRATION_MACHINE}
    with scratch_dir() as rd:
        disk = rd.file("disk.img")
        make_disk(disk, GUEST_CALIBRATION["file_pages"] * 4096 * 2)
        initrd = plan_initramfs(base, plan, rd.file("calibrate.cpio"))
        doc = boot(kernel, initrd, norm, accel, rd.path, disk, timeout, progress)
    figs = {f["name"]: f for f in doc.get("calibration", [])}
    prof = guest_profile(figs, kernel, accel)
    text = "# The costs of a guest, timed by kernel-run --vm (python/reclaimsim/vm.py guest_costs).\n" + tomli_w.dumps(prof)
    cache.parent.mkdir(parents=True, exist_ok=True)
    replace_atomically(cache, lambda f: f.write(text.encode()))
    return cache, f"the guest's costs, timed now ({cache})"


def with_guest_costs(model: dict, profile: Path, notes: list) -> dict:
    """The model's scenario with the guest's cost profile as its costs_profile (the
    scenario's own [costs] entries still win, as everywhere)."""
    d = json.loads(json.dumps(model))
    if d.get("costs_profile"):
        notes.append(f"the scenario's costs_profile {d['costs_profile']} is replaced by the guest's costs")
    d["costs_profile"] = str(profile)
    return d


# ---------------------------------------------------------------------------------------
# kernel-run --vm


def _host_mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def guest_setup_notes(setup: dict) -> list[str]:
    """What the guest kernel runs that the model does not, from the guest's setup report."""
    out = []
    if (setup.get("damon_stat") or "").upper() == "Y":
        out.append(
            "the guest kernel runs DAMON_STAT (its config enables it by default): a kdamond thread samples "
            "pages' accessed bits and preempts the workloads now and then; the model has no DAMON"
        )
    return out


def rep_counters(rep: dict, norm: dict, hists: list[dict] | None = None, notes: list | None = None) -> dict:
    """One guest rep's counters, named as kernel-run names them (sim_counters' names),
    and the rows of its event histograms (`hists`, tracehist.py)."""
    settled, cg_stats = {}, {}
    for cg in norm.get("cgroup", []):
        d = rep["cgroups"].get(cg["path"], {})
        st, ev = d.get("memory.stat", {}), d.get("memory.events", {})
        settled[cg["path"]] = (st.get("file", 0), st.get("anon", 0), st.get("kernel", 0))
        cg_stats[cg["path"]] = (st, ev)
    c = kernel_counters(rep["processes"], rep["vmstat"], settled, cg_stats, workload_names(norm))
    for path in settled:
        c.update(cgroup_time_rows(path, rep["cgroups"].get(path, {})))
    if rep.get("lru_gen") and norm.get("kernel", {}).get("lru") == "mglru":
        c.update(inc_max_seq_rows(parse_lru_gen(rep["lru_gen"]), list(settled)))
    if hists:
        rows, dropped = hist_rows(hists, rep.get("hists") or [])
        c.update(rows)
        if dropped and notes is not None:
            notes.append(f"the kernel dropped {dropped} hits of the event histograms (a table full): their rows count fewer")
    return c


def has_proactive_counters(doc: dict) -> bool:
    return any("pgscan_proactive" in c.get("memory.stat", {}) for r in doc["reps"] for c in r["cgroups"].values())


def fold_proactive(sim: dict) -> dict:
    """The simulator's counters as a kernel without the proactive reclaim counters shows
    them: memory.reclaim's scans and steals under direct."""
    out = dict(sim)
    for name, v in sim.items():
        for what in ("pgscan", "pgsteal"):
            if name.startswith(f"{what}_proactive@"):
                cg = name.split("@", 1)[1]
                out[f"{what}_direct@{cg}"] = out.get(f"{what}_direct@{cg}", 0) + v
                del out[name]
    return out


def prepare(scenario: dict) -> tuple[dict, list[int], list[str]]:
    """Validate the scenario for a VM run before anything is fetched or booted: the
    normalized scenario, the processes per workload, and the notes."""
    from . import _core

    scenario_json = json.dumps(scenario)
    nprocs = _core.host_processes_json(scenario_json)
    norm = json.loads(_core.validate_json(scenario_json))
    notes = check_scenario(norm, _host_mem_available())
    return norm, nprocs, notes


def run_in_vm(
    norm: dict, nprocs: list[int], reps: int, kernel: Kernel, accel: str, timeout: float, progress=None,
    after_accesses: list | None = None, hists: list[dict] | None = None, kprobes: list[str] | None = None,
) -> dict:
    """Boot `kernel`, run the scenario `reps` times in it; return the guest's document
    (with "accel", how it was chosen)."""
    if norm["kernel"].get("lru") == "mglru" and kernel.config and config_value(kernel, "LRU_GEN") != "y":
        raise KernelRunError(
            f'kernel.lru = "mglru": the kernel {kernel.release} was built without CONFIG_LRU_GEN ({kernel.config})'
        )
    swap = bool(norm["machine"].get("swap"))
    disk_bytes = _file_bytes(norm)
    mods = module_paths(kernel, needed_modules(kernel, swap, disk_bytes > 0))
    base = base_initramfs(kernel, mods, guest_runner())
    accel, how = resolve_accel(accel, kernel, base, progress)
    guest_mods = [f"/modules/{i:02d}-{m.name}" for i, m in enumerate(mods)]
    plan = guest_plan(norm, reps, nprocs, guest_mods, disk_bytes > 0, after_accesses, hists, kprobes)
    with scratch_dir() as rd:
        t = rd.path
        disk = None
        if disk_bytes:
            disk = rd.file("disk.img")
            make_disk(disk, disk_bytes)
        initrd = plan_initramfs(base, plan, rd.file("initrd.cpio"))
        if progress:
            progress(f"booting {kernel.release} ({accel}, {norm['machine']['cpus']} CPUs), {reps} rep(s)")
        doc = boot(kernel, initrd, norm, accel, t, disk, timeout, progress)
    doc["accel"] = accel
    doc["accel_how"] = how
    return doc


def sim_scenario(norm: dict, notes: list | None = None) -> dict:
    """The scenario the simulator runs beside a guest: cgroup v2, as the guest mounts it."""
    d = json.loads(json.dumps(norm))
    if d["kernel"].get("cgroup_version") != 2:
        if notes is not None:
            notes.append("the guest mounts cgroup v2: the simulator runs with kernel.cgroup_version = 2 too")
        d["kernel"]["cgroup_version"] = 2
    return d


def reclaim_timing(norm: dict, timing: str, notes: list, progress=None) -> list | None:
    """The access thresholds of the memory.reclaim writes (`timing` = "progress"), from one
    simulator run, or None for wall-clock due times."""
    if not norm.get("reclaim"):
        return None
    if timing == "wall":
        notes.append(
            "memory.reclaim writes are made at their wall-clock due times; under TCG the workloads run slower "
            "than in virtual time, so a write meets them earlier in their run"
        )
        return None
    from . import _core

    if progress:
        progress("simulating once for the memory.reclaim writes' progress points")
    sim = json.loads(_core.run_json(json.dumps(sim_scenario(norm)), None))
    notes.append(
        "memory.reclaim writes are made when the guest's workloads reach the accesses the simulator had done "
        "by each due time (--reclaim-timing progress); writes stop when the workloads end"
    )
    return reclaim_progress(norm, sim)


def model_with_guest_costs(model: dict, kernel: Kernel, accel: str, timeout: float, notes: list, progress=None) -> tuple[dict, str, str]:
    """(the model's scenario with the guest's costs, the accelerator, how it was chosen):
    the accelerator is resolved first, since the costs are those of the guest under it."""
    mods = module_paths(kernel, needed_modules(kernel, True, True))
    accel, how = resolve_accel(accel, kernel, base_initramfs(kernel, mods, guest_runner()), progress)
    profile, had = guest_costs(kernel, accel, timeout, progress)
    notes.append(f"the model runs with {had}")
    return with_guest_costs(model, profile, notes), accel, how


def kernel_run_vm(
    scenario: dict, reps: int, kernel_image: str | None, accel: str, timeout: float, progress=None,
    timing: str = "progress", kernel_version: str | None = None, model_costs: str = "guest",
    trace_hist: tuple = (), kprobes: tuple = (),
) -> dict:
    """kernel-run's report, with the kernel side from a VM and per-cgroup rows; the model
    runs as the booted kernel's version, or as `kernel_version` (model_of_kernel), with the
    guest's own costs (`model_costs` "guest", guest_costs) or the scenario's ("table").
    `trace_hist` and `kprobes`: --trace-hist's and --kprobe's values (tracehist.py)."""
    hists, probes = hist_entries(list(trace_hist)), kprobe_lines(list(kprobes))
    norm, nprocs, notes = prepare(scenario)
    check_kernel_file(kernel_image)
    check_prerequisites()
    notes.extend(remove_stale_scratch())
    kernel = resolve_kernel(kernel_image, progress)
    model = model_of_kernel(scenario, kernel.release, notes, kernel_version)
    how = None
    if model_costs == "guest":
        model, accel, how = model_with_guest_costs(model, kernel, accel, timeout, notes, progress)
    model = json.loads(_core.validate_json(json.dumps(per_access(model, notes))))
    after = reclaim_timing(model, timing, notes, progress)
    doc = run_in_vm(norm, nprocs, reps, kernel, accel, timeout, progress, after, hists, probes)
    notes.append(f"accel: {how or doc['accel_how']}")
    if doc.get("boot_retries"):
        notes.append(f"the guest kernel crashed before its init {doc['boot_retries']} time(s) (emulation faults) and was booted again")
    notes.extend(guest_setup_notes(doc.get("setup") or {}))
    sim_norm = sim_scenario(model, notes)
    reps_out = [{"wall_s": r["wall_s"], "counters": rep_counters(r, norm, hists, notes)} for r in doc["reps"]]
    modeled, kernel_only = split_by_model(hists)
    if modeled:
        sim_norm["tracepoints"] = True
    tables: list = []
    sims = simulate(sim_norm, reps, progress, per_cgroup=True, tracepoints=tables)
    add_model_rows(modeled, tables, sims, [r["counters"] for r in reps_out])
    if norm.get("reclaim") and not has_proactive_counters(doc):
        # The model as the guest's version counts memory.reclaim as direct already (rule
        # pgscan_proactive); a model of a later version (--kernel-version) is folded.
        if any(v for s in sims for k, v in s.items() if "_proactive@" in k):
            notes.append(
                "this kernel's memory.stat has no pgscan_proactive/pgsteal_proactive (v6.15 added them): "
                "it counts memory.reclaim's scans as direct, so the simulator's proactive counts are added to its direct ones"
            )
        sims = [fold_proactive(s) for s in sims]
    writes = [len(r["reclaim_writes"]) for r in doc["reps"]]
    if norm.get("reclaim"):
        notes.append(f"memory.reclaim writes made per rep: {', '.join(map(str, writes))}")
    tcg = None
    if doc["accel"] == "tcg" and model_costs != "guest":
        tcg = "under QEMU's TCG the guest runs several times slower than the hardware the model's costs describe"
    return assemble(
        norm, reps_out, sims, notes, 2, doc["kernel"], time_not_comparable=tcg, kernel_only=kernel_only,
        model_version=model["kernel"]["version"],
        vm={
            "image": str(kernel.image), "accel": doc["accel"], "version": doc.get("version"),
            "setup": doc.get("setup"), "boot_s": doc.get("boot_s"),
            "reclaim_writes": [r["reclaim_writes"] for r in doc["reps"]],
        },
    )
