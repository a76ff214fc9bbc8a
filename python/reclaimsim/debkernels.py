"""Debian's kernels pinned by package version and checksum, for `kernel-run --vm --kernel
debian-6.1|debian-6.12|debian-7.3` and `kernel-compare`, and their sources for
`kernel-build debian:6.1|6.12|7.3` (`SOURCES`): one kernel per modeled version
that Debian ships (docs/versions.md), so a run on the VM and the model set to the same
version compare like with like.

Each is the cloud flavour (virtio and ext4 built in, a small module tree, MGLRU and memcg
configured) as Debian's archive served it when the versions were added. Debian's suites
drop a superseded kernel (unstable and the backports suites within weeks), so each package
is named by its pool path with its size and SHA-256, fetched from deb.debian.org over
plain HTTP as apt fetches (the pinned checksum is what is trusted), checked, and unpacked
into the cache with `dpkg-deb -x` (nothing is installed). A pin the archive no longer
serves is said so, with what to do.

From 7.x Debian splits a kernel into packages: the image (linux-binary-*, the vmlinuz
under usr/lib/modules/RELEASE/), its modules (linux-modules-*, compressed .ko.xz) and the
configuration (linux-base-*); 6.x has one linux-image-*-unsigned package with /boot and
/lib/modules.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from . import debpkg
from .debpkg import cache_dir

# Plain HTTP, as apt uses it: the pinned SHA-256 is what makes a download trustworthy,
# and a machine without CA certificates still fetches.
MIRROR = "http://deb.debian.org/debian/"


@dataclass(frozen=True)
class Deb:
    """One package file: its path in the archive's pool, size and SHA-256."""

    pool: str
    size: int
    sha256: str

    @property
    def filename(self) -> str:
        return self.pool.rsplit("/", 1)[1]


@dataclass(frozen=True)
class DebianKernel:
    name: str
    version: str  # the Debian package version
    suite: str
    model_version: str  # the modeled kernel version it is (kernel.version)
    debs: tuple[Deb, ...]


KERNELS: dict[str, DebianKernel] = {
    k.name: k
    for k in (
        DebianKernel(
            "debian-6.1", "6.1.176-1", "bookworm", "6.1",
            (Deb("pool/main/l/linux/linux-image-6.1.0-50-cloud-amd64-unsigned_6.1.176-1_amd64.deb", 26489272,
                 "4f217f710203cdfedde21f836bc66a0a4d773752d7fe8e5e13f701f891788945"),),
        ),
        DebianKernel(
            "debian-6.12", "6.12.95-1~bpo12+1", "bookworm-backports", "6.12",
            (Deb("pool/main/l/linux/linux-image-6.12.95+deb12-cloud-amd64-unsigned_6.12.95-1~bpo12+1_amd64.deb", 33923316,
                 "6ed2b95055a96af9f543a427cc1bc56f67e5e72ec16b227ec965a9325aeb3480"),),
        ),
        DebianKernel(
            "debian-7.3", "7.3.4-1~bpo13+1", "trixie-backports", "7.3",
            (
                Deb("pool/main/l/linux-signed-amd64/linux-binary-7.3.4+deb13-cloud-amd64_7.3.4-1~bpo13+1_amd64.deb", 13604064,
                    "c4fbc8e404958693b28825474c20742d70594d65ca58aea7be6a279c81eb6fa0"),
                Deb("pool/main/l/linux/linux-modules-7.3.4+deb13-cloud-amd64_7.3.4-1~bpo13+1_amd64.deb", 22918420,
                    "359f04c363b7d3c5f9ce999ccb7351e00cc8eec0a30d6bc1cda37734987fc43d"),
                Deb("pool/main/l/linux/linux-base-7.3.4+deb13-cloud-amd64_7.3.4-1~bpo13+1_amd64.deb", 1025208,
                    "e08baa43706ba6e8daff58029b039f46beecfb3b3750c6fa0d6d5ca508a46a43"),
            ),
        ),
    )
}
# What `kernel-run --vm` boots without --kernel.
DEFAULT = "debian-6.12"


