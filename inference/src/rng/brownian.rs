//! torchsde's `BrownianTree`, the noise ComfyUI's and A1111's SDE samplers draw by default.
//!
//! A Brownian motion `W` on `[t0, t1]` whose value over any interval depends only on the
//! entropy (the seed), not on the order of the queries: every node of a dyadic tree of
//! intervals gets its own `torch.Generator` seed from numpy's `SeedSequence` keyed by the
//! node's position, and a child's increment is a Brownian bridge sample given its parent's.
//!
//! Ported from `google-research/torchsde` @ eb3a00e, `torchsde/_brownian/brownian_interval.py`
//! and `derived.py` (`BrownianTree`: `tol = 1e-6`, `pool_size = 24`, `halfway_tree = True`, no
//! Lévy area), and k-diffusion's `BatchedBrownianTree` / `BrownianTreeNoiseSampler`. Float32
//! arithmetic follows torch's operation by operation (Python-float factors are rounded to
//! float32 before they multiply a tensor, as torch does), so increments match bit for bit.
//!
//! Each node's draw is torchsde's `_randn`: a fresh generator seeded with the node's seed.
//! That is `torch.Generator('cpu')` for ComfyUI and A1111's CPU noise; A1111 replaces it with
//! its noise source's (`randn_local`), so with [`RngSource::Nv`] the nodes draw Philox.

use std::collections::HashMap;

use super::ImageGenerator;
use super::seed_sequence::SeedSequence;
use crate::api::RngSource;

/// torchsde's `BrownianTree` defaults.
const POOL_SIZE: usize = 24;
/// Interval ends are rounded to this many decimals (`tol = 1e-6`).
const DECIMALS: usize = 6;
/// Node increments kept between queries: about two root-to-leaf paths, so consecutive
/// queries (which share most of their path) rarely recompute. Only speed depends on it,
/// never values; memory is this many copies of the noise tensor per image.
const CACHE_LIMIT: usize = 64;

/// Python's `round(x, 6)`: the correctly rounded 6-decimal value, ties to even.
fn round_tol(x: f64) -> f64 {
    // Rust's fixed-precision formatting rounds the exact binary value, ties to even, as
    // Python's `round` does.
    format!("{x:.DECIMALS$}").parse().unwrap_or(x)
}

struct Node {
    start: f64,
    end: f64,
    parent: Option<usize>,
    is_left: bool,
    split: Option<Split>,
}

struct Split {
    midway: f64,
    /// Seed of the Brownian bridge noise between the two children.
    w_seed: u32,
    left: usize,
    right: usize,
    /// torchsde's spawn key `(key, depth)`: the node's path from the root as a binary number.
    key: u64,
    depth: u64,
}

/// One Brownian motion of `numel` independent float32 components.
pub struct BrownianTree {
    entropy: u64,
    source: RngSource,
    numel: usize,
    nodes: Vec<Node>,
    increments: HashMap<usize, Vec<f32>>,
}

impl BrownianTree {
    /// `torchsde.BrownianTree(t0, zeros(numel), t1, entropy=entropy)` (`t0 < t1`), its nodes
    /// drawn from `source`.
    pub fn new(t0: f64, t1: f64, numel: usize, entropy: u64, source: RngSource) -> Self {
        let seeds = SeedSequence::new(entropy, &[], POOL_SIZE).generate_state(3);
        // The whole interval's increment uses the unrounded ends.
        let scale = (t1 - t0).sqrt() as f32;
        let root_w: Vec<f32> = ImageGenerator::new(source, u64::from(seeds[0]))
            .randn(numel)
            .into_iter()
            .map(|v| v * scale)
            .collect();
        let root = Node {
            start: round_tol(t0),
            end: round_tol(t1),
            parent: None,
            is_left: false,
            split: None,
        };
        Self {
            entropy,
            source,
            numel,
            nodes: vec![root],
            increments: HashMap::from([(0, root_w)]),
        }
    }

    /// `W(tb) - W(ta)` for `ta <= tb`, both clamped to the tree's interval.
    pub fn increment(&mut self, ta: f64, tb: f64) -> Vec<f32> {
        let (start, end) = (self.nodes[0].start, self.nodes[0].end);
        let ta = ta.clamp(start, end);
        let tb = tb.clamp(start, end);
        if ta >= tb {
            return vec![0.0; self.numel];
        }
        let mut pieces = Vec::new();
        self.locate(0, round_tol(ta), round_tol(tb), &mut pieces);
        let mut total = self.node_increment(pieces[0]);
        for &piece in &pieces[1..] {
            let w = self.node_increment(piece);
            total.iter_mut().zip(&w).for_each(|(t, w)| *t += w);
        }
        if self.increments.len() > CACHE_LIMIT {
            self.increments.retain(|&node, _| node == 0);
        }
        total
    }

