//! The one `drover` binary: parse the command line, run the command, exit with its code.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use drover_cli::acl::AclCommand;
use drover_cli::agent::AgentArgs;
use drover_cli::allocs::AllocCommand;
use drover_cli::bench::{BenchArgs, BenchError};
use drover_cli::console::ConsoleArgs;
use drover_cli::dev::DevArgs;
use drover_cli::evals::EvalCommand;
use drover_cli::events::EventCommand;
use drover_cli::jobs::JobCommand;
use drover_cli::nodes::NodeCommand;
use drover_cli::operator::OperatorCommand;
use drover_cli::serve::ServerArgs;
use drover_cli::servers::ServerCommand;
use drover_cli::services::ServiceCommand;
use drover_cli::{CliError, Client, ClientArgs, Exit, argv};
use std::io::Write;
use std::process::ExitCode;

/// The server's write path allocates per allocation it stores; mimalloc is several times
/// cheaper there than the system allocator (the scheduler benches run with it too).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// drover: a cluster scheduler with a live operator console.
#[derive(Debug, Parser)]
#[command(name = "drover", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// A whole cluster in one process: a server, a real agent, simulated nodes and a
    /// sample job (add --console to watch it)
    Dev(DevArgs),
    /// Run a server, or list the cluster's servers (`server members`)
    #[command(args_conflicts_with_subcommands = true)]
    Server {
        #[command(subcommand)]
        command: Option<ServerCommand>,
        #[command(flatten)]
        args: ServerArgs,
    },
    /// Run this machine as a node (or simulated nodes with --simulate N)
    Agent(AgentArgs),
    /// The operator console
    Console(ConsoleArgs),
    /// Register, plan, inspect and stop jobs
    Job {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: JobCommand,
    },
    /// List nodes and act on them (offline, online, drain, eligibility)
    Node {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: NodeCommand,
    },
    /// Inspect evaluations and why their placements failed
    Eval {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: EvalCommand,
    },
    /// The service catalog: where services run and whether their checks pass
    Service {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: ServiceCommand,
    },
    /// Follow and steer deployments (rollouts under an update block)
    Deployment {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: drover_cli::deployments::DeploymentCommand,
    },
    /// Inspect allocations
    Alloc {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: AllocCommand,
    },
    /// Cluster-wide settings: the scheduler configuration and the scheduler workers
    Operator {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: OperatorCommand,
    },
    /// Access control: bootstrap, tokens and policies
    Acl {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: AclCommand,
    },
    /// Follow the event stream
    Event {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: EventCommand,
    },
    /// Measure how fast a server places allocations on simulated nodes (starts its own
    /// server unless given --address)
    Bench(BenchArgs),
    /// Make a cluster CA and certificates for mutual TLS (`tls ca create`,
    /// `tls cert create -server|-client|-cli`)
    Tls {
        #[command(subcommand)]
        command: drover_cli::tls::TlsCommand,
    },
    /// Print drover's version
    Version,
    /// Print a shell completion script (`drover completion bash > /etc/bash_completion.d/drover`)
    Completion {
        /// The shell to complete for
        shell: clap_complete::Shell,
    },
}

/// Nomad's `job plan` keeps 1 for "changes", so its errors need a code of their own.
const PLAN_ERROR: u8 = 255;

fn main() -> ExitCode {
    // The agent re-executes this binary as the task shim: run it before anything else
    // (no thread may exist yet when it enters namespaces).
    if let Some(code) = drover_agent::isolation::dispatch() {
        return code;
    }
    let args = argv::normalize(std::env::args_os(), &Cli::command());
    let is_plan = names_job_plan(&args);
    let parsed = Cli::command()
        .try_get_matches_from(args)
        .and_then(|matches| Cli::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout and succeed; a usage error is an error (1),
            // not clap's 2, which `job run` uses for placement failures, and `job plan`'s
            // error code, as its help says.
            let _ = e.print();
            return match (e.use_stderr(), is_plan) {
                (false, _) => ExitCode::SUCCESS,
                (true, true) => ExitCode::from(PLAN_ERROR),
                (true, false) => ExitCode::from(1),
            };
        }
    };
    let error_code = match &cli.command {
        Command::Job {
            command: JobCommand::Plan { .. },
            ..
        } => PLAN_ERROR,
        _ => 1,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("Error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(cli.command)) {
        Ok(Exit(code)) => ExitCode::from(code),
        Err(e) => {
            // Both name their cause in their own message; `{:#}` would repeat it.
            if let Some(cli_error) = e.downcast_ref::<CliError>() {
                if cli_error.is_broken_pipe() {
                    return ExitCode::SUCCESS;
                }
                eprintln!("Error: {cli_error}");
            } else if let Some(conflict) = drover_cli::conflict::port_conflict(&e) {
                eprintln!("Error: {conflict}");
            } else if let Some(bench_error) = e.downcast_ref::<BenchError>() {
                eprintln!("Error: {bench_error}");
            } else {
                eprintln!("Error: {e:#}");
            }
            ExitCode::from(error_code)
        }
    }
}

