"""Nothing outside what the user named is written or removed, and nothing from outside
reaches the terminal raw (docs/testing.md, "file safety"). Every case runs in a scratch
directory (pytest's tmp_path): never on the real /var/tmp, /dev/shm or /sys."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from reclaimsim import _core, kernelbuild, kernelrun, perflock, safefs, vm
from reclaimsim.sweep import Run, Store
from reclaimsim.term import printable

ESCAPES = ["\x1b[2J", "\x1b]0;owned\x07", "a\nb", "x\x9b31m"]


def cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "reclaimsim.cli", *args], capture_output=True, text=True, **kw)


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def _victim(tmp_path: Path) -> Path:
    """A user's directory with files named as kernel-run's own would be."""
    victim = tmp_path / "victim"
    victim.mkdir()
    for n in ("w0-f0.dat", "w1-f2.dat", "keep.txt"):
        (victim / n).write_text(f"the user's {n}")
    return victim


def _unchanged(victim: Path) -> bool:
    return sorted(p.name for p in victim.iterdir()) == ["keep.txt", "w0-f0.dat", "w1-f2.dat"] and all(
        (victim / n).read_text() == f"the user's {n}" for n in ("w0-f0.dat", "w1-f2.dat", "keep.txt")
    )


# --- stale-directory cleanup --------------------------------------------------------


def test_stale_cleanup_never_follows_a_planted_link(tmp_path):
    # Any user can plant /var/tmp/reclaimsim-<dead pid>... -> their target; root's cleanup
    # must not remove the target's files, whatever the link is named.
    var_tmp = tmp_path / "var_tmp"
    var_tmp.mkdir()
    victim = _victim(tmp_path)
    gone = _dead_pid()
    for name in (f"reclaimsim-{gone}", f"reclaimsim-{gone}-abc", f"reclaimsim-{gone}.perf-lock.data"):
        (var_tmp / name).symlink_to(victim)
    (victim / ".reclaimsim-run").write_text(f"reclaimsim {gone} kernel-run\nw0-f0.dat\nw1-f2.dat\nkeep.txt\n")
    notes = kernelrun.remove_stale(kernelrun.Cgroups(1, tmp_path / "nocgroup"), (var_tmp,))
    (victim / ".reclaimsim-run").unlink()
    assert notes == []
    assert _unchanged(victim)
    assert all((var_tmp / n).is_symlink() for n in os.listdir(var_tmp))


def test_stale_cleanup_needs_the_marker_of_that_very_process(tmp_path):
    gone, other = _dead_pid(), _dead_pid()
    cases = {
        "no marker": ("", False),
        "another pid's marker": (f"reclaimsim {other} kernel-run\n", False),
        "not reclaimsim's": (f"something {gone}\n", False),
        "its own": (f"reclaimsim {gone} kernel-run\n", True),
    }
    for i, (why, (marker, removed)) in enumerate(cases.items()):
        d = tmp_path / f"reclaimsim-{gone}-{i}"
        d.mkdir()
        (d / "w0-f0.dat").write_text("data")
        if marker:
            (d / ".reclaimsim-run").write_text(marker + "w0-f0.dat\n")
    out = safefs.remove_stale(tmp_path)
    for i, (why, (marker, removed)) in enumerate(cases.items()):
        assert (str(tmp_path / f"reclaimsim-{gone}-{i}") in out) == removed, why
        assert (tmp_path / f"reclaimsim-{gone}-{i}").exists() != removed, why


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a directory of another owner")
def test_stale_cleanup_leaves_another_users_directory(tmp_path):
    gone = _dead_pid()
    d = tmp_path / f"reclaimsim-{gone}-x"
    d.mkdir()
    (d / ".reclaimsim-run").write_text(f"reclaimsim {gone} kernel-run\nw0-f0.dat\n")
    (d / "w0-f0.dat").write_text("theirs")
    os.chown(d, 65534, 65534)
    assert safefs.remove_stale(tmp_path) == []
    assert (d / "w0-f0.dat").read_text() == "theirs"


def test_a_recorded_name_is_never_a_path(tmp_path):
    # A marker edited to name ../something removes nothing outside its directory.
    gone = _dead_pid()
    victim = _victim(tmp_path)
    d = tmp_path / f"reclaimsim-{gone}-x"
    d.mkdir()
    (d / ".reclaimsim-run").write_text(f"reclaimsim {gone} kernel-run\n../victim/w0-f0.dat\n..\n/\n")
    safefs.remove_stale(tmp_path)
    assert _unchanged(victim)


# --- kernel-run's own files ---------------------------------------------------------

FILE_READ = {
    "duration": "1s",
    "machine": {"cpus": 2, "memory_per_node": "64M"},
    "workload": [
        {"type": "file_read", "files": ["64K"], "accesses": 10},
        {"type": "file_read", "files": ["64K", "64K", "128K"], "accesses": 10},
    ],
}


def test_workdir_files_go_into_a_private_directory_and_only_they_are_removed(tmp_path):
    # --workdir DIR holding the user's own w0-f0.dat and w1-f2.dat: kernel-run's files of
    # the same names are made in a private directory in DIR, and removing them leaves
    # DIR as it was.
    victim = _victim(tmp_path)
    ws = kernelrun.Workspace(victim, shm=tmp_path / "shm")
    ws.create_files(json.dumps(FILE_READ))
    made = sorted(p.name for p in ws.path.iterdir())
    assert made == [".reclaimsim-run", "w0-f0.dat", "w1-f0.dat", "w1-f1.dat", "w1-f2.dat"]
    assert (ws.path / "w1-f2.dat").stat().st_size == 128 << 10
    assert stat.S_IMODE(ws.path.stat().st_mode) == 0o700
    marker = (ws.path / ".reclaimsim-run").read_text().splitlines()
    assert marker[0] == f"reclaimsim {os.getpid()} kernel-run"
    assert marker[1:] == ["w0-f0.dat", "w1-f0.dat", "w1-f1.dat", "w1-f2.dat"]
    ws.remove()
    assert not ws.path.exists()
    assert _unchanged(victim)


def test_the_files_are_created_new_never_through_a_link(tmp_path):
    victim = _victim(tmp_path)
    d = tmp_path / "run"
    d.mkdir()
    (d / "w0-f0.dat").symlink_to(victim / "w0-f0.dat")
    with pytest.raises(OSError, match="not overwritten"):
        _core.host_create_files_json(json.dumps(FILE_READ), str(d))
    assert _unchanged(victim)


def test_live_counter_files_are_in_a_private_directory(tmp_path):
    shm = tmp_path / "shm"
    shm.mkdir()
    gone_name = f"reclaimsim-{os.getpid()}-w0-p0"
    victim = _victim(tmp_path)
    (shm / gone_name).symlink_to(victim / "w0-f0.dat")  # the old predictable name
    ws = kernelrun.Workspace(tmp_path, shm=shm)
    live = ws.live_file(0, 0, 2)
    assert live.parent.parent == shm and live.parent.name.startswith(f"reclaimsim-{os.getpid()}-")
    assert live.read_bytes() == b"\0" * (2 * len(kernelrun.LIVE_FIELDS) * 8)
    ws.remove()
    assert _unchanged(victim) and sorted(os.listdir(shm)) == [gone_name]


def test_a_missing_workdir_is_refused_not_created(tmp_path):
    with pytest.raises(kernelrun.KernelRunError, match="not a directory"):
        kernelrun.check_workdir(str(tmp_path / "nope"), False)
    assert not (tmp_path / "nope").exists()


# --- --swapfile ---------------------------------------------------------------------


@pytest.fixture
def no_host_swap(monkeypatch):
    ran = []
    monkeypatch.setattr(kernelrun, "active_swaps", lambda: [])
    monkeypatch.setattr(kernelrun, "_run", lambda cmd: ran.append(cmd))
    return ran


def test_swapfile_refuses_an_existing_file_before_touching_it(tmp_path, no_host_swap):
    f = tmp_path / "thesis.tex"
    f.write_text("years of work")
    os.chmod(f, 0o644)
    with pytest.raises(kernelrun.KernelRunError, match="exists and is not a swap file"):
        kernelrun.Swap(1 << 20, str(f), [], device="ssd")
    assert f.read_text() == "years of work" and stat.S_IMODE(f.stat().st_mode) == 0o644
    assert no_host_swap == []


def test_swapfile_refuses_a_link_and_a_directory(tmp_path, no_host_swap):
    victim = _victim(tmp_path)
    link = tmp_path / "swap"
    link.symlink_to(victim / "keep.txt")
    for path, what in ((link, "symbolic link"), (victim, "not a regular file")):
        with pytest.raises(kernelrun.KernelRunError, match=what):
            kernelrun.Swap(1 << 20, str(path), [], device="ssd")
    assert _unchanged(victim)


def test_swapfile_new_or_kernel_runs_own(tmp_path, no_host_swap):
    # A new file is made (mode 0600) and labelled; a file with kernel-run's label (a
    # killed run's) is taken again; either is removed at the end.
    f = tmp_path / "swap"
    s = kernelrun.Swap(2 << 20, str(f), [], device="ssd")
    assert f.stat().st_size == 2 << 20 and stat.S_IMODE(f.stat().st_mode) == 0o600
    assert no_host_swap[0] == ["mkswap", "-L", "reclaimsim-swap", str(f)]
    # What mkswap -L would have written: the magic at the page's end, the label at 1052.
    head = bytearray(4096)
    head[1052:1052 + 15] = b"reclaimsim-swap"
    head[4086:] = b"SWAPSPACE2"
    with open(f, "r+b") as fh:
        fh.write(head)
    s.dev = None  # left behind, as by a run killed outright
    kernelrun.Swap(2 << 20, str(f), [], device="ssd").close()
    assert not f.exists()
    # Another label is someone else's swap file.
    head[1052:1052 + 15] = b"theirs-swap\0\0\0\0"
    f.write_bytes(bytes(head))
    with pytest.raises(kernelrun.KernelRunError, match="not a swap file kernel-run made"):
        kernelrun.Swap(2 << 20, str(f), [], device="ssd")
    assert f.read_bytes() == bytes(head)


# --- the sweep store and other replaced files ---------------------------------------


def test_store_temporary_files_are_never_followed(tmp_path):
    # Planted links under the names the store used to write first (.results.tmp,
    # runs/.ID.PID.tmp): the victims keep their contents, and results.parquet (itself a
    # planted link) becomes a regular file.
    store = tmp_path / "store"
    (store / "runs").mkdir(parents=True)
    victim = _victim(tmp_path)
    for name in ("results", "cgroups", "timeseries"):
        (store / f".{name}.tmp").symlink_to(victim / "keep.txt")
    (store / "runs" / f".r1.{os.getpid()}.tmp").symlink_to(victim / "w0-f0.dat")
    (store / "results.parquet").symlink_to(victim / "w1-f2.dat")
    st = Store(store)
    st.prepare()
    st._write("runs", "r1", [{"run_id": "r1", "error": None, "x": 1}])
    st.gather([Run("r1", {}, "A", 1, "{}")])
    assert _unchanged(victim)
    assert not (store / "results.parquet").is_symlink()
    assert pl.read_parquet(store / "results.parquet")["x"].to_list() == [1]
    assert sorted(p.name for p in store.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()) == []


def test_a_copied_kernel_image_never_goes_through_a_planted_name(tmp_path):
    victim = _victim(tmp_path)
    src, dest = tmp_path / "built", tmp_path / "out.bzImage"
    src.write_bytes(b"image")
    (tmp_path / f".out.bzImage.tmp-{os.getpid()}").symlink_to(victim / "keep.txt")
    kernelbuild._install(src, dest)
    assert dest.read_bytes() == b"image" and _unchanged(victim)


def test_replace_atomically_leaves_nothing_on_failure(tmp_path):
    dest = tmp_path / "out"
    dest.write_text("old")

    def fail(f):
        f.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        safefs.replace_atomically(dest, fail)
    assert dest.read_text() == "old" and sorted(os.listdir(tmp_path)) == ["out"]


# --- the terminal -------------------------------------------------------------------


@pytest.mark.parametrize("bad", ESCAPES)
def test_scenario_names_with_control_characters_are_refused(bad):
    for key in ("name", "workload[0].name", "cgroup[0].path"):
        value = json.dumps(bad if key != "cgroup[0].path" else "/" + bad)
        p = cli("validate", "default", "--set", f"{key}={value}")
        assert p.returncode == 2, p.stderr
        assert "control characters" in p.stderr
        assert len(p.stderr.splitlines()) == 1 and "\x1b" not in p.stderr and "\x9b" not in p.stderr


@pytest.mark.parametrize("path", ["/../rsim-escape", "/usemem/../../x", "/usemem/.", "/./usemem"])
def test_cgroup_paths_outside_the_tree_are_refused(path):
    p = cli("validate", "default", "--set", f"cgroup[0].path={json.dumps(path)}")
    assert p.returncode == 2, p.stderr
    assert "scenario.cgroup[0].path" in p.stderr and "not a cgroup name" in p.stderr


def test_errors_quoting_outside_text_are_escaped():
    p = cli("run", "no-such\x1b]0;title\x07scenario")
    assert p.returncode == 2
    assert "\x1b" not in p.stderr and "\x07" not in p.stderr and "\\x1b]0;title" in p.stderr


def test_a_kernel_images_version_string_is_escaped(tmp_path):
    img = bytearray(0x1000)
    img[0x202:0x206] = b"HdrS"
    img[0x20E:0x210] = (0x400 - 0x200).to_bytes(2, "little")
    img[0x400:0x420] = b"6.12\x1b]0;pwned\x07 #1 SMP\0"
    p = tmp_path / "bzImage"
    p.write_bytes(bytes(img))
    release = vm.user_kernel(str(p)).release
    assert release == "6.12\\x1b]0;pwned\\x07"


def test_perf_symbols_are_escaped():
    row = "          12      1.20 ms    200.00 us    100.00 us     spinlock   shrink\x1b[2Jlruvec+0x77"
    rows = perflock.parse(row)
    assert rows and "\x1b" not in rows[0]["caller"] and rows[0]["caller"].startswith("shrink\\x1b[2J")


def test_printable_escapes_every_control_and_nothing_else():
    assert printable("plain ✓ é") == "plain ✓ é"
    for c in [chr(i) for i in range(0x20)] + ["\x7f"] + [chr(i) for i in range(0x80, 0xA0)] + ["\u2028", "\u2029"]:
        out = printable(f"a{c}b")
        assert out.isprintable() and out.startswith("a\\") and out.endswith("b"), repr(c)


def test_the_cgroup_tree_refuses_a_path_that_leaves_it(tmp_path):
    # The last check before mkdir, should a path ever reach it unvalidated.
    cg = kernelrun.Cgroups(2, tmp_path, tmp_path / "reclaimsim-1")
    assert cg.path("/a/b") == tmp_path / "reclaimsim-1" / "a" / "b"
    for bad in ("/../x", "/a/../../x", "/a//b", "/."):
        with pytest.raises(kernelrun.KernelRunError, match="not inside the run's tree"):
            cg.path(bad)
