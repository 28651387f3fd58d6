//! Native file dialogs (rfd), each on a short-lived thread so the window keeps drawing while
//! a dialog is open; what the user picked comes back as an [`Action`].

use std::path::PathBuf;
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender, unbounded};

use super::action::{Action, CanvasAction};

/// Opens dialogs and collects their answers.
pub struct Dialogs {
    tx: Sender<Action>,
    rx: Receiver<Action>,
    wake: Arc<dyn Fn() + Send + Sync>,
}

impl Dialogs {
    pub fn new(wake: impl Fn() + Send + Sync + 'static) -> Self {
        let (tx, rx) = unbounded();
        Self {
            tx,
            rx,
            wake: Arc::new(wake),
        }
    }

    /// Actions from dialogs that closed since the last call.
    pub fn drain(&self) -> Vec<Action> {
        self.rx.try_iter().collect()
    }

    fn open(
        &self,
        dialog: impl FnOnce() -> Option<PathBuf> + Send + 'static,
        then: fn(PathBuf) -> Action,
    ) {
        let tx = self.tx.clone();
        let wake = self.wake.clone();
        let spawned = std::thread::Builder::new()
            .name("file-dialog".into())
            .spawn(move || {
                if let Some(path) = dialog() {
                    let _ = tx.send(then(path));
                    wake();
                }
            });
        if spawned.is_err() {
            // Without a thread there is no dialog; the drop target and models folder remain.
        }
    }

    pub fn pick_model_file(&self) {
        self.open(
            || {
                rfd::FileDialog::new()
                    .set_title("Open a Stable Diffusion checkpoint")
                    .add_filter("Checkpoints", &["safetensors", "ckpt"])
                    .pick_file()
            },
            Action::LoadModel,
        );
    }

    pub fn pick_refiner_file(&self) {
        self.open(
            || {
                rfd::FileDialog::new()
                    .set_title("Open an SDXL refiner checkpoint")
                    .add_filter("Checkpoints", &["safetensors", "ckpt"])
                    .pick_file()
            },
            |path| Action::SetRefiner(Some(path)),
        );
    }

    pub fn pick_model_folder(&self) {
        self.open(
            || {
                rfd::FileDialog::new()
                    .set_title("Open a diffusers model folder")
                    .pick_folder()
            },
            Action::LoadModel,
        );
    }

    pub fn pick_models_folder(&self) {
        self.open(
            || {
                rfd::FileDialog::new()
                    .set_title("Choose the folder your checkpoints are in")
                    .pick_folder()
            },
            Action::SetModelsFolder,
        );
    }

    pub fn pick_output_folder(&self) {
        self.open(
            || {
                rfd::FileDialog::new()
                    .set_title("Choose where Ember saves images")
                    .pick_folder()
            },
            Action::SetOutputFolder,
        );
    }
}

impl Dialogs {
    /// An image to paint on in the canvas.
    pub fn pick_canvas_image(&self) {
        self.open(
            || {
                rfd::FileDialog::new()
                    .set_title("Open an image for the canvas")
                    .add_filter("Images", &["png", "jpg", "jpeg", "webp"])
                    .pick_file()
            },
            |p| Action::Canvas(CanvasAction::OpenImage(p)),
        );
    }

    /// Reads an image from the clipboard on its own thread (the system clipboard can take a
    /// moment to answer).
    pub fn paste_image(&self) {
        let tx = self.tx.clone();
        let wake = self.wake.clone();
        let _ = std::thread::Builder::new()
            .name("clipboard".into())
            .spawn(move || {
                let read = arboard::Clipboard::new().and_then(|mut c| c.get_image());
                let action = match read {
                    Ok(img) => match from_clipboard(img.width, img.height, &img.bytes) {
                        Ok(image) => Action::Canvas(CanvasAction::ImagePasted(Box::new(image))),
                        Err(e) => Action::Notice(format!("cannot paste the clipboard image: {e}")),
                    },
                    Err(e) => Action::Notice(format!("no image to paste from the clipboard ({e})")),
                };
                let _ = tx.send(action);
                wake();
            });
    }

    /// A mask image (white = repaint) for the canvas.
    pub fn pick_mask(&self) {
        self.open(
            || {
                rfd::FileDialog::new()
                    .set_title("Open a mask (white = repaint)")
                    .add_filter("Images", &["png", "jpg", "jpeg", "webp"])
                    .pick_file()
            },
            |p| Action::Canvas(CanvasAction::OpenMask(p)),
        );
    }
}

/// A clipboard image (RGBA rows) as RGB, within the limits files get.
fn from_clipboard(
    width: usize,
    height: usize,
    rgba: &[u8],
) -> Result<inference::imaging::ImageRgb8, String> {
    let (w, h) = u32::try_from(width)
        .ok()
        .zip(u32::try_from(height).ok())
        .ok_or_else(|| format!("image is {width}x{height}, too large"))?;
    inference::imaging::check_input_size(w, h)?;
    if rgba.len() != width * height * 4 {
        return Err(format!(
            "its pixel data is incomplete ({} bytes for {width}x{height})",
            rgba.len()
        ));
    }
    Ok(inference::imaging::ImageRgb8 {
        width: w,
        height: h,
        pixels: rgba
            .chunks_exact(4)
            .flat_map(|p| [p[0], p[1], p[2]])
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::from_clipboard;

    #[test]
    fn clipboard_images_meet_the_file_limits() {
        let ok = from_clipboard(2, 1, &[1, 2, 3, 255, 4, 5, 6, 255]).unwrap();
        assert_eq!(ok.pixels, [1, 2, 3, 4, 5, 6]);
        assert!(
            from_clipboard(20_000, 1, &[])
                .unwrap_err()
                .contains("pixels a side")
        );
        assert!(from_clipboard(0, 5, &[]).unwrap_err().contains("no pixels"));
        assert!(
            from_clipboard(2, 2, &[0; 8])
                .unwrap_err()
                .contains("incomplete")
        );
    }
}
