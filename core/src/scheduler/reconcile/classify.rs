//! Sorting one group's allocations by what must happen to them, from their own state and the
//! state of their node.

use super::nodes::NodeView;
use super::reschedule::{self, Reschedule};
use crate::state::{JobAlloc, StateSnapshot};
use crate::types::*;

/// Why an allocation is being replaced; the replacement keeps its name.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Replace {
    /// Its node is down (or gone, or disconnected past the window): mark lost, place anew.
    Lost,
    /// Its node is draining: stop it and place it elsewhere (not a reschedule).
    Migrate,
    /// It failed and the policy allows another attempt now.
    Reschedule { delay: std::time::Duration },
    /// Its node just disconnected and the group wants a stand-in: mark unknown, place one.
    Disconnect,
    /// It is unknown with `replace` on and nothing holds its slot (the stand-in stopped).
    StandIn,
}

/// One allocation's class.
#[derive(Clone, PartialEq, Debug)]
pub enum Class {
    /// Terminal or superseded: nothing to do, holds no slot.
    Ignore,
    /// Holds its slot as it is (running, batch complete, failed without attempts left, ...).
    Keep,
    /// Holds its slot; its node disconnected inside the window: mark it unknown now.
    MarkUnknown,
    /// Holds its slot until `due`, when a follow-up eval acts (delayed reschedule, or
    /// `stop_after_client_disconnect`); `existing` is set when that eval is already written.
    Later {
        due: Timestamp,
        existing: Option<EvalId>,
        lost: bool,
    },
    /// Unknown on a disconnected node, inside the window: waits (holds the slot when the group
    /// does not replace).
    Unknown,
    /// Back from a disconnect with a client update: decide between it and its stand-in.
    Reconnecting,
    Replace(Replace),
}

/// Everything classification needs besides the allocation.
pub struct Context<'a> {
    /// Where an entry's whole allocation is read, for the few classes that need it.
    pub state: &'a StateSnapshot,
    pub job: &'a Job,
    pub group: &'a TaskGroup,
    pub node: NodeView,
    pub now: Timestamp,
    pub eval: EvalId,
}

/// Reads the index entry's copied fields first: an allocation that is wanted, live and on a
/// settled node (the usual case) is classified without reading the allocation itself.
pub fn classify(entry: &JobAlloc, cx: &Context<'_>) -> Class {
    if entry.desired_status != DesiredStatus::Run || entry.client_status == ClientStatus::Lost {
        return Class::Ignore;
    }
    let batch = cx.job.job_type.runs_to_completion();
    match entry.client_status {
        ClientStatus::Complete if batch && entry.job_version == cx.job.version => {
            return Class::Keep;
        }
        // A service that exited is replaced; an old version's finished batch work is history.
        ClientStatus::Complete => return Class::Ignore,
        ClientStatus::Failed => {
            let Some(alloc) = cx.state.job_alloc(entry) else {
                return Class::Ignore;
            };
            return match reschedule::decide(alloc, &cx.group.reschedule, cx.now, cx.eval) {
                Reschedule::Now { delay } => Class::Replace(Replace::Reschedule { delay }),
                Reschedule::Later { due, .. } => Class::Later {
                    due,
                    existing: alloc.links.get().follow_up_eval_id,
                    lost: false,
                },
                Reschedule::No => Class::Keep,
            };
        }
        _ => {}
    }
    // An entry always has its allocation in a consistent store; one without is no longer
    // there to act on.
    let whole = || cx.state.job_alloc(entry);
    match cx.node {
        NodeView::Gone => whole().map_or(Class::Ignore, |a| lost_or_later(a, cx, cx.now)),
        NodeView::Down(since) => whole().map_or(Class::Ignore, |a| lost_or_later(a, cx, since)),
        NodeView::Disconnected(since) => {
            whole().map_or(Class::Ignore, |a| disconnected(a, cx, since))
        }
        NodeView::Settled | NodeView::Draining => {
            if entry.last_state == Some(ClientStatus::Unknown) {
                // Reconnected: handled once the client has reported, never before.
                if entry.client_status == ClientStatus::Unknown {
                    Class::Unknown
                } else {
                    Class::Reconnecting
                }
            } else if entry.migrate {
                // A drain marked it (the drainer paces how many at a time); on a draining
                // node, an allocation not yet marked stays until it is.
                Class::Replace(Replace::Migrate)
            } else {
                Class::Keep
            }
        }
    }
}

/// A node that is gone: lost at once, unless `stop_after_client_disconnect` delays it.
fn lost_or_later(alloc: &Allocation, cx: &Context<'_>, since: Timestamp) -> Class {
    if let Some(delay) = cx.group.stop_after_client_disconnect {
        let due = since.saturating_add(delay);
        if due > cx.now && alloc.links.get().follow_up_eval_id != Some(cx.eval) {
            return Class::Later {
                due,
                existing: alloc.links.get().follow_up_eval_id,
                lost: true,
            };
        }
    }
    Class::Replace(Replace::Lost)
}

/// On a node disconnected since `node_since`.
fn disconnected(alloc: &Allocation, cx: &Context<'_>, node_since: Timestamp) -> Class {
    let Some(window) = cx.group.disconnect_window() else {
        return lost_or_later(alloc, cx, node_since);
    };
    if alloc.client_status != ClientStatus::Unknown {
        return Class::MarkUnknown;
    }
    let since = alloc.state_history.last().map_or(cx.now, |e| e.time);
    let expired = cx.now >= since.saturating_add(window)
        || alloc.links.get().follow_up_eval_id == Some(cx.eval);
    if expired {
        Class::Replace(Replace::Lost)
    } else {
        Class::Unknown
    }
}
