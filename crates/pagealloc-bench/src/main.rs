//! `pagealloc`: the benchmark and inspection command.

mod experiments;
mod harness;
mod show;
mod workloads;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "pagealloc", version, about = "The Linux page allocator in user space: benchmarks and reports")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the seed experiments (all of them, or one by name).
    Bench {
        /// Experiment to run (default: all).
        experiment: Option<String>,
        /// Full mode: the original loop counts, 5 repeats.
        #[arg(long)]
        full: bool,
        /// Write the results as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Hide progress bars.
        #[arg(long)]
        quiet: bool,
    },
    /// Build a default arena, run a workload, print a /proc report.
    Show {
        /// The report.
        #[arg(value_enum)]
        report: show::Report,
        /// The workload to run first.
        #[arg(long, value_enum, default_value_t = show::Workload::Fresh)]
        workload: show::Workload,
        /// pagetypeinfo: exact counts instead of the kernel's 100000 cap.
        #[arg(long)]
        exact: bool,
        /// pagetypeinfo: the old design (walk the free lists under the zone lock).
        #[arg(long)]
        walk_lists: bool,
    },
}

fn main() {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Show { report, workload, exact, walk_lists } => {
            print!("{}", show::show(&show::ShowArgs { report, workload, exact, walk_lists }));
        }
        Cmd::Bench { experiment, full, json, quiet } => {
            let all = experiments::all();
            let chosen: Vec<_> = match &experiment {
                None => all,
                Some(n) => {
                    let v: Vec<_> = all.into_iter().filter(|e| e.name() == n).collect();
                    if v.is_empty() {
                        let names: Vec<_> = experiments::all().iter().map(|e| e.name()).collect();
                        eprintln!("unknown experiment {n:?}; known: {}", names.join(", "));
                        std::process::exit(2);
                    }
                    v
                }
            };
            let ctx = harness::Ctx::new(full, true, !quiet);
            println!("TSC: {:.3} GHz", ctx.tsc.ghz);
            let mut results = Vec::new();
            for e in chosen {
                println!("== {} ==", e.name());
                let r = e.run(&ctx);
                for t in &r.targets {
                    println!(
                        "target: {} -> {:.3} (limit {}) {}",
                        t.what,
                        t.measured,
                        t.limit,
                        if t.met { "MET" } else { "MISSED" }
                    );
                }
                results.push(r);
            }
            if let Some(path) = json {
                std::fs::write(&path, serde_json::to_string_pretty(&results).unwrap()).expect("write json");
                println!("wrote {}", path.display());
            }
        }
    }
}
