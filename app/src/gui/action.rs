//! What the user asked for this frame: panels return [`Action`]s and the app performs them
//! after drawing, so panels only read state and stay easy to test.

use std::path::PathBuf;

use inference::worker::ModelRole;

use super::dialogs::PathPurpose;
pub use super::styles::StyleAction;

/// The app's main views.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum View {
    #[default]
    Generate,
    /// Image-to-image, inpainting and outpainting on a source image.
    Canvas,
    Gallery,
    /// Upscaling an image with an ESRGAN model (A1111's Extras tab).
    Extras,
}

/// One thing the user asked for.
#[must_use]
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    Generate,
    /// Start (`true`) or stop A1111's Generate forever.
    GenerateForever(bool),
    /// Stop the running image (the queue goes on).
    Cancel,
    /// Stop the running image and empty the queue.
    CancelAll,
    ClearQueue,
    /// Pick a path with the system dialog.
    Pick(PathPurpose),
    /// The dialog could not open: offer a typed path.
    DialogFailed(PathPurpose),
    /// Type a path (the dialog's fallback, also offered directly).
    TypePath(PathPurpose),
    LoadModel(PathBuf),
    /// Add a word (an embedding's name) to the end of the prompt.
    AddToPrompt(String),
    /// Load a checkpoint of non-standard size with the architecture in `config`.
    LoadWithConfig {
        model: PathBuf,
        config: PathBuf,
        role: ModelRole,
    },
    /// Use this refiner (loading it), or `None`: refine no more.
    SetRefiner(Option<PathBuf>),
    SetModelsFolder(PathBuf),
    SetOutputFolder(PathBuf),
    CancelLoad,
    RescanModels,
    Show(View),
    SelectImage(PathBuf),
    /// Copy the selected image's settings (and seed) into the generate panel.
    ReuseSettings {
        with_seed: bool,
    },
    CopyParameters,
    OpenOutputFolder,
    DeleteSelected,
    DismissNotices,
    /// Save the finished images kept unsaved, in the output folder as it is now.
    SaveAgain,
    DismissNotice(u64),
    /// Show every notice (`true`) or the newest few.
    ShowAllNotices(bool),
    RollSeed,
    /// A new random variation seed (the seed's Extra options).
    RollVariationSeed,
    /// Something the user should read (from a background helper).
    Notice(String),
    /// The canvas's own actions (see [`CanvasAction`]).
    Canvas(CanvasAction),
    /// The ControlNet units' actions (see [`ControlAction`]).
    Control(ControlAction),
    /// The Extras view's actions (see [`ExtrasAction`]).
    Extras(ExtrasAction),
    /// The Download window's actions (see [`DownloadAction`]).
    Download(DownloadAction),
    /// The Device menu's actions (see [`DeviceAction`]).
    Device(DeviceAction),
    /// The answer to closing with images still to make.
    Quit(QuitAction),
    /// The Styles row's and the style editor's actions (see [`StyleAction`]).
    Styles(StyleAction),
}

/// How to close while images are still to be made.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuitAction {
    /// Close, keeping them for the next start.
    KeepQueue,
    /// Close without them.
    DropQueue,
    /// Don't close.
    Stay,
}

/// What the Device menu asks for (the choice itself is a setting the menu edits).
#[must_use]
#[derive(Clone, Debug, PartialEq)]
pub enum DeviceAction {
    /// Look for the machine's devices (the menu opened).
    List,
    /// Close and start again on the chosen device: now, or once the queue is done.
    StartAgain { when_idle: bool },
    /// Stop waiting for the queue to start again.
    StayOpen,
}

/// What the Download window asks for.
#[must_use]
#[derive(Clone, Debug, PartialEq)]
pub enum DownloadAction {
    /// Show or hide the window.
    Show(bool),
    /// Download a catalogue model (by name) or a URL.
    Start(String),
    Cancel,
}

/// What the Extras view asks for.
#[must_use]
#[derive(Clone, Debug, PartialEq)]
pub enum ExtrasAction {
    /// Read this image as the one to upscale (and show the Extras view).
    OpenImage(PathBuf),
    /// Upscale with this ESRGAN model file.
    SetUpscaler(PathBuf),
    /// Queue the upscale.
    Upscale,
}

/// What the ControlNet section asks for.
#[must_use]
#[derive(Clone, Debug, PartialEq)]
pub enum ControlAction {
    /// Add a unit (a copy of the defaults).
    AddUnit,
    RemoveUnit(usize),
    /// Read this image as unit `unit`'s control image.
    OpenImage {
        unit: usize,
        path: PathBuf,
    },
    /// Use the canvas's source image as unit `unit`'s control image.
    UseCanvasImage(usize),
    /// Use this ControlNet file or folder in unit `unit`.
    SetModel {
        unit: usize,
        path: PathBuf,
    },
}

/// What the canvas asks for.
#[must_use]
#[derive(Clone, Debug, PartialEq)]
pub enum CanvasAction {
    /// Load this image as the canvas source.
    OpenImage(PathBuf),
    /// Load this image (a result or a gallery image) as the canvas source and show the canvas.
    SendTo(PathBuf),
    /// Read an image from the clipboard for the canvas.
    PasteImage,
    /// An image arrived from the clipboard.
    ImagePasted(Box<inference::imaging::ImageRgb8>),
    /// Use this image as the canvas mask.
    OpenMask(PathBuf),
    /// Grow the canvas by the settings' outpaint pixels on these sides.
    Outpaint {
        left: bool,
        right: bool,
        up: bool,
        down: bool,
    },
}
