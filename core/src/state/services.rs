//! The service catalog: registrations the agents running allocations write, by id, with
//! indexes by service name and by allocation.
//!
//! A registration is *listed* (what reads answer) while its allocation runs and is wanted
//! running. One whose allocation is disconnected (`unknown`) is kept but not listed, so it
//! is listed again when the node reconnects inside its disconnect window; one whose
//! allocation ended on the client (complete, failed, lost) or is gone is removed by the FSM
//! in the entry that ended it. **Invariant** (`check_consistency`): every registration
//! names an existing allocation, not client-terminal, on the registration's node.

use super::{StateStore, Table};
use crate::types::*;
use std::sync::Arc;

/// A registration's id as the table and both indexes key it. Keys are shared, not owned
/// strings: a write behind a reader's snapshot copies each tree node on its path, and
/// with it every key of that node, so a key's clone must be a reference count, not an
/// allocation and a copy of the string (with owned strings, registering one service
/// behind a snapshot copied a few hundred strings across the three trees).
pub(super) type RegId = Arc<str>;

/// The key of a registration in the by-name index: namespace, service name, id.
pub(super) type ByName = (Arc<str>, Arc<str>, RegId);

/// A service's key in the per-service change index: namespace, service name.
pub(super) type NameKey = (Arc<str>, Arc<str>);

fn name_key(r: &ServiceRegistration) -> NameKey {
    (
        Arc::from(r.namespace.as_str()),
        Arc::from(r.service_name.as_str()),
    )
}

/// What one write of an allocation's registrations changed.
#[derive(Debug, Default)]
pub struct ServiceChanges {
    pub upserted: Vec<Arc<ServiceRegistration>>,
    pub removed: Vec<Arc<ServiceRegistration>>,
}

/// One service name of a namespace with what its listed instances say.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ServiceSummary {
    pub namespace: String,
    pub name: String,
    /// Every tag of any instance, sorted, once.
    pub tags: Vec<String>,
    pub instances: usize,
    /// The worst health of its instances.
    pub health: ServiceHealth,
}

/// Whether the allocation's registrations are what reads answer.
pub fn alloc_listed(a: &Allocation) -> bool {
    a.client_status == ClientStatus::Running && a.desired_status == DesiredStatus::Run
}

impl StateStore {
    pub fn service_registration(&self, id: &str) -> Option<&Arc<ServiceRegistration>> {
        self.services.get(id)
    }

    /// Every registration of an allocation, listed or not, in id order.
    pub fn alloc_services(
        &self,
        alloc: AllocId,
    ) -> impl Iterator<Item = &Arc<ServiceRegistration>> {
        let from: (AllocId, RegId) = (alloc, Arc::from(""));
        self.services_by_alloc
            .range(from..)
            .take_while(move |(a, _)| *a == alloc)
            .filter_map(|(_, id)| self.services.get(&**id))
    }

    /// Whether a registration is listed: its allocation runs and is wanted running.
    pub fn service_listed(&self, r: &ServiceRegistration) -> bool {
        self.alloc(&r.alloc_id).is_some_and(|a| alloc_listed(a))
    }

    /// The `service` block a registration was made from, in the job version its allocation
    /// runs (the job's current version once that one is no longer kept). What its checks
    /// are for (`on_update`) lives there, not in the catalog; the registration's id names
    /// the block's position among its group's or task's services.
    pub fn service_definition(&self, r: &ServiceRegistration) -> Option<&Service> {
        let a = self.alloc(&r.alloc_id)?;
        let key = JobKey {
            namespace: a.namespace.clone(),
            id: a.job_id.clone(),
        };
        let job = self
            .job_version(&key, a.job_version)
            .or_else(|| self.job(&key))?;
        let group = job
            .groups
            .iter()
            .find(|g| g.name == a.task_group.as_str())?;
        let index = r.block_index()?;
        match &r.task {
            Some(t) => group
                .tasks
                .iter()
                .find(|x| x.name == *t)?
                .services
                .get(index),
            None => group.services.get(index),
        }
    }

