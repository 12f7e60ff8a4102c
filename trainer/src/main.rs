//! `vnni-dispatch`: the command line. Each subcommand lives in `commands/`; this file
//! only parses arguments and reports errors.

mod backend;
mod baselines;
mod cell;
mod certify;
mod certify_backends;
mod commands;
mod cpu_backend;
mod gpu_timing;
mod preflight;
mod progress;
mod rows;
mod shapes;
mod stats;
mod timing;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "vnni-dispatch",
    version,
    about = "Sweep, fit and generate dispatch tables for NativeVNNI integer kernels"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The one command: collect (or reuse) a corpus, certify, fit, generate, validate, report, optionally install.
    Refresh(commands::refresh::Args),
    /// List the source formats, their codebooks and alias groups.
    Formats(commands::formats::Args),
    /// The shape inventory: a profile's resolved plan and digest, or `import model.gguf`.
    Inventory(commands::inventory::Args),
    /// List the candidate kernels of the registry.
    Candidates(commands::candidates::Args),
    /// Compile every kernel specialization and record registers, spills, shared memory, occupancy.
    Preflight(commands::preflight::Args),
    /// Measure decode kernels against the copy roofline and cuBLAS on the GPU.
    Bench(commands::bench::Args),
    /// Seal a finished corpus directory into corpus.manifest.json.
    Seal(commands::seal::SealArgs),
    /// Verify sealed corpora (all committed ones by default), refit and regenerate committed tables.
    Verify(commands::verify::VerifyArgs),
    /// Certify that grouped rows are byte-identical to single-row decode.
    Certify(commands::certify::Args),
    /// Collect a profile's cells on a backend, cell by cell (resumable, shardable), and seal the corpus.
    Sweep(commands::sweep::Args),
    /// Combine shard work directories of one collection and seal the corpus when complete.
    Merge(commands::merge::Args),
    /// Fit a dispatch policy from a sealed corpus (trees, gates, sealed certification, overlays).
    Fit(commands::fit::Args),
    /// Render a policy into .inc / header / Rust tables, validate them against the evaluator, install.
    Generate(commands::generate::Args),
    /// Render a corpus report: decode bandwidth vs the copy roofline, regret CDFs, decision maps.
    Report(commands::report::Args),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Formats(args) => commands::formats::run(&args),
        Command::Candidates(args) => commands::candidates::run(&args),
        Command::Inventory(args) => commands::inventory::run(&args),
        Command::Preflight(args) => commands::preflight::run(&args),
        Command::Bench(args) => commands::bench::run(&args),
        Command::Sweep(args) => commands::sweep::run(&args),
        Command::Merge(args) => commands::merge::run(&args),
        Command::Refresh(args) => commands::refresh::run(&args),
        Command::Fit(args) => commands::fit::run(&args),
        Command::Generate(args) => commands::generate::run(&args),
        Command::Report(args) => commands::report::run(&args),
        Command::Certify(args) => commands::certify::run(&args),
        Command::Seal(args) => commands::seal::run_seal(&args),
        Command::Verify(args) => commands::verify::run(&args),
    }
}
