//! Thin PyO3 bindings of `reclaimsim-core`, exposed as the private module `reclaimsim._core`.
//!
//! Only conversion lives here: JSON text in, JSON text out, and the core's one error enum
//! mapped once onto the Python exception classes. Everything else is in the pure-Rust core.

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use reclaimsim_core::Error;

create_exception!(
    _core,
    ScenarioError,
    PyValueError,
    "A scenario field is invalid."
);
create_exception!(
    _core,
    SimulationError,
    PyRuntimeError,
    "The simulation failed."
);

/// Run one scenario given as JSON text (the normalized scenario schema) and return the
/// result as JSON text. `progress(now_ns, end_ns)` is called every few virtual
/// milliseconds; an exception it raises (Ctrl-C) stops the run and propagates. A run whose
/// estimated memory is above `max_memory` bytes (None: the memory this process may take, budget::available_memory) is
/// refused before it starts.
#[pyfunction]
#[pyo3(signature = (scenario_json, progress=None, max_memory=None))]
fn run_json(
    py: Python<'_>,
    scenario_json: &str,
    progress: Option<PyObject>,
    max_memory: Option<u64>,
) -> PyResult<String> {
    let mut py_err: Option<PyErr> = None;
    let out = {
        let mut cb = |now: u64, end: u64| -> bool {
            if let Some(p) = &progress {
                if let Err(e) = p.call1(py, (now, end)) {
                    py_err = Some(e);
                    return false;
                }
            } else if let Err(e) = py.check_signals() {
                py_err = Some(e);
                return false;
            }
            true
        };
        reclaimsim_core::run_json_limited(scenario_json, max_memory, &mut cb)
    };
    if let Some(e) = py_err {
        return Err(e);
    }
    out.map_err(to_py_err)
}

/// Validate a scenario (JSON text) without running it; returns the normalized scenario as
/// JSON text, with every default filled in. What `run_json` refuses before running (the
/// memory budget included, against `max_memory` or the memory this process may take) is
/// refused here too.
#[pyfunction]
#[pyo3(signature = (scenario_json, max_memory=None))]
fn validate_json(scenario_json: &str, max_memory: Option<u64>) -> PyResult<String> {
    reclaimsim_core::validate_json_limited(scenario_json, max_memory).map_err(to_py_err)
}

/// The estimated host memory of a scenario's run, as JSON text: `total` [bytes] and
/// `terms` (each `name`, `field`, `bytes`).
#[pyfunction]
fn estimate_memory_json(scenario_json: &str) -> PyResult<String> {
    reclaimsim_core::estimate_memory_json(scenario_json).map_err(to_py_err)
}

/// Python's pending signals (Ctrl-C), checked from a long loop that runs without the GIL:
/// false once a handler raised, the exception kept in `err`.
fn signals_ok(err: &mut Option<PyErr>) -> bool {
    Python::with_gil(|py| match py.check_signals() {
        Ok(()) => true,
        Err(e) => {
            *err = Some(e);
            false
        }
    })
}

/// The cost table as JSON text: each entry's name, value [ns], default, origin and
/// one-line documentation; with a scenario (JSON text), its profiles and `[costs]` applied.
#[pyfunction]
#[pyo3(signature = (scenario_json=None))]
fn cost_table_json(scenario_json: Option<&str>) -> PyResult<String> {
    reclaimsim_core::cost_table_json(scenario_json).map_err(to_py_err)
}

/// Check a scenario written by a person (TOML, --set) as JSON text: every duration has a
/// unit (reclaimsim_core::Scenario::check_units).
#[pyfunction]
fn check_units_json(scenario_json: &str) -> PyResult<()> {
    reclaimsim_core::Scenario::check_units(scenario_json).map_err(to_py_err)
}

/// The kernel versions and their rules (reclaimsim_core::versions), as JSON.
#[pyfunction]
fn versions_json() -> String {
    reclaimsim_core::versions::registry_json()
}

/// The modeled kernel version that stands for a kernel release string (`uname -r`, a
/// package version): (version, whether it is that very version), or None for a kernel
/// older than every modeled one (KernelVersion::of_release).
#[pyfunction]
fn version_of_release(release: &str) -> Option<(&'static str, bool)> {
    reclaimsim_core::versions::KernelVersion::of_release(release)
        .map(|(v, exact)| (v.name(), exact))
}

/// The model's lock call sites (the callers its lock tables name), in their order.
#[pyfunction]
fn lock_sites() -> Vec<&'static str> {
    reclaimsim_core::engine::Site::ALL
        .iter()
        .map(|s| s.name())
        .collect()
}

/// The built-in hardware profiles, as JSON text.
#[pyfunction]
fn profiles_json() -> PyResult<String> {
    reclaimsim_core::profiles_json().map_err(to_py_err)
}

