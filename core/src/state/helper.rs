//! The second core's share of a write: one helper thread that lives as long as the process.
//!
//! The FSM's apply splits an allocation batch's index work into two halves that share no
//! tree, and runs one of them on a second thread. On this project's 2-core test machine a
//! restart's replay spent a third of its time joining the thread spawned for each batch,
//! though those threads used less CPU than the caller's own half; creating and joining a
//! thread there costs over 100 µs and a fresh allocator heap each time. A long-lived thread
//! keeps its heap and is only woken. It blocks while idle: a pool whose idle workers spin
//! (rayon's) would take CPU the caller and the API need on two cores.
//!
//! Jobs are owned (`'static`): the caller moves the trees a job writes out of the store and
//! takes them back from [`Pending::wait`], so no borrow crosses threads and no unsafe code
//! is needed. Jobs from every store in the process run one after another, in order, so a
//! job may wait for the [`Pending`] of one queued before it (which is then done): that is
//! how batches lent one after another hand the trees on.
//!
//! Invariant: [`Pending::wait`] returns what the job would have returned run in place;
//! which thread ran it changes only the time it took.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, Sender, sync_channel};

type Job = Box<dyn FnOnce() + Send>;
type Outcome<R> = Result<R, Box<dyn Any + Send>>;

/// The queue into the helper, started on first use; `None` where the machine would not give
/// a thread, in which case jobs run on the caller.
fn helper() -> Option<&'static Sender<Job>> {
    static HELPER: OnceLock<Option<Sender<Job>>> = OnceLock::new();
    HELPER
        .get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("drover-index".into())
                .spawn(move || rx.into_iter().for_each(|job| job()))
                .map_err(|e| tracing::warn!(error = %e, "no index helper thread; indexing on one"))
                .ok()
                .map(|_| tx)
        })
        .as_ref()
}

/// A job handed to the helper, or already run here.
#[derive(Debug)]
pub(super) enum Pending<R> {
    Running(Receiver<Outcome<R>>),
    Done(R),
}

/// Starts `job` on the helper thread and returns at once.
pub(super) fn spawn<R, F>(job: F) -> Pending<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    match enqueue(job) {
        Queued::Running(rx) => Pending::Running(rx),
        Queued::NoHelper(job) => Pending::Done(job()),
        // The helper is gone (it only ends with the process): run the job here.
        Queued::HelperGone(wrapped, rx) => {
            wrapped();
            Pending::Running(rx)
        }
    }
}

/// Runs `job` on the helper thread and waits for it; `None`, without running it, where the
/// process has no helper. What it is for: a job that changes the thread itself (its
/// scheduling priority), which must not run on the caller instead.
pub fn run_on_helper<R, F>(job: F) -> Option<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    match enqueue(job) {
        Queued::Running(rx) => Some(Pending::Running(rx).wait()),
        Queued::NoHelper(_) | Queued::HelperGone(..) => None,
    }
}

/// Where [`enqueue`] left a job.
enum Queued<R, F> {
    Running(Receiver<Outcome<R>>),
    /// No helper thread was ever started: the job, untouched.
    NoHelper(F),
    /// The helper's queue is closed: the job wrapped to send its outcome to the receiver.
    HelperGone(Job, Receiver<Outcome<R>>),
}

fn enqueue<R, F>(job: F) -> Queued<R, F>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let Some(queue) = helper() else {
        return Queued::NoHelper(job);
    };
    let (tx, rx) = sync_channel(1);
    let wrapped: Job = Box::new(move || {
        // The caller may have unwound meanwhile; then nobody wants the result.
        let _ = tx.send(catch_unwind(AssertUnwindSafe(job)));
    });
    match queue.send(wrapped) {
        Ok(()) => Queued::Running(rx),
        Err(returned) => Queued::HelperGone(returned.0, rx),
    }
}

impl<R> Pending<R> {
    /// The job's result, once it has run. A panic in the job is resumed here.
    pub(super) fn wait(self) -> R {
        match self {
            Pending::Done(r) => r,
            Pending::Running(rx) => match rx.recv() {
                Ok(Ok(r)) => r,
                Ok(Err(panic)) => resume_unwind(panic),
                Err(_) => {
                    unreachable!("a queued job always sends its outcome before it is dropped")
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::spawn;

    #[test]
    fn a_job_run_on_the_helper_runs_on_its_thread() {
        let name = super::run_on_helper(|| std::thread::current().name().map(str::to_owned));
        assert_eq!(name, Some(Some("drover-index".to_owned())));
    }

    #[test]
    fn a_job_returns_what_it_owns_while_the_caller_works() {
        let owned = vec![1, 2, 3];
        let pending = spawn(move || {
            let mut v = owned;
            v.push(9);
            v
        });
        let here: i32 = (1..=4).sum();
        assert_eq!(pending.wait(), [1, 2, 3, 9]);
        assert_eq!(here, 10);
    }

    #[test]
    fn jobs_from_several_threads_each_get_their_own_result() {
        let results: Vec<u64> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8u64)
                .map(|i| s.spawn(move || spawn(move || i * i).wait()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(results, [0, 1, 4, 9, 16, 25, 36, 49]);
    }

    #[test]
    fn a_panic_on_the_helper_reaches_the_caller_and_the_helper_survives_it() {
        let caught = std::panic::catch_unwind(|| spawn(|| panic!("job failed")).wait());
        assert!(caught.is_err());
        assert_eq!(spawn(|| 2).wait(), 2);
    }
}