/// Whether the command line is `drover job plan ...`, whatever flags come between: its
/// usage errors take the plan's error code.
fn names_job_plan(args: &[std::ffi::OsString]) -> bool {
    let mut words = args
        .iter()
        .skip(1)
        .filter_map(|a| a.to_str())
        .filter(|a| !a.starts_with('-'));
    words.next() == Some("job") && words.next() == Some("plan")
}

async fn run(command: Command) -> anyhow::Result<Exit> {
    let mut out = std::io::stdout();
    let out = &mut out;
    let exit = match command {
        Command::Dev(args) => {
            drover_cli::dev::run(args).await?;
            Exit::OK
        }
        Command::Server {
            command: Some(ServerCommand::Members { client, output }),
            ..
        } => drover_cli::servers::members(&connect(&client).await?, output, out).await?,
        Command::Server {
            command: None,
            args,
        } => {
            drover_cli::serve::run(args).await?;
            Exit::OK
        }
        Command::Agent(args) => {
            drover_cli::agent::run(args).await?;
            Exit::OK
        }
        Command::Console(args) => {
            drover_cli::console::run(args).await?;
            Exit::OK
        }
        // Checking a job file needs no server.
        Command::Job {
            command: JobCommand::Validate { file, vars },
            ..
        } => drover_cli::jobs::validate(&file, &vars, out)?,
        Command::Job { client, command } => {
            drover_cli::jobs::run(&connect(&client).await?, command, out).await?
        }
        Command::Node { client, command } => {
            drover_cli::nodes::run(&connect(&client).await?, command, out).await?
        }
        Command::Eval { client, command } => {
            drover_cli::evals::run(&connect(&client).await?, command, out).await?
        }
        Command::Service { client, command } => {
            drover_cli::services::run(&connect(&client).await?, command, out).await?
        }
        Command::Deployment { client, command } => {
            drover_cli::deployments::run(&connect(&client).await?, command, out).await?
        }
        Command::Alloc { client, command } => {
            drover_cli::allocs::run(&connect(&client).await?, command, out).await?
        }
        Command::Operator { client, command } => {
            drover_cli::operator::run(&connect(&client).await?, command, out).await?
        }
        Command::Acl { client, command } => {
            drover_cli::acl::run(&connect(&client).await?, command, out).await?
        }
        Command::Event { client, command } => {
            drover_cli::events::run(&connect(&client).await?, command, out).await?
        }
        Command::Bench(args) => {
            drover_cli::bench::run(args, out).await?;
            Exit::OK
        }
        Command::Tls { command } => {
            drover_cli::tls::run(command, out)?;
            Exit::OK
        }
        Command::Version => {
            writeln!(out, "drover {}", env!("CARGO_PKG_VERSION")).map_err(CliError::Output)?;
            Exit::OK
        }
        Command::Completion { shell } => {
            // Into a buffer first: clap_complete panics when its writer fails (`| head`).
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "drover", &mut script);
            out.write_all(&script).map_err(CliError::Output)?;
            Exit::OK
        }
    };
    Ok(exit)
}

async fn connect(args: &ClientArgs) -> Result<Client, CliError> {
    Ok(
        Client::connect_with(&args.address, args.timeout, &args.tls())
            .await?
            .with_token(args.token.as_deref())?
            .with_namespace(args.namespace.as_deref()),
    )
}
