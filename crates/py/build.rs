//! Builds the virtual machine's guest runner (crates/guest) and hands it to the extension
//! module, which embeds it (`_core.guest_runner()`).
//!
//! `kernel-run --vm` boots a kernel whose initramfs holds that runner as `/init`. It must
//! be a static executable (the initramfs has no C library), so it cannot be the extension
//! module itself, and maturin builds one cargo artifact per wheel. Embedding its bytes
//! makes every build of the package, a wheel from `pip install .` included, carry the
//! runner that matches its own Rust sources, with no source tree and no cargo needed
//! when it runs.
//!
//! The runner is built by a second cargo, in its own target directory (target/guest-runner
//! beside the workspace's, so the two builds never wait on one lock), with the `guest`
//! profile (no LTO: the replay loops are simple) and the C library linked in statically.
//! The outer build's flags (PGO instrumentation, a coverage build's) are not passed on:
//! the runner runs in the guest, where no profile could be written.
use std::path::{Path, PathBuf};
use std::process::Command;

/// The guest's target: the VM is x86-64 (vm.py's QEMU) whatever the build host is.
const GUEST_TARGET: &str = "x86_64-unknown-linux-gnu";

fn main() {
    let manifest = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let root = manifest.join("../..");
    for dir in ["crates/core/src", "crates/host/src", "crates/guest/src"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    for file in ["Cargo.lock", "Cargo.toml", "crates/guest/Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", root.join(file).display());
    }
    let target_dir = target_dir(&root);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .args([
            "--profile",
            "guest",
            "--target",
            GUEST_TARGET,
            "-p",
            "reclaimsim-guest",
        ])
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .env("RUSTFLAGS", "-C target-feature=+crt-static");
    // What the outer cargo passes to build scripts and must not reach the inner build.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("could not start cargo to build the guest runner: {e}"));
    assert!(
        status.success(),
        "building the guest runner (crates/guest) failed: {status}"
    );
    let runner = target_dir
        .join(GUEST_TARGET)
        .join("guest")
        .join("reclaimsim-guest");
    assert!(
        runner.is_file(),
        "the guest runner is not at {}",
        runner.display()
    );
    println!(
        "cargo:rustc-env=RECLAIMSIM_GUEST_RUNNER={}",
        runner.display()
    );
}

/// target/guest-runner under the build's target directory (CARGO_TARGET_DIR when the
/// build sets one), else under the workspace root.
fn target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => PathBuf::from(d).join("guest-runner"),
        None => root.join("target").join("guest-runner"),
    }
}
