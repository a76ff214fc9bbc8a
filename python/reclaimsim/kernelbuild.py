"""`reclaimsim kernel-build`: a small x86-64 kernel (bzImage) from a source tree, optionally
patched, for the VM runner to boot.

The steps, each cached:

1. `fetch_source()`: Debian's ``linux-source-VERSION`` (6.1, 6.12 or 7.3, pinned beside
   the kernels in debkernels.py; the suite's current one through apt once the archive
   drops the pin), unpacked once into ``cache_dir()/src/linux-source-VERSION/`` (the
   Debian version it holds is in its ``.reclaimsim-source`` file).
2. `build()`: a build tree ``cache_dir()/build/tree-TREEKEY/`` per source tree and
   configuration (`tree_key()`: the source, the built-in and the user's fragments) holds
   ``src/`` (a copy of the source tree, hard links where possible, with the build's
   patches applied by ``patch -p1``, which writes each patched file anew, so the source
   tree's files never change) and ``obj/`` (the kernel's out-of-tree build, ``make
   O=obj``). Builds with other patches share it: `reset_tree()` first restores the files
   an earlier build's patches changed (as new copies, so make recompiles what depends on
   them), so a second patch set recompiles only what the patches touch. The result goes
   to ``cache_dir()/build/KEY/`` (``bzImage``, ``config``, ``build.log``), KEY being
   `cache_key()`: the tree's key and every patch's bytes. A build with the same KEY again
   copies the cached image; a build whose make failed resumes incrementally in ``obj/``.
3. Configuration: ``make tinyconfig``, then the built-in fragment `BUILTIN_FRAGMENT` (what
   the VM runner needs, all built in, no modules) and the user's fragments merged in that
   order (``scripts/kconfig/merge_config.sh -m``), then ``make olddefconfig``. Every
   option of the fragments must come out as asked; the ones Kconfig dropped (a missing
   dependency) are listed in the error.
4. ``make bzImage`` (no modules); arch/x86/boot/bzImage is copied to OUT and the
   ``.config`` to OUT.config.

Errors raise `KernelBuildError` with one line; `code` is 2 for bad input (a source tree,
patch or fragment that is not usable, a missing build tool) and 1 for a failed download
or compile.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable

from . import debkernels, debpkg
from .debpkg import cache_dir
from .safefs import replace_atomically

# The marker fetch_source() writes into a tree it unpacked: "PACKAGE VERSION".
SOURCE_MARKER = ".reclaimsim-source"

# Bumped when the way a tree is configured or built changes, so old cached images are not
# reused for new builds.
BUILD_RECIPE = "reclaimsim kernel-build 1: ARCH=x86_64 tinyconfig + fragments, olddefconfig, bzImage"

# What the VM runner needs, built in (=y; there are no modules). Menu options that only
# make others visible (BLK_DEV, VIRTIO_MENU) are here too, since merge_config would
# otherwise see the options under them dropped.
BUILTIN_FRAGMENT = """\
# reclaimsim kernel-build: what the VM runner needs, all built in.
CONFIG_64BIT=y
CONFIG_SMP=y
CONFIG_NR_CPUS=64
CONFIG_HZ_250=y
CONFIG_HZ=250
CONFIG_PREEMPT_VOLUNTARY=y
# tinyconfig's choices for a few-MB machine, undone: -O2 code and the full slab allocator,
# as distribution kernels have (SLUB_TINY is "not recommended for more than 16MB RAM").
CONFIG_CC_OPTIMIZE_FOR_PERFORMANCE=y
# CONFIG_SLUB_TINY is not set
# gzip rather than xz: quicker to compress, and to unpack at boot under emulation.
CONFIG_KERNEL_GZIP=y
# The console: the banner and the runner's output on ttyS0.
CONFIG_PRINTK=y
CONFIG_PRINTK_TIME=y
CONFIG_TTY=y
CONFIG_SERIAL_8250=y
CONFIG_SERIAL_8250_CONSOLE=y
# Userspace: /init (an ELF binary or a script) from an initramfs.
CONFIG_BINFMT_ELF=y
CONFIG_BINFMT_SCRIPT=y
CONFIG_BLK_DEV_INITRD=y
CONFIG_RD_GZIP=y
CONFIG_MULTIUSER=y
CONFIG_FUTEX=y
CONFIG_EPOLL=y
CONFIG_EVENTFD=y
CONFIG_SIGNALFD=y
CONFIG_TIMERFD=y
CONFIG_POSIX_TIMERS=y
CONFIG_ADVISE_SYSCALLS=y
CONFIG_FILE_LOCKING=y
# Filesystems the runner mounts or reads.
CONFIG_DEVTMPFS=y
CONFIG_DEVTMPFS_MOUNT=y
CONFIG_PROC_FS=y
CONFIG_PROC_SYSCTL=y
CONFIG_SYSFS=y
CONFIG_TMPFS=y
CONFIG_SHMEM=y
CONFIG_DEBUG_FS=y
# A virtio disk with ext4, for page cache that is not shmem.
CONFIG_PCI=y
CONFIG_VIRTIO_MENU=y
CONFIG_VIRTIO=y
CONFIG_VIRTIO_PCI=y
CONFIG_BLOCK=y
CONFIG_BLK_DEV=y
CONFIG_VIRTIO_BLK=y
CONFIG_EXT4_FS=y
# Swap on zram, lz4 by default as in Debian's 6.12 (lzo and lzo-rle available).
CONFIG_SWAP=y
CONFIG_ZSMALLOC=y
CONFIG_ZRAM=y
CONFIG_ZRAM_BACKEND_LZO=y
CONFIG_ZRAM_BACKEND_LZ4=y
CONFIG_ZRAM_DEF_COMP_LZ4=y
# Memory cgroups and the reclaim under study. MGLRU is on at boot and THP is madvise, as in
# Debian's 6.12 (lru_gen/enabled and transparent_hugepage= switch them at run time).
CONFIG_CGROUPS=y
CONFIG_MEMCG=y
CONFIG_LRU_GEN=y
CONFIG_LRU_GEN_ENABLED=y
CONFIG_VM_EVENT_COUNTERS=y
CONFIG_TRANSPARENT_HUGEPAGE=y
CONFIG_TRANSPARENT_HUGEPAGE_MADVISE=y
# A clean poweroff.
CONFIG_ACPI=y
"""

# Host tools a tinyconfig x86-64 bzImage needs: (what is looked for, Debian package).
# libelf: objtool, which x86-64 builds with its default ORC unwinder and mitigations.
BUILD_TOOLS = [
    ("make", "make"),
    ("gcc", "gcc"),
    ("ld", "binutils"),
    ("flex", "flex"),
    ("bison", "bison"),
    ("bc", "bc"),
    ("perl", "perl"),
    ("patch", "patch"),
    ("xz", "xz-utils"),
    ("gzip", "gzip"),
    ("/usr/include/gelf.h", "libelf-dev"),
]

# Further tools some configurations need: (CONFIG option, what is looked for, package).
CONFIG_TOOLS = [
    ("CONFIG_MODULE_SIG_FORMAT", "/usr/include/openssl/opensslv.h", "libssl-dev"),
    ("CONFIG_SYSTEM_TRUSTED_KEYRING", "/usr/include/openssl/opensslv.h", "libssl-dev"),
    ("CONFIG_KERNEL_LZ4", "lz4", "lz4"),
    ("CONFIG_KERNEL_ZSTD", "zstd", "zstd"),
    ("CONFIG_KERNEL_LZO", "lzop", "lzop"),
    ("CONFIG_DEBUG_INFO_BTF", "pahole", "dwarves"),
]

Progress = Callable[[str], None]


class KernelBuildError(Exception):
    """A kernel build that cannot be done (one line). `code`: the CLI's exit code, 2 for
    bad input, 1 for a failure of the download or the compile."""

    def __init__(self, msg: str, code: int = 2):
        super().__init__(msg)
        self.code = code


def _say(progress: Progress | None, msg: str) -> None:
    if progress:
        progress(msg)


# ---- the source -------------------------------------------------------------------------


def fetch_source(version: str = "6.12", progress: Progress | None = None) -> Path:
    """The unpacked source tree of Debian's linux-source-VERSION, fetched and unpacked once
    into cache_dir()/src/linux-source-VERSION/. The package is the one pinned for VERSION
    (debkernels.SOURCES: the same Debian release as the pinned kernel, from its suite);
    when the archive no longer serves it, the suite's current package, said so. Delete that
    directory to fetch again."""
    if not re.fullmatch(r"\d+\.\d+", version):
        raise KernelBuildError(f"kernel source version {version!r}: expected MAJOR.MINOR, e.g. 6.12")
    pin = debkernels.SOURCES.get(version)
    if pin is None:
        raise KernelBuildError(
            f"kernel source debian:{version}: not a version whose Debian source is pinned; allowed "
            f"{', '.join(debkernels.SOURCES)} (or a source directory)"
        )
    package = pin.package
    dest = cache_dir() / "src" / package
    if (dest / SOURCE_MARKER).is_file():
        return dest
    try:
        deb, ver = _download_source(pin, cache_dir() / "debs", progress)
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".unpack-") as tmp:
            _say(progress, f"unpacking {deb.name}")
            debpkg.extract(deb, Path(tmp) / "deb")
            tarballs = sorted((Path(tmp) / "deb" / "usr" / "src").glob("linux-source-*.tar.*"))
            if not tarballs:
                raise KernelBuildError(f"{deb.name}: no usr/src/linux-source-*.tar.* in it", 1)
            p = subprocess.run(["tar", "-xf", str(tarballs[0]), "-C", tmp], capture_output=True, text=True)
            if p.returncode != 0:
                raise KernelBuildError(f"unpacking {tarballs[0].name}: {p.stderr.strip() or p.returncode}", 1)
            top = Path(tmp) / tarballs[0].name.split(".tar")[0]
            if not (top / "Makefile").is_file():
                raise KernelBuildError(f"{tarballs[0].name}: no {top.name}/Makefile in it", 1)
            (top / SOURCE_MARKER).write_text(f"{package} {ver}\n")
            if dest.exists():
                shutil.rmtree(dest)  # an unpack that was interrupted before its marker
            top.rename(dest)
        deb.unlink(missing_ok=True)  # the tree is the cache; the .deb is 150 MB
    except (debpkg.DebPkgError, debkernels.DebKernelError) as e:
        raise KernelBuildError(str(e), 1) from None
    return dest


def _download_source(pin: debkernels.DebianSource, debs: Path, progress: Progress | None) -> tuple[Path, str]:
    """The source package's .deb in `debs` and its Debian version: the pinned one, else the
    suite's current one through apt (said so)."""
    mb = pin.deb.size / 1e6
    _say(progress, f"downloading {pin.package} {pin.package_version} ({pin.suite}, {mb:.0f} MB)")
    debs.mkdir(parents=True, exist_ok=True)
    try:
        return debkernels.fetch_deb(f"kernel source debian:{pin.version}", pin.deb, debs), pin.package_version
    except debkernels.NoLongerServed as e:
        ver = debpkg.version(pin.package, pin.suite)
        _say(progress, f"{e}; taking {pin.suite}'s current {pin.package} {ver} instead")
        return debpkg.apt_download(pin.package, debs, pin.suite), ver


