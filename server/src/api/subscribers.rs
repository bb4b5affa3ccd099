//! Event-stream subscriber slots: a total, a share no one token may exceed, and a reserve
//! only management tokens may take, so that no token holding `read-events` can lock every
//! operator out of the stream by opening subscriptions until the server is full.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tonic::Status;

/// How many slots each kind of caller may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotLimits {
    /// Subscribers served at once.
    pub total: usize,
    /// Subscribers one token (not a management one) may hold at once.
    pub per_token: usize,
    /// Slots only management tokens (or anyone when ACLs are off) may take.
    pub reserved_for_management: usize,
}

#[derive(Debug, Default)]
struct Held {
    open: usize,
    by_token: HashMap<String, usize>,
}

/// The slots of one server's event stream.
#[derive(Debug)]
pub struct Subscribers {
    limits: SlotLimits,
    held: Mutex<Held>,
}

/// Who asks for a slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subscriber {
    /// A management token, or anyone when ACLs are off.
    Management,
    /// Another token, by a key unique to it (its secret's digest).
    Token(String),
}

/// A held slot, given back when dropped.
#[derive(Debug)]
pub struct Slot {
    subscribers: Arc<Subscribers>,
    token: Option<String>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.subscribers.lock();
        held.open = held.open.saturating_sub(1);
        if let Some(t) = &self.token
            && let Some(n) = held.by_token.get_mut(t)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.by_token.remove(t);
            }
        }
    }
}

impl Subscribers {
    pub fn new(limits: SlotLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            held: Mutex::new(Held::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A slot for `who`, or RESOURCE_EXHAUSTED naming the limit it would pass.
    pub fn admit(self: &Arc<Self>, who: Subscriber) -> Result<Slot, Status> {
        let l = self.limits;
        let mut held = self.lock();
        if held.open >= l.total {
            return Err(Status::resource_exhausted(format!(
                "the server already serves its maximum of {} event subscribers: retry later",
                l.total
            )));
        }
        let token = match who {
            Subscriber::Management => None,
            Subscriber::Token(key) => {
                let open_for_others = l.total.saturating_sub(l.reserved_for_management);
                if held.open >= open_for_others {
                    return Err(Status::resource_exhausted(format!(
                        "every event subscriber slot but the {} kept for management tokens is taken: retry later",
                        l.reserved_for_management
                    )));
                }
                let mine = held.by_token.get(&key).copied().unwrap_or(0);
                if mine >= l.per_token {
                    return Err(Status::resource_exhausted(format!(
                        "this token already holds {mine} event subscriptions, the most one token may (limits.max_subscribers_per_token)"
                    )));
                }
                *held.by_token.entry(key.clone()).or_default() += 1;
                Some(key)
            }
        };
        held.open += 1;
        Ok(Slot {
            subscribers: self.clone(),
            token,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_share_slots_and_management_keeps_its_reserve() {
        let subs = Subscribers::new(SlotLimits {
            total: 6,
            per_token: 2,
            reserved_for_management: 2,
        });
        let token = |k: &str| Subscriber::Token(k.to_string());
        let a1 = subs.admit(token("a")).expect("a 1");
        let _a2 = subs.admit(token("a")).expect("a 2");
        let refused = subs.admit(token("a")).expect_err("a 3: past its share");
        assert!(
            refused.message().contains("holds 2"),
            "{}",
            refused.message()
        );
        let _b1 = subs.admit(token("b")).expect("b 1");
        let _b2 = subs.admit(token("b")).expect("b 2");
        let refused = subs
            .admit(token("c"))
            .expect_err("only the reserve is left");
        assert!(
            refused.message().contains("kept for management"),
            "{}",
            refused.message()
        );
        let _m1 = subs.admit(Subscriber::Management).expect("management 1");
        let _m2 = subs.admit(Subscriber::Management).expect("management 2");
        let refused = subs.admit(Subscriber::Management).expect_err("full");
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        drop(a1);
        assert!(
            subs.admit(token("a")).is_err(),
            "a freed slot is not in the reserve"
        );
        assert!(
            subs.admit(Subscriber::Management).is_ok(),
            "but management may take it"
        );
    }
}
