//! `drover console`: the operator console on a running cluster.

use crate::client::ClientArgs;
use drover_tui::ConsoleOptions;

#[derive(Debug, clap::Args)]
pub struct ConsoleArgs {
    #[command(flatten)]
    client: ClientArgs,
    /// Watch only: every action (offline, pause, ...) is hidden and refused (also the
    /// case when the --token may do none of them)
    #[arg(long)]
    read_only: bool,
    /// Capture the mouse: click rows and column titles, scroll with the wheel (the
    /// terminal's own text selection then needs shift held, in most terminals)
    #[arg(long)]
    mouse: bool,
}

pub async fn run(args: ConsoleArgs) -> anyhow::Result<()> {
    drover_tui::run(ConsoleOptions {
        tls: args.client.tls(),
        address: args.client.address,
        read_only: args.read_only,
        mouse: args.mouse,
        token: args.client.token,
    })
    .await?;
    Ok(())
}
