//! Paging of list RPCs: every list answers at most one page, so no answer outgrows the
//! gRPC message limit however large the cluster. A page is the items after a cursor in the
//! list's own sort order; the cursor travels as an opaque `next_token` (the last key sent),
//! so pages stay consistent while the list changes (nothing is skipped or sent twice
//! among items that exist throughout).

use tonic::Status;

/// The page size in force: the request's, capped by the server's maximum (0: the maximum).
pub(crate) fn size(requested: u32, max: usize) -> usize {
    match usize::try_from(requested) {
        Ok(0) | Err(_) => max,
        Ok(n) => n.min(max),
    }
}

/// Parses a `next_token`; empty is the first page. A token that does not parse is the
/// caller's mistake.
pub(crate) fn cursor<K: std::str::FromStr>(token: &str) -> Result<Option<K>, Status> {
    if token.is_empty() {
        return Ok(None);
    }
    token.parse().map(Some).map_err(|_| {
        Status::invalid_argument(format!(
            "next_token: {token:?} is not a token this list gave"
        ))
    })
}

/// Takes one page of `items`, which are sorted ascending by `key`: those after `after`, at
/// most `size`. Returns the page and the token of the next one (empty: this was the last).
pub(crate) fn take<T, K: Ord + ToString>(
    items: impl IntoIterator<Item = T>,
    key: impl Fn(&T) -> K,
    after: Option<&K>,
    size: usize,
) -> (Vec<T>, String) {
    let mut rest = items
        .into_iter()
        .skip_while(|t| after.is_some_and(|a| key(t) <= *a))
        .peekable();
    let page: Vec<T> = rest.by_ref().take(size).collect();
    let next = match (rest.peek(), page.last()) {
        (Some(_), Some(last)) => key(last).to_string(),
        _ => String::new(),
    };
    (page, next)
}

/// The cursor of lists sorted by (namespace, id): written `<namespace length>:<namespace><id>`
/// so any id (a `/` included) round-trips.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct NamespacedCursor {
    pub(crate) namespace: String,
    pub(crate) id: String,
}

impl std::fmt::Display for NamespacedCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}{}", self.namespace.len(), self.namespace, self.id)
    }
}

impl std::str::FromStr for NamespacedCursor {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        let (len, rest) = s.split_once(':').ok_or(())?;
        let len: usize = len.parse().map_err(|_| ())?;
        let namespace = rest.get(..len).ok_or(())?;
        Ok(Self {
            namespace: namespace.to_owned(),
            id: rest[len..].to_owned(),
        })
    }
}

/// The cursor of lists sorted newest first (create index descending, then id): written
/// `<create index>:<id>`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct NewestFirstCursor<I> {
    pub(crate) create_index: std::cmp::Reverse<u64>,
    pub(crate) id: I,
}

impl<I: std::fmt::Display> std::fmt::Display for NewestFirstCursor<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.create_index.0, self.id)
    }
}

impl<I: std::str::FromStr> std::str::FromStr for NewestFirstCursor<I> {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        let (index, id) = s.split_once(':').ok_or(())?;
        Ok(Self {
            create_index: std::cmp::Reverse(index.parse().map_err(|_| ())?),
            id: id.parse().map_err(|_| ())?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_cover_every_item_once() {
        let items: Vec<u32> = (1..=7).collect();
        let mut token = String::new();
        let mut seen = Vec::new();
        loop {
            let after: Option<u32> = cursor(&token).unwrap();
            let (page, next) = take(items.iter().copied(), |i| *i, after.as_ref(), 3);
            assert!(page.len() <= 3);
            seen.extend(page);
            if next.is_empty() {
                break;
            }
            token = next;
        }
        assert_eq!(seen, items);
        assert_eq!(size(0, 500), 500);
        assert_eq!(size(10, 500), 10);
        assert_eq!(size(9999, 500), 500);
        assert!(cursor::<u32>("x").is_err());
        let c = NamespacedCursor {
            namespace: "default".into(),
            id: "encode/dispatch-1".into(),
        };
        assert_eq!(cursor::<NamespacedCursor>(&c.to_string()).unwrap(), Some(c));
        let e = NewestFirstCursor {
            create_index: std::cmp::Reverse(42),
            id: 7u32,
        };
        assert_eq!(cursor(&e.to_string()).unwrap(), Some(e));
    }
}
