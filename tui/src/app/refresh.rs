//! Keeping each view's order current as the data changes: which rows a change touches,
//! and bringing a view's order up to date before a frame by re-placing only those rows.
//! A full re-sort happens only when a view's filter, sort or scope changes, or when so
//! many of its rows changed that re-placing them one by one would cost more.

use super::filter::RowFilter;
use super::list::ListState;
use super::order::{Rank, RowOrder};
use crate::kinds::RowKey;
use crate::model::{Change, Cluster};
use crate::views::{Ctx, TableView, ViewKind};
use std::collections::HashSet;

/// Touched rows beyond this many, or beyond a quarter of the view's rows, are re-sorted
/// in one go instead: a sort of n rows beats n binary-search inserts when n is large.
const INCREMENTAL_MIN: usize = 64;

/// What a view must redo before it is drawn next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stale {
    Fresh,
    /// These rows changed (arrived, moved, left) since the order was last brought up to date.
    Rows(HashSet<RowKey>),
    /// The order must be built from scratch.
    All,
}

impl Stale {
    /// Records that `key` changed, switching to a full rebuild once too many did (so the
    /// set kept for a view that is not shown stays small under a flood of events).
    pub fn touch(&mut self, key: RowKey, shown: usize) {
        match self {
            Stale::All => {}
            Stale::Fresh => *self = Stale::Rows(HashSet::from([key])),
            Stale::Rows(rows) => {
                rows.insert(key);
                if rows.len() > INCREMENTAL_MIN.max(shown / 4) {
                    *self = Stale::All;
                }
            }
        }
    }
}

/// The rows of every view that a change is about to touch, read from the state *before*
/// the change is applied (an allocation's old node and job lose it, its new ones gain
/// it). `all` receives views whose rows all depend on what changed.
pub fn touched_by(
    cluster: &Cluster,
    change: &Change,
    rows: &mut Vec<(ViewKind, RowKey)>,
    all: &mut Vec<ViewKind>,
) {
    match change {
        Change::Node(node) => {
            rows.push((ViewKind::Nodes, RowKey::Node(node.id)));
            // Allocation and service rows show their node's name.
            if cluster
                .nodes
                .get(&node.id)
                .is_none_or(|old| old.name != node.name)
            {
                all.extend([ViewKind::Allocs, ViewKind::Services]);
            }
        }
        Change::NodeRemoved(id) => {
            rows.push((ViewKind::Nodes, RowKey::Node(*id)));
            if cluster.nodes.contains_key(id) {
                all.extend([ViewKind::Allocs, ViewKind::Services]);
            }
        }
        Change::Alloc(row) => {
            alloc_rows(cluster, row.id, rows);
            rows.push((ViewKind::Nodes, RowKey::Node(row.node_id)));
            rows.push((ViewKind::Jobs, RowKey::Job(row.job.clone())));
        }
        Change::AllocRemoved(id) => alloc_rows(cluster, *id, rows),
        Change::Eval(eval) => {
            rows.push((ViewKind::Evals, RowKey::Eval(eval.id)));
            // A job's queued count comes from its newest evaluation.
            rows.push((ViewKind::Jobs, RowKey::Job(eval.job_key())));
        }
        Change::EvalRemoved(id) => {
            rows.push((ViewKind::Evals, RowKey::Eval(*id)));
            if let Some(old) = cluster.evals.get(id) {
                rows.push((ViewKind::Jobs, RowKey::Job(old.job_key())));
            }
        }
        Change::Job(job) => rows.push((ViewKind::Jobs, RowKey::Job(job.key.clone()))),
        Change::JobRemoved(key) => {
            rows.push((ViewKind::Jobs, RowKey::Job(key.clone())));
            // A purged job's deployments go with it.
            all.push(ViewKind::Deployments);
        }
        Change::Deployment(d) => {
            rows.push((ViewKind::Deployments, RowKey::Deployment(d.id)));
            // A new deployment, or one that finished, may drop the job's oldest (as the
            // servers keep only a few per job): every deployment of the job may go.
            let held = cluster.deployments.get(&d.id);
            if held.is_none_or(|old| old.status != d.status) {
                rows.extend(
                    cluster
                        .deployments
                        .of_job(&d.job_key())
                        .map(|o| (ViewKind::Deployments, RowKey::Deployment(o.id))),
                );
            }
        }
        Change::Service(r) => rows.push((ViewKind::Services, RowKey::Service(r.id.clone()))),
        Change::ServiceRemoved(id) => rows.push((ViewKind::Services, RowKey::Service(id.clone()))),
        Change::SchedulerConfig { .. } | Change::LogOnly => {}
    }
}

/// An allocation's own row and the node and job rows that count it now.
fn alloc_rows(cluster: &Cluster, id: drover_core::AllocId, rows: &mut Vec<(ViewKind, RowKey)>) {
    rows.push((ViewKind::Allocs, RowKey::Alloc(id)));
    if let Some(old) = cluster.allocs.get(&id) {
        rows.push((ViewKind::Nodes, RowKey::Node(old.node_id)));
        rows.push((ViewKind::Jobs, RowKey::Job(old.job.clone())));
    }
}

/// Where `key` sorts in `list`'s order, or `None` when the view does not show it (out of
/// scope, gone, or hidden by the `/` filter, parsed from `list.filter` by the caller).
pub fn rank_of(
    view: &dyn TableView,
    ctx: &Ctx,
    list: &ListState,
    filter: &RowFilter,
    key: &RowKey,
) -> Option<Rank> {
    let natural = view.natural_rank(ctx, key)?;
    if !filter.is_all() && !filter.admits(&view.cells(ctx, key)?) {
        return None;
    }
    Some(Rank {
        column: list.sort.map(|s| view.sort_key(ctx, key, s.column)),
        natural,
    })
}

/// The whole order of a view, from scratch.
pub fn build(view: &dyn TableView, ctx: &Ctx, list: &ListState) -> RowOrder {
    let filter = RowFilter::parse(&list.filter);
    let rows = view
        .rows(ctx)
        .into_iter()
        .filter_map(|key| rank_of(view, ctx, list, &filter, &key).map(|rank| (rank, key)))
        .collect();
    RowOrder::build(rows, list.sort.is_some_and(|s| s.descending))
}

/// The new place of each touched row (`None`: it leaves the table).
pub fn replace(
    view: &dyn TableView,
    ctx: &Ctx,
    list: &ListState,
    touched: HashSet<RowKey>,
) -> Vec<(RowKey, Option<Rank>)> {
    let filter = RowFilter::parse(&list.filter);
    touched
        .into_iter()
        .map(|key| {
            let rank = rank_of(view, ctx, list, &filter, &key);
            (key, rank)
        })
        .collect()
}
