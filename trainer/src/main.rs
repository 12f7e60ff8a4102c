//! `vnni-dispatch`: the command line. Each subcommand lives in `commands/`; this file
//! only parses arguments and reports errors.

mod commands;

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
    /// List the source formats, their codebooks and alias groups.
    Formats(commands::formats::Args),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Formats(args) => commands::formats::run(&args),
    }
}
