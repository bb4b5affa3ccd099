//! An allocation's name, kept small. Schedulers name every allocation
//! `<job>.<group>[<index>]`, so for nearly all of them the index says everything the text
//! would: the console keeps the index and spells the name out only for the rows it shows.
//! A million names held as text would be a million small heap strings.

use std::borrow::Cow;

/// Invariant: `Index(i)` only for a name that is exactly `<job>.<group>[i]` for the job and
/// group of the row holding it, so spelling it out gives back the text it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AllocName {
    /// The scheduler's form: the text is rebuilt from the row's job and group.
    Index(u32),
    /// Any other name, as it came.
    Text(Box<str>),
}

impl AllocName {
    /// `text` as the name of an allocation of `job_id`'s group `group`.
    pub fn new(text: &str, job_id: &str, group: &str) -> Self {
        match scheduler_index(text, job_id, group) {
            Some(index) => AllocName::Index(index),
            None => AllocName::Text(text.into()),
        }
    }

    /// The name as text.
    pub fn spell<'a>(&'a self, job_id: &str, group: &str) -> Cow<'a, str> {
        match self {
            AllocName::Index(index) => {
                Cow::Owned(drover_core::Allocation::name_for(job_id, group, *index).into())
            }
            AllocName::Text(text) => Cow::Borrowed(text),
        }
    }
}

/// The index of a name in the scheduler's form for this job and group; `None` for any
/// other text, including a form that would not spell back the same (a leading zero).
fn scheduler_index(text: &str, job_id: &str, group: &str) -> Option<u32> {
    let rest = text.strip_prefix(job_id)?.strip_prefix('.')?;
    let digits = rest
        .strip_prefix(group)?
        .strip_prefix('[')?
        .strip_suffix(']')?;
    let canonical = (1..=9).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if !canonical {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever the text, spelling the kept name gives it back; only the scheduler's own
    /// form is kept as an index.
    #[test]
    fn names_spell_back_exactly() {
        let cases: [(&str, bool); 9] = [
            ("web.api[0]", true),
            ("web.api[42]", true),
            ("web.api[999999999]", true),
            ("web.api[007]", false),
            ("web.api[1234567890]", false),
            ("web.api[]", false),
            ("web.apix[1]", false),
            ("other.api[1]", false),
            ("web.api[1]x", false),
        ];
        for (text, compact) in cases {
            let name = AllocName::new(text, "web", "api");
            assert_eq!(name.spell("web", "api"), text, "{text}");
            assert_eq!(matches!(name, AllocName::Index(_)), compact, "{text}");
        }
    }
}
