//! Native file dialogs (rfd), each on a short-lived thread so the window keeps drawing while
//! a dialog is open; what the user picked comes back as an [`Action`]. A dialog that could
//! not open (on Linux rfd needs xdg-desktop-portal; without one it returns at once with
//! nothing) comes back as [`Action::DialogFailed`], and the app offers a typed path instead.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, unbounded};
use inference::worker::ModelRole;

use super::action::{Action, CanvasAction, ControlAction, ExtrasAction, StyleAction};

/// A dialog that answers faster than this did not open: nobody picks or cancels that fast.
const TOO_FAST: Duration = Duration::from_millis(150);

const IMAGES: &[&str] = &["png", "jpg", "jpeg", "webp"];
const CHECKPOINTS: &[&str] = &["safetensors", "ckpt"];
const UPSCALERS: &[&str] = &["pth", "safetensors", "pt"];

/// What a path is picked for (by dialog or typed).
#[derive(Clone, Debug, PartialEq)]
pub enum PathPurpose {
    Model,
    ModelFolder,
    Refiner,
    ModelsFolder,
    OutputFolder,
    CanvasImage,
    Mask,
    /// A ControlNet unit's control image.
    ControlImage(usize),
    /// A ControlNet unit's model (a file; a diffusers folder through "Type a path…").
    ControlModel(usize),
    /// The image the Extras view upscales.
    ExtrasImage,
    /// An ESRGAN model for the Extras view.
    Upscaler,
    /// Another `styles.csv` (A1111's) whose styles to take in.
    StylesFile,
    /// The config folder for a checkpoint of non-standard size.
    ConfigFor {
        model: PathBuf,
        role: ModelRole,
    },
}

impl PathPurpose {
    /// The dialog's title (and the typed-path prompt's).
    pub fn title(&self) -> &'static str {
        match self {
            PathPurpose::Model => "Open a Stable Diffusion checkpoint",
            PathPurpose::ModelFolder => "Open a diffusers model folder",
            PathPurpose::Refiner => "Open an SDXL refiner checkpoint",
            PathPurpose::ModelsFolder => "Choose the folder your checkpoints are in",
            PathPurpose::OutputFolder => "Choose where Ember saves images",
            PathPurpose::CanvasImage => "Open an image for the canvas",
            PathPurpose::Mask => "Open a mask (white = repaint)",
            PathPurpose::ControlImage(_) => "Open a control image for ControlNet",
            PathPurpose::ControlModel(_) => "Open a ControlNet model",
            PathPurpose::ExtrasImage => "Open an image to upscale",
            PathPurpose::Upscaler => "Open an ESRGAN / Real-ESRGAN upscaler model",
            PathPurpose::StylesFile => "Import the styles of a styles.csv (A1111's)",
            PathPurpose::ConfigFor { .. } => {
                "Choose the checkpoint's config folder (a diffusers folder describing it)"
            }
        }
    }

    /// An example path for the typed-path prompt.
    pub fn example(&self) -> &'static str {
        match self.filter() {
            Some(("Images", _)) => "/home/you/Pictures/image.png",
            Some(("Upscaler models", _)) => "/home/you/models/ESRGAN/4x-UltraSharp.pth",
            Some(("Styles", _)) => "/home/you/stable-diffusion-webui/styles.csv",
            Some(_) => "/home/you/models/model.safetensors",
            None => "/home/you/models",
        }
    }

    /// Whether a folder is picked (else a file, with these extensions).
    fn filter(&self) -> Option<(&'static str, &'static [&'static str])> {
        match self {
            PathPurpose::Model | PathPurpose::Refiner => Some(("Checkpoints", CHECKPOINTS)),
            PathPurpose::CanvasImage
            | PathPurpose::Mask
            | PathPurpose::ControlImage(_)
            | PathPurpose::ExtrasImage => Some(("Images", IMAGES)),
            PathPurpose::Upscaler => Some(("Upscaler models", UPSCALERS)),
            PathPurpose::StylesFile => Some(("Styles", &["csv"])),
            PathPurpose::ControlModel(_) => Some(("ControlNet models", CHECKPOINTS)),
            _ => None,
        }
    }

    /// What picking `path` asks the app to do.
    pub fn action(&self, path: PathBuf) -> Action {
        match self {
            PathPurpose::Model | PathPurpose::ModelFolder => Action::LoadModel(path),
            PathPurpose::Refiner => Action::SetRefiner(Some(path)),
            PathPurpose::ModelsFolder => Action::SetModelsFolder(path),
            PathPurpose::OutputFolder => Action::SetOutputFolder(path),
            PathPurpose::CanvasImage => Action::Canvas(CanvasAction::OpenImage(path)),
            PathPurpose::Mask => Action::Canvas(CanvasAction::OpenMask(path)),
            PathPurpose::ControlImage(unit) => {
                Action::Control(ControlAction::OpenImage { unit: *unit, path })
            }
            PathPurpose::ControlModel(unit) => {
                Action::Control(ControlAction::SetModel { unit: *unit, path })
            }
            PathPurpose::ExtrasImage => Action::Extras(ExtrasAction::OpenImage(path)),
            PathPurpose::Upscaler => Action::Extras(ExtrasAction::SetUpscaler(path)),
            PathPurpose::StylesFile => Action::Styles(StyleAction::Import(path)),
            PathPurpose::ConfigFor { model, role } => Action::LoadWithConfig {
                model: model.clone(),
                config: path,
                role: *role,
            },
        }
    }
}

/// A path being typed for a purpose (the dialog's fallback); runtime state of the window.
#[derive(Clone, Debug, PartialEq)]
pub struct PathPrompt {
    pub purpose: PathPurpose,
    pub text: String,
    /// The field has had the keyboard focus once (given when the window opens, so the
    /// path can be typed at once; taken back by a click elsewhere, as the user wishes).
    pub focused: bool,
}

impl PathPrompt {
    pub fn new(purpose: PathPurpose) -> Self {
        Self {
            purpose,
            text: String::new(),
            focused: false,
        }
    }
}

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

    /// Opens the system dialog for `purpose`.
    pub fn pick(&self, purpose: PathPurpose) {
        let tx = self.tx.clone();
        let wake = self.wake.clone();
        let spawned = std::thread::Builder::new()
            .name("file-dialog".into())
            .spawn(move || {
                let start = Instant::now();
                let dialog = rfd::FileDialog::new().set_title(purpose.title());
                let picked = match purpose.filter() {
                    Some((name, extensions)) => dialog.add_filter(name, extensions).pick_file(),
                    None => dialog.pick_folder(),
                };
                let action = match picked {
                    Some(path) => purpose.action(path),
                    None if start.elapsed() < TOO_FAST => Action::DialogFailed(purpose),
                    None => return,
                };
                let _ = tx.send(action);
                wake();
            });
        if spawned.is_err() {
            let _ = self.tx.send(Action::DialogFailed(PathPurpose::Model));
        }
    }
}

impl Dialogs {
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
