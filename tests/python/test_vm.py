"""`reclaimsim kernel-run --vm`: the initramfs builder, module resolution, the guest plan,
the refusals, and (where QEMU is installed) real boots of Debian's 6.12 kernel under TCG."""

import json
import lzma
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reclaimsim import _core, vm
from reclaimsim.sidebyside import KernelRunError
from reclaimsim.scenario import load_scenario


def cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "reclaimsim.cli", *args], capture_output=True, text=True, env=env
    )


# ---------------------------------------------------------------------------------------
# the initramfs


def _elf_program_headers(blob: bytes) -> list[int]:
    """The p_type of each program header of a 64-bit little-endian ELF file (the ELF
    specification's layout, read independently of any ELF library)."""
    import struct

    assert blob[:4] == b"\x7fELF", "not an ELF file"
    assert blob[4] == 2 and blob[5] == 1, "not a 64-bit little-endian ELF file"
    (e_machine,) = struct.unpack_from("<H", blob, 18)
    assert e_machine == 62, f"e_machine {e_machine} is not x86-64 (62)"
    e_phoff, = struct.unpack_from("<Q", blob, 32)
    e_phentsize, e_phnum = struct.unpack_from("<HH", blob, 54)
    return [struct.unpack_from("<I", blob, e_phoff + i * e_phentsize)[0] for i in range(e_phnum)]


