//! `ember info FILE`: a checkpoint's family and layout, or an image's parameters.

use std::path::Path;

use inference::metadata::{self, ImageMetadata};
use inference::{imaging, weights};

pub fn run(path: &Path) -> Result<(), String> {
    // An image is told by its first bytes, whatever its name.
    if imaging::is_image_file(path) {
        return image_info(path);
    }
    if !path.exists() {
        return Err(format!("no such file or folder: {}", path.display()));
    }
    let info = weights::inspect::inspect(path).map_err(|e| e.to_string())?;
    println!("file:       {}", path.display());
    println!("layout:     {}", info.layout);
    println!("family:     {}", info.family);
    println!("tensors:    {}", info.tensor_count);
    println!("parameters: {:.1} M", info.parameter_count as f64 / 1e6);
    let dtypes: Vec<String> = info
        .dtypes
        .iter()
        .map(|(k, v)| format!("{k} x{v}"))
        .collect();
    println!("dtypes:     {}", dtypes.join(", "));
    Ok(())
}

fn image_info(path: &Path) -> Result<(), String> {
    let chunks = imaging::read_image_text(path).map_err(|e| e.to_string())?;
    match metadata::from_text_chunks(&chunks) {
        Some(ImageMetadata::A1111(p)) => {
            println!("format:   A1111 parameters");
            println!("prompt:   {}", p.prompt);
            println!("negative: {}", p.negative_prompt);
            for (k, v) in &p.fields {
                println!("{k}: {v}");
            }
        }
        Some(ImageMetadata::ComfyUi { samplers, texts }) => {
            println!("format: ComfyUI workflow");
            for text in texts {
                println!("text: {text}");
            }
            for sampler in samplers {
                let fields: Vec<String> =
                    sampler.iter().map(|(k, v)| format!("{k}: {v}")).collect();
                println!("sampler: {}", fields.join(", "));
            }
        }
        Some(ImageMetadata::Fooocus(fields)) => {
            println!("format: Fooocus parameters");
            for (k, v) in fields {
                println!("{k}: {v}");
            }
        }
        None => println!("{}: no generation parameters found", path.display()),
    }
    Ok(())
}