    /// `_loc_inner`: the tree nodes that exactly cover `[ta, tb]`, left to right, splitting
    /// nodes where the tree does not reach that far yet.
    fn locate(&mut self, node: usize, ta: f64, tb: f64, out: &mut Vec<usize>) {
        let (start, end) = (self.nodes[node].start, self.nodes[node].end);
        if ta < start || tb > end {
            // Not ours: a fresh right child after a split at `ta` hands the query back.
            let parent = self.nodes[node]
                .parent
                .expect("the root covers every query");
            return self.locate(parent, ta, tb, out);
        }
        if ta == start && tb == end {
            out.push(node);
            return;
        }
        let Some(split) = &self.nodes[node].split else {
            let at = if ta == start { tb } else { ta };
            self.split_towards(node, at);
            let next = self.children(node);
            let child = if ta == start { next.0 } else { next.1 };
            return self.locate(child, ta, tb, out);
        };
        let (midway, left, right) = (split.midway, split.left, split.right);
        if tb <= midway {
            self.locate(left, ta, tb, out);
        } else if ta >= midway {
            self.locate(right, ta, tb, out);
        } else {
            self.locate(left, ta, midway, out);
            self.locate(right, midway, tb, out);
        }
    }

    /// `_split` of the halfway tree: halve until `at` is a node boundary.
    fn split_towards(&mut self, node: usize, at: f64) {
        let (start, end) = (self.nodes[node].start, self.nodes[node].end);
        self.split_at(node, 0.5 * (end + start));
        let midway = round_tol(0.5 * (end + start));
        let (left, right) = self.children(node);
        if at > midway {
            self.split_towards(right, at);
        } else if at < midway {
            self.split_towards(left, at);
        }
    }

    /// `_split_exact`: two children meeting at `midway` (rounded), with this node's seeds.
    fn split_at(&mut self, node: usize, midway: f64) {
        let midway = round_tol(midway);
        let (key, depth) = match self.nodes[node].parent {
            None => (0, 0),
            Some(parent) => {
                let parent = self.nodes[parent]
                    .split
                    .as_ref()
                    .expect("a parent is split");
                let bit = u64::from(!self.nodes[node].is_left);
                (2 * parent.key + bit, parent.depth + 1)
            }
        };
        let seeds = SeedSequence::new(self.entropy, &[key, depth], POOL_SIZE).generate_state(4);
        let (start, end) = (self.nodes[node].start, self.nodes[node].end);
        let left = self.push(start, midway, node, true);
        let right = self.push(midway, end, node, false);
        self.nodes[node].split = Some(Split {
            midway,
            w_seed: seeds[0],
            left,
            right,
            key,
            depth,
        });
    }

    fn push(&mut self, start: f64, end: f64, parent: usize, is_left: bool) -> usize {
        self.nodes.push(Node {
            start,
            end,
            parent: Some(parent),
            is_left,
            split: None,
        });
        self.nodes.len() - 1
    }

    fn children(&self, node: usize) -> (usize, usize) {
        let split = self.nodes[node]
            .split
            .as_ref()
            .expect("node was just split");
        (split.left, split.right)
    }

    /// The increment over one node: a Brownian bridge sample given the parent's increment.
    fn node_increment(&mut self, node: usize) -> Vec<f32> {
        if let Some(w) = self.increments.get(&node) {
            return w.clone();
        }
        let parent = self.nodes[node]
            .parent
            .expect("only the root has no parent");
        let parent_w = self.node_increment(parent);
        let p = &self.nodes[parent];
        let split = p.split.as_ref().expect("a parent is split");
        let h_reciprocal = 1.0 / (p.end - p.start);
        let left_diff = split.midway - p.start;
        let right_diff = p.end - split.midway;
        let std = (left_diff * right_diff * h_reciprocal).sqrt() as f32;
        let (left_diff, h_reciprocal) = (left_diff as f32, h_reciprocal as f32);
        let noise = ImageGenerator::new(self.source, u64::from(split.w_seed)).randn(self.numel);
        let is_left = self.nodes[node].is_left;
        let w: Vec<f32> = parent_w
            .iter()
            .zip(&noise)
            .map(|(&w, &n)| {
                let left_w = w * left_diff * h_reciprocal + n * std;
                if is_left { left_w } else { w - left_w }
            })
            .collect();
        self.increments.insert(node, w.clone());
        w
    }
}