def source_from_arg(arg: str, progress: Progress | None = None) -> Path:
    """SOURCE_DIR of the command: ``debian`` or ``debian:VERSION`` (fetch_source), else a
    directory holding a kernel source tree."""
    if arg == "debian" or arg.startswith("debian:"):
        check_tools()  # before a download of 150 MB that could not be built
        return fetch_source(arg.partition(":")[2] or "6.12", progress)
    p = Path(arg)
    if not p.exists():
        raise KernelBuildError(f"source directory {arg}: does not exist (a kernel source tree, or `debian` for Debian's 6.12)")
    if not p.is_dir():
        raise KernelBuildError(f"source directory {arg}: is not a directory")
    if not (p / "Makefile").is_file():
        raise KernelBuildError(f"source directory {arg}: no Makefile, so not a kernel source tree")
    return p.resolve()


def source_identity(source_dir: Path) -> str:
    """What identifies the tree's contents in the cache key: for a tree fetch_source()
    unpacked, its path and Debian version; for any other tree, its path and every file's
    path, size and modification time (a tree edited in place gets a new key; .git is
    left out)."""
    source_dir = Path(source_dir).resolve()
    marker = source_dir / SOURCE_MARKER
    if marker.is_file():
        return f"{source_dir}\n{marker.read_text().strip()}"
    h = hashlib.sha256()
    for rel, st in sorted(_files(source_dir).items()):
        h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return f"{source_dir}\nfiles {h.hexdigest()}"


