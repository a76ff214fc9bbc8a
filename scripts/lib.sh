# Shared by scripts/install and scripts/test (sourced, from the project root).
#
# The environment: a virtual environment (default .venv in the project; RECLAIMSIM_VENV
# to put it elsewhere) holds the package, installed editable: the Python sources are read
# from python/ where they are, and the Rust core is a compiled module built into
# python/reclaimsim/. A build stamp in the virtual environment records the hash of the
# files the compiled module is built from (`source_hash`: crates/, Cargo.toml,
# Cargo.lock, pyproject.toml; tracked and untracked files, ignored ones left out) and
# which build it is (pgo or plain); the build is up to date while that hash is unchanged.
# (Python sources need no build: the editable install reads them from python/.)

venv="${RECLAIMSIM_VENV:-$PWD/.venv}"
stamp="$venv/reclaimsim-build.stamp"
t_start=$SECONDS

# say MESSAGE: one line of progress on stderr, prefixed with the script's name.
say() { echo "scripts/$(basename "$0"): $*" >&2; }

# since T0: the seconds since T0, as "42 s" or "3 min 5 s".
since() {
    local s=$((SECONDS - $1))
    if [ "$s" -ge 60 ]; then echo "$((s / 60)) min $((s % 60)) s"; else echo "$s s"; fi
}

# source_hash: one hash over the paths and contents of the compiled module's sources:
# each crate's src/, Cargo.toml and build.rs, the workspace's Cargo.toml and Cargo.lock,
# pyproject.toml and .cargo/config.toml, whose flags change the code (tests, examples and
# docs are not built into it). crates/guest is one of them: crates/py/build.rs builds the
# VM's runner and the module embeds it.
source_hash() {
    {
        if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
            git ls-files -z --cached --others --exclude-standard -- ':(glob)crates/*/src/**' \
                ':(glob)crates/*/Cargo.toml' ':(glob)crates/*/build.rs' Cargo.toml Cargo.lock pyproject.toml \
                .cargo/config.toml
        else
            find crates/*/src crates/*/Cargo.toml crates/*/build.rs Cargo.toml Cargo.lock pyproject.toml \
                .cargo/config.toml \
                -type f -print0 2>/dev/null
        fi
    } | sort -z | while IFS= read -r -d '' f; do
        # A tracked file deleted in the work tree is gone from the build too.
        if [ -f "$f" ]; then printf '%s %s\n' "$(sha256sum < "$f" | cut -c1-64)" "$f"; fi
    done | sha256sum | cut -c1-16
}

# build_state: "current", "missing" or "stale" (with the reason on stdout after a colon).
build_state() {
    if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import reclaimsim._core' 2>/dev/null; then
        echo "missing: no reclaimsim in $venv"
    elif [ ! -f "$stamp" ]; then
        echo "missing: no build stamp in $venv"
    elif [ "$(cut -d' ' -f1 "$stamp")" != "$(source_hash)" ]; then
        echo "stale: the Rust sources changed since the $(cut -d' ' -f2 "$stamp") build of $(cut -d' ' -f3- "$stamp")"
    else
        echo "current: the $(cut -d' ' -f2 "$stamp") build of $(cut -d' ' -f3- "$stamp")"
    fi
}

# apt_install WHY PACKAGE...: install the Debian packages that are missing, saying so and
# the exact command; never removes a package (apt-get --no-remove: an install that would
# remove one, such as a newer qemu-utils from backports, fails instead). Returns non-zero
# when not root, without apt-get, or when apt-get fails.
apt_install() {
    local why="$1"; shift
    local missing=()
    for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
    [ ${#missing[@]} -gt 0 ] || return 0
    local cmd=(apt-get install -y -q --no-install-recommends --no-remove "${missing[@]}")
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        say "$why needs ${missing[*]}; as root: ${cmd[*]}"
        return 1
    fi
    say "installing ${missing[*]} for $why (${cmd[*]}; a minute or two, once)"
    export DEBIAN_FRONTEND=noninteractive
    "${cmd[@]}" >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && "${cmd[@]}" >/dev/null 2>&1; } || {
        say "${cmd[*]} failed (it removes nothing: run it yourself to see why)"
        return 1
    }
}

# The Debian packages of each optional part (scripts/install --with PART,...).
VM_PACKAGES=(qemu-system-x86 cpio)
KERNEL_BUILD_PACKAGES=(make gcc binutils flex bison bc perl patch xz-utils libelf-dev)

# install_vm_packages: QEMU (kernel-run --vm boots kernels under it) and cpio (the
# initramfs test's reference reader); without them the VM tests say they are skipped.
install_vm_packages() {
    command -v qemu-system-x86_64 >/dev/null && command -v cpio >/dev/null && return 0
    apt_install "kernel-run --vm and its tests" "${VM_PACKAGES[@]}" || say "kernel-run --vm's boot tests will be skipped"
}

# chromium and its driver for the HTML report's browser test (tests/python/test_report.py).
install_browser() {
    command -v chromium >/dev/null && command -v chromedriver >/dev/null && return 0
    apt_install "the report's browser test" chromium chromium-driver || say "the report's browser test will be skipped"
}

# ensure_pinned_toolchain: rust-toolchain.toml pins the toolchain by version (the
# instruction counts of scripts/icount depend on the compiler). Where rustup's `stable`
# is that very version but is not installed under the version's name, name it so (rustup
# toolchain link), rather than have rustup download a copy.
ensure_pinned_toolchain() {
    local want
    want=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml 2>/dev/null)
    [ -n "$want" ] && command -v rustup >/dev/null 2>&1 || return 0
    rustup toolchain list 2>/dev/null | grep -q "^$want-" && return 0
    local have
    have=$(RUSTUP_TOOLCHAIN=stable rustc -V 2>/dev/null | awk '{print $2}')
    if [ "$have" = "$want" ]; then
        say "naming rustup's stable toolchain ($have) $want, as rust-toolchain.toml asks"
        rustup toolchain link "$want" "$(RUSTUP_TOOLCHAIN=stable rustc --print sysroot)"
    else
        say "rust-toolchain.toml pins Rust $want; rustup's stable is ${have:-missing}: rustup will fetch $want"
    fi
}

# install_valgrind: valgrind (callgrind counts instructions for scripts/icount).
install_valgrind() {
    command -v valgrind >/dev/null && return 0
    apt_install "the instruction counts (scripts/icount)" valgrind || exit 1
}

# config_rustflags: the flags .cargo/config.toml gives this host's target, as one
# RUSTFLAGS string (empty if none): a build whose RUSTFLAGS are set (the profile-guided
# steps of scripts/install) loses them otherwise. Read with the virtual environment's
# Python (3.11 or later, for tomllib): call it once $venv exists.
config_rustflags() {
    local host
    host=$(rustc -vV | sed -n 's/^host: //p')
    "$venv/bin/python" - "$host" <<'PY'
import os, sys, tomllib
cfg = {}
if os.path.exists(".cargo/config.toml"):
    with open(".cargo/config.toml", "rb") as f:
        cfg = tomllib.load(f)
print(" ".join(cfg.get("target", {}).get(sys.argv[1], {}).get("rustflags", [])))
PY
}

# build_runner TREE TARGET_DIR: build the plain release runner of the source tree TREE
# (crates/core/examples/run.rs) into TARGET_DIR; print the binary's path.
build_runner() {
    local tree="$1" target
    target=$(realpath -m "$2")
    (cd "$tree" && cargo build -q --release -p reclaimsim-core --example run --target-dir "$target" >&2)
    echo "$target/release/examples/run"
}
