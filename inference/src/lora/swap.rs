//! A network's float parameters read and replaced in place by their module path (Burn's
//! `ModuleMapper`, which says the path as it walks), without copying or converting the
//! weights nobody asked for: what lets a LoRA merge touch only the weights it changes (and
//! write into them, each handed over as the only reference to its buffer), and taking it
//! out put the very same tensors back.

use burn::module::{Module, ModuleMapper, Param};
use burn::tensor::Tensor;

/// Where a weight sits in its network.
pub struct Weight<'a> {
    /// Burn's module path (`down_blocks.0.….weight`).
    pub path: &'a str,
    /// Its dims in Burn's layout.
    pub dims: &'a [usize],
    /// A `Linear` layer's weight, which Burn holds transposed (`[in, out]`) from a
    /// checkpoint's `[out, in]` (burn-store's PyTorch adapter's rule).
    pub linear: bool,
}

/// What [`map_weights`] calls for each wanted weight: where it is, and the weight flattened
/// (the module's own reference, handed over); it returns the weight's new value, of the
/// same length (or the weight itself, unchanged).
pub type WeightFn<'a> = dyn FnMut(&Weight<'_>, Tensor<1>) -> Tensor<1> + 'a;

/// Walks `module`'s float parameters; for each whose path (`down_blocks.0.….weight`, Burn's
/// field names) `wanted` accepts, `f` gets the parameter flattened (its own layout) with
/// its dims and returns its flat new value of the same length.
///
/// # Panics
/// If `f` returns a tensor of another length (a bug in the caller).
pub fn map_weights<M: Module>(module: M, wanted: &dyn Fn(&str) -> bool, f: &mut WeightFn<'_>) -> M {
    module.map(&mut PathMapper {
        path: Vec::new(),
        containers: Vec::new(),
        wanted,
        f,
    })
}

struct PathMapper<'a> {
    /// Each entered module's name, `None` for an enum's variant (which, as in burn-store's
    /// names, is not part of the path).
    path: Vec<Option<String>>,
    /// Each entered module's container type (`Struct:Linear`, `Vec`, …).
    containers: Vec<String>,
    wanted: &'a dyn Fn(&str) -> bool,
    f: &'a mut WeightFn<'a>,
}

impl ModuleMapper for PathMapper<'_> {
    fn enter_module(&mut self, name: &str, container: &str) {
        let variant = container.starts_with("Enum:");
        self.path.push((!variant).then(|| name.to_string()));
        self.containers.push(container.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container: &str) {
        self.path.pop();
        self.containers.pop();
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let path = self
            .path
            .iter()
            .flatten()
            .cloned()
            .collect::<Vec<_>>()
            .join(".");
        if !(self.wanted)(&path) {
            return param;
        }
        // The innermost module that is not a collection, as burn-store's adapters see it.
        let module_type = self
            .containers
            .iter()
            .rev()
            .find(|c| c.starts_with("Struct:") || c.starts_with("Enum:"));
        let linear = D == 2
            && path.rsplit('.').next() == Some("weight")
            && module_type.is_some_and(|c| c == "Struct:Linear");
        param.map(|t| {
            let dims = t.dims();
            let n: usize = dims.iter().product();
            let weight = Weight {
                path: &path,
                dims: &dims,
                linear,
            };
            let new = (self.f)(&weight, t.reshape([n]));
            assert_eq!(new.dims(), [n], "a new value for `{path}` of another size");
            new.reshape(dims)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};

    #[derive(Module, Debug)]
    struct Pair {
        linear: Linear,
        embedding: Embedding,
    }

    fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
        t.into_data().try_into_vec::<f32>().unwrap()
    }

    #[test]
    fn paths_name_the_parameter_say_linear_and_only_wanted_ones_change() {
        let device = burn::tensor::Device::flex();
        let pair = Pair {
            linear: LinearConfig::new(3, 2).init(&device),
            embedding: EmbeddingConfig::new(4, 5).init(&device),
        };
        let mut seen = Vec::new();
        let wanted = |p: &str| p.ends_with("weight");
        let pair = map_weights(pair, &wanted, &mut |weight, flat| {
            seen.push((weight.path.to_string(), weight.dims.to_vec(), weight.linear));
            flat.zeros_like()
        });
        seen.sort();
        assert_eq!(
            seen,
            vec![
                ("embedding.weight".to_string(), vec![4, 5], false),
                ("linear.weight".to_string(), vec![3, 2], true),
            ]
        );
        assert!(values(pair.linear.weight.val()).iter().all(|&v| v == 0.0));
        let bias = values(pair.linear.bias.unwrap().val());
        assert!(bias.iter().any(|&v| v != 0.0), "the bias was not asked for");
    }
}
