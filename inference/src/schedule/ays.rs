//! Align Your Steps (Sabour et al. 2024): NVIDIA's optimised 10-step noise levels, stretched
//! to other step counts by log-linear interpolation (ComfyUI
//! `comfy_extras/nodes_align_your_steps.py` @ 341667c4).

/// The SD 1.x levels (ComfyUI `NOISE_LEVELS["SD1"]`).
const SD1_LEVELS: [f64; 11] = [
    14.614_641_229_3,
    6.474_576_095_6,
    3.863_674_598_5,
    2.694_615_152_0,
    1.884_192_117_7,
    1.394_380_509_2,
    0.964_258_390_4,
    0.652_368_601_6,
    0.397_745_627_2,
    0.151_523_266_2,
    0.029_167_158_2,
];

/// `steps + 1` sigmas for SD 1.x, the last one 0.
pub fn ays_sd1_sigmas(steps: usize) -> Vec<f32> {
    let mut sigmas: Vec<f64> = if steps + 1 == SD1_LEVELS.len() {
        SD1_LEVELS.to_vec()
    } else {
        loglinear_interp(&SD1_LEVELS, steps + 1)
    };
    if let Some(last) = sigmas.last_mut() {
        *last = 0.0;
    }
    sigmas.into_iter().map(|s| s as f32).collect()
}

/// numpy's `interp` of `log(levels)` (increasing order) at `n` evenly spaced points.
fn loglinear_interp(levels: &[f64], n: usize) -> Vec<f64> {
    let ys: Vec<f64> = levels.iter().rev().map(|s| s.ln()).collect();
    let last = (ys.len() - 1) as f64;
    let mut out: Vec<f64> = (0..n)
        .map(|k| {
            let x = if n == 1 {
                0.0
            } else {
                k as f64 / (n - 1) as f64
            };
            // numpy.linspace(0, 1, len) knots are j / last; find the interval.
            let position = x * last;
            let j = (position.floor() as usize).min(ys.len() - 2);
            let (x0, x1) = (j as f64 / last, (j + 1) as f64 / last);
            let w = (x - x0) / (x1 - x0);
            (ys[j] + w * (ys[j + 1] - ys[j])).exp()
        })
        .collect();
    out.reverse();
    out
}
