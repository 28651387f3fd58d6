//! A network's float parameters read and replaced in place by their module path (Burn's
//! `ModuleMapper`, which says the path as it walks), without copying or converting the
//! weights nobody asked for: what lets a LoRA merge touch only the weights it changes, and
//! taking it out put the very same tensors back.

use burn::module::{Module, ModuleMapper, Param};
use burn::tensor::Tensor;

/// What [`map_weights`] calls for each wanted weight: its path, the weight flattened and
/// its dims; a returned tensor of the same length replaces it.
pub type WeightFn<'a> = dyn FnMut(&str, Tensor<1>, &[usize]) -> Option<Tensor<1>> + 'a;

/// Walks `module`'s float parameters; for each whose path (`down_blocks.0.….weight`, Burn's
/// field names) `wanted` accepts, `f` gets the parameter flattened (its own layout) with
/// its dims and may return a flat replacement of the same length.
pub fn map_weights<M: Module>(module: M, wanted: &dyn Fn(&str) -> bool, f: &mut WeightFn<'_>) -> M {
    module.map(&mut PathMapper {
        path: Vec::new(),
        wanted,
        f,
    })
}

struct PathMapper<'a> {
    /// Each entered module's name, `None` for an enum's variant (which, as in burn-store's
    /// names, is not part of the path).
    path: Vec<Option<String>>,
    wanted: &'a dyn Fn(&str) -> bool,
    f: &'a mut WeightFn<'a>,
}

impl ModuleMapper for PathMapper<'_> {
    fn enter_module(&mut self, name: &str, container: &str) {
        let variant = container.starts_with("Enum:");
        self.path.push((!variant).then(|| name.to_string()));
    }

    fn exit_module(&mut self, _name: &str, _container: &str) {
        self.path.pop();
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
        param.map(|t| {
            let dims = t.dims();
            let n: usize = dims.iter().product();
            match (self.f)(&path, t.clone().reshape([n]), &dims) {
                Some(new) if new.dims() == [n] => new.reshape(dims),
                _ => t,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::LinearConfig;

    #[test]
    fn paths_name_the_parameter_and_only_wanted_ones_change() {
        let device = Default::default();
        let linear = LinearConfig::new(3, 2).init(&device);
        let mut seen = Vec::new();
        let linear = map_weights(linear, &|p| p == "weight", &mut |path, flat, dims| {
            seen.push((path.to_string(), dims.to_vec()));
            Some(flat.zeros_like())
        });
        assert_eq!(seen, vec![("weight".to_string(), vec![3, 2])]);
        let w: Vec<f32> = linear
            .weight
            .val()
            .into_data()
            .try_into_vec::<f32>()
            .unwrap();
        assert!(w.iter().all(|&v| v == 0.0));
        let b: Vec<f32> = linear
            .bias
            .unwrap()
            .val()
            .into_data()
            .try_into_vec::<f32>()
            .unwrap();
        assert!(b.iter().any(|&v| v != 0.0), "the bias was not asked for");
    }
}
