//! A task's `template` blocks: rendered into the task's directory before each start, from
//! inline `data` or a `source` file, with the task's environment and the node's values
//! (`node.unique.name`, `attr.*`, `meta.*`) for `env`; an `env = true` template's output
//! (`KEY=value` lines) joins the task's environment.
//!
//! Rendered files are put in place whole and never through a link the task may have made
//! (see [`super::task_files`]).
//!
//! While the task runs they are rendered again every [`RERENDER_EVERY`] (a `source` file
//! may change: another task or an artifact writes it); a destination whose text changed is
//! rewritten, and the task is told as its `change_mode` says: `restart` restarts it,
//! `signal` sends its `change_signal`, `noop` leaves it be. When several change at once,
//! a restart wins over a signal.

use drover_core::template::{self as engine, Lookup};
use drover_core::types::{ChangeMode, Template};
use nix::sys::signal::Signal;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often a running task's templates are rendered again to look for changes.
pub const RERENDER_EVERY: Duration = Duration::from_secs(2);

/// Why a template could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum TemplateFailure {
    /// The template text is wrong: the job's fault. The error carries line:col.
    #[error("template {name}: {error}")]
    Template {
        name: String,
        error: engine::TemplateError,
    },
    #[error("template {name}: cannot read source {path}: {error}")]
    Source {
        name: String,
        path: String,
        error: std::io::Error,
    },
    #[error("template {name}: line {line} of the rendered environment is not KEY=value: {text:?}")]
    EnvLine {
        name: String,
        line: usize,
        text: String,
    },
    /// The task's own directory cannot be written: the node's fault.
    #[error("template {name}: cannot write {path}: {error}")]
    Write {
        name: String,
        path: String,
        error: std::io::Error,
    },
}

impl TemplateFailure {
    /// A directory the task turned into a link is the task's doing, not the node's.
    pub fn is_infra(&self) -> bool {
        matches!(self, TemplateFailure::Write { error, .. } if !super::task_files::is_tampering(error))
    }
}

/// What a running task must do after its templates were rendered again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Restart,
    Signal(Signal),
}

/// The templates of one task and what each last rendered to.
#[derive(Debug)]
pub struct TaskTemplates {
    items: Vec<(Template, Option<String>)>,
    task_dir: PathBuf,
    owner: Option<(u32, u32)>,
}

/// One pass over the templates.
#[derive(Debug, Default)]
pub struct Rendered {
    /// From the `env = true` templates.
    pub env: BTreeMap<String, String>,
    /// What the running task must do; `None` when nothing changed or only `noop` ones did.
    pub change: Option<Change>,
    /// The destinations rewritten in this pass.
    pub changed: Vec<String>,
}