/// Check that every workload of a scenario (JSON text) can be replayed on the host kernel;
/// returns the number of processes of each workload.
#[pyfunction]
fn host_processes_json(scenario_json: &str) -> PyResult<Vec<u32>> {
    let sc = reclaimsim_core::Scenario::from_json(scenario_json).map_err(to_py_err)?;
    (0..sc.workloads.len())
        .map(|wi| reclaimsim_host::processes(&sc, wi).map_err(ScenarioError::new_err))
        .collect()
}

/// The CPU of each thread of each process of each workload of a scenario (JSON text), as
/// the simulator places them: kernel-run pins its workers there.
#[pyfunction]
fn host_process_cpus_json(scenario_json: &str) -> PyResult<Vec<Vec<Vec<u32>>>> {
    let sc = reclaimsim_core::Scenario::from_json(scenario_json).map_err(to_py_err)?;
    (0..sc.workloads.len())
        .map(|wi| {
            let n = reclaimsim_host::processes(&sc, wi).map_err(ScenarioError::new_err)?;
            Ok((0..n)
                .map(|p| reclaimsim_host::affinity::process_cpus(&sc, wi, p))
                .collect())
        })
        .collect()
}

/// The names of the files `host_create_files_json` makes (kernel-run records them first).
#[pyfunction]
fn host_file_names_json(scenario_json: &str) -> PyResult<Vec<String>> {
    reclaimsim_host::file_names_json(scenario_json).map_err(pyo3::exceptions::PyValueError::new_err)
}

/// Create the files of the scenario's file_read workloads under `dir` (kernel-run).
#[pyfunction]
fn host_create_files_json(py: Python<'_>, scenario_json: &str, dir: &str) -> PyResult<()> {
    py.allow_threads(|| reclaimsim_host::create_files_json(scenario_json, dir))
        .map_err(pyo3::exceptions::PyOSError::new_err)
}

/// Run one part of `reclaimsim calibrate`'s microbenchmarks (`anon`, `swap`, `page_cache`,
/// `device`, `cache_lines`) on this machine; returns the figures as JSON text.
#[pyfunction]
#[pyo3(signature = (part, dir, cpu_a, cpu_b, anon_pages, file_pages, reps, pingpongs))]
#[allow(clippy::too_many_arguments)]
fn host_calibrate_json(
    py: Python<'_>,
    part: &str,
    dir: &str,
    cpu_a: usize,
    cpu_b: usize,
    anon_pages: usize,
    file_pages: usize,
    reps: usize,
    pingpongs: u64,
) -> PyResult<String> {
    use reclaimsim_host::calibrate::{run_json, Part, Sizes};
    let part = match part {
        "anon" => Part::Anon,
        "swap" => Part::Swap,
        "page_cache" => Part::PageCache,
        "device" => Part::Device,
        "cache_lines" => Part::CacheLines,
        _ => {
            return Err(ScenarioError::new_err(format!(
                "calibrate part {part:?}: allowed anon, swap, page_cache, device, cache_lines"
            )))
        }
    };
    let sizes = Sizes {
        anon_pages,
        file_pages,
        reps,
        pingpongs,
    };
    py.allow_threads(|| run_json(part, std::path::Path::new(dir), (cpu_a, cpu_b), sizes))
        .map_err(pyo3::exceptions::PyOSError::new_err)
}

/// Trace workloads' id-to-page maps, built in the parent before the workers fork
/// (`host_prepare_json`), so that their memory is not charged to the workload's cgroup.
#[pyclass(frozen)]
struct HostPrepared(reclaimsim_host::Prepared);

/// Build the trace maps of a scenario (JSON text) for kernel-run's workers.
#[pyfunction]
fn host_prepare_json(py: Python<'_>, scenario_json: &str) -> PyResult<HostPrepared> {
    let sc = reclaimsim_core::Scenario::from_json(scenario_json).map_err(to_py_err)?;
    py.allow_threads(|| reclaimsim_host::prepare(&sc))
        .map(HostPrepared)
        .map_err(pyo3::exceptions::PyOSError::new_err)
}

/// Replay process `process` of workload `workload` natively in this process (kernel-run's
/// worker, already placed in its cgroup); returns its per-thread statistics as JSON text.
/// `live`: a file of threads * 5 u64 where the threads publish their counters as they go.
/// `pin`: pin each thread to the CPU the simulator gives it (kernel-run --pin).
#[pyfunction]
#[pyo3(signature = (scenario_json, workload, process, dir, live=None, prepared=None, pin=false))]
#[allow(clippy::too_many_arguments)]
fn host_run_process_json(
    py: Python<'_>,
    scenario_json: &str,
    workload: usize,
    process: u32,
    dir: &str,
    live: Option<&str>,
    prepared: Option<&HostPrepared>,
    pin: bool,
) -> PyResult<String> {
    let prepared = prepared.map(|p| &p.0);
    py.allow_threads(|| {
        reclaimsim_host::run_process_json(
            scenario_json,
            workload,
            process,
            dir,
            live,
            prepared,
            pin,
        )
    })
    .map_err(pyo3::exceptions::PyOSError::new_err)
}