def _digest(*parts: tuple[str, bytes]) -> str:
    h = hashlib.sha256()
    for tag, data in parts:
        h.update(f"{tag} {len(data)}\n".encode())
        h.update(data)
    return h.hexdigest()


def _kconfig_block(path: Path, symbol: str) -> str | None:
    """The lines of SYMBOL's `config` entry in the Kconfig file PATH (None: no entry)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for i, line in enumerate(lines):
        if line.strip() == f"config {symbol}":
            end = next((j for j in range(i + 1, len(lines)) if re.match(r"(config|menuconfig|choice|endchoice|menu|endmenu|if|endif|source)\b", lines[j])), len(lines))
            return "\n".join(lines[i:end])
    return None


def builtin_fragment(source_dir: Path) -> str:
    """BUILTIN_FRAGMENT in the words of the tree's Kconfig: 7.x names /proc/sys SYSCTL
    (PROC_SYSCTL before), and where x86 has lazy preemption PREEMPT_VOLUNTARY cannot be
    chosen, so the fragment asks for PREEMPT_LAZY (the preemption closest to voluntary
    that the tree offers). Other trees get BUILTIN_FRAGMENT unchanged."""
    src = Path(source_dir)
    frag = BUILTIN_FRAGMENT
    if _kconfig_block(src / "fs" / "proc" / "Kconfig", "PROC_SYSCTL") is None and _kconfig_block(src / "fs" / "proc" / "Kconfig", "SYSCTL") is not None:
        frag = frag.replace("CONFIG_PROC_SYSCTL=y\n", "CONFIG_SYSCTL=y\n")
    voluntary = _kconfig_block(src / "kernel" / "Kconfig.preempt", "PREEMPT_VOLUNTARY") or ""
    try:
        x86 = (src / "arch" / "x86" / "Kconfig").read_text(errors="replace")
    except OSError:
        x86 = ""
    if "depends on !ARCH_HAS_PREEMPT_LAZY" in voluntary and re.search(r"^\s*select ARCH_HAS_PREEMPT_LAZY\b", x86, re.M):
        frag = frag.replace("CONFIG_PREEMPT_VOLUNTARY=y\n", "CONFIG_PREEMPT_LAZY=y\n")
    return frag


def tree_key(source_dir: Path, fragments: Iterable[Path] = ()) -> str:
    """sha256 of what a build tree depends on: the recipe, the source tree
    (`source_identity`), the built-in fragment and every fragment's bytes (in order; not
    their names). Builds with other patches share the tree."""
    return _digest(
        ("recipe", BUILD_RECIPE.encode()),
        ("source", source_identity(source_dir).encode()),
        ("builtin", builtin_fragment(source_dir).encode()),
        *(("fragment", Path(f).read_bytes()) for f in fragments),
    )


def cache_key(source_dir: Path, patches: Iterable[Path] = (), fragments: Iterable[Path] = (), tree: str | None = None) -> str:
    """sha256 of what a build's result depends on: its tree (`tree_key`, or TREE when
    already computed) and every patch's bytes, in order (not their names)."""
    return _digest(
        ("tree", (tree or tree_key(source_dir, fragments)).encode()),
        *(("patch", Path(p).read_bytes()) for p in patches),
    )


