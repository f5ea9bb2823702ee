//! Small statistics for repetitions: Student's t distribution (via the regularised incomplete
//! beta function) for confidence intervals and Welch's unequal-variance t-test. Written out here
//! because the report needs only these two and they are short and well known (Numerical Recipes
//! §6.4); a statistics crate would bring far more than it gives.

/// Mean and sample variance (n − 1).
pub fn mean_var(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    if x.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let m = x.iter().sum::<f64>() / n;
    let v = if x.len() > 1 {
        x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (m, v)
}

fn ln_gamma(x: f64) -> f64 {
    // Lanczos approximation (g = 7, n = 9), accurate to ~1e-15 for x > 0.
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + 7.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Continued fraction of the incomplete beta function (modified Lentz, as in Numerical Recipes).
fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let not_tiny = |v: f64| if v.abs() < 1e-300 { 1e-300 } else { v };
    let mut c = 1.0;
    let mut d = 1.0 / not_tiny(1.0 - qab * x / qap);
    let mut h = d;
    // One Lentz step with coefficient `aa`: updates c and d, returns the factor for h.
    let mut step = |aa: f64| {
        d = 1.0 / not_tiny(1.0 + aa * d);
        c = not_tiny(1.0 + aa / c);
        d * c
    };
    for m in 1..300 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        h *= step(m * (b - m) * x / ((qam + m2) * (a + m2)));
        let del = step(-(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)));
        h *= del;
        if (del - 1.0).abs() < 1e-14 {
            break;
        }
    }
    h
}

/// Regularised incomplete beta I_x(a, b).
pub fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let bt = (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        bt * beta_cf(a, b, x) / a
    } else {
        1.0 - bt * beta_cf(b, a, 1.0 - x) / b
    }
}

/// Two-sided p-value of Student's t with `df` degrees of freedom.
pub fn t_two_sided_p(t: f64, df: f64) -> f64 {
    inc_beta(df / 2.0, 0.5, df / (df + t * t))
}

/// The 97.5% quantile of Student's t (for 95% two-sided intervals), by bisection.
pub fn t_quantile_975(df: f64) -> f64 {
    let (mut lo, mut hi) = (0.0, 1000.0);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if t_two_sided_p(mid, df) > 0.05 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Result of Welch's t-test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Welch {
    /// The t statistic, (mean of a − mean of b) ÷ its standard error; +∞ when both samples are
    /// constant and differ.
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value; compare calls a difference significant below [`crate::compare::ALPHA`].
    pub p: f64,
}

/// Welch's unequal-variance t-test of two samples; None when either has fewer than two values
/// or both have no variance (identical constant samples tell nothing).
pub fn welch(a: &[f64], b: &[f64]) -> Option<Welch> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (ma, va) = mean_var(a);
    let (mb, vb) = mean_var(b);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let se2 = va / na + vb / nb;
    if se2 <= 0.0 {
        return if ma == mb {
            None
        } else {
            Some(Welch {
                t: f64::INFINITY,
                df: na + nb - 2.0,
                p: 0.0,
            })
        };
    }
    let t = (ma - mb) / se2.sqrt();
    let df = se2 * se2 / ((va / na).powi(2) / (na - 1.0) + (vb / nb).powi(2) / (nb - 1.0));
    Some(Welch {
        t,
        df,
        p: t_two_sided_p(t, df),
    })
}

/// 95% confidence interval of mean(b) ÷ mean(a), from two samples of repetitions (two or more
/// each, positive means): the delta method on the log of the ratio, whose standard error is
/// √(var a ÷ (n_a·mean a²) + var b ÷ (n_b·mean b²)), with Student's t at the Welch–Satterthwaite
/// degrees of freedom of those two terms. Working on the log keeps the interval positive and
/// the same whichever run is divided by which. None when either sample is too small.
pub fn ratio_ci95(a: &[f64], b: &[f64]) -> Option<(f64, f64)> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (ma, va) = mean_var(a);
    let (mb, vb) = mean_var(b);
    if !(ma > 0.0 && mb > 0.0) {
        return None;
    }
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (ta, tb) = (va / (na * ma * ma), vb / (nb * mb * mb));
    let se2 = ta + tb;
    let r = mb / ma;
    if se2 <= 0.0 {
        // Constant repetitions on both sides: the ratio is known exactly.
        return Some((r, r));
    }
    let df = se2 * se2 / (ta * ta / (na - 1.0) + tb * tb / (nb - 1.0));
    let half = t_quantile_975(df) * se2.sqrt();
    Some((r * (-half).exp(), r * half.exp()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ratio_interval_holds_the_ratio_and_narrows_with_agreement() {
        let a = [100.0, 102.0, 98.0];
        let b = [150.0, 153.0, 147.0];
        let (lo, hi) = ratio_ci95(&a, &b).unwrap();
        assert!(lo < 1.5 && 1.5 < hi, "{lo} {hi}");
        assert!(lo > 1.4 && hi < 1.6, "2% noise, three each: {lo} {hi}");
        // The other way round is the reciprocal interval.
        let (rlo, rhi) = ratio_ci95(&b, &a).unwrap();
        assert!((rlo - 1.0 / hi).abs() < 1e-12 && (rhi - 1.0 / lo).abs() < 1e-12);
        // Noisier repetitions give a wider interval.
        let (wlo, whi) = ratio_ci95(&[80.0, 120.0, 100.0], &b).unwrap();
        assert!(wlo < lo && whi > hi, "{wlo} {whi}");
        assert_eq!(ratio_ci95(&[5.0, 5.0], &[10.0, 10.0]), Some((2.0, 2.0)));
        assert_eq!(ratio_ci95(&[5.0], &[10.0, 11.0]), None, "one repetition");
        assert_eq!(ratio_ci95(&[0.0, 0.0], &[10.0, 11.0]), None);
    }

    #[test]
    fn the_ratio_interval_matches_a_hand_computation() {
        // a: mean 10, var 1 (n 2); b: mean 20, var 4 (n 2). ta = 1/(2·100) = 0.005,
        // tb = 4/(2·400) = 0.005; se = 0.1; df = 1e-4 / (2.5e-5 + 2.5e-5) = 2; t(2) = 4.303.
        let (lo, hi) =
            ratio_ci95(&[9.292_893_2, 10.707_106_8], &[18.585_786_4, 21.414_213_6]).unwrap();
        let half: f64 = 4.302_653 * 0.1;
        assert!((lo - 2.0 * (-half).exp()).abs() < 1e-4, "{lo}");
        assert!((hi - 2.0 * half.exp()).abs() < 1e-4, "{hi}");
    }

    #[test]
    fn t_quantiles_match_tables() {
        assert!((t_quantile_975(1.0) - 12.706).abs() < 1e-3);
        assert!((t_quantile_975(4.0) - 2.776).abs() < 1e-3);
        assert!((t_quantile_975(30.0) - 2.042).abs() < 1e-3);
    }

    #[test]
    fn welch_matches_a_known_example() {
        // Example 1 of Wikipedia's "Welch's t-test": t = −2.46, ν = 24.99, p = 0.021.
        let a = [
            27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7,
            21.4,
        ];
        let b = [
            27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5,
            24.4,
        ];
        let w = welch(&a, &b).unwrap();
        assert!((w.t + 2.46).abs() < 5e-3, "{w:?}");
        assert!((w.df - 24.99).abs() < 5e-3, "{w:?}");
        assert!((w.p - 0.021).abs() < 5e-4, "{w:?}");
    }

    #[test]
    fn welch_needs_two_values_each() {
        assert!(welch(&[1.0], &[2.0, 3.0]).is_none());
    }
}
