//! `drover tls ca create` and `drover tls cert create -server|-client|-cli`: a cluster CA
//! and role certificates for mutual TLS, as `nomad tls` makes them. Files are written
//! owner-only and never overwritten.

use anyhow::Context;
use drover_server::tls::dev_certs::{self, Pem, Role};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The CA's files, in the current directory unless told otherwise.
pub const CA_CERT: &str = "drover-agent-ca.pem";
pub const CA_KEY: &str = "drover-agent-ca-key.pem";

#[derive(Debug, clap::Subcommand)]
pub enum TlsCommand {
    /// Make the cluster CA (drover-agent-ca.pem and its key)
    #[command(subcommand)]
    Ca(CaCommand),
    /// Make a certificate for a server, an agent (client) or an operator (cli)
    #[command(subcommand)]
    Cert(CertCommand),
}

#[derive(Debug, clap::Subcommand)]
pub enum CaCommand {
    Create {
        /// How long the CA is valid, in days
        #[arg(long, default_value_t = 1825)]
        days: i64,
        /// Where to write the files
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum CertCommand {
    Create(CertArgs),
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("role").required(true).args(["server", "client", "cli"])))]
pub struct CertArgs {
    /// A server certificate (server.global.drover, localhost, 127.0.0.1, ::1)
    #[arg(long)]
    server: bool,
    /// An agent's certificate (client.global.drover, and with -node its node's name)
    #[arg(long)]
    client: bool,
    /// With -client: the node name the agent registers as; the certificate names it
    /// (NAME.client.global.drover), which servers require before they call the agent for
    /// task logs and restarts, and before they let it register under that name
    #[arg(long, value_name = "NAME", requires = "client")]
    node: Option<String>,
    /// An operator's certificate for the CLI and console (cli.global.drover)
    #[arg(long)]
    cli: bool,
    /// The CA certificate that signs it
    #[arg(long, default_value = CA_CERT)]
    ca: PathBuf,
    /// The CA's key
    #[arg(long, default_value = CA_KEY)]
    key: PathBuf,
    /// More names or IP addresses the certificate is valid for; repeat for each
    #[arg(long = "additional-name", value_name = "NAME")]
    additional: Vec<String>,
    /// How long the certificate is valid, in days
    #[arg(long, default_value_t = 365)]
    days: i64,
    /// Where to write the files
    #[arg(long, default_value = ".")]
    dir: PathBuf,
}

/// Runs a `drover tls` command, printing the files it wrote.
pub fn run(command: TlsCommand, out: &mut dyn Write) -> anyhow::Result<()> {
    match command {
        TlsCommand::Ca(CaCommand::Create { days, dir }) => {
            let ca = dev_certs::create_ca(days)?;
            write_pair(&dir, CA_CERT, CA_KEY, &ca, out)
        }
        TlsCommand::Cert(CertCommand::Create(args)) => {
            let (role, name) = if args.server {
                (Role::Server, "server")
            } else if args.client {
                (Role::Client, "client")
            } else {
                (Role::Cli, "cli")
            };
            let ca = Pem {
                cert: read(&args.ca, "CA certificate (--ca)")?,
                key: read(&args.key, "CA key (--key)")?,
            };
            let mut names = args.additional.clone();
            let prefix = match &args.node {
                Some(node) => {
                    names.push(drover_proto::tls::agent_name(node)?);
                    node.as_str()
                }
                None => "global",
            };
            let pem = dev_certs::create_cert(&ca, role, &names, args.days)?;
            let cert = format!("{prefix}-{name}-drover.pem");
            let key = format!("{prefix}-{name}-drover-key.pem");
            write_pair(&args.dir, &cert, &key, &pem, out)
        }
    }
}

fn read(path: &Path, what: &str) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| {
        format!(
            "cannot read the {what} {}: make one with `drover tls ca create`",
            path.display()
        )
    })
}

fn write_pair(
    dir: &Path,
    cert: &str,
    key: &str,
    pem: &Pem,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (name, text) in [(cert, &pem.cert), (key, &pem.key)] {
        let path = dir.join(name);
        write_new(&path, text)?;
        writeln!(out, "==> wrote {}", path.display())?;
    }
    Ok(())
}

/// Creates `path` owner-only; an existing file is an error, never overwritten.
fn write_new(path: &Path, text: &str) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut f = options
        .open(path)
        .with_context(|| format!("cannot create {} (it is never overwritten)", path.display()))?;
    f.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}