    /// The index at which the listed instances of service `name` in `namespace` last
    /// changed (one registered, removed, changed, listed or hidden), so a blocking read of
    /// one service wakes for its own changes only, not for every change of the catalog
    /// (Nomad wakes it on any registration). A service with no registration answers the
    /// catalog's table index. Never below any of its registrations' `modify_index`.
    pub fn service_index(&self, namespace: &str, name: &str) -> Index {
        self.services_changed
            .get(&(Arc::from(namespace), Arc::from(name)))
            .copied()
            .unwrap_or_else(|| self.table_index(Table::Services))
    }

    /// Records that service `key` changed at `index`, or forgets it once it has no
    /// registration left (its readers then follow the table index, which is past it).
    fn service_changed(&mut self, key: NameKey, index: Index) {
        let from: ByName = (key.0.clone(), key.1.clone(), Arc::from(""));
        let any_left = self
            .services_by_name
            .range(from..)
            .next()
            .is_some_and(|(ns, name, _)| *ns == key.0 && *name == key.1);
        if any_left {
            self.services_changed.insert(key, index);
        } else {
            self.services_changed.remove(&key);
        }
    }

    /// Every present service starts at the table index: what changed it before a snapshot
    /// was not kept, and a reader must not see a service's index go backwards.
    pub(super) fn restart_service_indexes(&mut self) {
        let at = self.table_index(Table::Services);
        self.services_changed = self.services.values().map(|r| (name_key(r), at)).collect();
    }

