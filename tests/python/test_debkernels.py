"""Debian's pinned kernels (debkernels.py): the pins, the check of what is fetched, the
unpacked layouts of 6.x and 7.x packages, and the message when the archive has moved on.
No network: the archive is a fake opener serving local files."""

import hashlib
import io
import subprocess
import urllib.error

import pytest

from reclaimsim import _core, debkernels, vm
from reclaimsim.sidebyside import KernelRunError


def _deb(tmp_path, name: str, files: dict[str, bytes]) -> bytes:
    """A .deb with `files` (path -> content), built with dpkg-deb."""
    root = tmp_path / f"build-{name}"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: 1\nArchitecture: amd64\nMaintainer: t <t@t>\nDescription: t\n"
    )
    for path, data in files.items():
        p = root / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    out = tmp_path / f"{name}.deb"
    subprocess.run(["dpkg-deb", "--build", "-Zgzip", str(root), str(out)], check=True, capture_output=True)
    return out.read_bytes()


def _opener(served: dict[str, bytes]):
    def urlopen(url, timeout=None):
        for pool, data in served.items():
            if url.endswith(pool):
                return io.BytesIO(data)
        raise urllib.error.HTTPError(url, 404, "Not Found", {}, None)

    return urlopen


def _pin(monkeypatch, tmp_path, name, debs: dict[str, bytes], sha=None):
    monkeypatch.setenv("RECLAIMSIM_CACHE", str(tmp_path / "cache"))
    pins = tuple(debkernels.Deb(f"pool/main/l/x/{n}_1_amd64.deb", len(d), sha or hashlib.sha256(d).hexdigest())
                 for n, d in debs.items())
    k = debkernels.DebianKernel(name, "1", "trixie-backports", "7.3", pins)
    monkeypatch.setitem(debkernels.KERNELS, name, k)
    return {p.pool: d for p, d in zip(pins, debs.values())}


def test_the_pins_name_one_kernel_of_each_modeled_debian_version():
    # Each pin's release (from its package's file name) runs the model as its own version.
    releases = {"debian-6.1": "6.1.0-50-cloud-amd64", "debian-6.12": "6.12.95+deb12-cloud-amd64",
                "debian-7.3": "7.3.4+deb13-cloud-amd64"}
    assert set(debkernels.KERNELS) == set(releases)
    for name, k in debkernels.KERNELS.items():
        assert any(releases[name] in d.pool for d in k.debs), name
        assert _core.version_of_release(releases[name]) == (k.model_version, True), name
        assert k.version.startswith(k.model_version + "."), name
        assert all(len(d.sha256) == 64 and d.size > 500_000 for d in k.debs), name
    assert debkernels.DEFAULT == "debian-6.12"


def test_a_7x_kernel_in_three_packages_unpacks_with_its_modules_and_config(monkeypatch, tmp_path):
    rel = "7.3.4+deb13-cloud-amd64"
    base = f"usr/lib/modules/{rel}"
    served = _pin(monkeypatch, tmp_path, "debian-test", {
        "linux-binary": _deb(tmp_path, "linux-binary", {f"{base}/vmlinuz": b"kernel"}),
        "linux-modules": _deb(tmp_path, "linux-modules", {f"{base}/kernel/drivers/block/zram/zram.ko.xz": b"x"}),
        "linux-base": _deb(tmp_path, "linux-base", {f"{base}/config": b"CONFIG_ZRAM=m\n"}),
    })
    monkeypatch.setattr(debkernels.urllib.request, "urlopen", _opener(served))
    k = vm.resolve_kernel("debian-test")
    assert k.release == rel and k.image.read_bytes() == b"kernel"
    assert vm.config_value(k, "ZRAM") == "m"
    assert k.modules is not None and (k.modules / "kernel/drivers/block/zram/zram.ko.xz").exists()
    # Unpacked once: a second call fetches nothing.
    monkeypatch.setattr(debkernels.urllib.request, "urlopen", _opener({}))
    assert vm.debian_kernel("debian-test").image == k.image


def test_a_pin_the_archive_no_longer_serves_is_said_so(monkeypatch, tmp_path):
    _pin(monkeypatch, tmp_path, "debian-gone", {"linux-binary": b"x" * 10})
    monkeypatch.setattr(debkernels.urllib.request, "urlopen", _opener({}))
    with pytest.raises(KernelRunError) as e:
        vm.debian_kernel("debian-gone")
    msg = str(e.value)
    assert "debian-gone" in msg and "no longer serves" in msg and "linux-binary_1_amd64.deb" in msg
    assert "--kernel IMAGE" in msg


def test_a_package_that_is_not_the_pinned_one_is_refused(monkeypatch, tmp_path):
    data = b"not the kernel"
    served = _pin(monkeypatch, tmp_path, "debian-bad", {"linux-binary": data}, sha="0" * 64)
    monkeypatch.setattr(debkernels.urllib.request, "urlopen", _opener(served))
    with pytest.raises(KernelRunError) as e:
        vm.debian_kernel("debian-bad")
    assert "is not the pinned package" in str(e.value) and hashlib.sha256(data).hexdigest() in str(e.value)
    assert not (tmp_path / "cache" / "kernels" / "debian-bad_1" / "ok").exists()