/// Write a zipf(`theta`) trace in libCacheSim's oracleGeneral format (zstd when the path
/// ends in .zst): `requests` requests over `objects` 4 KiB objects. Returns bytes written.
/// Ctrl-C stops it.
#[pyfunction]
#[pyo3(signature = (path, objects, requests, theta, seed, max_memory=None))]
fn trace_gen(
    py: Python<'_>,
    path: &str,
    objects: u64,
    requests: u64,
    theta: f64,
    seed: u64,
    max_memory: Option<u64>,
) -> PyResult<u64> {
    let mut sig: Option<PyErr> = None;
    let r = py.allow_threads(|| {
        reclaimsim_core::trace::write_zipf_oracle(
            path,
            objects,
            requests,
            theta,
            seed,
            max_memory,
            &mut || signals_ok(&mut sig),
        )
    });
    if let Some(e) = sig {
        return Err(e);
    }
    r.map_err(to_py_err)
}

/// (requests, distinct objects, pages) of a trace, in one streaming pass. Ctrl-C stops it.
#[pyfunction]
#[pyo3(signature = (path, format="auto"))]
fn trace_count(py: Python<'_>, path: &str, format: &str) -> PyResult<(u64, u64, u64)> {
    let f: reclaimsim_core::scenario::TraceFormat = serde_json::from_value(serde_json::Value::String(format.into()))
        .map_err(|_| ScenarioError::new_err(format!("trace format {format:?}: allowed auto, text, csv, oracle_general, oracle_general_zst, damon")))?;
    let mut sig: Option<PyErr> = None;
    let r = py.allow_threads(|| {
        reclaimsim_core::trace::count_with(path, f, None, 0, &mut || signals_ok(&mut sig))
    });
    if let Some(e) = sig {
        return Err(e);
    }
    r.map_err(to_py_err)
}

fn to_py_err(e: Error) -> PyErr {
    match e {
        Error::Scenario { .. } | Error::Trace { .. } => ScenarioError::new_err(e.to_string()),
        Error::Interrupted => pyo3::exceptions::PyKeyboardInterrupt::new_err("interrupted"),
        Error::Internal(_) => SimulationError::new_err(e.to_string()),
    }
}

/// The VM's guest runner (crates/guest, a static x86-64 executable), built with this
/// module by build.rs and embedded, so that `kernel-run --vm` needs no source tree.
#[pyfunction]
fn guest_runner(py: Python<'_>) -> Bound<'_, pyo3::types::PyBytes> {
    static RUNNER: &[u8] = include_bytes!(env!("RECLAIMSIM_GUEST_RUNNER"));
    pyo3::types::PyBytes::new(py, RUNNER)
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run_json, m)?)?;
    m.add_function(wrap_pyfunction!(validate_json, m)?)?;
    m.add_function(wrap_pyfunction!(estimate_memory_json, m)?)?;
    m.add_function(wrap_pyfunction!(cost_table_json, m)?)?;
    m.add_function(wrap_pyfunction!(profiles_json, m)?)?;
    m.add_function(wrap_pyfunction!(host_calibrate_json, m)?)?;
    m.add_function(wrap_pyfunction!(host_processes_json, m)?)?;
    m.add_function(wrap_pyfunction!(host_process_cpus_json, m)?)?;
    m.add_function(wrap_pyfunction!(host_prepare_json, m)?)?;
    m.add_class::<HostPrepared>()?;
    m.add_function(wrap_pyfunction!(trace_gen, m)?)?;
    m.add_function(wrap_pyfunction!(trace_count, m)?)?;
    m.add_function(wrap_pyfunction!(host_create_files_json, m)?)?;
    m.add_function(wrap_pyfunction!(host_file_names_json, m)?)?;
    m.add_function(wrap_pyfunction!(lock_sites, m)?)?;
    m.add_function(wrap_pyfunction!(check_units_json, m)?)?;
    m.add_function(wrap_pyfunction!(versions_json, m)?)?;
    m.add_function(wrap_pyfunction!(version_of_release, m)?)?;
    m.add_function(wrap_pyfunction!(host_run_process_json, m)?)?;
    m.add_function(wrap_pyfunction!(guest_runner, m)?)?;
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add("SimulationError", m.py().get_type::<SimulationError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