def test_the_guest_runner_comes_with_the_package_without_a_source_tree(tmp_path):
    """The installed package alone, copied away from the source tree (as a wheel installs
    it), hands over a static x86-64 guest runner: no ELF interpreter (PT_INTERP, 3), since
    the initramfs has no C library, and it is crates/guest's (its start-up line)."""
    pkg = Path(vm.__file__).resolve().parent
    shutil.copytree(pkg, tmp_path / "reclaimsim", ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    code = (
        "import sys, reclaimsim.vm as vm; "
        "assert not vm.__file__.startswith(sys.argv[1]), vm.__file__; "
        "sys.stdout.buffer.write(vm.guest_runner())"
    )
    p = subprocess.run([sys.executable, "-c", code, str(pkg)], capture_output=True, env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    blob = p.stdout
    PT_INTERP, PT_LOAD = 3, 1
    headers = _elf_program_headers(blob)
    assert PT_LOAD in headers and PT_INTERP not in headers, headers
    assert b"reclaimsim-guest: started" in blob


@pytest.mark.skipif(shutil.which("cpio") is None, reason="needs Debian's cpio as the reference reader")
def test_cpio_newc_unpacks_with_gnu_cpio_and_appended_archives_override(tmp_path):
    files = [("init", 0o100755, b"\x7fELF-runner"), ("modules/00-zram.ko.xz", 0o100644, b"x" * 4097)]
    base = vm.cpio_newc(vm._with_parents(files))
    plan = vm.cpio_newc([("plan.json", 0o100644, b'{"reps": 3}'), ("init", 0o100755, b"new")])
    out = tmp_path / "root"
    out.mkdir()
    for archive in (base, plan):  # the kernel unpacks concatenated archives in order
        p = subprocess.run(["cpio", "-idmu", "--quiet"], input=archive, cwd=out, capture_output=True)
        assert p.returncode == 0, p.stderr
    assert (out / "modules" / "00-zram.ko.xz").read_bytes() == b"x" * 4097
    assert (out / "plan.json").read_bytes() == b'{"reps": 3}'
    assert (out / "init").read_bytes() == b"new"
    assert os.stat(out / "init").st_mode & 0o777 == 0o755
    assert (out / "modules").is_dir()


def test_cpio_newc_header_fields_and_alignment():
    data = b"abcde"
    a = vm.cpio_newc([("f", 0o100644, data)])
    assert a[:6] == b"070701"
    fields = [int(a[6 + 8 * i:14 + 8 * i], 16) for i in range(13)]
    # mode, filesize and namesize (with its NUL) as the newc format defines them
    assert fields[1] == 0o100644 and fields[6] == len(data) and fields[11] == 2
    name_end = 110 + 2
    data_at = name_end + (-name_end % 4)
    assert a[data_at:data_at + 5] == data
    trailer = a.index(b"TRAILER!!!")
    assert (trailer - 110) % 4 == 0  # each header starts 4-byte aligned
    assert len(a) % 4 == 0


def _fake_module(path: Path, name: str, depends: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    body = b"\0ELFstuff\0" + f"name={name}\0depends={depends}\0vermagic=6.12 SMP\0".encode() + b"tail"
    path.write_bytes(lzma.compress(body))


def test_module_paths_put_dependencies_first_and_name_missing_modules(tmp_path):
    mods = tmp_path / "lib" / "modules" / "6.12-test"
    _fake_module(mods / "kernel/drivers/block/zram/zram.ko.xz", "zram", "zsmalloc,lz4_compress")
    _fake_module(mods / "kernel/mm/zsmalloc.ko.xz", "zsmalloc", "")
    _fake_module(mods / "kernel/lib/lz4/lz4_compress.ko.xz", "lz4_compress", "")
    _fake_module(mods / "kernel/drivers/block/virtio_blk.ko.xz", "virtio_blk", "")
    k = vm.Kernel(tmp_path / "bzImage", "6.12-test", mods, None)
    got = [p.name for p in vm.module_paths(k, ["zram", "virtio-blk"])]
    assert got == ["zsmalloc.ko.xz", "lz4_compress.ko.xz", "zram.ko.xz", "virtio_blk.ko.xz"]
    with pytest.raises(KernelRunError, match="no module ext4"):
        vm.module_paths(k, ["ext4"])


def test_needed_modules_follow_the_kernel_config(tmp_path):
    cfg = tmp_path / "config"
    cfg.write_text('CONFIG_ZRAM=m\nCONFIG_ZRAM_DEF_COMP="lz4"\nCONFIG_CRYPTO_LZ4=m\nCONFIG_VIRTIO_BLK=y\n')
    k = vm.Kernel(tmp_path / "bzImage", "t", tmp_path, cfg)
    assert vm.needed_modules(k, swap=True, disk=True) == ["zram", "lz4"]
    assert vm.needed_modules(k, swap=False, disk=True) == []
    # 6.1's cloud kernel: the disk's PCI transport and virtio_blk are modules, the
    # transport first (it is no dependency of virtio_blk, so modinfo would not bring it).
    # Its zram compresses with lzo-rle, a module of CRYPTO_LZO (crypto/lzo-rle.c).
    cfg.write_text('CONFIG_ZRAM=m\nCONFIG_ZRAM_DEF_COMP="lzo-rle"\nCONFIG_CRYPTO_LZO=m\n'
                   "CONFIG_VIRTIO_PCI=m\nCONFIG_VIRTIO_BLK=m\n")
    assert vm.needed_modules(k, swap=True, disk=True) == ["zram", "lzo-rle", "virtio_pci", "virtio_blk"]
    assert vm.needed_modules(k, swap=False, disk=False) == []


# ---------------------------------------------------------------------------------------
# the plan and the data port


def _norm(name, *sets):
    return json.loads(_core.validate_json(json.dumps(load_scenario(name, list(sets)))))


def test_guest_plan_applies_limits_lru_swap_and_the_reclaim_schedule():
    norm = _norm(
        "calib-mglru-reclaim",
        "kernel.swappiness=133",
        'reclaim[0].swappiness="max"',
        "machine.swap.size=64M",
        "machine.swap.device=zram",
    )
    plan = vm.guest_plan(norm, 3, [1], ["/modules/00-zram.ko.xz"], True)
    assert plan["reps"] == 3 and plan["disk"] == "/dev/vda"
    assert ["/proc/sys/vm/swappiness", "133"] in [list(w) for w in plan["writes"]]
    assert plan["lru_gen"] == "y"
    assert plan["swap_bytes"] == 64 << 20
    assert plan["cgroups"] == [{"path": "/reader", "files": [("memory.max", str(96 << 20))]}]
    r = plan["reclaim"][0]
    assert (r["at_ns"], r["every_ns"], r["times"]) == (500_000_000, 250_000_000, 8)
    assert r["buffer"] == f"{8 << 20} swappiness=max"
    assert plan["procs"] == [{"workload": 0, "count": 1, "threads": 1, "cgroup": "/reader"}]
    classic = vm.guest_plan(_norm("calib-zipf"), 1, [1], [], True)
    assert classic["lru_gen"] == "n" and classic["swap_bytes"] == 0


def test_parse_data_takes_only_a_complete_framed_document():
    body = json.dumps({"reps": [1, 2]}).encode()
    framed = b"noise\r\n" + vm.DATA_BEGIN + str(len(body)).encode() + b"\n" + body + vm.DATA_END + b"\n"
    assert vm.parse_data(framed) == {"reps": [1, 2]}
    assert vm.parse_data(framed[: len(framed) - 30]) is None  # cut by a power-off
    assert vm.parse_data(b"[    1.0] Kernel panic") is None


def test_fold_proactive_moves_proactive_counts_into_direct():
    sim = {"pgscan_direct@/a": 10, "pgscan_proactive@/a": 5, "pgsteal_proactive@/a": 4, "pgsteal_direct@/a": 1}
    assert vm.fold_proactive(sim) == {"pgscan_direct@/a": 15, "pgsteal_direct@/a": 5}


# ---------------------------------------------------------------------------------------
# refusals (nothing is fetched or booted)


def _refused(*args):
    p = cli("kernel-run", *args)
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    return p.stderr


def test_a_machine_the_host_cannot_hold_is_refused_before_anything_runs(tmp_path):
    err = _refused("calib-zipf", "--vm", "--set", "machine.memory_per_node=1T", "--set", "machine.nodes=2")
    assert "machine: 2 x 1048576 MiB" in err and "available memory" in err


def test_more_cpus_than_the_guest_machine_takes_are_refused():
    err = _refused("calib-zipf", "--vm", "--set", "machine.cpus=256")
    assert "machine.cpus = 256" in err and "at most 255" in err


def test_per_cgroup_swappiness_is_refused_under_vm_naming_the_field():
    err = _refused("calib-anon-zram", "--vm", "--set", "cgroup[0].memory.swappiness=30")
    assert "scenario.cgroup[0].memory.swappiness = 30" in err and "cgroup v2" in err


def test_vm_options_need_vm_and_host_options_are_refused_with_it(tmp_path):
    assert "--kernel" in _refused("calib-zipf", "--kernel", str(tmp_path / "x"))
    assert "--accel tcg" in _refused("calib-zipf", "--accel", "tcg")
    assert "--model-costs table: only with --vm" in _refused("calib-zipf", "--model-costs", "table")
    # A guest's time limit given for a host run would be silently ignored.
    assert "--timeout 60.0: only with --vm" in _refused("calib-zipf", "--timeout", "60")
    assert "--workdir" in _refused("calib-zipf", "--vm", "--workdir", str(tmp_path))


def test_a_kernel_that_is_not_a_bzimage_is_refused(tmp_path):
    bad = tmp_path / "vmlinux"
    bad.write_bytes(b"\x7fELF" + b"\0" * 2000)
    err = _refused("calib-zipf", "--vm", "--kernel", str(bad))
    assert "not an x86 bzImage" in err


# ---------------------------------------------------------------------------------------
# real boots (Debian's 6.12 under TCG): CI installs QEMU; elsewhere they need it


QEMU = shutil.which("qemu-system-x86_64")
needs_qemu = pytest.mark.skipif(QEMU is None, reason="needs qemu-system-x86 (apt-get install qemu-system-x86)")


def _boot(tmp_path, scenario, *sets):
    """kernel-run --vm with its own TMPDIR, which must be empty afterwards, and no QEMU
    left running on its files."""
    out = tmp_path / "rep.json"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    args = ["kernel-run", scenario, "--vm", "--accel", "tcg", "--reps", "1", "--timeout", "600", "--json", str(out)]
    for s in sets:
        args += ["--set", s]
    p = cli(*args, env=dict(os.environ, TMPDIR=str(tmp)))
    assert p.returncode == 0, p.stderr[-2000:]
    assert list(tmp.iterdir()) == []  # initramfs, disk image and console removed
    qemu = subprocess.run(["pgrep", "-f", f"qemu-system-x86_64 .*{tmp}"], capture_output=True, text=True)
    assert qemu.stdout.split() == []
    return json.loads(out.read_text())


@needs_qemu
def test_vm_page_cache_case_on_mglru_with_memory_reclaim_reports_per_cgroup_counters(tmp_path):
    rep = _boot(
        tmp_path, "calib-mglru-reclaim", "workload[0].accesses=40000", "cgroup[0].memory.max=16M",
        "reclaim[0].times=4", "reclaim[0].bytes=2M",
    )
    assert rep["cgroup_version"] == 2 and rep["kernel"].startswith("6.12")
    # the model beside Debian's 6.12 runs as 6.12, not as the scenario's 6.18, and says so
    assert rep["model_version"] == "6.12"
    assert any("the model runs as 6.12" in n and "not the scenario's kernel.version 6.18" in n for n in rep["notes"])
    assert rep["vm"]["setup"]["lru_gen_enabled"] == "0x0007"  # MGLRU, all features, as "y" sets
    # the model ran with the guest's own costs, timed in a boot of the same kernel: a
    # page-cache hit under TCG costs more than the table's hardware figure
    said = [n for n in rep["notes"] if n.startswith("the model runs with the guest's costs")]
    assert len(said) == 1
    profile = said[0].split("(")[-1].rstrip(")")
    data = load_scenario("calib-zipf", [f"costs_profile={json.dumps(profile)}"])
    got = {c["name"]: c for c in json.loads(_core.cost_table_json(json.dumps(data)))}
    assert got["file_read_hit"]["origin"]["layer"] == "costs_profile"
    assert got["file_read_hit"]["ns"] > got["file_read_hit"]["default_ns"]
    assert got["zram_read"]["origin"]["layer"] == "costs_profile"
    rows = {r["name"]: r for r in rep["counters"]}
    assert rows["accesses"]["kernel_mean"] == 40000  # every access replayed in the guest
    assert rows["hits"]["kernel_mean"] + rows["misses"]["kernel_mean"] == 40000
    # zipf reads over a 256M file through a 16M limit: the kernel reclaimed inside the
    # cgroup, and the cgroup's memory.stat agrees with /proc/vmstat (no other reclaim)
    assert rows["pgsteal@/reader"]["kernel_mean"] == rows["pgsteal_file"]["kernel_mean"] > 0
    assert rows["memory.events.max@/reader"]["kernel_mean"] >= 1
    writes = rep["vm"]["reclaim_writes"][0]
    assert [w["due_ns"] for w in writes] == [500_000_000 + k * 250_000_000 for k in range(4)]
    # made at the simulator's progress points (--reclaim-timing progress, the default): in
    # order, each once the workload had done its threshold of accesses
    due = [w["due_accesses"] for w in writes]
    assert due == sorted(due) and 0 < due[0] < 40000
    assert all(w["due_accesses"] <= w["accesses"] < w["due_accesses"] + 4096 for w in writes)
    assert all(w["pgsteal"] is not None and w["pgsteal"] >= 0 for w in writes)
    # memory.reclaim answers -EAGAIN when it cannot reclaim the whole amount; the file is
    # there and written either way
    assert all(w["error"] is None or "Resource temporarily unavailable" in w["error"] for w in writes)


@needs_qemu
def test_vm_anon_zram_case_swaps_to_the_guests_zram(tmp_path):
    # Faulted in by the writes, not populated: Debian's 6.12.95 OOM-kills the populated
    # area within half a second (every folio marked accessed; docs/fidelity.md).
    rep = _boot(tmp_path, "calib-anon-zram", "workload[0].repeat=1", "workload[0].prefault=false")
    rows = {r["name"]: r for r in rep["counters"]}
    assert rows["oom_killed_processes"]["kernel_mean"] == 0
    # 48M written by two threads into a 32M cgroup: at least the overflow goes to zram
    assert rows["pswpout"]["kernel_mean"] >= (16 << 20) // 4096
    assert rows["pgsteal@/anon"]["kernel_mean"] == rows["pgsteal_anon"]["kernel_mean"]
    assert rep["vm"]["setup"]["swap_bytes"] == 256 << 20
    assert rep["vm"]["setup"]["lru_gen_enabled"] == "0x0000"  # the classic LRU, as the scenario asks


@needs_qemu
def test_ctrl_c_during_a_boot_kills_qemu_and_removes_the_files(tmp_path):
    import signal
    import time

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    p = subprocess.Popen(
        [sys.executable, "-m", "reclaimsim.cli", "kernel-run", "calib-zipf", "--vm", "--accel", "tcg", "--reps", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, TMPDIR=str(tmp)),
    )
    deadline = time.monotonic() + 300
    while not list(tmp.glob("reclaimsim-*/console.log")) and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.2)
    assert p.poll() is None, p.communicate()[1]
    time.sleep(2)  # the guest is booting
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "Traceback" not in err
    assert list(tmp.iterdir()) == []
    qemu = subprocess.run(["pgrep", "-f", f"qemu-system-x86_64 .*{tmp}"], capture_output=True, text=True)
    assert qemu.stdout.split() == []


@needs_qemu
def test_qemu_dies_with_a_command_killed_outright_and_a_later_run_removes_its_files(tmp_path, monkeypatch):
    import signal
    import tempfile
    import time

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    p = subprocess.Popen(
        [sys.executable, "-m", "reclaimsim.cli", "kernel-run", "calib-zipf", "--vm", "--accel", "tcg", "--reps", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ, TMPDIR=str(tmp)),
    )
    deadline = time.monotonic() + 300
    while not list(tmp.glob("reclaimsim-*/console.log")) and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.2)
    assert p.poll() is None
    time.sleep(2)
    p.send_signal(signal.SIGKILL)
    p.wait()
    deadline = time.monotonic() + 30
    while subprocess.run(["pgrep", "-f", f"qemu-system-x86_64 .*{tmp}"], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "QEMU outlived the command"
        time.sleep(0.2)
    left = list(tmp.iterdir())
    assert len(left) == 1 and (left[0] / ".reclaimsim-run").is_file()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    notes = vm.remove_stale_scratch()
    assert len(notes) == 1 and list(tmp.iterdir()) == []


# ---------------------------------------------------------------------------------------
# kernel-compare (the kernel side faked: no boot)


def test_agreement_compares_the_direction_of_significant_changes():
    from reclaimsim.kernelcompare import agreement

    up = {"significant": True, "a_mean": 1, "b_mean": 2}
    down = {"significant": True, "a_mean": 2, "b_mean": 1}
    flat = {"significant": False, "a_mean": 1, "b_mean": 1}
    assert agreement(up, up) == "yes"
    assert agreement(up, down) == "no (opposite)"
    assert agreement(flat, flat) == "yes (neither changes)"
    assert agreement(up, flat) == "no (kernel only)"
    assert agreement(flat, down) == "no (model only)"


def test_kernel_compare_interleaves_boots_and_sets_kernel_stats_beside_the_models(monkeypatch, tmp_path):
    from reclaimsim import kernelcompare

    boots = []
    # pgscan_anon per boot: kernel A 100, 110, 120; kernel B 200, 220, 240
    values = {"A": [100, 110, 120], "B": [200, 220, 240]}

    accels = []

    def fake_run_in_vm(norm, nprocs, reps, kernel, accel, timeout, progress=None, after=None, hists=None, kprobes=None):
        side = kernel.release
        boots.append(side)
        accels.append(accel)
        n = values[side][sum(1 for b in boots if b == side) - 1]
        rep = {
            "wall_s": 1.0,
            "vmstat": {"pgscan_anon": n},
            "cgroups": {"/anon": {"memory.stat": {"pgscan": n, "pgscan_proactive": 0}, "memory.events": {}}},
            "processes": [{"threads": [{"accesses": 5, "hits": 1, "misses": 4, "major_faults": 4, "minor_faults": 0}]}],
            "reclaim_writes": [],
        }
        how = "tcg (probed: KVM did not boot this kernel)" if accel == "auto" else f"{accel} (asked)"
        return {"reps": [rep], "accel_how": how, "accel": "tcg"}

    monkeypatch.setattr(kernelcompare.vm, "run_in_vm", fake_run_in_vm)
    monkeypatch.setattr(kernelcompare.vm, "check_prerequisites", lambda: None)
    monkeypatch.setattr(kernelcompare, "_kernel", lambda spec, progress: kernelcompare.vm.Kernel(tmp_path / spec, spec))
    data = load_scenario("calib-anon-zram", ["workload[0].repeat=1", "kernel.cgroup_version=2"])
    said = []
    c = kernelcompare.kernel_compare(data, "A", "B", 3, "auto", 60, "rotation_cost=true", "rotation_cost=false",
                                     progress=said.append, model_costs="table")
    assert boots == ["A", "B", "A", "B", "A", "B"]
    # KVM is probed at each kernel's first boot only; the progress says what is left.
    assert accels == ["auto", "auto", "tcg", "tcg", "tcg", "tcg"]
    boot_lines = [m for m in said if m.startswith("rep ")]
    assert boot_lines[0] == "rep 1/3, kernel A (A): boot 1 of 6"
    assert boot_lines[5].startswith("rep 3/3, kernel B (B): boot 6 of 6; about ") and boot_lines[5].endswith(" min left")
    assert c["notes"][-1] == "accel: tcg (probed: KVM did not boot this kernel)"
    row = {r["name"]: r for r in c["metrics"]}["pgscan_anon"]
    k = row["kernel"]
    assert (k["a_mean"], k["b_mean"]) == (110, 220)
    assert k["a_std"] == pytest.approx(10.0) and k["b_std"] == pytest.approx(20.0)  # sample std (n - 1)
    assert k["pct_change"] == pytest.approx(100.0) and k["significant"]
    assert row["model"] is not None and row["agree"] is not None
    assert "kernel-compare calib-anon-zram" in kernelcompare.format_kernel_compare(c)


def test_kernel_compare_puts_the_scenarios_aggregates_over_cgroups_first(monkeypatch, tmp_path):
    from reclaimsim import kernelcompare

    # pgsteal of /memcg0 and /memcg1 per boot: kernel A even (100, 100: cv 0), kernel B
    # uneven (50, 150: cv 50%, the population sd over the mean).
    steals = {"A": (100, 100), "B": (50, 150)}

    def fake_run_in_vm(norm, nprocs, reps, kernel, accel, timeout, progress=None, after=None, hists=None, kprobes=None):
        cgs = {f"/memcg{i}": {"memory.stat": {"pgsteal": n}, "memory.events": {}}
               for i, n in enumerate(steals[kernel.release])}
        rep = {"wall_s": 1.0, "vmstat": {"pgsteal_anon": 200}, "cgroups": cgs,
               "processes": [{"threads": [{"accesses": 5, "hits": 1, "misses": 4, "major_faults": 4, "minor_faults": 0}]}] * 2,
               "reclaim_writes": []}
        return {"reps": [rep], "accel_how": "tcg (asked)", "accel": "tcg"}

    monkeypatch.setattr(kernelcompare.vm, "run_in_vm", fake_run_in_vm)
    monkeypatch.setattr(kernelcompare.vm, "check_prerequisites", lambda: None)
    monkeypatch.setattr(kernelcompare.vm, "reclaim_timing", lambda norm, how, notes, progress: None)
    monkeypatch.setattr(kernelcompare, "_kernel", lambda spec, progress: kernelcompare.vm.Kernel(tmp_path / spec, spec))
    data = load_scenario("calib-memcg-reclaim", [
        "cgroup[0].copies=2", "workload[0].copies=2", "machine.cpus=3", "duration=2s",
        "workload[0].random_writes=2000", "reclaim[0].at=1s", "reclaim[0].times=2"])
    c = kernelcompare.kernel_compare(data, "A", "B", 2, "tcg", 60, model_costs="table")
    names = [r["name"] for r in c["metrics"]]
    # In the [compare] list's order; the refault aggregates have no rows on these kernels.
    assert names[:2] == ["cv:pgsteal@/memcg*", "sum:pgsteal@/memcg*"]
    assert not any(n.startswith("cv:workingset") for n in names)
    rows = {r["name"]: r for r in c["metrics"]}
    cv = rows["cv:pgsteal@/memcg*"]["kernel"]
    assert (cv["a_mean"], cv["b_mean"]) == (0.0, pytest.approx(50.0))
    assert rows["sum:pgsteal@/memcg*"]["kernel"]["a_values"] == [200.0, 200.0]
    # The model's side has the same rows, from its own per-cgroup counters.
    assert rows["cv:pgsteal@/memcg*"]["model"] is not None
    assert "cv:pgsteal@/memcg*" in kernelcompare.format_kernel_compare(c)


def test_kernel_compare_refuses_equal_model_sides():
    from reclaimsim import kernelcompare

    data = load_scenario("calib-zipf", [])
    with pytest.raises(KernelRunError, match="same switch set"):
        kernelcompare.kernel_compare(data, "debian", "debian", 2)
    with pytest.raises(KernelRunError, match="same switch set"):
        kernelcompare.kernel_compare(data, "debian-6.12", "debian", 2)
    # Two kernels of different versions: the model's sides differ by their versions' rules.
    assert kernelcompare._model_version("debian-6.1") == "6.1"
    assert kernelcompare._model_version("debian-7.3") == "7.3"
    assert kernelcompare._model_version("/nonexistent/bzImage") is None


def test_reclaim_progress_takes_each_writes_accesses_from_the_models_log():
    norm = _norm("calib-mglru-reclaim")
    # the model made the first three of eight writes, after 100, 5000 and 9000 accesses;
    # the run ended before the other five: due when the 200000 accesses are done
    cols = ["t_ns", "duration_ns", "requested_bytes", "reclaimed_bytes", "calls", "result", "accesses"]
    log = [[t, 1, 1, 1, 1, "ok", a] for t, a in ((500, 100), (750, 5000), (1000, 9000))]
    sim = {"workloads": [{"runtime_ns": 4_000_000_000, "accesses": 200_000}],
           "proactive": {"schedules": [{"log_columns": cols, "log": log}]}}
    th = vm.reclaim_progress(norm, sim)
    assert th == [[100, 5000, 9000] + [200_000] * 5]
    plan = vm.guest_plan(norm, 1, [1], [], True, th)
    assert plan["reclaim"][0]["after_accesses"] == th[0]


def test_the_models_write_log_counts_the_accesses_done_when_each_write_starts():
    # The accesses a write's log row gives are those of a run cut at its start: the run
    # up to then is the same (a discrete-event run does not look ahead).
    sets = ["workload[0].accesses=40000", "reclaim[0].times=3"]
    norm = _norm("calib-mglru-reclaim", *sets)
    sim = json.loads(_core.run_json(json.dumps(norm), None))
    log = sim["proactive"]["schedules"][0]
    col, tcol = log["log_columns"].index("accesses"), log["log_columns"].index("t_ns")
    assert len(log["log"]) == 3
    for row in log["log"]:
        cut = _norm("calib-mglru-reclaim", *sets, f"duration={row[tcol] + 1}ns")
        upto = json.loads(_core.run_json(json.dumps(cut), None))
        done = sum(w["accesses"] for w in upto["workloads"])
        assert 0 < row[col] and abs(row[col] - done) <= 1, (row, done)


def test_rep_counters_keep_each_threads_hits_and_misses_beside_the_totals():
    # Two threads of one usemem process: one ran alone and fitted, the other thrashed.
    t0 = {"accesses": 24576, "hits": 18431, "misses": 1, "major_faults": 1, "minor_faults": 6144, "elapsed_ns": 41_600_000}
    t1 = {"accesses": 24576, "hits": 6524, "misses": 11908, "major_faults": 11908, "minor_faults": 6144, "elapsed_ns": 1_250_400_000}
    rep = {"processes": [{"threads": [t0, t1]}], "vmstat": {}, "cgroups": {}}
    c = vm.rep_counters(rep, {"cgroup": []})
    assert (c["hits"], c["misses"]) == (18431 + 6524, 1 + 11908)
    assert (c["hits#t0"], c["misses#t0"], c["hits#t1"], c["misses#t1"]) == (18431, 1, 6524, 11908)
    assert (c["elapsed_ms#t0"], c["elapsed_ms#t1"]) == (42, 1250)  # ns to ms, rounded
    # The simulator reports its threads the same way (workloads[i].threads, in stream
    # order): its rows sit beside the kernel's and are compared.
    from types import SimpleNamespace

    from reclaimsim.sidebyside import assemble, sim_counters

    w = {"name": "u", "accesses": 49152, "hits": 24955, "misses": 11909, "major_faults": 11909,
         "minor_faults": 12288, "runtime_ns": 1_300_000_000,
         "threads": [{"stream": 0, "hits": 18431, "misses": 1, "elapsed_ns": 40_000_000},
                     {"stream": 1, "hits": 6524, "misses": 11908, "elapsed_ns": 1_300_000_000}]}
    sim = sim_counters(SimpleNamespace(workloads=[w], vmstat={}, cgroups=[], oom_kills=[]))
    assert (sim["misses#t0"], sim["misses#t1"], sim["elapsed_ms#t1"]) == (1, 11908, 1300)
    report = assemble({"seed": 1}, [{"wall_s": 1.0, "counters": c}], [sim], [], 2, "k")
    rows = {r["name"]: r for r in report["counters"]}
    assert rows["misses#t1"]["comparable"] and rows["misses#t1"]["diff_pct"] == 0.0
    assert rows["elapsed_ms#t1"]["comparable"] and rows["elapsed_ms#t1"]["diff_pct"] == pytest.approx(4.0)
    assert rows["misses"]["comparable"]


# /sys/kernel/debug/lru_gen as 6.1's lru_gen_seq_show prints it (memcg id and path, then
# per node its generations, oldest first: seq, age in ms, anon and file pages).
LRU_GEN_TEXT = """memcg     1 /
 node     0
          0      40113          0          0
          1      40113          0          0
          2      40113          0          0
          3      40113          0          0
memcg     2 /anon
 node     0
         14        150          0        512
         15         93       1024          0
         16         25       2048          0
 node     1
          4        310         16          0
          5         12          0          0
"""


def test_rep_counters_give_each_threads_context_switches_not_compared():
    # Each thread's switches (getrusage's ru_nvcsw and ru_nivcsw) are rows of their own; a
    # thread the OOM killer ended has none (0). The model has no scheduler: the rows are
    # shown, not compared.
    t0 = {"accesses": 10, "hits": 10, "misses": 0, "major_faults": 0, "minor_faults": 0,
          "voluntary_ctxt_switches": 7, "nonvoluntary_ctxt_switches": 2}
    t1 = {"accesses": 10, "hits": 10, "misses": 0, "major_faults": 0, "minor_faults": 0}
    rep = {"processes": [{"threads": [t0, t1]}], "vmstat": {}, "cgroups": {}}
    c = vm.rep_counters(rep, {"cgroup": []})
    assert (c["voluntary_ctxt_switches#t0"], c["nonvoluntary_ctxt_switches#t0"]) == (7, 2)
    assert (c["voluntary_ctxt_switches#t1"], c["nonvoluntary_ctxt_switches#t1"]) == (0, 0)
    from reclaimsim.sidebyside import assemble

    report = assemble({"seed": 1}, [{"wall_s": 1.0, "counters": c}], [{}], [], 2, "k")
    rows = {r["name"]: r for r in report["counters"]}
    for k in ("voluntary_ctxt_switches#t0", "nonvoluntary_ctxt_switches#t1"):
        assert not rows[k]["comparable"] and "scheduler" in rows[k]["why_not"]


def test_rep_counters_give_each_cgroups_stall_and_cpu_time_in_ms_kernel_only():
    # memory.pressure's totals and cpu.stat's are microseconds (psi_show, cpu_stat_show);
    # the rows are milliseconds. The model has neither: shown without a difference.
    files = {"memory.pressure": {"some": 2_500_000, "full": 1_750_500},
             "cpu.stat": {"usage_usec": 9_000_000, "user_usec": 1_000_000, "system_usec": 8_000_000}}
    rep = {"processes": [], "vmstat": {}, "cgroups": {"/r": files, "/empty": {}}}
    c = vm.rep_counters(rep, {"cgroup": [{"path": "/r"}, {"path": "/empty"}]})
    assert c["memory.pressure.some_ms@/r"] == 2500.0
    assert c["memory.pressure.full_ms@/r"] == 1750.5
    assert (c["cpu.stat.user_ms@/r"], c["cpu.stat.system_ms@/r"]) == (1000.0, 8000.0)
    # A kernel without PSI (or a cgroup whose files were not read) gives no row.
    assert not any(k.endswith("@/empty") and k.startswith(("memory.pressure", "cpu.stat")) for k in c)
    from reclaimsim.sidebyside import assemble

    report = assemble({"seed": 1}, [{"wall_s": 1.0, "counters": c}], [{}], [], 2, "k")
    rows = {r["name"]: r for r in report["counters"]}
    for k in ("memory.pressure.some_ms@/r", "cpu.stat.system_ms@/r"):
        assert not rows[k]["comparable"] and rows[k]["diff_pct"] is None, rows[k]
    assert "PSI" in rows["memory.pressure.full_ms@/r"]["why_not"]


def test_rep_counters_count_each_memcgs_agings_from_lru_gen():
    # A memcg made for the rep starts at max_seq 3 on each node (MIN_NR_GENS + 1) and
    # each inc_max_seq adds one: /anon aged 16 - 3 = 13 times on node 0 and 5 - 3 = 2
    # on node 1. The root is not one of the scenario's cgroups: no row.
    rep = {"processes": [], "vmstat": {}, "cgroups": {"/anon": {}}, "lru_gen": LRU_GEN_TEXT}
    norm = {"kernel": {"lru": "mglru"}, "cgroup": [{"path": "/anon"}]}
    c = vm.rep_counters(rep, norm)
    assert c["inc_max_seq@/anon"] == 15
    assert not any(k.startswith("inc_max_seq@/") and k != "inc_max_seq@/anon" for k in c)
    # The classic LRU leaves the file at max_seq 3 (nothing ages): no row; nor without
    # the file (no debugfs).
    assert "inc_max_seq@/anon" not in vm.rep_counters(rep, {**norm, "kernel": {"lru": "classic"}})
    rep["lru_gen"] = None
    assert "inc_max_seq@/anon" not in vm.rep_counters(rep, norm)
    # The simulator's lru_gen table at the run's end gives the same row.
    from reclaimsim.sidebyside import inc_max_seq_rows, sim_max_seqs

    table = {"columns": ["memcg_id", "cgroup", "node", "seq", "age_ms", "nr_anon", "nr_file"],
             "rows": [[1, "/", 0, 3, 9, 0, 0], [2, "/anon", 0, 26, 25, 0, 3], [2, "/anon", 0, 27, 15, 0, 0],
                      [2, "/anon", 1, 3, 15, 0, 0]]}
    assert inc_max_seq_rows(sim_max_seqs(table), ["/anon"]) == {"inc_max_seq@/anon": 24}
    assert sim_max_seqs(None) == {}


def test_a_kernel_that_crashes_before_its_init_is_booted_again(monkeypatch, tmp_path):
    consoles = [b"[ 1.8] Oops: int3\n[ 1.9] Kernel panic", b"[ 1.8] Oops\n", b"reclaimsim-guest: started\n"]
    calls = []

    def fake_once(kernel, initrd, norm, accel, console, data, disk, timeout):
        calls.append(1)
        text = consoles[len(calls) - 1]
        console.write_bytes(text)
        return ({"reps": []} if vm.STARTED in text and b"panic" not in text else None), "", 0

    monkeypatch.setattr(vm, "_boot_once", fake_once)
    monkeypatch.setenv("RECLAIMSIM_CACHE", str(tmp_path / "cache"))
    k = vm.Kernel(tmp_path / "bzImage", "t")
    doc = vm.boot(k, tmp_path / "i", {}, "tcg", tmp_path, None, 60)
    assert len(calls) == 3 and doc["boot_retries"] == 2
    # a crash after the runner started is the scenario's result, not retried
    calls.clear()
    consoles[:] = [b"reclaimsim-guest: started\n[ 9.0] Kernel panic"]
    with pytest.raises(KernelRunError, match="no result from the guest"):
        vm.boot(k, tmp_path / "i", {}, "tcg", tmp_path, None, 60)
    assert len(calls) == 1
    # every attempt crashing: the error after BOOT_RETRIES + 1 boots
    calls.clear()
    consoles[:] = [b"[ 1.8] Oops"] * 3
    with pytest.raises(KernelRunError, match="Oops"):
        vm.boot(k, tmp_path / "i", {}, "tcg", tmp_path, None, 60)
    assert len(calls) == vm.BOOT_RETRIES + 1


# ---------------------------------------------------------------------------------------
# the guest's own costs


def _fig(name, ns):
    return {"name": name, "ns": ns, "spread": 0.05, "ops": 1000, "how": f"timed {name}"}


# What a TCG guest's calibration boot might send: every figure several times the table's.
GUEST_FIGS = [
    _fig("anon_fault_path", 20000.0), _fig("page_zero", 2000.0), _fig("access_seq", 40.0),
    _fig("access_random", 300.0), _fig("file_read_hit", 8000.0), _fig("file_read_miss_path", 90000.0),
    _fig("swap_in_path", 60000.0),
]


def _fake_calibration_boot(monkeypatch, tmp_path, figs=GUEST_FIGS):
    """vm.guest_costs with the boot, the initramfs and the disk replaced: returns the list
    of plans the calibration boots were given."""
    plans = []
    monkeypatch.setattr(vm, "cache_dir", lambda: tmp_path / "cache")
    monkeypatch.setattr(vm, "guest_runner", lambda: b"runner")
    monkeypatch.setattr(vm, "calibration_key", lambda kernel, accel, runner: f"{kernel.release}-{accel}")
    monkeypatch.setattr(vm, "module_paths", lambda kernel, names: [])
    monkeypatch.setattr(vm, "base_initramfs", lambda kernel, mods, runner: tmp_path / "base.cpio")
    monkeypatch.setattr(vm, "make_disk", lambda path, size: None)

    def fake_plan(base, plan, dest):
        plans.append(plan)
        return dest

    def fake_boot(kernel, initrd, norm, accel, workdir, disk, timeout, progress=None):
        assert disk is not None and norm["machine"] == vm.CALIBRATION_MACHINE
        return {"kernel": kernel.release, "calibration": figs}

    monkeypatch.setattr(vm, "plan_initramfs", fake_plan)
    monkeypatch.setattr(vm, "boot", fake_boot)
    return plans


def test_guest_costs_time_the_guest_once_and_derive_the_entries_as_calibrate_does(monkeypatch, tmp_path):
    plans = _fake_calibration_boot(monkeypatch, tmp_path)
    k = vm.Kernel(tmp_path / "vmlinuz", "6.12.95+deb12-cloud-amd64")
    path, how = vm.guest_costs(k, "tcg", 60)
    # one boot, with no reps: the calibration sizes, zram swap and a data disk
    assert len(plans) == 1
    p = plans[0]
    assert p["calibrate"] == vm.GUEST_CALIBRATION and p["swap_bytes"] > 0 and p["disk"] == "/dev/vda"
    assert "reps" not in p and "scenario" not in p
    assert "timed now" in how
    table = {c["name"]: c["ns"] for c in json.loads(_core.cost_table_json())}
    data = load_scenario("calib-zipf", [f"costs_profile={json.dumps(str(path))}"])
    got = {c["name"]: c for c in json.loads(_core.cost_table_json(json.dumps(data)))}
    # measured entries as measured
    assert got["file_read_hit"]["ns"] == 8000 and got["access_random"]["ns"] == 300
    # path figures less the entries the path also takes (the measured ones, else the table's)
    assert got["fault_entry"]["ns"] == 20000 - 2000 - table["page_alloc"] - table["pte_map"]
    assert got["ssd_read_latency"]["ns"] == 90000 - 8000 - table["page_alloc"]
    fault = got["fault_entry"]["ns"]
    assert got["zram_read"]["ns"] == 60000 - fault - table["page_alloc"] - table["pte_map"] - table["swap_cache_op"]
    assert got["file_read_hit"]["origin"]["layer"] == "costs_profile"
    # what no figure measured keeps the table's value
    assert got["list_op"]["ns"] == table["list_op"] and got["list_op"]["origin"]["layer"] == "default"
    # a second run takes the cached profile: no boot
    path2, how2 = vm.guest_costs(k, "tcg", 60)
    assert path2 == path and len(plans) == 1 and "timed before" in how2
    # another accelerator is another guest
    vm.guest_costs(k, "kvm", 60)
    assert len(plans) == 2


def test_the_scenarios_own_costs_win_over_the_guests(monkeypatch, tmp_path):
    _fake_calibration_boot(monkeypatch, tmp_path)
    path, _ = vm.guest_costs(vm.Kernel(tmp_path / "vmlinuz", "6.12.95"), "tcg", 60)
    notes = []
    model = vm.with_guest_costs(load_scenario("calib-zipf", ["costs.file_read_hit=700"]), path, notes)
    got = {c["name"]: c["ns"] for c in json.loads(_core.cost_table_json(json.dumps(model)))}
    assert got["file_read_hit"] == 700 and got["access_random"] == 300
    assert notes == []
    model = vm.with_guest_costs(dict(model, costs_profile="/elsewhere.toml"), path, notes)
    assert model["costs_profile"] == str(path) and "/elsewhere.toml" in notes[0]


def test_calibration_key_names_the_guest_the_costs_were_timed_in(monkeypatch, tmp_path):
    monkeypatch.setattr(vm, "_need", lambda tool, package: "/bin/true")
    img = tmp_path / "vmlinuz"
    img.write_bytes(b"x" * 10)
    k = vm.Kernel(img, "6.12.95")
    key = vm.calibration_key(k, "tcg", b"runner")
    assert key == vm.calibration_key(k, "tcg", b"runner")
    assert key != vm.calibration_key(k, "kvm", b"runner")
    assert key != vm.calibration_key(k, "tcg", b"another runner")
    img.write_bytes(b"x" * 11)
    assert key != vm.calibration_key(k, "tcg", b"runner")


def _fake_guest_rep(elapsed_ns):
    return {
        "wall_s": 1.0, "vmstat": {"pgscan_file": 10},
        "cgroups": {"/reader": {"memory.stat": {"file": 0}, "memory.events": {}}},
        "processes": [{"workload": 0, "threads": [{"accesses": 5, "hits": 1, "misses": 4, "major_faults": 4,
                                                   "minor_faults": 0, "elapsed_ns": elapsed_ns}]}],
        "reclaim_writes": [],
    }


def test_kernel_run_vm_runs_the_model_with_the_guests_costs_and_compares_time(monkeypatch, tmp_path):
    _fake_calibration_boot(monkeypatch, tmp_path)
    k = vm.Kernel(tmp_path / "vmlinuz", "6.12.95+deb12-cloud-amd64")
    monkeypatch.setattr(vm, "resolve_kernel", lambda spec, progress=None: k)
    monkeypatch.setattr(vm, "check_prerequisites", lambda: None)
    monkeypatch.setattr(vm, "resolve_accel", lambda accel, kernel, base, progress=None: ("tcg", "tcg (asked)"))
    seen = []

    def fake_run_in_vm(norm, nprocs, reps, kernel, accel, timeout, progress=None, after=None, hists=None, kprobes=None):
        return {"reps": [_fake_guest_rep(10**9)], "accel_how": "tcg (asked)", "accel": accel, "kernel": kernel.release}

    def fake_simulate(norm, runs, progress=None, per_cgroup=False, locks=None, tracepoints=None):
        seen.append(norm)
        return [{"pgscan_file": 10, "elapsed_ms@zipf": 1000.0}]

    monkeypatch.setattr(vm, "run_in_vm", fake_run_in_vm)
    monkeypatch.setattr(vm, "simulate", fake_simulate)
    data = load_scenario("calib-zipf", ["workload[0].accesses=5"])
    rep = vm.kernel_run_vm(data, 1, None, "tcg", 60)
    assert seen[0]["costs_profile"].endswith("6.12.95+deb12-cloud-amd64-tcg.toml")
    assert any("the model runs with the guest's costs, timed now" in n for n in rep["notes"])
    rows = {r["name"]: r for r in rep["counters"]}
    assert rows["elapsed_ms@zipf"]["comparable"]
    # with the table's costs the time rows of a TCG guest are not comparable
    seen.clear()
    rep = vm.kernel_run_vm(data, 1, None, "tcg", 60, model_costs="table")
    assert "costs_profile" not in seen[0] or seen[0]["costs_profile"] is None
    rows = {r["name"]: r for r in rep["counters"]}
    assert not rows["elapsed_ms@zipf"]["comparable"] and "TCG" in rows["elapsed_ms@zipf"]["why_not"]


def test_kernel_compare_runs_each_model_side_with_its_kernels_guest_costs(monkeypatch, tmp_path):
    from reclaimsim import kernelcompare

    # Kernel A's guest times file_read_hit at 8000 ns, kernel B's at 4000.
    figs = {"A": [_fig("file_read_hit", 8000.0)], "B": [_fig("file_read_hit", 4000.0)]}
    _fake_calibration_boot(monkeypatch, tmp_path)
    monkeypatch.setattr(vm, "boot", lambda kernel, *a, **k: {"calibration": figs[kernel.release]})
    monkeypatch.setattr(vm, "resolve_accel", lambda accel, kernel, base, progress=None: ("tcg", "tcg (asked)"))
    monkeypatch.setattr(vm, "check_prerequisites", lambda: None)
    monkeypatch.setattr(kernelcompare, "_kernel", lambda spec, progress: vm.Kernel(tmp_path / spec, spec))
    monkeypatch.setattr(vm, "run_in_vm", lambda norm, nprocs, reps, kernel, accel, timeout, progress=None, after=None: {
        "reps": [_fake_guest_rep(10**9)], "accel_how": "tcg (asked)", "accel": accel})
    timed, costs = [], {}

    def fake_timing(norm, how, notes, progress):
        timed.append(norm.get("costs_profile"))
        return None

    def fake_simulate(norm, runs, progress=None, per_cgroup=False, locks=None):
        table = {c["name"]: c["ns"] for c in json.loads(_core.cost_table_json(json.dumps(norm)))}
        costs.setdefault("sides", []).append(table["file_read_hit"])
        return [{"pgscan_file": 10}] * runs

    monkeypatch.setattr(vm, "reclaim_timing", fake_timing)
    monkeypatch.setattr(kernelcompare, "simulate", fake_simulate)
    data = load_scenario("calib-zipf", ["workload[0].accesses=5"])
    c = kernelcompare.kernel_compare(data, "A", "B", 2, "tcg", 60, "rotation_cost=true", "rotation_cost=false")
    assert costs["sides"] == [8000, 4000]
    # kernel A's guest sets the memory.reclaim writes' progress points
    assert timed == [str(tmp_path / "cache" / "guest-costs" / "A-tcg.toml")]
    assert any(n.startswith("model B: the model runs with the guest's costs of kernel B") for n in c["notes"])


def test_a_guest_running_damon_stat_is_noted_and_one_without_is_not():
    assert "DAMON_STAT" in vm.guest_setup_notes({"damon_stat": "Y", "cpus": 2})[0]
    assert vm.guest_setup_notes({"damon_stat": "N"}) == []
    assert vm.guest_setup_notes({"damon_stat": None}) == []
    assert vm.guest_setup_notes({}) == []