# ---- tools ------------------------------------------------------------------------------


def _have(what: str) -> bool:
    return Path(what).exists() if what.startswith("/") else shutil.which(what) is not None


def missing_tools(config: dict[str, str] | None = None) -> list[str]:
    """The Debian packages to install for the build tools that are missing (for CONFIG's
    options too, when given)."""
    need = [pkg for what, pkg in BUILD_TOOLS if not _have(what)]
    if config is not None:
        need += [pkg for opt, what, pkg in CONFIG_TOOLS if config.get(opt) == "y" and not _have(what)]
    return list(dict.fromkeys(need))


def check_tools(config: dict[str, str] | None = None) -> None:
    """Refuse a build this machine lacks the tools for, with the apt-get line that adds them."""
    need = missing_tools(config)
    if need:
        raise KernelBuildError(f"missing build tools: install Debian's {', '.join(need)} (apt-get install {' '.join(need)})")


# ---- patches ----------------------------------------------------------------------------


def _hunk_header(patch_text: str, target: str, n: int) -> str | None:
    """The @@ line of the Nth hunk (1-based) of TARGET's section in a unified diff."""
    in_file = False
    seen = 0
    for line in patch_text.splitlines():
        if line.startswith("+++ "):
            name = line[4:].split("\t")[0].strip()
            in_file = name.split("/", 1)[-1] == target or name == target
            seen = 0
        elif in_file and line.startswith("@@"):
            seen += 1
            if seen == n:
                return line.strip()
    return None


