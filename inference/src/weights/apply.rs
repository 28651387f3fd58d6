//! Strict application of named tensors to a Burn module.
//!
//! **Invariant:** a missing tensor, a shape mismatch or a non-finite weight is an error that
//! names the tensor; nothing falls back to zeros, ones or random values. Tensors the module
//! does not use are reported.

use std::collections::HashMap;
use std::path::Path;

use burn::module::{Module, ModuleVisitor, Param};
use burn::store::burn_pack::Tensor as PackTensor;
use burn::store::{
    ApplyError, ChainAdapter, FloatCastAdapter, ModuleSnapshot, PyTorchToBurnAdapter,
};
use burn::tensor::{DType, Tensor};

use crate::error::{Error, Result};

/// What loading one component found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ComponentReport {
    /// Component name (`UNet`, `VAE`, `text encoder`).
    pub component: String,
    /// Tensors loaded.
    pub applied: usize,
    /// Tensors of the file's component that the architecture does not use (file key names).
    pub unused: Vec<String>,
    /// Tensors stored in a reduced precision and widened on load, by dtype name.
    pub converted_from: Vec<(String, usize)>,
}

/// A single file's own name for a module path it lacks.
pub type FileName<'a> = &'a dyn Fn(&str) -> Option<String>;

/// A tensor to load: the module path it goes to, and the key it has in the file.
pub struct NamedTensor {
    pub tensor: PackTensor,
    pub file_key: String,
}

/// Loads `tensors` into `module` (whose parameters are still uninitialised), converting
/// PyTorch layouts (Linear transposes, norm parameter names) and floats to `dtype`.
///
/// `file_name`, for a single file, gives the file's own name for a module path it lacks,
/// so a missing tensor is named as the user can find it.
pub fn apply_strict<M: Module>(
    mut module: M,
    tensors: Vec<NamedTensor>,
    (component, path): (&str, &Path),
    dtype: DType,
    file_name: Option<FileName<'_>>,
) -> Result<(M, ComponentReport)> {
    let mut origin: HashMap<String, String> = HashMap::new();
    let mut stored_dtypes: HashMap<String, usize> = HashMap::new();
    let mut pack = Vec::with_capacity(tensors.len());
    // Two file keys naming one weight (a CLIP key with and without `text_model.`): the first
    // by name loads, and the other is reported unused, never swapped in silently.
    let mut tensors = tensors;
    tensors.sort_by(|a, b| a.file_key.cmp(&b.file_key));
    let mut copies = Vec::new();
    for NamedTensor { tensor, file_key } in tensors {
        if let Some(first) = origin.get(&tensor.name) {
            copies.push(format!("{file_key} (a second copy of `{first}`)"));
            continue;
        }
        if tensor.dtype != dtype && tensor.dtype.is_float() {
            *stored_dtypes
                .entry(format!("{:?}", tensor.dtype))
                .or_default() += 1;
        }
        origin.insert(tensor.name.clone(), file_key);
        pack.push(tensor);
    }
    // Enum variants (`Projection::Conv`) are not part of diffusers key paths.
    let result = module.apply(pack, None, Some(Box::new(load_adapter(dtype))), true);

    let file_key = |module_path: &str| {
        origin
            .get(module_path)
            .cloned()
            .unwrap_or_else(|| module_path.to_string())
    };
    if let Some(error) = result.errors.first() {
        let message = match error {
            ApplyError::ShapeMismatch {
                path: p,
                expected,
                found,
            } => format!(
                "{component} tensor `{}` has shape {:?} but this architecture needs {:?}",
                file_key(p),
                found.as_slice(),
                expected.as_slice()
            ),
            ApplyError::DTypeMismatch {
                path: p,
                expected,
                found,
            } => {
                format!(
                    "{component} tensor `{}` is {found:?} where {expected:?} is needed",
                    file_key(p)
                )
            }
            ApplyError::AdapterError { path: p, message }
            | ApplyError::LoadError { path: p, message } => {
                format!(
                    "{component} tensor `{}` could not be read ({message})",
                    file_key(p)
                )
            }
        };
        let more = if result.errors.len() > 1 {
            format!(" (and {} more problems)", result.errors.len() - 1)
        } else {
            String::new()
        };
        return Err(Error::weights(path, format!("{message}{more}")));
    }
    if !result.missing.is_empty() {
        let names: Vec<String> = result
            .missing
            .iter()
            .take(3)
            .map(|(name, _)| match file_name.map(|find| find(name)) {
                None => format!("`{name}`"),
                Some(Some(file_key)) => format!("`{file_key}` (Ember's `{name}`)"),
                Some(None) => format!("`{name}` (Ember's name)"),
            })
            .collect();
        return Err(Error::weights(
            path,
            format!(
                "the file lacks {} tensor(s) the {component} needs, e.g. {}; it is incomplete or not this kind of model",
                result.missing.len(),
                names.join(", ")
            ),
        ));
    }
    if let Some(name) = first_non_finite(&module)? {
        return Err(Error::weights(
            path,
            format!(
                "{component} weight `{}` contains NaN or infinite values; the file is damaged",
                file_key(&name)
            ),
        ));
    }
    let module = crate::weight_layout::unpadded(module);
    let mut unused: Vec<String> = result.unused.iter().map(|p| file_key(p)).collect();
    unused.extend(copies);
    unused.sort();
    let mut converted_from: Vec<(String, usize)> = stored_dtypes.into_iter().collect();
    converted_from.sort();
    Ok((
        module,
        ComponentReport {
            component: component.to_string(),
            applied: result.applied.len(),
            unused,
            converted_from,
        },
    ))
}

/// How a file's tensors become a module's weights: PyTorch layouts and names to Burn's,
/// floats to `dtype`. Reading a weight again ([`super::restore`]) must convert it the same.
pub(crate) fn load_adapter(dtype: DType) -> ChainAdapter {
    ChainAdapter::new(PyTorchToBurnAdapter, FloatCastAdapter::to(dtype))
}

/// The path of the first float parameter holding NaN or infinity, if any; the device's
/// error when it failed to hold the weights (a GPU out of memory or lost while loading).
fn first_non_finite<M: Module>(module: &M) -> Result<Option<String>> {
    struct Finder {
        path: Vec<String>,
        found: Option<String>,
        failure: Option<String>,
    }
    impl ModuleVisitor for Finder {
        fn enter_module(&mut self, name: &str, _container_type: &str) {
            self.path.push(name.to_string());
        }
        fn exit_module(&mut self, _name: &str, _container_type: &str) {
            self.path.pop();
        }
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if self.found.is_some() || self.failure.is_some() {
                return;
            }
            match param.val().is_finite().all().try_into_scalar::<bool>() {
                Ok(finite) if finite || crate::device::values_are_fake() => {}
                Ok(_) => self.found = Some(self.path.join(".")),
                Err(e) => self.failure = Some(e.to_string()),
            }
        }
    }
    let mut finder = Finder {
        path: Vec::new(),
        found: None,
        failure: None,
    };
    module.visit(&mut finder);
    match finder.failure {
        Some(report) => Err(crate::device::device_failure_while(
            crate::device::GpuWork::Loading,
            &report,
        )),
        None => Ok(finder.found),
    }
}
