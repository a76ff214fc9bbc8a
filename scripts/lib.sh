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
# and pyproject.toml (tests, examples and docs are not built into it).
source_hash() {
    {
        if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
            git ls-files -z --cached --others --exclude-standard -- ':(glob)crates/*/src/**' \
                ':(glob)crates/*/Cargo.toml' ':(glob)crates/*/build.rs' Cargo.toml Cargo.lock pyproject.toml \
                ':(exclude)crates/guest'
        else
            find crates/*/src crates/*/Cargo.toml crates/*/build.rs Cargo.toml Cargo.lock pyproject.toml \
                -type f -not -path 'crates/guest/*' -print0 2>/dev/null
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

# install_vm_packages: QEMU (kernel-run --vm boots kernels under it) and cpio (the
# initramfs test's reference reader), from Debian's packages, when missing and this is
# root with apt-get; otherwise the VM tests say they are skipped and why.
install_vm_packages() {
    local missing=()
    command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
    command -v cpio >/dev/null || missing+=(cpio)
    [ ${#missing[@]} -gt 0 ] || return 0
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        say "not installing ${missing[*]} (needs root and apt-get): kernel-run --vm's boot tests will be skipped"
        return 0
    fi
    say "installing ${missing[*]} for kernel-run --vm (apt-get; a minute or two, once)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1; } ||
        say "apt-get install ${missing[*]} failed: kernel-run --vm's boot tests will be skipped"
}

# chromium and its driver for the HTML report's browser test (tests/python/test_report.py).
install_browser() {
    command -v chromium >/dev/null && command -v chromedriver >/dev/null && return 0
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        say "not installing chromium (needs root and apt-get): the report's browser test will be skipped"
        return 0
    fi
    say "installing chromium and chromium-driver for the report's browser test (apt-get; a minute or two, once)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null 2>&1; } ||
        say "apt-get install chromium chromium-driver failed: the report's browser test will be skipped"
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

# install_valgrind: valgrind (callgrind counts instructions for scripts/icount), from
# Debian's packages, when missing and this is root with apt-get.
install_valgrind() {
    command -v valgrind >/dev/null && return 0
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        say "valgrind is missing and cannot be installed here (needs root and apt-get): install it (apt-get install valgrind)"
        exit 1
    fi
    say "installing valgrind for the instruction counts (apt-get; a minute, once)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends valgrind >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends valgrind >/dev/null 2>&1; } ||
        { say "apt-get install valgrind failed"; exit 1; }
}

# build_runner TREE TARGET_DIR: build the plain release runner of the source tree TREE
# (crates/core/examples/run.rs) into TARGET_DIR; print the binary's path.
build_runner() {
    local tree="$1" target
    target=$(realpath -m "$2")
    (cd "$tree" && cargo build -q --release -p reclaimsim-core --example run --target-dir "$target" >&2)
    echo "$target/release/examples/run"
}