def apply_patch(tree: Path, patch: Path) -> None:
    """Apply PATCH to TREE with ``patch -p1 --forward --batch``; first a dry run, so a
    patch that does not apply leaves the tree as it was. Raises KernelBuildError naming the
    patch, the file and the first rejected hunk."""
    patch = Path(patch)
    args = ["patch", "-p1", "--forward", "--batch", "--no-backup-if-mismatch", "-d", str(tree), "-i", str(patch.resolve())]
    dry = subprocess.run([*args, "--dry-run"], capture_output=True, text=True)
    if dry.returncode != 0:
        raise KernelBuildError(f"patch {patch}: does not apply: {_why_rejected(dry.stdout + dry.stderr, patch)}")
    real = subprocess.run([*args, "--reject-file=-"], capture_output=True, text=True)
    if real.returncode != 0:
        raise KernelBuildError(f"patch {patch}: does not apply: {_why_rejected(real.stdout + real.stderr, patch)}")


def _why_rejected(out: str, patch: Path) -> str:
    current = None
    for line in out.splitlines():
        m = re.match(r"(?:checking|patching) file (.+)$", line.strip())
        if m:
            current = m.group(1).strip().strip("'\"")
            continue
        m = re.match(r"Hunk #(\d+) FAILED at (\d+)", line.strip())
        if m and current:
            try:
                head = _hunk_header(patch.read_text(errors="replace"), current, int(m.group(1)))
            except OSError:
                head = None
            where = f" ({head})" if head else ""
            return f"{current}: hunk #{m.group(1)}{where} rejected at line {m.group(2)}"
        if "Reversed (or previously applied) patch detected" in line:
            return f"{current or 'a file'}: already applied (or reversed)"
        if "can't find file to patch" in line:
            return "a file it patches is not in the tree (wrong -p level or kernel version?)"
        if "Only garbage was found" in line or "malformed patch" in line:
            return line.strip()
    lines = [l.strip() for l in out.splitlines() if l.strip()]
    return lines[-1] if lines else "patch failed"


# ---- configuration ----------------------------------------------------------------------


