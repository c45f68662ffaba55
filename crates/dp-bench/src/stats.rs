//! Means and confidence intervals of repeated measurements.

/// Two-sided 97.5% quantile of Student's t with `df` degrees of freedom
/// (tabulated; 1.96 beyond 30).
pub fn t_quantile_975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        _ => 1.96,
    }
}

/// Mean and half-width of the 95% confidence interval of the mean.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeanCi {
    /// Sample mean.
    pub mean: f64,
    /// Half-width `t · s/√R` (infinite with one sample).
    pub half_width: f64,
}

impl MeanCi {
    /// From samples (at least one).
    pub fn of(samples: &[f64]) -> Self {
        let r = samples.len();
        let mean = samples.iter().sum::<f64>() / r.max(1) as f64;
        if r < 2 {
            return Self {
                mean,
                half_width: f64::INFINITY,
            };
        }
        let var = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (r - 1) as f64;
        Self {
            mean,
            half_width: t_quantile_975(r - 1) * (var / r as f64).sqrt(),
        }
    }

    /// Lower end of the interval.
    pub fn low(&self) -> f64 {
        self.mean - self.half_width
    }

    /// Upper end of the interval.
    pub fn high(&self) -> f64 {
        self.mean + self.half_width
    }
}

/// Least-squares slope of `ln y` on `ln x` (a fitted growth exponent).
pub fn fitted_exponent(xs: &[f64], ys: &[f64]) -> f64 {
    let lx: Vec<f64> = xs.iter().map(|v| v.ln()).collect();
    let ly: Vec<f64> = ys.iter().map(|v| v.ln()).collect();
    let k = lx.len() as f64;
    let mx = lx.iter().sum::<f64>() / k;
    let my = ly.iter().sum::<f64>() / k;
    let num: f64 = lx.iter().zip(&ly).map(|(a, b)| (a - mx) * (b - my)).sum();
    let den: f64 = lx.iter().map(|a| (a - mx).powi(2)).sum();
    num / den
}
