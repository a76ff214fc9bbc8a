"""`reclaimsim kernel-build` and scripts/rotation-cost-patch without building a kernel:
the built-in config fragment, refusals (a patch that does not apply, a missing source or
tool), the cache key, a cached image, and the generated patch on small fake trees.

Real builds (download of Debian's 6.12 source, ~15 minutes on 2 cores) run only with
RECLAIMSIM_KERNEL_BUILD_TESTS=1."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from reclaimsim import cli as cli_mod
from reclaimsim import kernelbuild

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "rotation-cost-patch"

real_build = pytest.mark.skipif(
    not os.environ.get("RECLAIMSIM_KERNEL_BUILD_TESTS"),
    reason="needs the network and a kernel build (set RECLAIMSIM_KERNEL_BUILD_TESTS=1)",
)


# The user's cache setting, for the real builds (which reuse the user's source and images).
USER_CACHE = os.environ.get("RECLAIMSIM_CACHE")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Every test gets its own cache directory (never the user's)."""
    monkeypatch.setenv("RECLAIMSIM_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def user_cache(monkeypatch):
    if USER_CACHE is None:
        monkeypatch.delenv("RECLAIMSIM_CACHE")
    else:
        monkeypatch.setenv("RECLAIMSIM_CACHE", USER_CACHE)


def one_error_line(r):
    """The one `error: ` line of a CliRunner result (asserting there is only that)."""
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    lines = [l for l in r.output.splitlines() if l.strip() and not l.startswith("kernel-build: ")]
    assert len(lines) == 1, r.output
    assert lines[0].startswith("error: "), r.output
    return lines[0]


# ---- the built-in fragment --------------------------------------------------------------

# What the VM runner needs built in, as its author listed it (not read from the module).
REQUIRED_Y = """
64BIT SMP PRINTK TTY SERIAL_8250 SERIAL_8250_CONSOLE BINFMT_ELF BINFMT_SCRIPT
BLK_DEV_INITRD RD_GZIP DEVTMPFS DEVTMPFS_MOUNT PROC_FS SYSFS TMPFS SHMEM DEBUG_FS PCI
VIRTIO VIRTIO_PCI VIRTIO_BLK BLOCK EXT4_FS SWAP ZSMALLOC ZRAM CGROUPS MEMCG LRU_GEN
VM_EVENT_COUNTERS MULTIUSER FUTEX EPOLL POSIX_TIMERS ACPI TRANSPARENT_HUGEPAGE HZ_250
PREEMPT_VOLUNTARY PROC_SYSCTL
""".split()


def test_builtin_fragment_sets_every_required_option_built_in():
    frag = kernelbuild.parse_config(kernelbuild.BUILTIN_FRAGMENT)
    missing = [o for o in REQUIRED_Y if frag.get(f"CONFIG_{o}") != "y"]
    assert missing == []
    assert int(frag["CONFIG_NR_CPUS"]) >= 8
    assert frag["CONFIG_HZ"] == "250"
    # zram needs a compressor built in: LZ4 or LZO.
    assert "y" in (frag.get("CONFIG_ZRAM_BACKEND_LZ4"), frag.get("CONFIG_ZRAM_BACKEND_LZO"))


def kconfig_words_tree(root: Path, sysctl: str, lazy: bool) -> Path:
    """A tree with just the three Kconfig entries builtin_fragment reads: /proc/sys named
    SYSCTL, and PREEMPT_VOLUNTARY closed to an x86 with lazy preemption, as in 7.x (or
    PROC_SYSCTL and an open PREEMPT_VOLUNTARY, as before)."""
    src = root / "linux"
    for d in ("fs/proc", "kernel", "arch/x86"):
        (src / d).mkdir(parents=True)
    (src / "fs" / "proc" / "Kconfig").write_text(f'config {sysctl}\n\tbool "Sysctl support (/proc/sys)" if EXPERT\n\tdepends on PROC_FS\n\nconfig PROC_PAGE_MONITOR\n\tdefault y\n')
    dep = "\tdepends on !ARCH_HAS_PREEMPT_LAZY\n" if lazy else ""
    (src / "kernel" / "Kconfig.preempt").write_text(f'config PREEMPT_VOLUNTARY\n\tbool "Voluntary Kernel Preemption (Desktop)"\n{dep}\tdepends on !ARCH_NO_PREEMPT\n\nconfig PREEMPT\n\tbool "Preemptible Kernel"\n\tdepends on !ARCH_HAS_PREEMPT_LAZY\n')
    (src / "arch" / "x86" / "Kconfig").write_text("config X86\n\tdef_bool y\n\tselect ARCH_HAS_PREEMPT_LAZY\n")
    return src


def test_builtin_fragment_takes_the_trees_kconfig_words(tmp_path):
    # 7.x: SYSCTL and lazy preemption; the rest of the fragment as it was.
    new = kernelbuild.builtin_fragment(kconfig_words_tree(tmp_path / "new", "SYSCTL", True))
    frag = kernelbuild.parse_config(new)
    assert frag["CONFIG_SYSCTL"] == "y" and frag["CONFIG_PREEMPT_LAZY"] == "y"
    assert "CONFIG_PROC_SYSCTL" not in frag and "CONFIG_PREEMPT_VOLUNTARY" not in frag
    assert new.replace("CONFIG_SYSCTL=y", "CONFIG_PROC_SYSCTL=y").replace("CONFIG_PREEMPT_LAZY=y", "CONFIG_PREEMPT_VOLUNTARY=y") == kernelbuild.BUILTIN_FRAGMENT
    # Before: unchanged, so the cache keys of earlier builds stay.
    assert kernelbuild.builtin_fragment(kconfig_words_tree(tmp_path / "old", "PROC_SYSCTL", False)) == kernelbuild.BUILTIN_FRAGMENT
    # Each word alone: the lazy-preemption check reads PREEMPT_VOLUNTARY's own entry (the
    # same line under PREEMPT does not count).
    only_lazy = kernelbuild.parse_config(kernelbuild.builtin_fragment(kconfig_words_tree(tmp_path / "a", "PROC_SYSCTL", True)))
    assert only_lazy["CONFIG_PROC_SYSCTL"] == "y" and only_lazy["CONFIG_PREEMPT_LAZY"] == "y"
    only_sysctl = kernelbuild.parse_config(kernelbuild.builtin_fragment(kconfig_words_tree(tmp_path / "b", "SYSCTL", False)))
    assert only_sysctl["CONFIG_SYSCTL"] == "y" and only_sysctl["CONFIG_PREEMPT_VOLUNTARY"] == "y"


def test_builtin_fragment_has_no_modules():
    assert not [k for k, v in kernelbuild.parse_config(kernelbuild.BUILTIN_FRAGMENT).items() if v == "m"]
    assert "=m" not in kernelbuild.BUILTIN_FRAGMENT


def test_options_kconfig_dropped_are_listed():
    wanted = {"CONFIG_A": "y", "CONFIG_B": "64", "CONFIG_C": "n", "CONFIG_D": "y", "CONFIG_E": "n"}
    got = kernelbuild.parse_config("CONFIG_A=y\nCONFIG_B=32\nCONFIG_C=y\n# CONFIG_D is not set\n")
    bad = kernelbuild.dropped_options(wanted, got)
    assert bad == ["CONFIG_B=64 (got 32)", "CONFIG_C=n (got y)", "CONFIG_D=y (got not set)"]


# A stand-in for the kernel's Kconfig: tinyconfig writes one line, merge_config appends the
# fragments, olddefconfig drops CONFIG_ZRAM and CONFIG_FOO (as a missing dependency would).
FAKE_KCONFIG_MAKEFILE = """\
tinyconfig:
\t@echo CONFIG_EXPERT=y > $(O)/.config
olddefconfig:
\t@grep -v -e '^CONFIG_ZRAM=' -e '^CONFIG_FOO=' $(O)/.config > $(O)/.config.new; mv $(O)/.config.new $(O)/.config
"""
FAKE_MERGE_CONFIG = """\
#!/bin/sh
# -m -O DIR BASE FRAGMENTS...
out=$3; base=$4; shift 4
cat "$@" >> "$base"
"""


def fake_kconfig_tree(root: Path) -> Path:
    src = root / "kconfig-src"
    (src / "scripts" / "kconfig").mkdir(parents=True)
    (src / "Makefile").write_text(FAKE_KCONFIG_MAKEFILE)
    (src / "scripts" / "kconfig" / "merge_config.sh").write_text(FAKE_MERGE_CONFIG)
    return src


def test_configure_lists_the_options_kconfig_dropped_by_fragment(tmp_path):
    src = fake_kconfig_tree(tmp_path)
    frag = tmp_path / "mine.config"
    frag.write_text("CONFIG_FOO=y\nCONFIG_BAR=y\n")
    with pytest.raises(kernelbuild.KernelBuildError) as e:
        kernelbuild.configure(src, tmp_path / "obj", [frag], tmp_path / "log")
    msg = str(e.value)
    assert "\n" not in msg
    assert "the built-in fragment: CONFIG_ZRAM=y (got not set)" in msg, msg
    assert f"config fragment {frag}: CONFIG_FOO=y (got not set)" in msg, msg
    assert "CONFIG_BAR" not in msg and "CONFIG_SWAP" not in msg, msg


def test_configure_lets_a_later_fragment_override_the_builtin_one(tmp_path):
    src = fake_kconfig_tree(tmp_path)
    frag = tmp_path / "mine.config"
    frag.write_text("# CONFIG_ZRAM is not set\n")  # dropped by olddefconfig anyway: as asked
    config = kernelbuild.configure(src, tmp_path / "obj", [frag], tmp_path / "log", ident=kernelbuild.ident_fragment("ab" * 32))
    assert config["CONFIG_SWAP"] == "y" and config.get("CONFIG_ZRAM", "n") == "n"
    assert config["CONFIG_LOCALVERSION"] == '"-rsabababababab"'


# ---- refusals ---------------------------------------------------------------------------

FOO_C = "int a;\nint b;\nint c;\nint d;\n"


def fake_tree(root: Path) -> Path:
    src = root / "linux"
    (src / "mm").mkdir(parents=True)
    (src / "Makefile").write_text("all:\n\t@echo fake\n")
    (src / "mm" / "foo.c").write_text(FOO_C)
    return src


GOOD_PATCH = """\
--- a/mm/foo.c
+++ b/mm/foo.c
@@ -1,4 +1,4 @@
 int a;
-int b;
+long b;
 int c;
 int d;
"""

# Its context (int x;) is not in foo.c.
BAD_PATCH = """\
--- a/mm/foo.c
+++ b/mm/foo.c
@@ -1,4 +1,4 @@
 int x;
-int y;
+long y;
 int z;
 int w;
"""


@pytest.fixture
def tools_present(monkeypatch):
    """The build tools are not what these tests are about."""
    monkeypatch.setattr(kernelbuild, "missing_tools", lambda config=None: [])


def test_patch_that_does_not_apply_exits_2_naming_it(tmp_path, tools_present, private_cache):
    src = fake_tree(tmp_path)
    (tmp_path / "good.patch").write_text(GOOD_PATCH)
    (tmp_path / "bad.patch").write_text(BAD_PATCH)
    r = CliRunner().invoke(
        cli_mod.main,
        ["kernel-build", str(src), "--patch", str(tmp_path / "good.patch"), "--patch", str(tmp_path / "bad.patch"), "-o", str(tmp_path / "img")],
    )
    assert r.exit_code == 2, r.output
    line = one_error_line(r)
    assert "bad.patch" in line and "good.patch" not in line, line
    assert "mm/foo.c" in line and "@@ -1,4 +1,4 @@" in line, line
    # Nothing changed in the source, the build tree is the source again (good.patch
    # undone), no image written.
    assert (src / "mm" / "foo.c").read_text() == FOO_C
    trees = list((private_cache / "build").glob("tree-*/src"))
    assert len(trees) == 1
    assert (trees[0] / "mm" / "foo.c").read_text() == FOO_C, "a half-patched tree was kept"
    assert not (tmp_path / "img").exists()


def test_patch_of_a_file_not_in_the_tree_is_refused(tmp_path, tools_present):
    src = fake_tree(tmp_path)
    (tmp_path / "other.patch").write_text(GOOD_PATCH.replace("mm/foo.c", "mm/bar.c"))
    r = CliRunner().invoke(cli_mod.main, ["kernel-build", str(src), "--patch", str(tmp_path / "other.patch"), "-o", str(tmp_path / "img")])
    assert r.exit_code == 2, r.output
    line = one_error_line(r)
    assert "other.patch" in line and "not in the tree" in line, line


def test_patched_copy_leaves_the_source_files_alone(tmp_path):
    src = fake_tree(tmp_path)
    (src / "README").write_text("unpatched file\n")
    (tmp_path / "good.patch").write_text(GOOD_PATCH)
    tree = kernelbuild.prepare_tree(src, [tmp_path / "good.patch"], tmp_path / "b")
    assert (tree / "mm" / "foo.c").read_text() == FOO_C.replace("int b;", "long b;")
    assert (src / "mm" / "foo.c").read_text() == FOO_C
    # The copy is hard links (same filesystem), except for the patched file.
    assert (tree / "README").stat().st_ino == (src / "README").stat().st_ino
    assert (tree / "mm" / "foo.c").stat().st_ino != (src / "mm" / "foo.c").stat().st_ino


BAR_PATCH = """\
--- a/mm/bar.c
+++ b/mm/bar.c
@@ -1,2 +1,2 @@
-int bar;
+long bar;
 int baz;
--- /dev/null
+++ b/mm/new.c
@@ -0,0 +1 @@
+int new;
"""


def test_another_patch_set_restores_what_the_earlier_one_changed(tmp_path):
    src = fake_tree(tmp_path)
    (src / "mm" / "bar.c").write_text("int bar;\nint baz;\n")
    (src / "README").write_text("never patched\n")
    old = os.stat(src / "mm" / "foo.c")
    os.utime(src / "mm" / "foo.c", ns=(old.st_atime_ns, old.st_mtime_ns - 10**9))  # an old source file
    source_inode = os.stat(src / "mm" / "foo.c").st_ino
    (tmp_path / "foo.patch").write_text(GOOD_PATCH)
    (tmp_path / "bar.patch").write_text(BAR_PATCH)
    tdir = tmp_path / "t"

    tree = kernelbuild.prepare_tree(src, [tmp_path / "foo.patch"], tdir)
    assert (tree / "mm" / "foo.c").read_text() == FOO_C.replace("int b;", "long b;")

    tree = kernelbuild.prepare_tree(src, [tmp_path / "bar.patch"], tdir)
    assert (tree / "mm" / "foo.c").read_text() == FOO_C
    assert (tree / "mm" / "bar.c").read_text() == "long bar;\nint baz;\n"
    assert (tree / "mm" / "new.c").read_text() == "int new;\n"
    # The restored file is newer than the source's, so make rebuilds its object.
    assert os.stat(tree / "mm" / "foo.c").st_mtime_ns > os.stat(src / "mm" / "foo.c").st_mtime_ns

    tree = kernelbuild.prepare_tree(src, [], tdir)
    assert (tree / "mm" / "bar.c").read_text() == "int bar;\nint baz;\n"
    assert not (tree / "mm" / "new.c").exists()
    # Nothing more to restore the next time; the source never changed; an unpatched file
    # is still the source's own (a hard link).
    assert kernelbuild.reset_tree(src, tdir) == 0
    assert (src / "mm" / "foo.c").read_text() == FOO_C and os.stat(src / "mm" / "foo.c").st_ino == source_inode
    assert (src / "mm" / "bar.c").read_text() == "int bar;\nint baz;\n" and not (src / "mm" / "new.c").exists()
    assert (tree / "README").stat().st_ino == (src / "README").stat().st_ino


def test_missing_source_dir_exits_2(tmp_path):
    r = CliRunner().invoke(cli_mod.main, ["kernel-build", str(tmp_path / "nope"), "-o", str(tmp_path / "img")])
    assert r.exit_code == 2
    line = one_error_line(r)
    assert str(tmp_path / "nope") in line and "does not exist" in line, line


def test_directory_without_makefile_exits_2(tmp_path):
    r = CliRunner().invoke(cli_mod.main, ["kernel-build", str(tmp_path), "-o", str(tmp_path / "img")])
    assert r.exit_code == 2
    assert "no Makefile" in one_error_line(r)


def test_missing_patch_file_exits_2_before_any_download(tmp_path, monkeypatch):
    monkeypatch.setattr(kernelbuild, "fetch_source", lambda *a, **k: pytest.fail("fetched the source"))
    r = CliRunner().invoke(cli_mod.main, ["kernel-build", "debian", "--patch", str(tmp_path / "x.patch"), "-o", str(tmp_path / "img")])
    assert r.exit_code == 2
    line = one_error_line(r)
    assert f"patch {tmp_path / 'x.patch'}: no such file" in line, line


def test_patch_from_a_pipe_is_refused_saying_why(tmp_path):
    src = fake_tree(tmp_path)
    os.mkfifo(tmp_path / "fifo")
    r = CliRunner().invoke(cli_mod.main, ["kernel-build", str(src), "--patch", str(tmp_path / "fifo"), "-o", str(tmp_path / "img")])
    assert r.exit_code == 2
    assert "not a regular file" in one_error_line(r)


def test_fragment_without_config_lines_exits_2(tmp_path):
    src = fake_tree(tmp_path)
    (tmp_path / "f.config").write_text("hello\n")
    r = CliRunner().invoke(cli_mod.main, ["kernel-build", str(src), "--config-fragment", str(tmp_path / "f.config"), "-o", str(tmp_path / "img")])
    assert r.exit_code == 2
    assert "f.config" in one_error_line(r)


def test_missing_build_tools_exit_2_naming_the_packages(tmp_path, monkeypatch):
    src = fake_tree(tmp_path)
    real_which = shutil.which
    monkeypatch.setattr(kernelbuild.shutil, "which", lambda t: None if t in ("flex", "bison") else real_which(t))
    r = CliRunner().invoke(cli_mod.main, ["kernel-build", str(src), "-o", str(tmp_path / "img")])
    assert r.exit_code == 2
    line = one_error_line(r)
    assert "flex" in line and "bison" in line and "apt-get install" in line, line


def test_unusable_output_path_is_refused(tmp_path):
    src = fake_tree(tmp_path)
    r = CliRunner().invoke(cli_mod.main, ["kernel-build", str(src), "-o", str(tmp_path / "no" / "img")])
    assert r.exit_code == 2
    assert "does not exist" in one_error_line(r)


# ---- the cache --------------------------------------------------------------------------


def test_cache_key_follows_patch_and_fragment_bytes_only(tmp_path):
    src = fake_tree(tmp_path)
    p1 = tmp_path / "one.patch"
    p1.write_text(GOOD_PATCH)
    frag = tmp_path / "f.config"
    frag.write_text("CONFIG_KALLSYMS=y\n")
    base = kernelbuild.cache_key(src, [p1], [frag])

    # The same bytes under another name, elsewhere: the same build.
    (tmp_path / "d").mkdir()
    p2 = tmp_path / "d" / "renamed.diff"
    p2.write_bytes(p1.read_bytes())
    assert kernelbuild.cache_key(src, [p2], [frag]) == base
    # Unrelated files outside the tree change nothing.
    (tmp_path / "unrelated").write_text("x")
    assert kernelbuild.cache_key(src, [p1], [frag]) == base

    # One byte more in the patch, a changed fragment, no patch, patches swapped: new keys.
    p3 = tmp_path / "three.patch"
    p3.write_text(GOOD_PATCH + "\n")
    assert kernelbuild.cache_key(src, [p3], [frag]) != base
    frag2 = tmp_path / "g.config"
    frag2.write_text("CONFIG_KALLSYMS=n\n")
    assert kernelbuild.cache_key(src, [p1], [frag2]) != base
    assert kernelbuild.cache_key(src, [], [frag]) != base
    assert kernelbuild.cache_key(src, [p1, p3], [frag]) != kernelbuild.cache_key(src, [p3, p1], [frag])


def test_cache_key_follows_an_edit_of_the_source_tree(tmp_path):
    src = fake_tree(tmp_path)
    before = kernelbuild.cache_key(src)
    assert kernelbuild.cache_key(src) == before
    (src / "mm" / "foo.c").write_text(FOO_C + "int e;\n")
    assert kernelbuild.cache_key(src) != before


def test_cache_key_of_a_fetched_tree_is_its_debian_version(tmp_path):
    src = fake_tree(tmp_path)
    (src / kernelbuild.SOURCE_MARKER).write_text("linux-source-6.12 6.12.1-1\n")
    before = kernelbuild.cache_key(src)
    (src / "mm" / "foo.c").write_text("touched\n")  # such a tree is not edited; its version names it
    assert kernelbuild.cache_key(src) == before
    (src / kernelbuild.SOURCE_MARKER).write_text("linux-source-6.12 6.12.2-1\n")
    assert kernelbuild.cache_key(src) != before


def test_a_second_build_with_the_same_key_copies_the_cached_image(tmp_path, private_cache, monkeypatch):
    src = fake_tree(tmp_path)
    key = kernelbuild.cache_key(src)
    d = private_cache / "build" / key[:16]
    d.mkdir(parents=True)
    (d / "bzImage").write_bytes(b"\x00kernel image\xff")
    (d / "config").write_text("CONFIG_64BIT=y\n")

    def no_build(*a, **k):
        raise AssertionError("built although cached")

    monkeypatch.setattr(kernelbuild, "prepare_tree", no_build)
    monkeypatch.setattr(kernelbuild, "configure", no_build)
    out = tmp_path / "out.bzImage"
    msgs = []
    kernelbuild.build(src, out=out, progress=msgs.append)
    assert out.read_bytes() == b"\x00kernel image\xff"
    assert Path(f"{out}.config").read_text() == "CONFIG_64BIT=y\n"
    assert any("cached" in m for m in msgs), msgs


# ---- scripts/rotation-cost-patch --------------------------------------------------------

# The two places as they are in Linux 6.12 (mm/swap.c, mm/vmscan.c), shortened.
SWAP_C = """\
void lru_note_cost(struct lruvec *lruvec, bool file,
\t\t   unsigned int nr_io, unsigned int nr_rotated)
{
\tunsigned long cost;

\t/*
\t * Reflect the relative cost of incurring IO and spending CPU
\t * time on rotations.
\t */
\tcost = nr_io * SWAP_CLUSTER_MAX + nr_rotated;

\tdo {
\t\tif (file)
\t\t\tlruvec->file_cost += cost;
\t\telse
\t\t\tlruvec->anon_cost += cost;
\t} while ((lruvec = parent_lruvec(lruvec)));
}

void lru_note_cost_refault(struct folio *folio)
{
\tlru_note_cost(folio_lruvec(folio), folio_is_file_lru(folio),
\t\t      folio_nr_pages(folio), 0);
}
"""

VMSCAN_C = """\
static unsigned long shrink_inactive_list(unsigned long nr_to_scan,
\t\tstruct lruvec *lruvec, struct scan_control *sc, enum lru_list lru)
{
\tlru_note_cost(lruvec, file, stat.nr_pageout, nr_scanned - nr_reclaimed);
\treturn nr_reclaimed;
}

static void shrink_active_list(unsigned long nr_to_scan,
\t\t\t       struct lruvec *lruvec,
\t\t\t       struct scan_control *sc,
\t\t\t       enum lru_list lru)
{
\tunsigned nr_rotated = 0;

\tspin_unlock_irq(&lruvec->lru_lock);

\tif (nr_rotated)
\t\tlru_note_cost(lruvec, file, 0, nr_rotated);
\ttrace_mm_vmscan_lru_shrink_active(pgdat->node_id, nr_taken, nr_activate,
\t\t\tnr_deactivate, nr_rotated, sc->priority, file);
}
"""

# What the two files must say after the patch, written out by hand.
SWAP_C_NOROT = SWAP_C.replace(
    "\tcost = nr_io * SWAP_CLUSTER_MAX + nr_rotated;\n",
    "\t/* rotation_cost=false: the pages of IO only, as before v6.2 */\n\tcost = nr_io;\n",
)
VMSCAN_C_NOROT = VMSCAN_C.replace("\tif (nr_rotated)\n\t\tlru_note_cost(lruvec, file, 0, nr_rotated);\n", "")


def rot_tree(root: Path, swap=SWAP_C, vmscan=VMSCAN_C) -> Path:
    src = root / "linux"
    (src / "mm").mkdir(parents=True)
    (src / "mm" / "swap.c").write_text(swap)
    (src / "mm" / "vmscan.c").write_text(vmscan)
    return src


def rotation_cost_patch(src):
    # `bash scripts/rotation-cost-patch`, as the docs run it.
    return subprocess.run(["bash", str(SCRIPT), str(src)], capture_output=True, text=True)


def test_rotation_cost_patch_applies_and_removes_the_rotation_term(tmp_path):
    assert SWAP_C_NOROT != SWAP_C and VMSCAN_C_NOROT != VMSCAN_C  # the fixtures hold both places
    src = rot_tree(tmp_path)
    p = rotation_cost_patch(src)
    assert p.returncode == 0, p.stderr
    assert "--- a/mm/swap.c" in p.stdout and "+++ b/mm/vmscan.c" in p.stdout
    # The source itself is not changed; the patch applies with -p1 to a copy.
    assert (src / "mm" / "swap.c").read_text() == SWAP_C
    work = tmp_path / "work"
    shutil.copytree(src, work)
    (tmp_path / "norot.patch").write_text(p.stdout)
    ap = subprocess.run(["patch", "-p1", "--batch", "-d", str(work), "-i", str(tmp_path / "norot.patch")], capture_output=True, text=True)
    assert ap.returncode == 0, ap.stdout + ap.stderr
    assert (work / "mm" / "swap.c").read_text() == SWAP_C_NOROT
    assert (work / "mm" / "vmscan.c").read_text() == VMSCAN_C_NOROT


def test_rotation_cost_patch_exits_2_when_the_cost_line_is_missing(tmp_path):
    src = rot_tree(tmp_path, swap=SWAP_C.replace("nr_io * SWAP_CLUSTER_MAX + nr_rotated", "nr_io"))
    p = rotation_cost_patch(src)
    assert p.returncode == 2
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "mm/swap.c" in lines[0], p.stderr


def test_rotation_cost_patch_exits_2_when_shrink_active_list_has_no_call(tmp_path):
    # The call only in shrink_inactive_list's place, as in kernels before v6.2: not found
    # in shrink_active_list, so refused.
    src = rot_tree(tmp_path, vmscan=VMSCAN_C_NOROT)
    p = rotation_cost_patch(src)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "mm/vmscan.c" in lines[0] and "shrink_active_list" in lines[0], p.stderr


def test_rotation_cost_patch_exits_2_on_a_missing_tree(tmp_path):
    p = rotation_cost_patch(tmp_path / "nope")
    assert p.returncode == 2 and "nope" in p.stderr


# ---- real builds (opt-in) ---------------------------------------------------------------


@real_build
def test_real_build_base_and_rotation_cost_patched(tmp_path, user_cache):
    src = kernelbuild.fetch_source("6.12")
    base = kernelbuild.build(src, out=tmp_path / "base.bzImage")
    patch = tmp_path / "norot.patch"
    p = rotation_cost_patch(src)
    assert p.returncode == 0, p.stderr
    patch.write_text(p.stdout)
    norot = kernelbuild.build(src, [patch], out=tmp_path / "norot.bzImage")
    assert base.read_bytes()[:0x202 + 4][0x202:] == b"HdrS"  # the x86 boot protocol's magic
    assert base.read_bytes() != norot.read_bytes()
    cfg = kernelbuild.parse_config(Path(f"{base}.config").read_text())
    assert all(cfg.get(f"CONFIG_{o}") == "y" for o in REQUIRED_Y)


@pytest.mark.parametrize("text", ["", "\n\n", "just some notes\n"])
def test_an_empty_patch_or_one_without_a_diff_is_refused(tmp_path, text):
    p = tmp_path / "x.patch"
    p.write_text(text)
    r = subprocess.run([sys.executable, "-m", "reclaimsim.cli", "kernel-build", str(tmp_path), "--patch", str(p),
                        "-o", str(tmp_path / "out")], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert f"patch {p}" in r.stderr and ("empty" in r.stderr or "no diff" in r.stderr)


def test_missing_build_tools_are_refused_before_a_download(monkeypatch):
    from reclaimsim import kernelbuild

    monkeypatch.setattr(kernelbuild, "_have", lambda what: what not in ("flex", "/usr/include/gelf.h"))
    fetched = []
    monkeypatch.setattr(kernelbuild, "fetch_source", lambda *a: fetched.append(a))
    with pytest.raises(kernelbuild.KernelBuildError, match=r"apt-get install flex libelf-dev"):
        kernelbuild.source_from_arg("debian")
    assert fetched == []


# ---- scripts/memcg-iter-patch -----------------------------------------------------------

ITER_SCRIPT = REPO / "scripts" / "memcg-iter-patch"

# The three functions as shaped in Linux 6.12's mm/vmscan.c, cut down to the lines the
# patch script keys on, and a !CONFIG_LRU_GEN stub that shares lru_gen_shrink_lruvec's
# first line.
MEMCG_LRU_VMSCAN_C = """\
static int shrink_one(struct lruvec *lruvec, struct scan_control *sc)
{
\tif (READ_ONCE(lruvec->lrugen.seg) != MEMCG_LRU_TAIL)
\t\treturn MEMCG_LRU_TAIL;
\tsuccess = try_to_shrink_lruvec(lruvec, sc);

\tshrink_slab(sc->gfp_mask, pgdat->node_id, memcg, sc->priority);

\tif (!sc->proactive)
\t\tvmpressure(sc->gfp_mask, sc->order, memcg, false, 1, 2);

\tflush_reclaim_state(sc);

\treturn MEMCG_LRU_YOUNG;
}

static void shrink_many(struct pglist_data *pgdat, struct scan_control *sc)
{
\tgen = get_memcg_gen(READ_ONCE(pgdat->memcg_lru.seq));
\top = shrink_one(lruvec, sc);
\tif (should_abort_scan(lruvec, sc))
\t\treturn;
}

static void lru_gen_shrink_lruvec(struct lruvec *lruvec, struct scan_control *sc)
{
\tset_mm_walk(NULL, sc->proactive);

\tif (try_to_shrink_lruvec(lruvec, sc))
\t\tlru_gen_rotate_memcg(lruvec, MEMCG_LRU_YOUNG);

\tclear_mm_walk();
}

#else /* !CONFIG_LRU_GEN */

static void lru_gen_shrink_lruvec(struct lruvec *lruvec, struct scan_control *sc)
{
\tBUILD_BUG();
}
"""


def memcg_iter_patch(src):
    return subprocess.run(["bash", str(ITER_SCRIPT), str(src)], capture_output=True, text=True)


def iter_tree(root: Path, vmscan=MEMCG_LRU_VMSCAN_C) -> Path:
    src = root / "linux"
    (src / "mm").mkdir(parents=True)
    (src / "mm" / "vmscan.c").write_text(vmscan)
    return src


def test_memcg_iter_patch_walks_memcgs_with_the_iterator_and_stops_rotating(tmp_path):
    src = iter_tree(tmp_path)
    p = memcg_iter_patch(src)
    assert p.returncode == 0, p.stderr
    work = tmp_path / "work"
    shutil.copytree(src, work)
    (tmp_path / "iter.patch").write_text(p.stdout)
    ap = subprocess.run(["patch", "-p1", "--batch", "-d", str(work), "-i", str(tmp_path / "iter.patch")], capture_output=True, text=True)
    assert ap.returncode == 0, ap.stdout + ap.stderr
    out = (work / "mm" / "vmscan.c").read_text()
    one = out[out.index("shrink_one("):out.index("static void shrink_many")]
    many = out[out.index("static void shrink_many"):out.index("static void lru_gen_shrink_lruvec")]
    # shrink_one: no verdict for the memcg LRU, no protection check of its own.
    assert one.startswith("shrink_one(") and "static void shrink_one(" in out
    assert "MEMCG_LRU" not in one and "below_min" not in one and "try_to_shrink_lruvec(lruvec, sc);" in one
    # The tree's own shrink_slab ... flush_reclaim_state run is kept as it was (the
    # vmpressure call's arguments differ between versions), then the function ends.
    tail = MEMCG_LRU_VMSCAN_C[MEMCG_LRU_VMSCAN_C.index("\tshrink_slab("):MEMCG_LRU_VMSCAN_C.index("flush_reclaim_state(sc);\n") + len("flush_reclaim_state(sc);\n")]
    assert one.endswith(tail + "}\n\n"), one
    # shrink_many: the iterator under the target, a cookie unless kswapd or a full walk,
    # protection computed per memcg, and both stops (abort; a partial walk's goal met).
    assert "memcg_lru" not in many
    for s in ("mem_cgroup_iter(target, NULL, cookie)", "mem_cgroup_iter(target, memcg, cookie)",
              "if (current_is_kswapd() || sc->memcg_full_walk)", "mem_cgroup_calculate_protection(target, memcg)",
              "sc->memcg_low_skipped = 1", "should_abort_scan(lruvec, sc)",
              "if (cookie && sc->nr_reclaimed >= sc->nr_to_reclaim)", "mem_cgroup_iter_break(target, memcg)"):
        assert s in many, s
    # The goal check follows the `next:` label that a skipped memcg jumps to.
    assert many.index("next:") < many.index("sc->nr_reclaimed >= sc->nr_to_reclaim")
    # lru_gen_shrink_lruvec no longer rotates; its !CONFIG_LRU_GEN stub is untouched.
    assert "lru_gen_rotate_memcg" not in out
    assert "\ttry_to_shrink_lruvec(lruvec, sc);\n\n\tclear_mm_walk();" in out
    assert out.endswith("{\n\tBUILD_BUG();\n}\n")
    # The header names the seed patch and the tree it was made from.
    assert "Subject: [PATCH] mm/mglru: use mem_cgroup_iter for global reclaim" in p.stdout
    assert str(src.resolve()) in p.stdout


def test_memcg_iter_patch_exits_2_on_a_tree_without_the_memcg_lru(tmp_path):
    # A shrink_many that no longer takes memcgs from pgdat->memcg_lru (already patched,
    # or another kernel's form): refused, nothing printed.
    src = iter_tree(tmp_path, MEMCG_LRU_VMSCAN_C.replace("READ_ONCE(pgdat->memcg_lru.seq)", "0"))
    p = memcg_iter_patch(src)
    assert p.returncode == 2 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "shrink_many" in lines[0] and "pgdat->memcg_lru" in lines[0], p.stderr
