//! `vnni-dispatch`: the command line. Each subcommand lives in `commands/` as typed
//! arguments and a thin `run` over the libraries (`vnni-measure`, `vnni-learner`,
//! `vnni-generator`, `vnni-corpus`); this file parses arguments and reports errors.

mod argv;
mod commands;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug, PartialEq)]
#[command(
    name = "vnni-dispatch",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("VNNI_RUSTC_VERSION"), ")"),
    about = "Sweep, fit and generate dispatch tables for NativeVNNI integer kernels"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug, PartialEq)]
enum Command {
    /// The one command: collect (or reuse) a corpus, certify, fit, generate, validate, report, optionally install.
    #[command(
        after_help = "Example:\n  vnni-dispatch refresh --backend cpu --profile family-smoke --out target/refresh"
    )]
    Refresh(commands::refresh::Args),
    /// List the source formats, their codebooks and alias groups.
    #[command(after_help = "Example:\n  vnni-dispatch formats --json")]
    Formats(commands::formats::Args),
    /// The shape inventory: a profile's resolved plan and digest, or `import model.gguf`.
    #[command(after_help = "Example:\n  vnni-dispatch inventory --profile core")]
    Inventory(commands::inventory::Args),
    /// List the candidate kernels of the registry.
    #[command(after_help = "Example:\n  vnni-dispatch candidates --backend cuda --surface decode")]
    Candidates(commands::candidates::Args),
    /// Compile every kernel specialization and record registers, spills, shared memory, occupancy.
    #[command(after_help = "Example:\n  vnni-dispatch preflight --static --arch sm_90 --out resources.csv")]
    Preflight(commands::preflight::Args),
    /// Measure decode kernels against the copy roofline and cuBLAS on the GPU.
    #[command(
        after_help = "Example:\n  vnni-dispatch bench --backend cuda --shapes 151936x4096,4096x4096 --out target/bench"
    )]
    Bench(commands::bench::Args),
    /// Seal a finished corpus directory into corpus.manifest.json.
    #[command(after_help = "Example:\n  vnni-dispatch seal target/refresh/family-smoke/corpus")]
    Seal(commands::seal::Args),
    /// Verify sealed corpora (all committed ones by default), refit and regenerate committed tables.
    #[command(after_help = "Example:\n  vnni-dispatch verify --root lfs-data/corpora")]
    Verify(commands::verify::Args),
    /// Certify that grouped (or prefill) rows are byte-identical to single-row decode.
    #[command(
        after_help = "Example:\n  vnni-dispatch certify --backend cuda --policy policy.json --out certificates.jsonl"
    )]
    Certify(commands::certify::Args),
    /// Collect a profile's cells on a backend, cell by cell (resumable, shardable), and seal the corpus.
    #[command(
        after_help = "Example:\n  vnni-dispatch sweep --backend cuda --profile core --out /scratch/core-0 --shard 0/4"
    )]
    Sweep(commands::sweep::Args),
    /// Combine shard work directories of one collection and seal the corpus when complete.
    #[command(after_help = "Example:\n  vnni-dispatch merge --out /scratch/core /scratch/core-0 /scratch/core-1")]
    Merge(commands::merge::Args),
    /// Fit a dispatch policy from a sealed corpus (trees, gates, sealed certification, overlays).
    #[command(
        after_help = "Example:\n  vnni-dispatch fit --corpus target/refresh/family-smoke/corpus --out policy.json --report fit-report"
    )]
    Fit(commands::fit::Args),
    /// Time again, as pairs, the development cells a fit's failing domains get wrong (the pair loop's measuring half).
    #[command(
        after_help = "Example:\n  vnni-dispatch remeasure --corpus target/refresh/core/m1/corpus --out pairs\n  vnni-dispatch fit --corpus target/refresh/core/m1/corpus --pairs pairs/pairs.samples.csv"
    )]
    Remeasure(commands::remeasure::Args),
    /// Nsight Compute evidence beside a sealed CUDA corpus: one extra launch per (cell, candidate, mode), never timed.
    #[command(
        after_help = "Example:\n  vnni-dispatch profile --corpus target/refresh/family-smoke/corpus --out target/evidence --top 3"
    )]
    Profile(commands::profile::Args),
    /// Render a policy into .inc / header / Rust tables, validate them against the evaluator, install.
    #[command(after_help = "Example:\n  vnni-dispatch generate --policy policy.json --out tables --validate")]
    Generate(commands::generate::Args),
    /// Render a corpus report: decode bandwidth vs the copy roofline, regret CDFs, decision maps.
    #[command(
        after_help = "Example:\n  vnni-dispatch report --corpus target/refresh/family-smoke/corpus --policy policy.json --out report"
    )]
    Report(commands::report::Args),
    /// Why a policy picks its candidate for one query: the tree path or overlay, the bpp, the measured margin.
    #[command(
        after_help = "Example:\n  vnni-dispatch explain --policy policy.json --format Q4_K --m 8 --n 151936 --k 4096"
    )]
    Explain(commands::explain::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(
        after_help = "Example:\n  vnni-dispatch completions bash > ~/.local/share/bash-completion/completions/vnni-dispatch"
    )]
    Completions(commands::shell::CompletionsArgs),
    /// Write man pages of the command and every subcommand.
    #[command(after_help = "Example:\n  vnni-dispatch man --out target/man")]
    Man(commands::shell::ManArgs),
}

