//! The scored rewards at a glance (count, mean, range, equal-width bins), as `agentrl score`
//! prints them after a file: computed here so that the command needs no numpy.
//!
//! Values are put in bins exactly as `numpy.histogram(values, bins, range=(min, max))`
//! does, so the printed counts match what a user computes from the written rewards.

/// Finite rewards summarised; non-finite ones are left out of every field.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    /// How many rewards were finite.
    pub finite: usize,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// `counts.len() + 1` edges from `min` to `max` (empty when nothing is finite).
    pub edges: Vec<f64>,
    /// Rewards in each bin; the last bin includes `max`.
    pub counts: Vec<u64>,
}

/// Summarises the finite values of `values` in `bins` equal-width bins (at least one).
/// When every finite value is equal, there is one bin holding them all.
pub fn histogram(values: &[f64], bins: usize) -> Histogram {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let Some(&first) = finite.first() else {
        return Histogram {
            finite: 0,
            mean: f64::NAN,
            min: f64::NAN,
            max: f64::NAN,
            edges: Vec::new(),
            counts: Vec::new(),
        };
    };
    let (min, max) = finite
        .iter()
        .fold((first, first), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let mean = finite.iter().sum::<f64>() / finite.len() as f64;
    let bins = if min == max { 1 } else { bins.max(1) };
    let span = max - min;
    // numpy.linspace: start + i * step, with the last edge exactly `max`.
    let step = span / bins as f64;
    let mut edges: Vec<f64> = (0..bins).map(|i| i as f64 * step + min).collect();
    edges.push(max);
    let mut counts = vec![0u64; bins];
    for &v in &finite {
        counts[bin_of(v, min, span, &edges)] += 1;
    }
    Histogram {
        finite: finite.len(),
        mean,
        min,
        max,
        edges,
        counts,
    }
}

/// numpy's bin for `v` in `[min, max]`: the scaled position, then corrected by one where
/// rounding put it across an edge.
fn bin_of(v: f64, min: f64, span: f64, edges: &[f64]) -> usize {
    let bins = edges.len() - 1;
    if span == 0.0 {
        return 0;
    }
    // `v >= min`, so the position is not negative; the cast floors it.
    let mut index = (((v - min) / span * bins as f64) as usize).min(bins - 1);
    if index > 0 && v < edges[index] {
        index -= 1;
    } else if index + 1 < bins && v >= edges[index + 1] {
        index += 1;
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_every_finite_value_once_with_the_maximum_in_the_last_bin() {
        let values = [-5.4, 0.0, 0.1, 12.0, 12.0, f64::NAN, f64::INFINITY, 3.3];
        let h = histogram(&values, 12);
        assert_eq!(h.finite, 6);
        assert_eq!(h.counts.iter().sum::<u64>(), 6);
        assert_eq!((h.min, h.max), (-5.4, 12.0));
        assert_eq!(h.edges.len(), 13);
        assert_eq!(h.edges[12], 12.0);
        assert_eq!(h.counts[11], 2);
        assert_eq!(h.counts[0], 1);
        assert!((h.mean - (-5.4 + 0.1 + 24.0 + 3.3) / 6.0).abs() < 1e-12);
    }

    #[test]
    fn values_on_an_inner_edge_go_to_the_bin_above() {
        let h = histogram(&[0.0, 1.0, 2.0, 3.0, 4.0], 4);
        assert_eq!(h.edges, vec![0.0, 1.0, 2.0, 3.0, 4.0]);
        assert_eq!(h.counts, vec![1, 1, 1, 2]);
    }

    #[test]
    fn equal_values_share_one_bin_and_nothing_finite_gives_no_bins() {
        let h = histogram(&[2.5, 2.5], 10);
        assert_eq!((h.counts, h.edges), (vec![2], vec![2.5, 2.5]));
        let none = histogram(&[f64::NAN], 10);
        assert_eq!(none.finite, 0);
        assert!(none.counts.is_empty() && none.mean.is_nan());
    }
}
