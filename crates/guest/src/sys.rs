//! System setup of the guest: mounts, modules, sysctls, the LRU, zram swap, power-off.

use crate::plan::Plan;
use serde_json::{json, Value};
use std::ffi::CString;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

pub const CGROOT: &str = "/sys/fs/cgroup";
pub const WORKDIR: &str = "/work";
const LRU_GEN: &str = "/sys/kernel/mm/lru_gen/enabled";

fn cstr(s: &str) -> CString {
    CString::new(s).expect("no NUL in paths")
}

fn os_err(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

pub fn mount(src: &str, target: &str, fstype: &str, data: &str) -> Result<(), String> {
    std::fs::create_dir_all(target).map_err(|e| format!("mkdir {target}: {e}"))?;
    let (s, t, f, d) = (cstr(src), cstr(target), cstr(fstype), cstr(data));
    // SAFETY: valid NUL-terminated strings that outlive the call.
    let rc = unsafe {
        libc::mount(
            s.as_ptr(),
            t.as_ptr(),
            f.as_ptr(),
            0,
            d.as_ptr() as *const libc::c_void,
        )
    };
    if rc != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EBUSY) {
        return Err(os_err(&format!("mount {fstype} on {target}")));
    }
    Ok(())
}

/// The pseudo filesystems every run needs.
pub fn mount_base() -> Result<(), String> {
    mount("proc", "/proc", "proc", "")?;
    mount("sysfs", "/sys", "sysfs", "")?;
    mount("devtmpfs", "/dev", "devtmpfs", "")?;
    mount("tmpfs", "/dev/shm", "tmpfs", "")?;
    mount("cgroup2", CGROOT, "cgroup2", "")?;
    // debugfs is for MGLRU's /sys/kernel/debug/lru_gen only: a kernel without it still
    // runs every plan.
    let _ = mount("debugfs", DEBUGFS, "debugfs", "");
    Ok(())
}

/// Where mount_base mounts debugfs.
pub const DEBUGFS: &str = "/sys/kernel/debug";

/// Load kernel modules in order (finit_module; compressed .ko.xz/.ko.zst are
/// decompressed by the kernel, which Debian's kernels allow).
pub fn load_modules(paths: &[String]) -> Result<(), String> {
    const MODULE_INIT_COMPRESSED_FILE: libc::c_uint = 4;
    for p in paths {
        let f = File::open(p).map_err(|e| format!("{p}: {e}"))?;
        let flags = if p.ends_with(".ko") {
            0
        } else {
            MODULE_INIT_COMPRESSED_FILE
        };
        let empty = cstr("");
        // SAFETY: a valid fd and parameter string.
        let rc =
            unsafe { libc::syscall(libc::SYS_finit_module, f.as_raw_fd(), empty.as_ptr(), flags) };
        if rc != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
            return Err(os_err(&format!("loading module {p}")));
        }
    }
    Ok(())
}

pub fn write(path: &str, value: &str) -> Result<(), String> {
    std::fs::write(path, value).map_err(|e| format!("cannot write {value:?} to {path}: {e}"))
}

pub fn uname_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Sysctls, the LRU, swap and the data disk; returns what was set up.
pub fn setup(plan: &Plan) -> Result<Value, String> {
    if let Some(want) = &plan.lru_gen {
        if !Path::new(LRU_GEN).exists() {
            return Err(format!(
                "this kernel ({}) has no {LRU_GEN}: it was built without CONFIG_LRU_GEN, so it cannot run kernel.lru = \"{}\"",
                uname_release(),
                if want == "n" { "classic" } else { "mglru" }
            ));
        }
        write(LRU_GEN, want)?;
    }
    for (path, value) in &plan.writes {
        write(path, value)?;
    }
    let lru_gen = std::fs::read_to_string(LRU_GEN)
        .ok()
        .map(|s| s.trim().to_string());
    if plan.swap_bytes > 0 {
        zram_swap(plan.swap_bytes)?;
    }
    if let Some(dev) = &plan.disk {
        mount(dev, WORKDIR, "ext4", "")?;
        let name = dev.trim_start_matches("/dev/");
        // Readahead off, as the workloads read one page at a time (POSIX_FADV_RANDOM too).
        let _ = write(&format!("/sys/block/{name}/queue/read_ahead_kb"), "0");
    }
    // DAMON_STAT (6.17 on) monitors physical memory from boot where the kernel's config
    // enables it by default (Debian's 7.x): its kdamond clears the accessed bits of the
    // pages it samples. The host says so beside the model, which has no DAMON.
    let damon_stat = std::fs::read_to_string("/sys/module/damon_stat/parameters/enabled")
        .ok()
        .map(|s| s.trim().to_string());
    Ok(json!({
        "lru_gen_enabled": lru_gen,
        "damon_stat": damon_stat,
        "swap_bytes": plan.swap_bytes,
        "memtotal_kb": meminfo("MemTotal"),
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
    }))
}

