"""Debian packages from one suite of Debian's archive, fetched with a private apt state.

The host's apt configuration is never touched: every apt-get and apt-cache call here gets
its own sources list (the one suite asked for, bookworm-backports unless said), package
lists and download cache under ``cache_dir()/apt/SUITE``, and runs without the host's
locks. Packages are only downloaded and
unpacked (``dpkg-deb -x``), never installed.

- `cache_dir()`: where reclaimsim keeps downloads and builds.
- `apt_download(package, dest_dir)`: the package's .deb, in dest_dir.
- `resolve(meta_package)`: the concrete package a meta package depends on.
- `extract(deb, dest)`: unpack a .deb's files under dest.

Every failure raises `DebPkgError` with one line naming the package or file.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import time
from pathlib import Path

# The suite a call reads unless it names another.
SUITE = "bookworm-backports"


def _sources(suite: str) -> str:
    """The one source a private apt state reads: the archive's own key, one suite."""
    return (
        "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
        f"http://deb.debian.org/debian {suite} main\n"
    )

# `apt-get update` runs at most this often [s]; the stamp file is cache_dir()/apt/updated
# (shared with every other user of this apt state).
UPDATE_EVERY_S = 24 * 3600


class DebPkgError(Exception):
    """A package that cannot be resolved, downloaded or unpacked (one line)."""


def cache_dir() -> Path:
    """$RECLAIMSIM_CACHE if set, else $XDG_CACHE_HOME/reclaimsim, else ~/.cache/reclaimsim."""
    if os.environ.get("RECLAIMSIM_CACHE"):
        return Path(os.environ["RECLAIMSIM_CACHE"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "reclaimsim"
    return Path.home() / ".cache" / "reclaimsim"


def _apt_dir(suite: str = SUITE) -> Path:
    d = cache_dir() / "apt" / suite
    (d / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (d / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    src = d / "sources.list"
    if not src.exists() or src.read_text() != _sources(suite):
        src.write_text(_sources(suite))
    return d


def _apt_options(d: Path) -> list[str]:
    return [
        "-o", f"Dir::Etc::SourceList={d / 'sources.list'}",
        "-o", "Dir::Etc::SourceParts=/dev/null",
        "-o", f"Dir::State::Lists={d / 'lists'}",
        "-o", f"Dir::Cache={d / 'cache'}",
        "-o", "Debug::NoLocking=1",
        # Downloads go straight into dest_dir, which apt's unprivileged _apt user may not
        # be able to write.
        "-o", f"APT::Sandbox::User={'root' if os.geteuid() == 0 else '_apt'}",
    ]


def _run(cmd: list[str], what: str, cwd: Path | None = None) -> str:
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    except FileNotFoundError:
        raise DebPkgError(f"{what}: {cmd[0]} not found (a Debian system with apt is needed)") from None
    if p.returncode != 0:
        err = [l.strip() for l in (p.stderr or p.stdout).splitlines() if l.strip()]
        # apt's last "E:" line is the reason; otherwise its last line.
        reason = next((l for l in reversed(err) if l.startswith("E:")), err[-1] if err else f"exit code {p.returncode}")
        raise DebPkgError(f"{what}: {reason}")
    return p.stdout


def _update(d: Path, suite: str, force: bool = False) -> None:
    """`apt-get update` of the private state, at most once per UPDATE_EVERY_S."""
    stamp = d / "updated"
    if not force and stamp.exists() and time.time() - stamp.stat().st_mtime < UPDATE_EVERY_S:
        return
    _run(["apt-get", *_apt_options(d), "-q", "update"], f"apt-get update ({suite})")
    stamp.touch()


def _show(package: str, suite: str = SUITE) -> str:
    d = _apt_dir(suite)
    _update(d, suite)
    try:
        return _run(["apt-cache", *_apt_options(d), "show", package], f"package {package}")
    except DebPkgError:
        # The lists may predate the package: refresh once, then ask again.
        _update(d, suite, force=True)
        return _run(["apt-cache", *_apt_options(d), "show", package], f"package {package}")


def _stanzas(text: str) -> list[dict[str, str]]:
    out = []
    for block in text.strip().split("\n\n"):
        fields: dict[str, str] = {}
        key = None
        for line in block.splitlines():
            if line[:1] in (" ", "\t") and key:
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, _, val = line.partition(":")
                fields[key] = val.strip()
        if fields:
            out.append(fields)
    return out


def _compare_versions(a: str, b: str) -> int:
    """dpkg's order of two Debian versions: -1, 0 or 1."""
    if a == b:
        return 0
    r = subprocess.run(["dpkg", "--compare-versions", a, "lt", b])
    return -1 if r.returncode == 0 else 1


_version_key = functools.cmp_to_key(_compare_versions)


def resolve(meta_package: str, suite: str = SUITE) -> str:
    """The concrete package META_PACKAGE depends on: the first Depends entry of its highest
    version (e.g. linux-source -> linux-source-6.12)."""
    stanzas = [s for s in _stanzas(_show(meta_package, suite)) if s.get("Package") == meta_package]
    if not stanzas:
        raise DebPkgError(f"package {meta_package}: not in {suite}")
    best = max(stanzas, key=lambda s: _version_key(s.get("Version", "0")))
    dep = best.get("Depends", "").split(",")[0].split("|")[0].strip()
    name = re.sub(r"\s*\(.*\)$", "", dep).split(":")[0].strip()
    if not name:
        raise DebPkgError(f"package {meta_package}: version {best.get('Version')} has no Depends")
    return name


def version(package: str, suite: str = SUITE) -> str:
    """The highest version of PACKAGE in SUITE."""
    stanzas = [s for s in _stanzas(_show(package, suite)) if s.get("Package") == package]
    if not stanzas:
        raise DebPkgError(f"package {package}: not in {suite}")
    return max((s.get("Version", "0") for s in stanzas), key=_version_key)


def apt_download(package: str, dest_dir: Path | str, suite: str = SUITE) -> Path:
    """Download PACKAGE's .deb (its highest version in SUITE) into DEST_DIR and return its
    path; an already downloaded .deb of that version is reused."""
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    ver = version(package, suite)
    # apt names the file PACKAGE_VERSION_ARCH.deb with ':' in the version as %3a.
    stem = f"{package}_{ver.replace(':', '%3a')}_"
    have = sorted(dest.glob(f"{stem}*.deb"))
    if have:
        return have[0]
    d = _apt_dir(suite)
    _run(["apt-get", *_apt_options(d), "-q", "download", f"{package}={ver}"], f"download of package {package}", cwd=dest)
    have = sorted(dest.glob(f"{stem}*.deb"))
    if not have:
        raise DebPkgError(f"download of package {package}: apt-get reported success but no {stem}*.deb is in {dest}")
    return have[0]


def extract(deb: Path | str, dest: Path | str) -> None:
    """Unpack DEB's files under DEST (dpkg-deb -x; nothing is installed)."""
    deb = Path(deb)
    if not deb.is_file():
        raise DebPkgError(f"{deb}: no such .deb")
    Path(dest).mkdir(parents=True, exist_ok=True)
    _run(["dpkg-deb", "-x", str(deb), str(dest)], f"unpacking {deb.name}")
