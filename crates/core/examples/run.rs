//! Run a scenario TOML from the command line without Python (development aid):
//! `cargo run --release -p reclaimsim-core --example run -- scenario.toml|scenario.json [out.json]`.
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: run SCENARIO.toml [OUT.json]");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        eprintln!("error: {path}: {e}");
        std::process::exit(2)
    });
    let parsed = if path.ends_with(".json") {
        reclaimsim_core::Scenario::from_json(&text)
    } else {
        reclaimsim_core::Scenario::from_toml(&text)
    };
    let sc = match parsed {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2)
        }
    };
    let json = serde_json::to_string(&sc).unwrap();
    let t0 = Instant::now();
    let out = reclaimsim_core::run_json(&json, &mut |_, _| true).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1)
    });
    let wall = t0.elapsed().as_secs_f64();
    eprintln!("wall {wall:.3} s");
    match args.get(2) {
        Some(o) => std::fs::write(o, out).expect("write output"),
        None => println!("{out}"),
    }
}