impl argv::ToArgv for Command {
    fn to_argv(&self) -> Vec<String> {
        match self {
            Command::Refresh(a) => a.to_argv(),
            Command::Formats(a) => a.to_argv(),
            Command::Inventory(a) => a.to_argv(),
            Command::Candidates(a) => a.to_argv(),
            Command::Preflight(a) => a.to_argv(),
            Command::Bench(a) => a.to_argv(),
            Command::Seal(a) => a.to_argv(),
            Command::Verify(a) => a.to_argv(),
            Command::Certify(a) => a.to_argv(),
            Command::Sweep(a) => a.to_argv(),
            Command::Merge(a) => a.to_argv(),
            Command::Fit(a) => a.to_argv(),
            Command::Remeasure(a) => a.to_argv(),
            Command::Profile(a) => a.to_argv(),
            Command::Generate(a) => a.to_argv(),
            Command::Report(a) => a.to_argv(),
            Command::Explain(a) => a.to_argv(),
            Command::Completions(a) => a.to_argv(),
            Command::Man(a) => a.to_argv(),
        }
    }
}

fn run(command: &Command) -> anyhow::Result<()> {
    match command {
        Command::Formats(args) => commands::formats::run(args),
        Command::Candidates(args) => commands::candidates::run(args),
        Command::Inventory(args) => commands::inventory::run(args),
        Command::Preflight(args) => commands::preflight::run(args),
        Command::Bench(args) => commands::bench::run(args),
        Command::Sweep(args) => commands::sweep::run(args),
        Command::Merge(args) => commands::merge::run(args),
        Command::Refresh(args) => commands::refresh::run(args),
        Command::Fit(args) => commands::fit::run(args),
        Command::Remeasure(args) => commands::remeasure::run(args),
        Command::Profile(args) => commands::profile::run(args),
        Command::Generate(args) => commands::generate::run(args),
        Command::Report(args) => commands::report::run(args),
        Command::Explain(args) => commands::explain::run(args),
        Command::Certify(args) => commands::certify::run(args),
        Command::Seal(args) => commands::seal::run(args),
        Command::Verify(args) => commands::verify::run(args),
        Command::Completions(args) => commands::shell::completions(args),
        Command::Man(args) => commands::shell::man(args),
    }
}

fn main() -> std::process::ExitCode {
    // Output piped into `head` and the like ends quietly at the closed pipe, as other Unix
    // tools do: Rust ignores SIGPIPE, so the first print after it would panic.
    #[cfg(unix)]
    // SAFETY: sets the default disposition of one signal, before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // NVRTC 12.9+ keeps its own compilation cache and, on a hit, returns a cubin without the
    // ptxas log the preflight reads registers and spills from (every kernel would then be
    // rejected). Kernels are cached by `--cache` with their logs; the driver's JIT cache is
    // not used (cubins are loaded, never PTX). Set before any other thread exists; a value the
    // user set stays.
    if std::env::var_os("CUDA_CACHE_DISABLE").is_none() {
        std::env::set_var("CUDA_CACHE_DISABLE", "1");
    }
    let cli = Cli::parse();
    match run(&cli.command) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // The error chain once, each cause on its own line; a backtrace only when asked
            // for with VNNI_BACKTRACE=1 (RUST_BACKTRACE is often set on developer machines
            // and would print one for every ordinary error).
            eprintln!("error: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            if std::env::var_os("VNNI_BACKTRACE").is_some_and(|v| v == "1") {
                eprintln!("\n{}", e.backtrace());
            }
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests;
