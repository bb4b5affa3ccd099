//! Nomad's single-dash long flags (`-json`, `-detach`, `-address=...`, `-config FILE`).
//!
//! clap reads `-json` as the short flags `-j -s -o -n`, so the arguments are rewritten
//! before parsing: a single-dash word whose name is a long flag of the command tree gets a
//! second dash. Anything else, including everything after `--`, is passed through as is.

use std::collections::BTreeSet;
use std::ffi::OsString;

/// `args` (program name first) with Nomad-style single-dash long flags made double-dash.
pub fn normalize(
    args: impl IntoIterator<Item = OsString>,
    command: &clap::Command,
) -> Vec<OsString> {
    let longs = long_flags(command);
    let mut after_separator = false;
    args.into_iter()
        .enumerate()
        .map(|(i, arg)| {
            if i == 0 || after_separator {
                return arg;
            }
            if arg == "--" {
                after_separator = true;
                return arg;
            }
            match arg.to_str().and_then(|s| single_dash_long(s, &longs)) {
                Some(fixed) => OsString::from(fixed),
                None => arg,
            }
        })
        .collect()
}

fn single_dash_long(arg: &str, longs: &BTreeSet<String>) -> Option<String> {
    let rest = arg.strip_prefix('-')?;
    if rest.starts_with('-') {
        return None;
    }
    let name = rest.split_once('=').map_or(rest, |(name, _)| name);
    (name.len() > 1 && longs.contains(name)).then(|| format!("-{arg}"))
}

/// Every long flag name (and alias) anywhere in the command tree.
fn long_flags(command: &clap::Command) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut pending = vec![command];
    while let Some(cmd) = pending.pop() {
        for arg in cmd.get_arguments() {
            names.extend(arg.get_long().map(str::to_string));
            names.extend(
                arg.get_all_aliases()
                    .unwrap_or_default()
                    .into_iter()
                    .map(str::to_string),
            );
        }
        pending.extend(cmd.get_subcommands());
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction, Command};

    fn command() -> Command {
        Command::new("drover").subcommand(
            Command::new("job")
                .arg(Arg::new("json").long("json").action(ArgAction::SetTrue))
                .arg(Arg::new("address").long("address"))
                .arg(Arg::new("n").short('n').action(ArgAction::SetTrue)),
        )
    }

    #[test]
    fn rewrites_only_known_single_dash_long_flags() {
        let cases: &[(&[&str], &[&str])] = &[
            (&["drover", "job", "-json"], &["drover", "job", "--json"]),
            (&["drover", "job", "--json"], &["drover", "job", "--json"]),
            (
                &["drover", "job", "-address=x:1"],
                &["drover", "job", "--address=x:1"],
            ),
            (&["drover", "job", "-n"], &["drover", "job", "-n"]),
            (&["drover", "job", "-nope"], &["drover", "job", "-nope"]),
            (&["drover", "job", "-5"], &["drover", "job", "-5"]),
            (
                &["drover", "job", "--", "-json"],
                &["drover", "job", "--", "-json"],
            ),
            (&["-json"], &["-json"]),
        ];
        for (given, want) in cases {
            let got = normalize(given.iter().map(OsString::from), &command());
            let want: Vec<OsString> = want.iter().map(OsString::from).collect();
            assert_eq!(got, want, "{given:?}");
        }
    }
}
