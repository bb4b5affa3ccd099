//! What the API's tower layers (authentication, request limits, forwarding) share.

/// Takes the service a tower layer's `poll_ready` readied, leaving a fresh clone in its
/// place: the ready one is the one to call (tower's contract), and the clone is readied
/// again before the next call. Every API layer that calls its inner service from a boxed
/// future does this.
pub(crate) fn take_ready<S: Clone>(slot: &mut S) -> S {
    let fresh = slot.clone();
    std::mem::replace(slot, fresh)
}
