//! The servers of the cluster, as the membership lists them, with what each server the
//! console can ask says of itself: its Raft role, term and applied index, and whom it takes
//! for the leader. During an election they disagree, and this is where it shows.

use super::{Cell, Column, Ctx, DetailLine, KeyHelp, TableView, Tone, ViewKind, col};
use crate::kinds::{RowKey, SortKey};
use crate::model::{ServerState, ServerView};

pub struct ServersView;

fn server<'a>(ctx: &Ctx<'a>, key: &RowKey) -> Option<&'a ServerState> {
    match key {
        RowKey::Server(id) => ctx.cluster.info.servers.iter().find(|s| &s.id == id),
        _ => None,
    }
}

/// What `id` said of itself: the server the console talks to answers in the cluster
/// status, the others when asked directly.
fn own_view(ctx: &Ctx, id: &str) -> Option<ServerView> {
    let info = &ctx.cluster.info;
    if info.server_id == id {
        return Some(ServerView {
            server_id: id.to_owned(),
            url: String::new(),
            role: info.role,
            term: info.term,
            applied_index: info.applied_index,
            leader_id: info.leader_id.clone(),
        });
    }
    ctx.cluster
        .server_views
        .iter()
        .find(|v| v.server_id == id)
        .cloned()
}

fn role_cell(s: &ServerState) -> Cell {
    match (s.reachable, s.role) {
        (false, _) => Cell::tone("unreachable", Tone::Bad),
        (true, "leader") => Cell::tone("leader", Tone::Good),
        (true, "candidate") => Cell::tone("candidate", Tone::Warn),
        (true, role) => Cell::new(role),
    }
}

/// A number a server told, or a dash for a server the console could not ask.
fn told(view: Option<&ServerView>, pick: impl Fn(&ServerView) -> u64) -> Cell {
    view.map_or_else(
        || Cell::tone("-", Tone::Dim),
        |v| Cell::new(pick(v).to_string()),
    )
}

const COLUMNS: &[Column] = &[
    col("NAME", 10, 0),
    col("ID", 4, 0),
    col("ADDRESS", 15, 2),
    col("ROLE", 11, 0),
    col("TERM", 5, 1),
    col("INDEX", 8, 1),
    col("LEADER", 6, 1),
    col("VERSION", 8, 3),
];

const KEYS: &[KeyHelp] = &[];

impl TableView for ServersView {
    fn kind(&self) -> ViewKind {
        ViewKind::Servers
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn rows(&self, ctx: &Ctx) -> Vec<RowKey> {
        ctx.cluster
            .info
            .servers
            .iter()
            .map(|s| RowKey::Server(s.id.clone()))
            .collect()
    }

    fn natural_rank(&self, ctx: &Ctx, key: &RowKey) -> Option<Vec<SortKey>> {
        server(ctx, key).map(|s| vec![SortKey::text(&s.id)])
    }

    fn cells(&self, ctx: &Ctx, key: &RowKey) -> Option<Vec<Cell>> {
        let s = server(ctx, key)?;
        let view = own_view(ctx, &s.id);
        let leader = match view.as_ref().map(|v| v.leader_id.as_str()) {
            None => Cell::tone("-", Tone::Dim),
            Some("") => Cell::tone("none", Tone::Warn),
            Some(id) => Cell::new(id),
        };
        Some(vec![
            Cell::name(s.name.clone()),
            Cell::new(s.id.clone()),
            Cell::tone(s.address.clone(), Tone::Dim),
            role_cell(s),
            told(view.as_ref(), |v| v.term),
            told(view.as_ref(), |v| v.applied_index),
            leader,
            Cell::tone(s.version.clone(), Tone::Dim),
        ])
    }

    fn sort_key(&self, ctx: &Ctx, key: &RowKey, column: usize) -> SortKey {
        let Some(s) = server(ctx, key) else {
            return SortKey::Num(0);
        };
        let view = own_view(ctx, &s.id);
        match column {
            0 => SortKey::text(&s.name),
            1 => SortKey::text(&s.id),
            2 => SortKey::text(&s.address),
            3 => SortKey::text(role_cell(s).text),
            4 => SortKey::Num(view.map_or(0, |v| v.term)),
            5 => SortKey::Num(view.map_or(0, |v| v.applied_index)),
            6 => SortKey::text(view.map(|v| v.leader_id).unwrap_or_default()),
            _ => SortKey::text(&s.version),
        }
    }

    fn detail(&self, ctx: &Ctx, key: &RowKey) -> Vec<DetailLine> {
        let Some(s) = server(ctx, key) else {
            return Vec::new();
        };
        let role = role_cell(s);
        let mut lines = vec![
            DetailLine::field("name", s.name.clone()),
            DetailLine::field("id", s.id.clone()),
            DetailLine::field("address", s.address.clone()),
            DetailLine::toned("role", role.text, role.tone),
            DetailLine::field("version", s.version.clone()),
        ];
        match own_view(ctx, &s.id) {
            Some(v) => {
                lines.push(DetailLine::heading("as it says itself"));
                if !v.url.is_empty() {
                    lines.push(DetailLine::field("asked at", v.url));
                }
                lines.extend([
                    DetailLine::field("role", v.role),
                    DetailLine::field("term", v.term.to_string()),
                    DetailLine::field("applied index", v.applied_index.to_string()),
                    DetailLine::field(
                        "leader",
                        if v.leader_id.is_empty() {
                            "none known".to_owned()
                        } else {
                            v.leader_id
                        },
                    ),
                ]);
            }
            None => lines.push(DetailLine::heading(
                "not asked: list its address in --address to see its own view",
            )),
        }
        lines
    }

    fn keys(&self) -> &'static [KeyHelp] {
        KEYS
    }
}