def parse_config(text: str) -> dict[str, str]:
    """A .config or fragment as {CONFIG_X: value}; "# CONFIG_X is not set" is "n"."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        m = re.fullmatch(r"# (CONFIG_\w+) is not set", line)
        if m:
            out[m.group(1)] = "n"
            continue
        if line.startswith("CONFIG_") and "=" in line:
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


def dropped_options(wanted: dict[str, str], got: dict[str, str]) -> list[str]:
    """The options of WANTED that the final .config (GOT) does not have as asked."""
    bad = []
    for k, v in wanted.items():
        have = got.get(k, "n")
        if v == "n":
            if have not in ("n", ""):
                bad.append(f"{k}=n (got {have})")
        elif have != v:
            bad.append(f"{k}={v} (got {'not set' if have == 'n' else have})")
    return bad


def _make(src: Path, obj: Path, *targets: str, jobs: int = 1) -> list[str]:
    # KBUILD_BUILD_USER/HOST: /proc/version names the build, not the machine it ran on.
    return [
        "make", "-C", str(src), f"O={obj}", "ARCH=x86_64", f"-j{jobs}",
        "KBUILD_BUILD_USER=reclaimsim", "KBUILD_BUILD_HOST=kernel-build", *targets,
    ]


def _run_logged(cmd: list[str], log: Path, what: str, progress: Progress | None = None, every_s: float = 30.0) -> None:
    """Run CMD with its output appended to LOG; a progress line every EVERY_S seconds with
    the latest step. Raises KernelBuildError (code 1) with the first error line."""
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace") as p:
            last_say = time.monotonic()
            steps = 0
            assert p.stdout is not None
            for line in p.stdout:
                f.write(line)
                if line.startswith("  ") and line[2:3].isupper():
                    steps += 1
                if progress and time.monotonic() - last_say >= every_s:
                    last_say = time.monotonic()
                    progress(f"{what}: {steps} steps, now {line.strip()}")
            rc = p.wait()
    if rc != 0:
        raise KernelBuildError(f"{what} failed: {_first_error(log)} (the whole output: {log})", 1)


def _first_error(log: Path) -> str:
    lines = log.read_text(errors="replace").splitlines()
    start = max((i for i, l in enumerate(lines) if l.startswith("$ ")), default=0)
    tail = lines[start:]
    for pat in (r"\berror\b", r"\*\*\*", r"Error \d+"):
        for l in tail:
            if re.search(pat, l, re.I) and not l.startswith("$ "):
                return l.strip()
    return tail[-1].strip() if tail else "no output"


def ident_fragment(key: str) -> str:
    """The release suffix that names a build by its cache key, so `uname -r` and
    /proc/version tell which build a VM booted (e.g. 6.12.95-rs3a009f30973f)."""
    return f'CONFIG_LOCALVERSION="-rs{key[:12]}"\n# CONFIG_LOCALVERSION_AUTO is not set\n'


def configure(
    src: Path, obj: Path, fragments: list[Path], log: Path, progress: Progress | None = None, ident: str = ""
) -> dict[str, str]:
    """tinyconfig, then the built-in fragment, IDENT (Kconfig lines) and FRAGMENTS merged in
    that order, then olddefconfig; the final .config as a dict. Raises KernelBuildError
    listing every option that did not come out as the last fragment setting it asked."""
    _say(progress, "configure: tinyconfig + the built-in fragment" + (f" + {len(fragments)} more" if fragments else ""))
    obj.mkdir(parents=True, exist_ok=True)
    _run_logged(_make(src, obj, "tinyconfig"), log, "make tinyconfig")
    merge = src / "scripts" / "kconfig" / "merge_config.sh"
    if not merge.is_file():
        raise KernelBuildError(f"source directory {src}: no scripts/kconfig/merge_config.sh, so not a kernel source tree")
    (obj / "reclaimsim.config").write_text(builtin_fragment(src))
    (obj / "reclaimsim-ident.config").write_text(ident)
    frags = [(obj / "reclaimsim.config", "the built-in fragment"), (obj / "reclaimsim-ident.config", "the release suffix")]
    frags += [(Path(f).resolve(), f"config fragment {f}") for f in fragments]
    cmd = ["env", "ARCH=x86_64", "sh", str(merge), "-m", "-O", str(obj), str(obj / ".config"), *(str(f) for f, _ in frags)]
    _run_logged(cmd, log, "merge_config.sh")
    _run_logged(_make(src, obj, "olddefconfig"), log, "make olddefconfig")
    config = parse_config((obj / ".config").read_text())
    # What each option should be: the last fragment that sets it wins, as in merge_config.
    wanted: dict[str, tuple[str, str]] = {}
    for f, name in frags:
        for k, v in parse_config(f.read_text()).items():
            wanted[k] = (v, name)
    bad: dict[str, list[str]] = {}
    for k, (v, name) in wanted.items():
        for miss in dropped_options({k: v}, config):
            bad.setdefault(name, []).append(miss)
    if bad:
        parts = [f"{name}: {', '.join(opts)}" for name, opts in bad.items()]
        raise KernelBuildError(f"Kconfig dropped options (a dependency is not met): {'; '.join(parts)}")
    return config


# ---- the build --------------------------------------------------------------------------


def _copy_tree(source_dir: Path, dest: Path) -> str:
    """DEST as a copy of SOURCE_DIR: hard links when on one filesystem, else a real copy
    (modification times kept). Returns how it was copied."""
    p = subprocess.run(["cp", "-al", f"{source_dir}/.", str(dest)], capture_output=True, text=True)
    if p.returncode == 0:
        how = "hard links"
    else:
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        p = subprocess.run(["cp", "-a", "--reflink=auto", f"{source_dir}/.", str(dest)], capture_output=True, text=True)
        if p.returncode != 0:
            raise KernelBuildError(f"copying {source_dir}: {p.stderr.strip()}", 1)
        how = "a copy"
    shutil.rmtree(dest / ".git", ignore_errors=True)
    return how


def _files(root: Path) -> dict[str, os.stat_result]:
    """Every non-directory under ROOT (symbolic links not followed, .git left out), by
    path relative to ROOT."""
    out = {}
    stack = [root]
    while stack:
        d = stack.pop()
        with os.scandir(d) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    if e.name != ".git":
                        stack.append(Path(e.path))
                else:
                    out[os.path.relpath(e.path, root)] = e.stat(follow_symlinks=False)
    return out


def _state(tree_dir: Path) -> dict:
    try:
        return json.loads((tree_dir / "state.json").read_text())
    except (OSError, ValueError):
        return {"copies": {}, "absent": []}


def _save_state(tree_dir: Path, state: dict) -> None:
    replace_atomically(tree_dir / "state.json", lambda f: f.write(json.dumps(state).encode()))


def reset_tree(source_dir: Path, tree_dir: Path) -> int:
    """Make TREE_DIR/src hold SOURCE_DIR's files again, undoing earlier patches; returns
    how many files it restored.

    A file is as in the source when it is the source's file (a hard link: same inode),
    or a copy with the source's size and modification time (cp -a), or a copy this
    function made (recorded in state.json with its size and modification time). Any other
    file is replaced by a new copy, which has a new modification time, so make rebuilds
    what depends on it; files a patch created are removed. The source's inodes are never
    written: a tree file is unlinked before its replacement is written."""
    src = tree_dir / "src"
    state = _state(tree_dir)
    copies: dict[str, list[int]] = state.setdefault("copies", {})
    absent = set(state.get("absent", []))
    want = _files(Path(source_dir))
    have = _files(src)
    restored = 0
    for rel in have.keys() - want.keys():
        (src / rel).unlink()
        copies.pop(rel, None)
        restored += 1
    for rel, s in want.items():
        if rel in absent:
            continue
        t = have.get(rel)
        if t is not None and (
            (t.st_ino, t.st_dev) == (s.st_ino, s.st_dev)
            or (t.st_size, t.st_mtime_ns) == (s.st_size, s.st_mtime_ns)
            or copies.get(rel) == [t.st_size, t.st_mtime_ns]
        ):
            continue
        dest = src / rel
        if t is not None:
            dest.unlink()
        dest.parent.mkdir(parents=True, exist_ok=True)
        orig = Path(source_dir) / rel
        if orig.is_symlink():
            os.symlink(os.readlink(orig), dest)
        else:
            shutil.copy(orig, dest)  # contents and mode; the modification time is now
        st = dest.lstat()
        copies[rel] = [st.st_size, st.st_mtime_ns]
        restored += 1
    _save_state(tree_dir, state)
    return restored


def prepare_tree(source_dir: Path, patches: list[Path], tree_dir: Path, progress: Progress | None = None) -> Path:
    """TREE_DIR/src: a copy of SOURCE_DIR (made once, hard links where possible) with
    PATCHES applied in order, after the files earlier builds' patches changed are
    restored (`reset_tree`). A patch that does not apply leaves the tree as the source.
    SOURCE_DIR's files are never written."""
    src = tree_dir / "src"
    source_dir = Path(source_dir)
    if not (tree_dir / "src.done").exists():
        tmp = tree_dir / "src.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(src, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            how = _copy_tree(source_dir, tmp)
            _say(progress, f"source tree: {how} of {source_dir}")
            state = {"copies": {}, "absent": []}
            if (tmp / ".config").exists() or (tmp / "include" / "config").exists():
                # An in-tree build's leftovers: make O= refuses such a tree. Cleaning only
                # unlinks files of the copy; what it removed stays absent.
                subprocess.run(["make", "-C", str(tmp), "mrproper"], capture_output=True)
                state["absent"] = sorted(_files(source_dir).keys() - _files(tmp).keys())
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        tmp.rename(src)
        _save_state(tree_dir, state)
        (tree_dir / "src.done").touch()
    restored = reset_tree(source_dir, tree_dir)
    if restored:
        _say(progress, f"source tree: {restored} file(s) restored from the source (an earlier build's patches)")
    try:
        for p in patches:
            apply_patch(src, Path(p))
    except BaseException:
        reset_tree(source_dir, tree_dir)
        raise
    if patches:
        _say(progress, f"source tree: {len(patches)} patch(es) applied")
    return src