impl TaskTemplates {
    pub fn new(templates: &[Template], task_dir: &Path, owner: Option<(u32, u32)>) -> Self {
        Self {
            items: templates.iter().map(|t| (t.clone(), None)).collect(),
            task_dir: task_dir.to_path_buf(),
            owner,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Renders every template with `lookup`, writing those whose text changed.
    pub fn render(&mut self, lookup: &dyn Lookup) -> Result<Rendered, TemplateFailure> {
        let mut out = Rendered::default();
        for (spec, last) in &mut self.items {
            let name = spec.destination.clone();
            let text = match (&spec.data, &spec.source) {
                (Some(data), _) => data.clone(),
                (None, Some(source)) => {
                    let path = self.task_dir.join(source);
                    std::fs::read_to_string(&path).map_err(|error| TemplateFailure::Source {
                        name: name.clone(),
                        path: path.display().to_string(),
                        error,
                    })?
                }
                (None, None) => String::new(),
            };
            let rendered = engine::parse(&text, &spec.left_delimiter, &spec.right_delimiter)
                .and_then(|t| t.render(lookup))
                .map_err(|error| TemplateFailure::Template {
                    name: name.clone(),
                    error,
                })?;
            if spec.env {
                out.env.extend(env_lines(&name, &rendered)?);
            }
            if last.as_deref() == Some(rendered.as_str()) {
                continue;
            }
            let mode = u32::from_str_radix(&spec.perms, 8).unwrap_or(0o644);
            super::task_files::replace_file(
                &self.task_dir,
                Path::new(&spec.destination),
                rendered.as_bytes(),
                mode,
                self.owner,
            )
            .map_err(|error| TemplateFailure::Write {
                name: name.clone(),
                path: spec.destination.clone(),
                error,
            })?;
            // The first render happens before the task starts: nothing to tell it.
            if last.is_some() {
                out.changed.push(name);
                let wanted = match spec.change_mode {
                    ChangeMode::Restart => Some(Change::Restart),
                    ChangeMode::Signal => spec
                        .change_signal
                        .as_deref()
                        .and_then(crate::driver::process::parse_signal)
                        .map(Change::Signal),
                    ChangeMode::Noop => None,
                };
                out.change = match (out.change, wanted) {
                    (Some(Change::Restart), _) | (_, Some(Change::Restart)) => {
                        Some(Change::Restart)
                    }
                    (None, w) => w,
                    (c, _) => c,
                };
            }
            *last = Some(rendered);
        }
        Ok(out)
    }
}

/// `KEY=value` lines (blank lines and `#` comments skipped; a value may be quoted).
fn env_lines(name: &str, text: &str) -> Result<BTreeMap<String, String>, TemplateFailure> {
    let mut env = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = || TemplateFailure::EnvLine {
            name: name.to_string(),
            line: i + 1,
            text: line.to_string(),
        };
        let (key, value) = line.split_once('=').ok_or_else(bad)?;
        let key = key
            .trim()
            .strip_prefix("export ")
            .unwrap_or(key.trim())
            .trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(bad());
        }
        let value = value.trim();
        let value = ['"', '\'']
            .iter()
            .find_map(|q| value.strip_prefix(*q).and_then(|v| v.strip_suffix(*q)))
            .unwrap_or(value);
        env.insert(key.to_string(), value.to_string());
    }
    Ok(env)
}

/// What `env` reads in a task's templates: the task's environment, then the node's values.
pub fn lookup<'a>(
    env: &'a BTreeMap<String, String>,
    node: &'a BTreeMap<String, String>,
) -> impl Fn(&str) -> Option<String> + 'a {
    move |name| env.get(name).or_else(|| node.get(name)).cloned()
}

/// What a running task's templates read: [`lookup`]'s values and, for `nomadService`, the
/// node's service catalog in the task's namespace.
pub struct TaskLookup<'a, F> {
    pub values: F,
    pub catalog: &'a std::sync::Arc<crate::checks::catalog::ServiceCatalog>,
    pub namespace: &'a str,
}

impl<F> std::fmt::Debug for TaskLookup<'_, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskLookup")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl<F: Fn(&str) -> Option<String>> Lookup for TaskLookup<'_, F> {
    fn get(&self, name: &str) -> Option<String> {
        (self.values)(name)
    }

