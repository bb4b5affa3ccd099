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
        JobKey {
            namespace: self.text(&key.namespace),
            id: JobId(self.text(&key.id.0)),
        }
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
        assert!(Arc::ptr_eq(&interner.text(&web), &a.id.0));
    }
}
