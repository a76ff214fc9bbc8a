"""debpkg without the network: the cache directory's precedence, meta-package resolution
from apt-cache's stanzas, and its errors."""

import shutil

import pytest

from reclaimsim import debpkg


def test_cache_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("RECLAIMSIM_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert debpkg.cache_dir() == tmp_path / "home" / ".cache" / "reclaimsim"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert debpkg.cache_dir() == tmp_path / "xdg" / "reclaimsim"
    monkeypatch.setenv("RECLAIMSIM_CACHE", str(tmp_path / "rs"))
    assert debpkg.cache_dir() == tmp_path / "rs"


# Two versions of a meta package, the higher one listed second; 6.12.10 > 6.12.9 only in
# Debian's order, not as strings.
SHOW = """\
Package: linux-source
Version: 6.12.9-1~bpo12+1
Depends: linux-source-6.11 (= 6.12.9-1~bpo12+1)
Description: old

Package: linux-source
Version: 6.12.10-1~bpo12+1
Depends: linux-source-6.12 (= 6.12.10-1~bpo12+1), other | alternative
Description: Linux kernel source (meta-package)
 with a continuation line
"""


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="needs dpkg (Debian's version order)")
def test_resolve_takes_the_first_depends_of_the_highest_version(monkeypatch):
    monkeypatch.setattr(debpkg, "_show", lambda pkg, suite="bookworm-backports": SHOW)
    assert debpkg.resolve("linux-source") == "linux-source-6.12"
    assert debpkg.version("linux-source") == "6.12.10-1~bpo12+1"


def test_resolve_of_an_unknown_package_names_it(monkeypatch):
    monkeypatch.setattr(debpkg, "_show", lambda pkg, suite="bookworm-backports": SHOW)
    with pytest.raises(debpkg.DebPkgError, match="package linux-other: not in bookworm-backports"):
        debpkg.resolve("linux-other")
    with pytest.raises(debpkg.DebPkgError, match="package linux-other: not in trixie-backports"):
        debpkg.version("linux-other", "trixie-backports")


def test_each_suite_has_its_own_apt_state_reading_that_suite_only(monkeypatch, tmp_path):
    monkeypatch.setenv("RECLAIMSIM_CACHE", str(tmp_path))
    a, b = debpkg._apt_dir("bookworm"), debpkg._apt_dir("trixie-backports")
    assert a != b and a.parent == b.parent == tmp_path / "apt"
    assert (a / "sources.list").read_text().split()[-2:] == ["bookworm", "main"]
    assert (b / "sources.list").read_text().split()[-2:] == ["trixie-backports", "main"]


def test_extract_of_a_missing_deb_names_it(tmp_path):
    with pytest.raises(debpkg.DebPkgError, match="nope.deb: no such .deb"):
        debpkg.extract(tmp_path / "nope.deb", tmp_path / "out")


def test_a_failed_apt_command_is_one_line_naming_the_package(monkeypatch, tmp_path):
    monkeypatch.setenv("RECLAIMSIM_CACHE", str(tmp_path))
    with pytest.raises(debpkg.DebPkgError) as e:
        debpkg._run(["sh", "-c", "echo 'W: noise' >&2; echo 'E: Unable to locate package zzz' >&2; exit 100"], "package zzz")
    assert str(e.value) == "package zzz: E: Unable to locate package zzz"