    fn services(&self, name: &str) -> Option<Vec<drover_core::template::Record>> {
        Some(self.catalog.instances(self.namespace, name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(destination: &str, data: &str, mode: ChangeMode) -> Template {
        let mut t = Template::inline(data, destination);
        t.change_mode = mode;
        if mode == ChangeMode::Signal {
            t.change_signal = Some("SIGHUP".into());
        }
        t
    }

    #[test]
    fn templates_render_env_and_node_values_and_feed_the_environment() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = template(
            "local/app.conf",
            "name={{ env \"node.unique.name\" }} alloc={{ env \"NOMAD_ALLOC_ID\" }}\n",
            ChangeMode::Restart,
        );
        config.perms = "0600".into();
        let mut env_file = template(
            "secrets/app.env",
            "# settings\nGREETING=\"hello {{ env \"meta.rack\" }}\"\nexport LEVEL=3\n",
            ChangeMode::Noop,
        );
        env_file.env = true;
        let mut templates = TaskTemplates::new(&[config, env_file], dir.path(), None);
        let env = BTreeMap::from([("NOMAD_ALLOC_ID".to_string(), "a1".to_string())]);
        let node = BTreeMap::from([
            ("node.unique.name".to_string(), "n1".to_string()),
            ("meta.rack".to_string(), "r7".to_string()),
        ]);
        let rendered = templates.render(&lookup(&env, &node)).expect("renders");
        let path = dir.path().join("local/app.conf");
        assert_eq!(
            std::fs::read_to_string(&path).expect("written"),
            "name=n1 alloc=a1\n"
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            rendered.env,
            BTreeMap::from([
                ("GREETING".to_string(), "hello r7".to_string()),
                ("LEVEL".to_string(), "3".to_string()),
            ])
        );
        assert_eq!(
            rendered.change, None,
            "a first render tells the task nothing"
        );
    }

    #[test]
    fn a_changed_source_is_rewritten_and_the_strongest_change_mode_wins() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("local")).expect("local");
        let source = dir.path().join("local/in.tpl");
        std::fs::write(&source, "v1").expect("source");
        let mut by_source = Template::inline("", "local/out.txt");
        by_source.data = None;
        by_source.source = Some("local/in.tpl".into());
        by_source.change_mode = ChangeMode::Signal;
        by_source.change_signal = Some("SIGHUP".into());
        let steady = template("local/steady.txt", "same", ChangeMode::Restart);
        let mut templates = TaskTemplates::new(&[by_source.clone(), steady], dir.path(), None);
        let nothing = |_: &str| None;
        templates.render(&nothing).expect("first render");
        let again = templates.render(&nothing).expect("second render");
        assert_eq!((again.change, again.changed.len()), (None, 0));

        std::fs::write(&source, "v2").expect("source changes");
        let changed = templates.render(&nothing).expect("third render");
        assert_eq!(changed.change, Some(Change::Signal(Signal::SIGHUP)));
        assert_eq!(changed.changed, ["local/out.txt"]);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("local/out.txt")).expect("out"),
            "v2"
        );

        // A restart template changing with a signal one: the restart wins.
        let mut restart = by_source.clone();
        restart.destination = "local/other.txt".into();
        restart.change_mode = ChangeMode::Restart;
        let mut both = TaskTemplates::new(&[by_source, restart], dir.path(), None);
        both.render(&nothing).expect("first");
        std::fs::write(&source, "v3").expect("source changes");
        assert_eq!(
            both.render(&nothing).expect("changed").change,
            Some(Change::Restart)
        );
    }

    #[test]
    fn bad_templates_fail_with_their_position_and_whose_fault() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("local")).expect("local");
        std::fs::write(dir.path().join("local/bad.tpl"), "ok\n  {{ nope }}").expect("source");
        let mut from_file = Template::inline("", "local/out");
        from_file.data = None;
        from_file.source = Some("local/bad.tpl".into());
        let mut env_file = template("local/env", "not a pair", ChangeMode::Noop);
        env_file.env = true;
        let mut missing = from_file.clone();
        missing.source = Some("local/absent.tpl".into());
        let cases = [
            (
                from_file,
                "template local/out: 2:6: function \"nope\" is not defined",
            ),
            (
                env_file,
                "template local/env: line 1 of the rendered environment is not KEY=value",
            ),
            (missing, "template local/out: cannot read source"),
        ];
        for (spec, want) in cases {
            let mut one = TaskTemplates::new(&[spec], dir.path(), None);
            let err = one.render(&|_: &str| None).expect_err(want);
            assert!(err.to_string().starts_with(want), "{err}");
            assert!(!err.is_infra(), "{err}");
        }
    }
}
