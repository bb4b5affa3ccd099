//! The finite state machine of the Raft log: commands, how they change the store, the events
//! they emit, and their binary form.

mod apply;
mod apply_acl;
mod codec;
mod command;
mod event;

#[cfg(test)]
mod acl_tests;
#[cfg(test)]
mod service_tests;
#[cfg(test)]
mod tests;

pub use apply::{Applier, ApplyError, apply};
pub use codec::{
    COMMAND_FORMAT, CodecError, SNAPSHOT_FORMAT, decode_command, decode_snapshot, encode_command,
    encode_snapshot, encode_snapshot_to, read_header,
};
pub use command::{
    AllocClientUpdate, AllocServices, Command, NodeAllocUpdates, PlanApply, one_eval_per_job,
};
pub use event::{Event, EventPayload, EventType, Topic};
