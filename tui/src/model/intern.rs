//! One shared copy of each repeated string. Every allocation names its namespace, job and
//! group; a million allocations of a few hundred jobs would otherwise hold a million copies
//! of each, as every decoded event brings fresh ones.

use drover_core::{JobId, JobKey};
use rustc_hash::FxHashSet;
use std::sync::Arc;

/// Invariant: holds each text at most once; what it hands out is the copy it holds.
#[derive(Clone, Debug, Default)]
pub struct Interner {
    texts: FxHashSet<Arc<str>>,
    /// The job key asked for last and what was handed out for it: rows arrive grouped by
    /// job (a load reads one job's allocations at a time, and they share its key), so most
    /// rows carry exactly the pointers asked for last and skip the hashing.
    last_job: Option<(JobKey, JobKey)>,
    last_group: Option<(Arc<str>, Arc<str>)>,
}

impl Interner {
    /// The held copy of `text`, which becomes the held copy if there is none yet.
    pub fn text(&mut self, text: &Arc<str>) -> Arc<str> {
        match self.texts.get(&**text) {
            Some(held) => held.clone(),
            None => {
                self.texts.insert(text.clone());
                text.clone()
            }
        }
    }

    /// `key` made of held copies.
    pub fn job(&mut self, key: &JobKey) -> JobKey {
        if let Some((asked, held)) = &self.last_job
            && Arc::ptr_eq(&asked.namespace, &key.namespace)
            && Arc::ptr_eq(&asked.id.0, &key.id.0)
        {
            return held.clone();
        }
        let held = JobKey {
            namespace: self.text(&key.namespace),
            id: JobId(self.text(&key.id.0)),
        };
        self.last_job = Some((key.clone(), held.clone()));
        held
    }

    /// The held copy of a task group's name.
    pub fn group(&mut self, group: &Arc<str>) -> Arc<str> {
        if let Some((asked, held)) = &self.last_group
            && Arc::ptr_eq(asked, group)
        {
            return held.clone();
        }
        let held = self.text(group);
        self.last_group = Some((group.clone(), held.clone()));
        held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_share_one_copy() {
        let mut interner = Interner::default();
        let a = interner.job(&JobKey::new("default", "web"));
        let b = interner.job(&JobKey::new("default", "web"));
        let c = interner.job(&JobKey::new("default", "api"));
        assert!(Arc::ptr_eq(&a.namespace, &b.namespace) && Arc::ptr_eq(&a.id.0, &b.id.0));
        assert!(Arc::ptr_eq(&a.namespace, &c.namespace));
        assert_eq!(c, JobKey::new("default", "api"));
        let web: Arc<str> = Arc::from("web");
        assert!(Arc::ptr_eq(&interner.group(&web), &a.id.0));
        // Asked again with the same pointers, it hands out the held copies again.
        let fresh = JobKey::new("default", "web");
        let first = interner.job(&fresh);
        let again = interner.job(&fresh);
        assert!(Arc::ptr_eq(&first.namespace, &a.namespace));
        assert!(Arc::ptr_eq(&again.id.0, &a.id.0));
    }
}
