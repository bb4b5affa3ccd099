//! A restore builds its indexes with full B-tree leaves (`state::packed`), measured as the
//! heap bytes each way of building a map leaves held: if imbl's split rule changed, or the
//! build went back to ascending inserts, the packed map would hold as much as the other.
//!
//! Bytes are counted per thread, so the harness's other threads do not disturb a count.

use drover_core::state::ordmap_from_sorted;
use imbl::OrdMap;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct PerThread;

thread_local! {
    static HELD: Cell<isize> = const { Cell::new(0) };
}

fn count(bytes: isize) {
    // During a thread's teardown its counter may be gone; that thread measures nothing.
    let _ = HELD.try_with(|held| held.set(held.get() + bytes));
}

// GlobalAlloc is an unsafe trait; this forwards to the system allocator and only counts.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for PerThread {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count(l.size() as isize);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        count(-(l.size() as isize));
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        count(new as isize - l.size() as isize);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static GLOBAL: PerThread = PerThread;

/// What `build` returns, and the bytes it still holds once everything else `build`
/// allocated is freed.
fn held_by<T>(build: impl FnOnce() -> T) -> (T, isize) {
    let before = HELD.with(Cell::get);
    let built = build();
    (built, HELD.with(Cell::get) - before)
}

#[test]
fn sorted_entries_packed_hold_little_more_than_half_what_ascending_inserts_hold() {
    // An allocation index's entry is 24 to 144 bytes; 48 here.
    let entries: Vec<(u64, [u64; 5])> = (0..100_000u64).map(|k| (k * 7, [k; 5])).collect();
    let (ascending, ascending_bytes) =
        held_by(|| entries.iter().cloned().collect::<OrdMap<_, _>>());
    let (packed, packed_bytes) = held_by(|| ordmap_from_sorted(entries.clone()));
    assert_eq!(packed, ascending);
    let raw = (entries.len() * std::mem::size_of::<(u64, [u64; 5])>()) as isize;
    assert!(
        ascending_bytes > raw * 19 / 10,
        "ascending inserts held {ascending_bytes} bytes for {raw} bytes of entries: \
         the measure no longer sees half-full leaves"
    );
    assert!(
        packed_bytes < raw * 12 / 10,
        "the packed map held {packed_bytes} bytes for {raw} bytes of entries \
         (ascending inserts: {ascending_bytes}): its leaves are not full"
    );
}
