//! Features that change the Raft log's format, switched on only when every server can
//! read the entries they write (Nomad's "servers meet minimum version").
//!
//! Servers of one cluster are upgraded one at a time, so for a while old and new versions
//! replicate the same log. An entry of a kind an old server cannot decode would stop its
//! state machine for good. So before the leader writes the first entry of such a kind it
//! asks every member which version it runs (the Raft listener's `Info`) and refuses while
//! any is older than the feature needs, or does not answer.

use std::cmp::Ordering;
use std::fmt;

/// A feature whose entries only some versions can apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feature {
    /// The ACL tables: bootstrap, tokens and policies (`Command::Acl*`).
    AclTables,
}

impl Feature {
    /// The first version that applies the feature's entries.
    pub fn since(self) -> Version {
        match self {
            Feature::AclTables => Version::new(0, 1, 0),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Feature::AclTables => "acl",
        }
    }
}

/// A drover version, `major.minor.patch` (anything after a `-` or `+` is ignored).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
}

impl Version {
    pub const fn new(major: u64, minor: u64, patch: u64) -> Self {
        Self {
            major,
            minor,
            patch,
        }
    }

    /// This build's version.
    pub fn current() -> Self {
        Self::parse(env!("CARGO_PKG_VERSION")).unwrap_or(Self::new(0, 0, 0))
    }

    /// `None` for anything that is not three dot-separated numbers.
    pub fn parse(text: &str) -> Option<Self> {
        let core = text.split(['-', '+']).next()?;
        let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
        let v = Self::new(parts.next()??, parts.next()??, parts.next()??);
        parts.next().is_none().then_some(v)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Why a feature stays off.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    #[error(
        "{feature} needs every server at version {since} or later: server {server_id} runs {version:?}"
    )]
    TooOld {
        feature: &'static str,
        since: Version,
        server_id: u64,
        version: String,
    },
    #[error(
        "{feature} needs every server at version {since} or later: server {server_id} does not answer"
    )]
    Unknown {
        feature: &'static str,
        since: Version,
        server_id: u64,
    },
}

/// Whether every member's advertised version (`None`: it did not answer) supports
/// `feature`. Members are checked in id order, so the error names the same one each time.
pub fn check<'a>(
    feature: Feature,
    members: impl IntoIterator<Item = (u64, Option<&'a str>)>,
) -> Result<(), GateError> {
    let since = feature.since();
    for (server_id, version) in members {
        let Some(version) = version else {
            return Err(GateError::Unknown {
                feature: feature.name(),
                since,
                server_id,
            });
        };
        let supports = Version::parse(version).is_some_and(|v| v.cmp(&since) != Ordering::Less);
        if !supports {
            return Err(GateError::TooOld {
                feature: feature.name(),
                since,
                server_id,
                version: version.to_string(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_order() {
        let cases = [
            ("0.1.0", Some(Version::new(0, 1, 0))),
            ("1.2.3-rc.1", Some(Version::new(1, 2, 3))),
            ("0.10.0+build", Some(Version::new(0, 10, 0))),
            ("0.1", None),
            ("0.1.0.0", None),
            ("x.1.0", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(Version::parse(text), want, "{text}");
        }
        assert!(Version::new(0, 10, 0) > Version::new(0, 9, 9));
        assert_eq!(
            Version::parse(env!("CARGO_PKG_VERSION")),
            Some(Version::current())
        );
    }

    #[test]
    fn a_gate_opens_only_when_every_server_supports_the_feature() {
        let since = Feature::AclTables.since();
        let current = Version::current().to_string();
        let cases: Vec<(Vec<(u64, Option<&str>)>, Result<(), GateError>)> = vec![
            (vec![(1, Some(&current)), (2, Some(&current))], Ok(())),
            (vec![(1, Some("9.0.0"))], Ok(())),
            (
                vec![(1, Some(&current)), (2, Some("0.0.9")), (3, Some("0.0.1"))],
                Err(GateError::TooOld {
                    feature: "acl",
                    since,
                    server_id: 2,
                    version: "0.0.9".into(),
                }),
            ),
            (
                vec![(1, Some(&current)), (3, None)],
                Err(GateError::Unknown {
                    feature: "acl",
                    since,
                    server_id: 3,
                }),
            ),
            (
                vec![(4, Some("garbage"))],
                Err(GateError::TooOld {
                    feature: "acl",
                    since,
                    server_id: 4,
                    version: "garbage".into(),
                }),
            ),
        ];
        for (members, want) in cases {
            assert_eq!(
                check(Feature::AclTables, members.clone()),
                want,
                "{members:?}"
            );
        }
    }
}