    /// The listed instances of service `name` in `namespace`, in id order.
    pub fn service_instances<'a>(
        &'a self,
        namespace: &str,
        name: &str,
    ) -> impl Iterator<Item = &'a Arc<ServiceRegistration>> + 'a {
        let from: ByName = (Arc::from(namespace), Arc::from(name), Arc::from(""));
        let (ns, n) = (namespace.to_owned(), name.to_owned());
        self.services_by_name
            .range(from..)
            .take_while(move |(a, b, _)| **a == *ns && **b == *n)
            .filter_map(|(_, _, id)| self.services.get(&**id))
            .filter(|r| self.service_listed(r))
    }

    /// Every service name with listed instances, of one namespace or all, in
    /// (namespace, name) order.
    pub fn service_summaries(&self, namespace: Option<&str>) -> Vec<ServiceSummary> {
        let mut out: Vec<ServiceSummary> = Vec::new();
        let start: ByName = (
            Arc::from(namespace.unwrap_or_default()),
            Arc::from(""),
            Arc::from(""),
        );
        for (ns, name, id) in self.services_by_name.range(start..) {
            if namespace.is_some_and(|want| want != &**ns) {
                break;
            }
            let Some(r) = self.services.get(&**id).filter(|r| self.service_listed(r)) else {
                continue;
            };
            match out.last_mut() {
                Some(s) if *s.namespace == **ns && *s.name == **name => {
                    s.instances += 1;
                    s.health = s.health.max(r.health);
                    s.tags.extend(r.tags.iter().cloned());
                }
                _ => out.push(ServiceSummary {
                    namespace: ns.to_string(),
                    name: name.to_string(),
                    tags: r.tags.clone(),
                    instances: 1,
                    health: r.health,
                }),
            }
        }
        for s in &mut out {
            s.tags.sort();
            s.tags.dedup();
        }
        out
    }

    pub fn service_count(&self) -> usize {
        self.services.len()
    }

    /// Replaces the registrations of allocation `alloc` with `regs` (ids not in `regs`
    /// go). A registration that did not change keeps its indexes and is not reported.
    pub(crate) fn set_alloc_services(
        &mut self,
        index: Index,
        alloc: AllocId,
        regs: Vec<ServiceRegistration>,
    ) -> ServiceChanges {
        let mut changes = ServiceChanges::default();
        let keep: std::collections::BTreeSet<&str> = regs.iter().map(|r| r.id.as_str()).collect();
        let stale: Vec<String> = self
            .alloc_services(alloc)
            .filter(|r| !keep.contains(r.id.as_str()))
            .map(|r| r.id.clone())
            .collect();
        for id in stale {
            if let Some(r) = self.remove_service(&id) {
                changes.removed.push(r);
            }
        }
        for mut r in regs {
            match self.services.get(r.id.as_str()) {
                Some(old) => {
                    r.create_index = old.create_index;
                    r.modify_index = old.modify_index;
                    if **old == r {
                        continue;
                    }
                    self.remove_service(&r.id);
                }
                None => r.create_index = index,
            }
            r.modify_index = index;
            let r = Arc::new(r);
            self.insert_service(r.clone());
            changes.upserted.push(r);
        }
        if !changes.upserted.is_empty() || !changes.removed.is_empty() {
            self.touch(Table::Services, index);
            for r in changes.upserted.iter().chain(&changes.removed) {
                self.service_changed(name_key(r), index);
            }
        }
        changes
    }

    /// Marks the catalog, and each service allocation `alloc` offers, changed at `index`
    /// without changing a registration: the allocation's registrations became listed or
    /// stopped being listed.
    pub(crate) fn touch_alloc_services(&mut self, index: Index, alloc: AllocId) {
        // Asked of every allocation that starts or stops running: most clusters register
        // no service, and a lookup costs a key allocation.
        if self.services.is_empty() {
            return;
        }
        let names: Vec<NameKey> = self.alloc_services(alloc).map(|r| name_key(r)).collect();
        if names.is_empty() {
            return;
        }
        self.touch(Table::Services, index);
        for key in names {
            self.service_changed(key, index);
        }
    }

    /// Puts a registration back as a snapshot holds it (indexes kept).
    pub(super) fn restore_service(&mut self, r: ServiceRegistration) {
        self.insert_service(Arc::new(r));
    }

    /// Puts a registration in the table and both indexes, under one shared id.
    fn insert_service(&mut self, r: Arc<ServiceRegistration>) {
        let id = RegId::from(r.id.as_str());
        self.services_by_name.insert((
            Arc::from(r.namespace.as_str()),
            Arc::from(r.service_name.as_str()),
            id.clone(),
        ));
        self.services_by_alloc.insert((r.alloc_id, id.clone()));
        self.services.insert(id, r);
    }

    fn remove_service(&mut self, id: &str) -> Option<Arc<ServiceRegistration>> {
        let (id, r) = self.services.remove_with_key(id)?;
        self.services_by_name.remove(&(
            Arc::from(r.namespace.as_str()),
            Arc::from(r.service_name.as_str()),
            id.clone(),
        ));
        self.services_by_alloc.remove(&(r.alloc_id, id));
        Some(r)
    }

    /// Whether the catalog's invariant holds and its indexes agree with the table.
    pub(super) fn services_consistent(&self) -> Result<(), String> {
        for r in self.services.values() {
            match self.alloc(&r.alloc_id) {
                None => return Err(format!("registration {} names a missing allocation", r.id)),
                Some(a) if a.client_terminal() => {
                    return Err(format!(
                        "registration {} outlived its allocation ({})",
                        r.id,
                        a.client_status.as_str()
                    ));
                }
                Some(a) if a.node_id != r.node_id => {
                    return Err(format!(
                        "registration {} is not on its allocation's node",
                        r.id
                    ));
                }
                Some(_) => {}
            }
            let at = self.service_index(&r.namespace, &r.service_name);
            if at < r.modify_index {
                return Err(format!(
                    "service {:?} changed at {at}, before its registration {} (at {})",
                    r.service_name, r.id, r.modify_index
                ));
            }
        }
        if let Some((id, r)) = self.services.iter().find(|(id, r)| ***id != *r.id) {
            return Err(format!("registration {} is keyed as {id}", r.id));
        }
        let by_name: imbl::OrdSet<ByName> = self
            .services
            .values()
            .map(|r| {
                (
                    Arc::from(r.namespace.as_str()),
                    Arc::from(r.service_name.as_str()),
                    RegId::from(r.id.as_str()),
                )
            })
            .collect();
        let by_alloc: imbl::OrdSet<(AllocId, RegId)> = self
            .services
            .values()
            .map(|r| (r.alloc_id, RegId::from(r.id.as_str())))
            .collect();
        if by_name != self.services_by_name || by_alloc != self.services_by_alloc {
            return Err("service indexes disagree with the registrations".into());
        }
        Ok(())
    }
}
