//! Blocked evaluations (leader only). Being built.
