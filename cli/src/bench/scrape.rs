//! The benchmarked server's own timings, read from its `/metrics` page: a histogram is
//! scraped before and after the measured phase, and the quantiles come from the
//! difference, so figures from before the phase (node registration, an earlier run on a
//! shared server) do not count.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A histogram's cumulative bucket counts by upper bound, summed over every label set.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    /// (upper bound in seconds, observations at or below it), ascending; the last bound
    /// is `+Inf`.
    buckets: Vec<(f64, u64)>,
}

/// The metrics page of the server at `addr` (`host:port`), as text.
pub async fn fetch(addr: &str) -> std::io::Result<String> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request = format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut body = Vec::new();
    stream.read_to_end(&mut body).await?;
    let text = String::from_utf8_lossy(&body).into_owned();
    match text.split_once("\r\n\r\n") {
        Some((_, body)) => Ok(body.to_string()),
        None => Err(std::io::Error::other("the metrics answer has no body")),
    }
}

impl Histogram {
    /// The histogram `name` (without `_bucket`) in `page`, its label sets added up.
    pub fn parse(page: &str, name: &str) -> Histogram {
        let prefix = format!("{name}_bucket{{");
        let mut by_bound: Vec<(f64, u64)> = Vec::new();
        for line in page.lines().filter(|l| l.starts_with(&prefix)) {
            let Some((labels, value)) = line[prefix.len()..].rsplit_once("} ") else {
                continue;
            };
            let Some(le) = labels
                .split(',')
                .find_map(|label| label.trim().strip_prefix("le=\""))
                .and_then(|v| v.strip_suffix('"'))
            else {
                continue;
            };
            let bound = if le == "+Inf" {
                f64::INFINITY
            } else {
                match le.parse::<f64>() {
                    Ok(b) => b,
                    Err(_) => continue,
                }
            };
            let Ok(count) = value.split_whitespace().next().unwrap_or("").parse::<f64>() else {
                continue;
            };
            match by_bound.iter_mut().find(|(b, _)| *b == bound) {
                Some((_, n)) => *n += count as u64,
                None => by_bound.push((bound, count as u64)),
            }
        }
        by_bound.sort_by(|a, b| a.0.total_cmp(&b.0));
        Histogram { buckets: by_bound }
    }

    /// The observations made after `earlier` was scraped.
    pub fn since(&self, earlier: &Histogram) -> Histogram {
        let buckets = self
            .buckets
            .iter()
            .map(|&(bound, n)| {
                let before = earlier
                    .buckets
                    .iter()
                    .find(|(b, _)| *b == bound)
                    .map_or(0, |(_, n)| *n);
                (bound, n.saturating_sub(before))
            })
            .collect();
        Histogram { buckets }
    }

    pub fn count(&self) -> u64 {
        self.buckets.last().map_or(0, |(_, n)| *n)
    }

    /// The `q` quantile in seconds, interpolated linearly inside its bucket (as
    /// Prometheus' `histogram_quantile` does); `None` without observations. A quantile
    /// in the `+Inf` bucket is reported as the highest finite bound.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * total as f64;
        let mut lower = (0.0, 0u64);
        for &(bound, n) in &self.buckets {
            if n as f64 >= rank && n > lower.1 {
                if bound.is_infinite() {
                    return Some(lower.0);
                }
                let inside = (rank - lower.1 as f64) / (n - lower.1) as f64;
                return Some(lower.0 + (bound - lower.0) * inside);
            }
            lower = (bound, n);
        }
        Some(lower.0)
    }
}

/// A counter's value in `page` (label sets added up); 0 when absent.
pub fn counter(page: &str, name: &str) -> f64 {
    page.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "\
# TYPE drover_eval_seconds histogram
drover_eval_seconds_sum{scheduler=\"service\"} 1.5
drover_eval_seconds_count{scheduler=\"service\"} 10
drover_eval_seconds_bucket{le=\"0.001\",scheduler=\"service\"} 0
drover_eval_seconds_bucket{le=\"0.002\",scheduler=\"service\"} 4
drover_eval_seconds_bucket{le=\"0.004\",scheduler=\"service\"} 8
drover_eval_seconds_bucket{le=\"+Inf\",scheduler=\"service\"} 10
drover_eval_seconds_bucket{le=\"0.001\",scheduler=\"system\"} 2
drover_eval_seconds_bucket{le=\"0.002\",scheduler=\"system\"} 2
drover_eval_seconds_bucket{le=\"0.004\",scheduler=\"system\"} 2
drover_eval_seconds_bucket{le=\"+Inf\",scheduler=\"system\"} 2
drover_heartbeats_total 12345
drover_heartbeats_created 1.7e9
# EOF
";

    #[test]
    fn label_sets_add_up_and_quantiles_interpolate() {
        let h = Histogram::parse(PAGE, "drover_eval_seconds");
        assert_eq!(h.count(), 12);
        let cases: &[(f64, f64)] = &[
            (0.0, 0.0),
            // rank 1 of the 2 at or below 1 ms.
            (1.0 / 12.0, 0.0005),
            // rank 6: the last of the 4 between 1 and 2 ms.
            (0.5, 0.002),
            // rank 8: the 2nd of the 4 between 2 and 4 ms.
            (8.0 / 12.0, 0.003),
            // rank 12: in +Inf, reported as the highest finite bound.
            (1.0, 0.004),
        ];
        for &(q, want) in cases {
            let got = h.quantile(q).expect("observations");
            assert!((got - want).abs() < 1e-9, "q {q}: {got} != {want}");
        }
    }

    #[test]
    fn since_keeps_only_later_observations() {
        let before = Histogram::parse(PAGE, "drover_eval_seconds");
        let after_page = PAGE.replace(
            "le=\"+Inf\",scheduler=\"system\"} 2",
            "le=\"+Inf\",scheduler=\"system\"} 5",
        );
        let after = Histogram::parse(&after_page, "drover_eval_seconds");
        let delta = after.since(&before);
        assert_eq!(delta.count(), 3);
        assert_eq!(delta.quantile(0.5), Some(0.004));
        assert_eq!(Histogram::default().quantile(0.5), None);
    }

    #[test]
    fn counters_by_exact_name() {
        assert_eq!(counter(PAGE, "drover_heartbeats_total"), 12345.0);
        assert_eq!(counter(PAGE, "drover_heartbeats"), 0.0);
        assert_eq!(counter(PAGE, "drover_missing"), 0.0);
    }
}