/// k-diffusion's tree range for a sigma list, `(sigmas[sigmas > 0].min(), sigmas.max())`;
/// `None` when no sigma is positive.
pub fn sigma_range(sigmas: &[f32]) -> Option<(f32, f32)> {
    let positive = sigmas.iter().copied().filter(|&s| s > 0.0);
    Some((
        positive.clone().reduce(f32::min)?,
        positive.reduce(f32::max)?,
    ))
}

/// k-diffusion's `BrownianTreeNoiseSampler` over one tree per image (A1111's batch
/// convention: image `i` has its own tree with its own seed, so each image of a batch is
/// its batch-1 image; ComfyUI's single-image tree is the same tree).
pub struct BrownianNoise {
    trees: Vec<BrownianTree>,
}

impl BrownianNoise {
    /// Trees over `[sigma_min, sigma_max]` (the smallest non-zero and the largest sigma of
    /// the run), one per seed, each of `per_image` components, drawn from `source`.
    pub fn new(
        (sigma_min, sigma_max): (f32, f32),
        seeds: &[u64],
        per_image: usize,
        source: RngSource,
    ) -> Self {
        let (t0, t1) = (sigma_min.min(sigma_max), sigma_min.max(sigma_max));
        let (t0, t1) = (f64::from(t0), f64::from(t1));
        let trees = seeds
            .iter()
            .map(|&seed| BrownianTree::new(t0, t1, per_image, seed, source))
            .collect();
        Self { trees }
    }

    /// Trees over k-diffusion's range for a sigma list: its smallest non-zero and its largest
    /// sigma, drawing torch-CPU noise (ComfyUI's). `None` when no sigma is positive (nothing
    /// to add noise to).
    pub fn for_sigmas(sigmas: &[f32], seeds: &[u64], per_image: usize) -> Option<Self> {
        let range = sigma_range(sigmas)?;
        Some(Self::new(range, seeds, per_image, RngSource::Cpu))
    }

    /// The unit-variance noise for a step from `sigma` to `sigma_next`:
    /// `(W(sigma_next) - W(sigma)) / sqrt(|sigma_next - sigma|)`, images concatenated.
    pub fn sample(&mut self, sigma: f32, sigma_next: f32) -> Vec<f32> {
        let (ta, tb, sign) = if sigma <= sigma_next {
            (sigma, sigma_next, 1.0)
        } else {
            (sigma_next, sigma, -1.0)
        };
        let scale = (sigma_next - sigma).abs().sqrt();
        let mut out = Vec::new();
        for tree in &mut self.trees {
            let w = tree.increment(f64::from(ta), f64::from(tb));
            out.extend(w.into_iter().map(|w| w * sign / scale));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_is_pythons() {
        assert_eq!(round_tol(0.0078125), 0.007812);
        assert_eq!(round_tol(0.0234375), 0.023438);
        assert_eq!(round_tol(14.614643096923828), 14.614643);
    }

    #[test]
    fn increments_add_up_and_do_not_depend_on_query_order() {
        let mut tree = BrownianTree::new(0.03, 14.6, 64, 1234, RngSource::Cpu);
        let a = tree.increment(1.0, 5.0);
        let b = tree.increment(5.0, 9.0);
        let whole = tree.increment(1.0, 9.0);
        for ((a, b), w) in a.iter().zip(&b).zip(&whole) {
            assert!((a + b - w).abs() < 1e-5, "{a} + {b} != {w}");
        }
        let mut fresh = BrownianTree::new(0.03, 14.6, 64, 1234, RngSource::Cpu);
        assert_eq!(fresh.increment(5.0, 9.0), b);
        assert_eq!(fresh.increment(1.0, 5.0), a);
    }

    #[test]
    fn increments_have_the_variance_of_their_length() {
        let mut tree = BrownianTree::new(0.0, 16.0, 4096, 7, RngSource::Cpu);
        let w = tree.increment(2.0, 6.0);
        let variance = w.iter().map(|v| v * v).sum::<f32>() / w.len() as f32;
        assert!((variance - 4.0).abs() < 0.4, "variance {variance}");
    }
}
