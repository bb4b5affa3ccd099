//! The one `drover` binary: parse the command line, then call the libraries.

use clap::Parser;

/// drover: a cluster scheduler with a live operator console.
///
/// Subcommands (dev, server, agent, console, job, node, eval, operator, bench) arrive with
/// the issues that build them.
#[derive(Debug, Parser)]
#[command(name = "drover", version, about, long_about)]
struct Cli {}

fn main() -> anyhow::Result<()> {
    let _cli = Cli::parse();
    println!("drover {}: see `drover --help`", env!("CARGO_PKG_VERSION"));
    Ok(())
}