def test_kernel_names_other_than_a_file_or_a_pin_are_refused_with_the_list(tmp_path):
    with pytest.raises(KernelRunError) as e:
        vm.resolve_kernel(str(tmp_path / "debian-6.2"))
    assert "debian-6.1, debian-6.12, debian-7.3" in str(e.value)


# ---- pinned sources (kernel-build debian:VERSION) ----------------------------------------


def test_each_pinned_source_is_the_release_of_its_versions_pinned_kernel():
    # kernel-build debian:V must build what kernel-run --kernel debian-V boots.
    assert set(debkernels.SOURCES) == {k.model_version for k in debkernels.KERNELS.values()}
    for v, src in debkernels.SOURCES.items():
        k = debkernels.KERNELS[f"debian-{v}"]
        assert (src.package_version, src.suite) == (k.version, k.suite), v
        assert src.deb.filename == f"linux-source-{v}_{k.version}_all.deb", v
        assert len(src.deb.sha256) == 64 and src.deb.size > 100_000_000, v


def _source_deb(tmp_path, version: str) -> bytes:
    """A linux-source-VERSION .deb as Debian lays it out: a tarball of the tree under usr/src."""
    tree = tmp_path / f"tree-{version}" / f"linux-source-{version}"
    tree.mkdir(parents=True)
    (tree / "Makefile").write_text("VERSION = 0\n")
    tar = tmp_path / f"linux-source-{version}.tar.xz"
    subprocess.run(["tar", "-cJf", str(tar), "-C", str(tree.parent), tree.name], check=True)
    return _deb(tmp_path, f"linux-source-{version}", {f"usr/src/{tar.name}": tar.read_bytes()})


def _pin_source(monkeypatch, tmp_path, version, data: bytes):
    from reclaimsim import kernelbuild

    monkeypatch.setenv("RECLAIMSIM_CACHE", str(tmp_path / "cache"))
    deb = debkernels.Deb(f"pool/main/l/linux/linux-source-{version}_9_all.deb", len(data),
                         hashlib.sha256(data).hexdigest())
    monkeypatch.setitem(debkernels.SOURCES, version, debkernels.DebianSource(version, "9", "trixie-backports", deb))
    monkeypatch.setattr(kernelbuild, "check_tools", lambda *a: None)
    return {deb.pool: data}


def test_a_pinned_source_is_fetched_checked_and_unpacked_once(monkeypatch, tmp_path):
    from reclaimsim import kernelbuild

    served = _pin_source(monkeypatch, tmp_path, "7.3", _source_deb(tmp_path, "7.3"))
    monkeypatch.setattr(debkernels.urllib.request, "urlopen", _opener(served))
    said = []
    src = kernelbuild.source_from_arg("debian:7.3", said.append)
    assert (src / "Makefile").read_text() == "VERSION = 0\n"
    assert (src / kernelbuild.SOURCE_MARKER).read_text() == "linux-source-7.3 9\n"
    assert any("trixie-backports" in m for m in said)
    monkeypatch.setattr(debkernels.urllib.request, "urlopen", _opener({}))
    assert kernelbuild.source_from_arg("debian:7.3") == src


def test_a_source_the_archive_dropped_is_taken_from_its_suite_and_said_so(monkeypatch, tmp_path):
    from reclaimsim import debpkg, kernelbuild

    data = _source_deb(tmp_path, "6.1")
    _pin_source(monkeypatch, tmp_path, "6.1", data)
    monkeypatch.setattr(debkernels.urllib.request, "urlopen", _opener({}))
    asked = []

    def download(package, dest, suite):
        asked.append((package, suite))
        out = dest / f"{package}_10_all.deb"
        out.write_bytes(data)
        return out

    monkeypatch.setattr(debpkg, "version", lambda package, suite: "10")
    monkeypatch.setattr(debpkg, "apt_download", download)
    said = []
    src = kernelbuild.fetch_source("6.1", said.append)
    assert asked == [("linux-source-6.1", "trixie-backports")]
    assert (src / kernelbuild.SOURCE_MARKER).read_text() == "linux-source-6.1 10\n"
    assert any("no longer serves" in m and "linux-source-6.1 10" in m for m in said)


def test_an_unpinned_source_version_is_refused_with_the_list(tmp_path, monkeypatch):
    from reclaimsim import kernelbuild

    monkeypatch.setenv("RECLAIMSIM_CACHE", str(tmp_path))
    with pytest.raises(kernelbuild.KernelBuildError) as e:
        kernelbuild.fetch_source("6.6")
    assert e.value.code == 2 and "debian:6.6" in str(e.value) and "6.1, 6.12, 7.3" in str(e.value)