fn meminfo(key: &str) -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k == key).then(|| v.trim().trim_end_matches(" kB").trim().parse().ok())?
        })
        .unwrap_or(0)
}

/// zram0 as swap: size it, write a version-1 swap header (what mkswap writes), swapon.
fn zram_swap(bytes: u64) -> Result<(), String> {
    let dev = "/dev/zram0";
    if !Path::new("/sys/block/zram0").exists() {
        return Err("no /sys/block/zram0: the zram module did not load".into());
    }
    write("/sys/block/zram0/disksize", &bytes.to_string())?;
    std::fs::write(dev, swap_header(bytes)).map_err(|e| format!("{dev}: {e}"))?;
    let p = cstr(dev);
    // SAFETY: a valid path.
    if unsafe { libc::swapon(p.as_ptr(), 0) } != 0 {
        return Err(os_err("swapon /dev/zram0"));
    }
    Ok(())
}

/// The first page of a swap area (include/linux/swap.h `union swap_header`): `version` 1,
/// `last_page`, no bad pages, and the "SWAPSPACE2" magic at the page's end.
pub fn swap_header(bytes: u64) -> Vec<u8> {
    const PAGE: usize = 4096;
    let mut h = vec![0u8; PAGE];
    let last_page = (bytes / PAGE as u64).saturating_sub(1) as u32;
    h[1024..1028].copy_from_slice(&1u32.to_le_bytes());
    h[1028..1032].copy_from_slice(&last_page.to_le_bytes());
    h[PAGE - 10..].copy_from_slice(b"SWAPSPACE2");
    h
}

/// Drop clean page cache and slab (what `echo 3 > drop_caches` does), after a sync.
pub fn drop_caches() -> Result<(), String> {
    // SAFETY: plain syscall.
    unsafe { libc::sync() };
    write("/proc/sys/vm/drop_caches", "3")
}

/// The data port, in raw mode (no newline translation).
pub fn open_raw_tty(path: &str) -> std::io::Result<File> {
    let f = std::fs::OpenOptions::new().write(true).open(path)?;
    // SAFETY: termios calls on an fd we own.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(f.as_raw_fd(), &mut t) == 0 {
            libc::cfmakeraw(&mut t);
            libc::tcsetattr(f.as_raw_fd(), libc::TCSANOW, &t);
        }
    }
    Ok(f)
}

/// Wait until the UART has sent everything (else power-off can cut the document).
pub fn tty_drain(f: &File) {
    // SAFETY: an fd we own.
    unsafe { libc::tcdrain(f.as_raw_fd()) };
}

/// Sync and power off. QEMU runs with -no-reboot, so a restart ends it too; that is the
/// fallback when the kernel has no ACPI power-off.
pub fn power_off() -> ! {
    // SAFETY: plain syscalls; PID 1 must never return.
    unsafe {
        libc::sync();
        libc::reboot(libc::RB_POWER_OFF);
        libc::reboot(libc::RB_AUTOBOOT);
    }
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::swap_header;

    /// The header is what util-linux's mkswap writes for the same size (the UUID aside).
    #[test]
    fn swap_header_matches_mkswap() {
        let Ok(mkswap) = which("mkswap") else {
            eprintln!("skipped: no mkswap");
            return;
        };
        for bytes in [64u64 << 20, (256 << 20) + 4096 * 3] {
            let dir = std::env::temp_dir()
                .join(format!("reclaimsim-swaphdr-{}-{bytes}", std::process::id()));
            std::fs::write(&dir, vec![0u8; bytes as usize]).unwrap();
            let out = std::process::Command::new(&mkswap)
                .arg(&dir)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let mut theirs = std::fs::read(&dir).unwrap()[..4096].to_vec();
            std::fs::remove_file(&dir).unwrap();
            let mut ours = swap_header(bytes);
            // sws_uuid: 16 bytes after version, last_page and nr_badpages
            theirs[1036..1052].fill(0);
            ours[1036..1052].fill(0);
            assert_eq!(ours, theirs, "{bytes} bytes");
        }
    }

    fn which(name: &str) -> Result<std::path::PathBuf, ()> {
        for dir in ["/usr/sbin", "/sbin", "/usr/bin", "/bin"] {
            let p = std::path::Path::new(dir).join(name);
            if p.exists() {
                return Ok(p);
            }
        }
        Err(())
    }
}
