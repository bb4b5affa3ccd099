//! When each task of an allocation may run, from its `lifecycle` block and its siblings'
//! states (pure, so every ordering rule is a table row). As Nomad orders them:
//!
//! - prestart tasks start at once; main tasks wait until every prestart task that is not a
//!   sidecar has finished successfully and every prestart sidecar runs;
//! - poststart tasks start once every main task has started;
//! - poststop tasks start once every main task has ended;
//! - sidecars are stopped once every main task has ended.
//!
//! A prestart task that fails fails the allocation (as any failed task does), so the main
//! tasks are stopped before they ever start.

use drover_core::types::{LifecycleHook, Task, TaskRunState, TaskState};
use std::collections::BTreeMap;

/// What a task runner may do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// Not yet: its hook has not come.
    Wait,
    Open,
    /// A sidecar whose main tasks have ended: stop it.
    Stop,
}

/// A task's place in the allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Main,
    Hook { hook: LifecycleHook, sidecar: bool },
}

impl Role {
    pub fn of(task: &Task) -> Self {
        match &task.lifecycle {
            None => Role::Main,
            Some(l) => Role::Hook {
                hook: l.hook,
                sidecar: l.sidecar,
            },
        }
    }

    /// Hooks that are not sidecars run once, to completion, whatever the job's type.
    pub fn runs_once(self) -> bool {
        matches!(self, Role::Hook { sidecar: false, .. })
    }
}

/// The gate of every task, by name, given the states of all of them.
pub fn gates(
    roles: &BTreeMap<String, Role>,
    states: &BTreeMap<String, TaskState>,
) -> BTreeMap<String, Gate> {
    let state = |name: &str| states.get(name).cloned().unwrap_or_default();
    let of = |pick: &dyn Fn(Role) -> bool| -> Vec<TaskState> {
        roles
            .iter()
            .filter(|(_, r)| pick(**r))
            .map(|(n, _)| state(n))
            .collect()
    };
    let mains = of(&|r| r == Role::Main);
    let prestart_done = of(&|r| {
        matches!(
            r,
            Role::Hook {
                hook: LifecycleHook::Prestart,
                sidecar: false
            }
        )
    })
    .iter()
    .all(|s| s.state == TaskRunState::Dead && !s.failed);
    let prestart_sidecars_up = of(&|r| {
        matches!(
            r,
            Role::Hook {
                hook: LifecycleHook::Prestart,
                sidecar: true
            }
        )
    })
    .iter()
    .all(|s| s.state != TaskRunState::Pending);
    let mains_started = mains.iter().all(|s| s.started_at.is_some());
    let mains_ended = !mains.is_empty() && mains.iter().all(|s| s.state == TaskRunState::Dead);

    roles
        .iter()
        .map(|(name, role)| {
            let gate = match *role {
                Role::Main => open_if(prestart_done && prestart_sidecars_up),
                Role::Hook { sidecar: true, .. } if mains_ended => Gate::Stop,
                Role::Hook {
                    hook: LifecycleHook::Prestart,
                    ..
                } => Gate::Open,
                Role::Hook {
                    hook: LifecycleHook::Poststart,
                    ..
                } => open_if(mains_started),
                Role::Hook {
                    hook: LifecycleHook::Poststop,
                    ..
                } => open_if(mains_ended),
            };
            (name.clone(), gate)
        })
        .collect()
}

fn open_if(ready: bool) -> Gate {
    if ready { Gate::Open } else { Gate::Wait }
}

#[cfg(test)]
mod tests {
    use super::*;
    use LifecycleHook::{Poststart, Poststop, Prestart};
    use drover_core::types::Timestamp;

    fn st(state: TaskRunState, failed: bool, started: bool) -> TaskState {
        TaskState {
            state,
            failed,
            started_at: started.then_some(Timestamp::from_millis(1)),
            ..TaskState::default()
        }
    }

    #[test]
    fn hooks_open_in_nomads_order() {
        use Gate::{Open, Stop, Wait};
        use TaskRunState::{Dead, Pending, Running};
        let roles: BTreeMap<String, Role> = [
            (
                "init",
                Role::Hook {
                    hook: Prestart,
                    sidecar: false,
                },
            ),
            (
                "proxy",
                Role::Hook {
                    hook: Prestart,
                    sidecar: true,
                },
            ),
            ("main", Role::Main),
            (
                "warm",
                Role::Hook {
                    hook: Poststart,
                    sidecar: false,
                },
            ),
            (
                "flush",
                Role::Hook {
                    hook: Poststop,
                    sidecar: false,
                },
            ),
        ]
        .into_iter()
        .map(|(n, r)| (n.to_string(), r))
        .collect();
        // (init, proxy, main) states -> gates of (init, proxy, main, warm, flush)
        let cases = [
            (
                "nothing ran yet: only prestart tasks may start",
                [
                    st(Pending, false, false),
                    st(Pending, false, false),
                    st(Pending, false, false),
                ],
                [Open, Open, Wait, Wait, Wait],
            ),
            (
                "init done, sidecar not up yet",
                [
                    st(Dead, false, true),
                    st(Pending, false, false),
                    st(Pending, false, false),
                ],
                [Open, Open, Wait, Wait, Wait],
            ),
            (
                "init done, sidecar up: main starts",
                [
                    st(Dead, false, true),
                    st(Running, false, true),
                    st(Pending, false, false),
                ],
                [Open, Open, Open, Wait, Wait],
            ),
            (
                "init failed: main never opens",
                [
                    st(Dead, true, true),
                    st(Running, false, true),
                    st(Pending, false, false),
                ],
                [Open, Open, Wait, Wait, Wait],
            ),
            (
                "main running: poststart opens",
                [
                    st(Dead, false, true),
                    st(Running, false, true),
                    st(Running, false, true),
                ],
                [Open, Open, Open, Open, Wait],
            ),
            (
                "main ended: poststop opens, the sidecar stops",
                [
                    st(Dead, false, true),
                    st(Running, false, true),
                    st(Dead, false, true),
                ],
                [Open, Stop, Open, Open, Open],
            ),
        ];
        for (name, [init, proxy, main], want) in cases {
            let states = BTreeMap::from([
                ("init".to_string(), init),
                ("proxy".to_string(), proxy),
                ("main".to_string(), main),
            ]);
            let got = gates(&roles, &states);
            let got: Vec<Gate> = ["init", "proxy", "main", "warm", "flush"]
                .iter()
                .map(|n| got[*n])
                .collect();
            assert_eq!(got, want, "{name}");
        }
    }
}
