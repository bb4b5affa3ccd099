//! Stopping a child process within a deadline, shared by `drover dev`'s servers and the
//! bench's.

use std::process::Child;
use std::time::Duration;

/// How a child ended once asked to stop.
#[derive(Debug)]
pub enum Stopped {
    Exited(std::process::ExitStatus),
    /// Still running at the deadline, so killed.
    Killed,
}

/// Waits up to `deadline` for `child` to exit, then kills it (blocking: run it off the
/// runtime).
pub fn wait_or_kill(child: &mut Child, deadline: Duration) -> std::io::Result<Stopped> {
    let until = std::time::Instant::now() + deadline;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Stopped::Exited(status));
        }
        if std::time::Instant::now() >= until {
            child.kill()?;
            child.wait()?;
            return Ok(Stopped::Killed);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// A child that ignores SIGINT, as a hung server does: started, asked to stop, then
    /// waited for with `deadline`.
    fn stop_one(ignore_sigint: bool, deadline: Duration) -> Stopped {
        let script = if ignore_sigint {
            "trap '' INT; exec sleep 30"
        } else {
            "exec sleep 30"
        };
        let mut child = Command::new("sh").args(["-c", script]).spawn().unwrap();
        // Signal only once `sh` has become `sleep`: before, the trap may not be set yet.
        let started = std::time::Instant::now();
        while std::fs::read_to_string(format!("/proc/{}/comm", child.id()))
            .is_ok_and(|comm| comm.trim() != "sleep")
        {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "sh never ran sleep"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        )
        .unwrap();
        let stopped = wait_or_kill(&mut child, deadline).unwrap();
        assert!(
            child.try_wait().unwrap().is_some(),
            "the child is gone either way"
        );
        stopped
    }

    #[test]
    fn a_server_that_ignores_sigint_is_killed_at_the_deadline_and_one_that_stops_is_not() {
        let started = std::time::Instant::now();
        assert!(matches!(
            stop_one(true, Duration::from_millis(300)),
            Stopped::Killed
        ));
        assert!(started.elapsed() >= Duration::from_millis(300));
        match stop_one(false, Duration::from_secs(30)) {
            Stopped::Exited(status) => assert!(!status.success(), "{status}"),
            Stopped::Killed => panic!("a child that stops on SIGINT was killed"),
        }
    }
}
