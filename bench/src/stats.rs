//! The statistics the bench reports (DESIGN §9): medians of per-process means, ratios computed
//! round by round (each round runs every configuration once, back to back, so a ratio compares
//! processes that saw the same machine state) and then summarised by their median and spread.

/// Median of the finite values; NaN when there are none.
pub fn median(v: &[f64]) -> f64 {
    quantile(v, 0.5)
}

/// Linear-interpolated quantile (`q` in 0..=1) of the finite values; NaN when there are none.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return f64::NAN;
    }
    s.sort_by(|a, b| a.total_cmp(b));
    let pos = q.clamp(0.0, 1.0) * (s.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
}

/// Median and spread of a set of per-round values.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub q1: f64,
    pub q3: f64,
    /// Finite values summarised.
    pub n: usize,
}

impl Summary {
    pub fn of(v: &[f64]) -> Summary {
        let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        Summary {
            median: median(&finite),
            min: finite.iter().copied().fold(f64::NAN, f64::min),
            max: finite.iter().copied().fold(f64::NAN, f64::max),
            q1: quantile(&finite, 0.25),
            q3: quantile(&finite, 0.75),
            n: finite.len(),
        }
    }

    pub fn is_valid(&self) -> bool {
        self.n > 0 && self.median.is_finite()
    }
}

/// `f(a[i], b[i])` for every round where both values exist (a failed process leaves NaN, and
/// that round drops out of the ratio instead of being paired with another round's value).
pub fn paired(a: &[f64], b: &[f64], f: impl Fn(f64, f64) -> f64) -> Vec<f64> {
    a.iter()
        .zip(b)
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .map(|(x, y)| f(*x, *y))
        .collect()
}

/// Smallest zero-copy gain, as a fraction of the baseline time, for which a recovered fraction
/// is reported. Below it `t_base − t_zero` is within run-to-run noise and the quotient is
/// meaningless (it can be any number, of either sign).
pub const MIN_GAIN: f64 = 0.02;
/// A recovered fraction whose rounds span more than this is flagged as noisy.
pub const NOISY_RECOVERED: f64 = 0.25;

/// Recovered fraction `(t_base − t_echo) / (t_base − t_zero)`: 1 when echo is as fast as the
/// hand-written zero-copy version, 0 when it is as slow as the baseline. `None` when the
/// zero-copy gain is below `min_gain · t_base` (nothing to recover) or an input is not finite.
pub fn recovered(t_base: f64, t_echo: f64, t_zero: f64, min_gain: f64) -> Option<f64> {
    if !(t_base.is_finite() && t_echo.is_finite() && t_zero.is_finite()) || t_base <= 0.0 {
        return None;
    }
    let gain = t_base - t_zero;
    if gain <= min_gain * t_base || gain <= 0.0 {
        return None;
    }
    Some((t_base - t_echo) / gain)
}

/// Amdahl bound on the speedup from removing a fraction `f` of the time: `1 / (1 − f)`.
pub fn amdahl(f: f64) -> f64 {
    if !f.is_finite() || f < 0.0 {
        f64::NAN
    } else if f >= 1.0 {
        f64::INFINITY
    } else {
        1.0 / (1.0 - f)
    }
}

/// Per-round recovered fractions, for the rounds where one is defined.
pub fn recovered_per_round(base: &[f64], echo: &[f64], zero: &[f64], min_gain: f64) -> Vec<f64> {
    base.iter()
        .zip(echo)
        .zip(zero)
        .filter_map(|((b, e), z)| recovered(*b, *e, *z, min_gain))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even_and_nan() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[f64::NAN, 5.0, 1.0, 3.0]), 3.0);
        assert!(median(&[]).is_nan());
        assert!(median(&[f64::NAN]).is_nan());
    }

    #[test]
    fn quartiles_interpolate() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile(&v, 0.25), 2.0);
        assert_eq!(quantile(&v, 0.75), 4.0);
        assert_eq!(quantile(&[1.0, 2.0], 0.5), 1.5);
        let s = Summary::of(&[5.0, f64::NAN, 1.0, 3.0]);
        assert_eq!((s.median, s.min, s.max, s.n), (3.0, 1.0, 5.0, 3));
        assert!(!Summary::of(&[]).is_valid());
    }

    #[test]
    fn ratios_pair_round_by_round() {
        // Round 2 is slow for every configuration (machine busy): paired ratios are all 2.0, while
        // a ratio of medians taken separately would mix rounds.
        let base = [10.0, 20.0, 10.0];
        let echo = [5.0, 10.0, 5.0];
        let r = paired(&base, &echo, |b, e| b / e);
        assert_eq!(r, vec![2.0, 2.0, 2.0]);
        // A failed process (NaN) removes its round instead of shifting the pairing.
        let echo = [5.0, f64::NAN, 4.0];
        assert_eq!(paired(&base, &echo, |b, e| b / e), vec![2.0, 2.5]);
    }

    #[test]
    fn recovered_fraction_and_its_edges() {
        assert_eq!(recovered(10.0, 6.0, 6.0, MIN_GAIN), Some(1.0));
        assert_eq!(recovered(10.0, 10.0, 6.0, MIN_GAIN), Some(0.0));
        assert_eq!(recovered(10.0, 8.0, 6.0, MIN_GAIN), Some(0.5));
        // Faster than zero-copy, or slower than the baseline: reported as measured.
        assert_eq!(recovered(10.0, 5.0, 6.0, MIN_GAIN), Some(1.25));
        assert_eq!(recovered(10.0, 12.0, 6.0, MIN_GAIN), Some(-0.5));
        // t_base ≈ t_zero: nothing to recover, no number (not ±huge).
        assert_eq!(recovered(10.0, 9.0, 9.99, MIN_GAIN), None);
        assert_eq!(recovered(10.0, 9.0, 10.5, MIN_GAIN), None);
        assert_eq!(recovered(10.0, 9.0, 9.8, MIN_GAIN), None); // exactly 2 %: still noise
        assert!(recovered(10.0, 9.0, 9.7, MIN_GAIN).is_some());
        assert_eq!(recovered(f64::NAN, 1.0, 1.0, MIN_GAIN), None);
        assert_eq!(recovered(0.0, 0.0, 0.0, MIN_GAIN), None);
        let per = recovered_per_round(&[10.0, 10.0], &[6.0, 8.0], &[6.0, 10.0], MIN_GAIN);
        assert_eq!(per, vec![1.0]);
    }

    #[test]
    fn amdahl_bound() {
        assert_eq!(amdahl(0.0), 1.0);
        assert_eq!(amdahl(0.5), 2.0);
        assert!((amdahl(0.31) - 1.449).abs() < 1e-3);
        assert!(amdahl(1.0).is_infinite());
        assert!(amdahl(-0.1).is_nan());
    }
}