def check_inputs(patches: Iterable[Path], fragments: Iterable[Path]) -> None:
    """Refuse a patch or fragment file that is missing, unreadable, or a fragment without
    CONFIG_ lines."""
    for kind, files in (("patch", patches), ("config fragment", fragments)):
        for f in map(Path, files):
            if not f.exists():
                raise KernelBuildError(f"{kind} {f}: no such file")
            if not f.is_file():
                # A pipe (<(...)) could be read only once; the build reads it more often.
                raise KernelBuildError(f"{kind} {f}: not a regular file (write it to a file first)")
            try:
                text = f.read_text(errors="replace")
            except OSError as e:
                raise KernelBuildError(f"{kind} {f}: cannot read: {e.strerror or e}") from None
            if kind == "patch" and not re.search(r"(?m)^(\+\+\+ |--- )", text):
                raise KernelBuildError(
                    f"patch {f}: {'empty' if not text.strip() else 'no diff in it'} (expected a unified diff, e.g. from git diff)"
                )
            if kind == "config fragment" and not parse_config(text):
                raise KernelBuildError(f"config fragment {f}: no CONFIG_ lines (expected lines like CONFIG_FOO=y)")


def build(
    source_dir: Path,
    patches: Iterable[Path] = (),
    fragments: Iterable[Path] = (),
    out: Path | str = "bzImage",
    jobs: int | None = None,
    progress: Progress | None = None,
) -> Path:
    """Build a bzImage of SOURCE_DIR with PATCHES and config FRAGMENTS; copy it to OUT and
    its .config to OUT.config. Returns OUT. A build with the same cache key as an earlier
    one copies that build's image."""
    source_dir = Path(source_dir)
    if not (source_dir / "Makefile").is_file():
        raise KernelBuildError(f"source directory {source_dir}: no Makefile, so not a kernel source tree")
    patches = [Path(p) for p in patches]
    fragments = [Path(f) for f in fragments]
    check_inputs(patches, fragments)
    out = Path(out)
    jobs = jobs or os.cpu_count() or 1

    tkey = tree_key(source_dir, fragments)
    key = cache_key(source_dir, patches, fragments, tree=tkey)
    builds = cache_dir() / "build"
    result = builds / key[:16]
    if _cached(result, progress):
        return _deliver(result, out)
    # One tree per source and configuration, shared by the builds with other patches (so
    # a build after another one recompiles only what the patches change): one build at a
    # time in it.
    tree_dir = builds / f"tree-{tkey[:16]}"
    tree_dir.mkdir(parents=True, exist_ok=True)
    with open(builds / f"tree-{tkey[:16]}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _cached(result, progress):  # built by another process meanwhile
            return _deliver(result, out)
        check_tools()
        t0 = time.monotonic()
        src = prepare_tree(source_dir, patches, tree_dir, progress)
        obj = tree_dir / "obj"
        log = tree_dir / "build.log"
        log.write_text("")
        config = configure(src, obj, fragments, log, progress, ident_fragment(key))
        check_tools(config)
        _say(progress, f"build started: make -j{jobs} bzImage (log: {log})")
        _run_logged(_make(src, obj, "bzImage", jobs=jobs), log, "make bzImage", progress)
        built = obj / "arch" / "x86" / "boot" / "bzImage"
        if not built.is_file():
            raise KernelBuildError(f"make bzImage made no {built} (see {log})", 1)
        result.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, result / "build.log")
        shutil.copyfile(obj / ".config", result / "config.tmp")
        shutil.copyfile(built, result / "bzImage.tmp")
        (result / "config.tmp").rename(result / "config")
        (result / "bzImage.tmp").rename(result / "bzImage")
        _say(progress, f"done in {time.monotonic() - t0:.0f} s: {result / 'bzImage'}")
    return _deliver(result, out)


def _cached(result: Path, progress: Progress | None) -> bool:
    if (result / "bzImage").is_file() and (result / "config").is_file():
        _say(progress, f"cached: {result / 'bzImage'} (same source, patches and fragments as before)")
        return True
    return False


def _deliver(result: Path, out: Path) -> Path:
    _install(result / "bzImage", out)
    _install(result / "config", Path(f"{out}.config"))
    return out


def _install(src: Path, dest: Path) -> None:
    """Copy SRC to DEST so that a reader (a VM starting meanwhile) sees the old file or the
    new one, never half of it: a temporary file beside DEST, renamed over it. A DEST that
    exists and is not a regular file (/dev/null) is written as it is."""
    if dest.exists() and not dest.is_file():
        shutil.copyfile(src, dest)
        return
    dest.parent.mkdir(parents=True, exist_ok=True)

    def copy(f) -> None:
        with open(src, "rb") as s:
            shutil.copyfileobj(s, f, 1 << 20)

    replace_atomically(dest, copy)
