//! A job file's variable values from outside it: `-var name=value`, `-var-file FILE` and
//! the `NOMAD_VAR_<name>` environment, plus the text of the files its `file()` calls name.
//! The CLI reads them; the jobspec parser (which does no IO) evaluates them.

use crate::error::CliError;
use drover_core::jobspec::{Inputs, file_references};
use std::path::PathBuf;

/// The variable flags of `job run`, `job plan` and `job validate`.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct VarArgs {
    /// A variable's value, as NAME=VALUE; repeat for several (a later one wins)
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub vars: Vec<String>,
    /// An HCL file of `name = value` variable values; repeat for several
    #[arg(long = "var-file", value_name = "FILE")]
    pub var_files: Vec<PathBuf>,
}

/// The prefix of the environment variables that set job file variables (Nomad's).
const ENV_PREFIX: &str = "NOMAD_VAR_";

impl VarArgs {
    /// Everything the parser needs besides the job file's text `src`.
    pub fn inputs(&self, src: &str) -> Result<Inputs, CliError> {
        let vars = self
            .vars
            .iter()
            .map(|v| {
                v.split_once('=')
                    .map(|(k, v)| (k.trim().to_string(), v.to_string()))
                    .filter(|(k, _)| !k.is_empty())
                    .ok_or_else(|| CliError::Usage(format!("-var {v:?}: expected NAME=VALUE")))
            })
            .collect::<Result<_, _>>()?;
        let var_files = self
            .var_files
            .iter()
            .map(|path| read(path).map(|text| (path.display().to_string(), text)))
            .collect::<Result<_, _>>()?;
        let env = std::env::vars()
            .filter_map(|(k, v)| k.strip_prefix(ENV_PREFIX).map(|name| (name.to_string(), v)))
            .collect();
        // `file()` paths are read relative to the working directory, as Nomad does.
        let files = file_references(src)
            .into_iter()
            .filter_map(|path| read(&PathBuf::from(&path)).ok().map(|text| (path, text)))
            .collect();
        Ok(Inputs {
            vars,
            var_files,
            env,
            files,
            // Fresh `uuid()`s each read, as Nomad's.
            seed: rand::random(),
        })
    }
}

fn read(path: &PathBuf) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(|source| CliError::ReadFile {
        path: path.display().to_string(),
        source,
    })
}
