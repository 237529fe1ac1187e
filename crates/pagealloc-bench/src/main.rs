//! `pagealloc`: the benchmark and inspection command.

mod burst_peer;
mod experiments;
mod harness;
mod peers;
mod replay;
mod report;
mod show;
mod sqlite_child;
mod sqlite_db;
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
    /// Run the seed experiments (all of them, or one by name) and write the report.
    #[command(args_conflicts_with_subcommands = true)]
    Bench {
        #[command(subcommand)]
        action: Option<BenchCmd>,
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
        /// Print each experiment's raw output as it is produced.
        #[arg(long, short)]
        verbose: bool,
        /// Directory of the report (index.html, results.json, raw/).
        #[arg(long, default_value = "bench-report")]
        out: PathBuf,
        #[command(flatten)]
        page_fault1: experiments::page_fault1::Args,
        #[command(flatten)]
        scaling: experiments::scaling::Args,
        #[command(flatten)]
        sqlite: experiments::sqlite::Args,
    },
    /// Replay a kernel allocation trace (scripts/capture-trace) through pagealloc.
    Replay(replay::Args),
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
    /// One peer allocator's side of `bench burst-idle`, in a process of its own.
    #[command(hide = true)]
    BurstPeer {
        /// The peer.
        #[arg(value_enum)]
        peer: burst_peer::Peer,
        /// 4 KiB blocks the burst allocates.
        blocks: usize,
        /// Idle milliseconds sampled after the frees.
        idle_ms: u64,
    },
    /// One page cache's side of `bench sqlite`'s many-databases workload,
    /// in a process of its own (the cache is process-wide).
    #[command(hide = true)]
    SqliteChild(sqlite_child::ChildArgs),
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Compare two results.json files in mmtests style (Min/Amean/Stddev/Max, % change).
    Compare {
        /// The baseline run.
        old: PathBuf,
        /// The run to judge against it.
        new: PathBuf,
    },
}

fn main() {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Show { report, workload, exact, walk_lists } => {
            print!("{}", show::show(&show::ShowArgs { report, workload, exact, walk_lists }));
        }
        Cmd::Replay(args) => std::process::exit(replay::main(&args)),
        Cmd::BurstPeer { peer, blocks, idle_ms } => std::process::exit(burst_peer::run(peer, blocks, idle_ms)),
        Cmd::SqliteChild(args) => std::process::exit(sqlite_child::run(&args)),
        Cmd::Bench { action: Some(BenchCmd::Compare { old, new }), .. } => compare(&old, &new),
        Cmd::Bench { action: None, experiment, full, json, quiet, verbose, out, page_fault1, scaling, sqlite } => {
            let chosen = choose(experiment.as_deref(), &page_fault1, &scaling, &sqlite);
            bench(chosen, full, json, quiet, verbose, &out);
        }
    }
}

/// The experiments `pagealloc bench [EXPERIMENT]` runs: all of them, or the
/// one named (which may be on demand); exits on an unknown name.
fn choose(
    experiment: Option<&str>,
    page_fault1: &experiments::page_fault1::Args,
    scaling: &experiments::scaling::Args,
    sqlite: &experiments::sqlite::Args,
) -> Vec<Box<dyn harness::Experiment>> {
    let all = experiments::all(page_fault1);
    match experiment {
        None => all,
        Some(n) => {
            let v: Vec<_> =
                all.into_iter().chain(experiments::on_demand(scaling, sqlite)).filter(|e| e.name() == n).collect();
            if v.is_empty() {
                let names: Vec<_> = experiments::all(page_fault1)
                    .iter()
                    .chain(&experiments::on_demand(scaling, sqlite))
                    .map(|e| e.name())
                    .collect();
                eprintln!("unknown experiment {n:?}; known: {}", names.join(", "));
                std::process::exit(2);
            }
            v
        }
    }
}

/// Run `chosen`, print each one's targets and the summary, and write the
/// report (and the JSON, if asked).
fn bench(
    chosen: Vec<Box<dyn harness::Experiment>>,
    full: bool,
    json: Option<PathBuf>,
    quiet: bool,
    verbose: bool,
    out: &std::path::Path,
) {
    let (t0, started) = (std::time::Instant::now(), std::time::SystemTime::now());
    let mut machine = report::Machine::probe();
    if let Some(w) = machine.busy_warning() {
        eprintln!("{w}");
    }
    let mut ctx = harness::Ctx::new(full, verbose, !quiet);
    ctx.idle_cpus = harness::idle_cpus(machine.loadavg[0]);
    machine.tsc_ghz = ctx.tsc.ghz;
    println!(
        "{} ({} CPUs), kernel {}, TSC {:.3} GHz; {} mode, {} repeats",
        machine.cpu_model,
        machine.cores,
        machine.kernel,
        ctx.tsc.ghz,
        if full { "full" } else { "quick" },
        ctx.repeats
    );
    let mut results = Vec::new();
    let n = chosen.len();
    for (i, e) in chosen.into_iter().enumerate() {
        println!("[{}/{n}] {}", i + 1, e.name());
        let r = e.run(&ctx);
        for t in &r.targets {
            let why = t.not_measurable.as_deref().map_or(String::new(), |w| format!(": {w}"));
            println!("target: {} -> {:.3} (limit {}) {}{why}", t.what, t.measured, t.limit, t.status());
        }
        results.push(r);
    }
    let info = report::RunInfo {
        command: report::machine::command_line(),
        full,
        repeats: ctx.repeats,
        started: started.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        duration_s: t0.elapsed().as_secs_f64(),
        machine,
    };
    let rep = report::Report::new(info, results);
    print!("{}", rep.summary());
    if let Some(path) = json {
        std::fs::write(&path, rep.to_json()).expect("write json");
        println!("wrote {}", path.display());
    }
    match rep.write_dir(out) {
        Ok(index) => println!("report: {} ({:.0} s)", index.display(), rep.duration_s),
        Err(e) => {
            eprintln!("cannot write the report to {}: {e}", out.display());
            std::process::exit(1);
        }
    }
}

/// `pagealloc bench compare OLD.json NEW.json`.
fn compare(old: &std::path::Path, new: &std::path::Path) {
    let load = |p: &std::path::Path| {
        report::Report::load(p).unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(2)
        })
    };
    let label = |p: &std::path::Path| p.file_stem().map_or("run".into(), |s| s.to_string_lossy().into_owned());
    let (mut lo, mut ln) = (label(old), label(new));
    if lo == ln {
        (lo, ln) = ("old".into(), "new".into());
    }
    print!("{}", report::compare::runs(&load(old), &load(new), &lo, &ln));
}

#[cfg(test)]
mod tests {
    /// clap's own checks of the command line (unique argument and group
    /// names: page-fault1's and scaling's flags share the bench command),
    /// which only a debug build's parse would otherwise run.
    #[test]
    fn command_line_is_consistent() {
        <super::Cli as clap::CommandFactory>::command().debug_assert();
    }
}
