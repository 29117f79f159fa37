//! The usage chart (D48): requests and 429s per minute, drawn on the
//! server as SVG from the API's buckets (D46), so it needs no script. Its
//! colours come from the stylesheet's classes (light and dark); the page
//! gives the same numbers in words for screen readers.

use std::fmt::Write;

/// One minute of usage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// `HH:MM` (UTC) of the minute's start.
    pub label: String,
    pub requests: u64,
    pub rejected: u64,
}

/// What the page says about the chart.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Summary {
    pub requests: u64,
    pub rejected: u64,
    pub peak: u64,
    pub peak_at: String,
    pub minutes: usize,
}

impl From<Summary> for minijinja::Value {
    fn from(s: Summary) -> Self {
        minijinja::Value::from(minijinja::value::Serde(s))
    }
}

pub fn summary(buckets: &[Bucket]) -> Summary {
    let peak = buckets.iter().max_by_key(|b| b.requests);
    Summary {
        requests: buckets.iter().map(|b| b.requests).sum(),
        rejected: buckets.iter().map(|b| b.rejected).sum(),
        peak: peak.map_or(0, |b| b.requests),
        peak_at: peak.map(|b| b.label.clone()).unwrap_or_default(),
        minutes: buckets.len(),
    }
}

const W: f64 = 720.0;
const H: f64 = 240.0;
const LEFT: f64 = 48.0;
const BOTTOM: f64 = 28.0;
const TOP: f64 = 12.0;

/// The SVG (markup we write ourselves; every text in it is a number or a
/// `HH:MM` label we formatted). It scales to its container's width.
pub fn svg(buckets: &[Bucket], title_id: &str, desc_id: &str) -> String {
    let max = buckets.iter().map(|b| b.requests).max().unwrap_or(0).max(1);
    // A round top for the axis: 1, 2, 5 × 10^n.
    let mut top = 1u64;
    while top < max {
        top = match top.to_string().as_bytes()[0] {
            b'1' => top * 2,
            b'2' => top / 2 * 5,
            _ => top * 2,
        };
    }
    let n = buckets.len().max(1) as f64;
    let plot_w = W - LEFT - 8.0;
    let plot_h = H - TOP - BOTTOM;
    let x = |i: usize| LEFT + plot_w * (i as f64 + 0.5) / n;
    let y = |v: u64| TOP + plot_h * (1.0 - v as f64 / top as f64);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart" viewBox="0 0 {W} {H}" role="img" aria-labelledby="{title_id} {desc_id}" preserveAspectRatio="none" xmlns="http://www.w3.org/2000/svg">"#
    );
    // Grid and axis labels: 0, half the top, the top.
    for k in 0..=2u64 {
        let v = top as f64 * k as f64 / 2.0;
        let yy = TOP + plot_h * (1.0 - v / top as f64);
        let label = if v.fract() == 0.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        };
        let _ = write!(
            s,
            r#"<line class="grid" x1="{LEFT}" x2="{}" y1="{yy:.1}" y2="{yy:.1}"/><text class="axis" x="{}" y="{:.1}" text-anchor="end">{label}</text>"#,
            W - 8.0,
            LEFT - 6.0,
            yy + 4.0
        );
    }
    let ticks = 6usize.min(buckets.len());
    for t in 0..ticks {
        let i = if ticks <= 1 {
            0
        } else {
            t * (buckets.len() - 1) / (ticks - 1)
        };
        let _ = write!(
            s,
            r#"<text class="axis" x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            x(i),
            H - 8.0,
            buckets[i].label
        );
    }
    for (class, value) in [
        ("requests", (|b: &Bucket| b.requests) as fn(&Bucket) -> u64),
        ("rejected", |b: &Bucket| b.rejected),
    ] {
        let points: Vec<String> = buckets
            .iter()
            .enumerate()
            .map(|(i, b)| format!("{:.1},{:.1}", x(i), y(value(b))))
            .collect();
        let _ = write!(
            s,
            r#"<polyline class="{class}" fill="none" points="{}"/>"#,
            points.join(" ")
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(label: &str, requests: u64, rejected: u64) -> Bucket {
        Bucket {
            label: label.into(),
            requests,
            rejected,
        }
    }

    #[test]
    fn summary_and_svg() {
        let buckets = vec![b("10:00", 3, 0), b("10:01", 7, 2), b("10:02", 0, 0)];
        let s = summary(&buckets);
        assert_eq!((s.requests, s.rejected, s.peak), (10, 2, 7));
        assert_eq!(s.peak_at, "10:01");
        let svg = svg(&buckets, "t", "d");
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains(r#"class="requests""#) && svg.contains(r#"class="rejected""#));
        assert!(svg.contains(">10:00<") && svg.contains(">10:02<"));
        // The axis is rounded up to 10.
        assert!(svg.contains(">10</text>"));
        assert!(!svg.contains("style="), "no inline style under the CSP");
    }

    #[test]
    fn an_empty_chart_still_draws() {
        let svg = svg(&[], "t", "d");
        assert!(svg.contains("<svg"));
        assert_eq!(summary(&[]).requests, 0);
    }
}