@dataclass(frozen=True)
class DebianSource:
    """Debian's linux-source-VERSION package of one modeled version, pinned as the kernels
    are (`kernel-build debian:VERSION`): the same Debian release as the kernel pin."""

    version: str  # the kernel's MAJOR.MINOR
    package_version: str
    suite: str
    deb: Deb

    @property
    def package(self) -> str:
        return f"linux-source-{self.version}"


SOURCES: dict[str, DebianSource] = {
    s.version: s
    for s in (
        DebianSource("6.1", "6.1.176-1", "bookworm",
                     Deb("pool/main/l/linux/linux-source-6.1_6.1.176-1_all.deb", 139131140,
                         "9305d1a151b8e83dcb88aa11361e7b9513f0c252bdf7f5647e4542762d99c094")),
        DebianSource("6.12", "6.12.95-1~bpo12+1", "bookworm-backports",
                     Deb("pool/main/l/linux/linux-source-6.12_6.12.95-1~bpo12+1_all.deb", 152599636,
                         "a7fe4673af74236c99dad9766eca714a198e50a07e5d659e63ec312ae6afccfe")),
        DebianSource("7.3", "7.3.4-1~bpo13+1", "trixie-backports",
                     Deb("pool/main/l/linux/linux-source-7.3_7.3.4-1~bpo13+1_all.deb", 166780612,
                         "703e369ddd4cce971452f5a593ee55df3a5c10c83caf0fa0df039633ed181ee3")),
    )
}


class DebKernelError(Exception):
    pass


class NoLongerServed(DebKernelError):
    """The archive answers 404 for a pinned package: its suite has moved on."""


def fetch_deb(who: str, deb: Deb, dest: Path) -> Path:
    """Download one pinned package into `dest` and check its size and SHA-256; `who` names
    it in errors. NoLongerServed when the archive no longer has it."""
    url = MIRROR + deb.pool
    out = dest / deb.filename
    h = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=60) as r, open(out, "wb") as f:
            while chunk := r.read(1 << 20):
                h.update(chunk)
                f.write(chunk)
    except urllib.error.HTTPError as e:
        if e.code == 404:
            raise NoLongerServed(f"{who}: Debian's archive no longer serves the pinned {deb.filename}") from None
        raise DebKernelError(f"{who}: fetching {url}: HTTP {e.code}") from None
    except (urllib.error.URLError, OSError) as e:
        raise DebKernelError(f"{who}: fetching {url}: {getattr(e, 'reason', e)}") from None
    size = out.stat().st_size
    if size != deb.size or h.hexdigest() != deb.sha256:
        raise DebKernelError(
            f"{who}: {deb.filename} is not the pinned package ({size} bytes, sha256 {h.hexdigest()}; "
            f"pinned {deb.size} bytes, sha256 {deb.sha256})"
        )
    return out


def _fetch(k: DebianKernel, deb: Deb, dest: Path) -> Path:
    try:
        return fetch_deb(k.name, deb, dest)
    except NoLongerServed as e:
        raise DebKernelError(
            f"{e} ({k.suite} has moved on from {k.version}); boot another kernel with --kernel IMAGE (kernel-build "
            "builds one), or pin the suite's current package in python/reclaimsim/debkernels.py"
        ) from None


def unpacked(name: str, progress=None) -> Path:
    """The directory the pinned kernel `name` is unpacked in (fetched the first time)."""
    k = KERNELS[name]
    dest = cache_dir() / "kernels" / f"{k.name}_{k.version}"
    if (dest / "ok").exists():
        return dest
    if progress:
        mb = sum(d.size for d in k.debs) / 1e6
        progress(f"fetching Debian's {k.version} cloud kernel ({k.suite}, {mb:.0f} MB)")
    cache_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        debs = [_fetch(k, d, Path(tmp)) for d in k.debs]
        if dest.exists():
            shutil.rmtree(dest)
        try:
            for d in debs:
                debpkg.extract(d, dest)
        except debpkg.DebPkgError as e:
            raise DebKernelError(str(e)) from None
    (dest / "ok").touch()
    return dest
