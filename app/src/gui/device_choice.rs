//! The Device menu's state: the device the engine runs on from the next start (a setting,
//! applied by starting Ember again), the devices this machine has (listed once, off the UI
//! thread: Vulkan and CUDA take a while to answer), and a start-again the user asked for.

use std::sync::Arc;

use crossbeam_channel::Receiver;
use inference::device::{DeviceKind, DeviceRow};

/// Lists the devices (`inference::device::list_devices`; tests give their own).
pub type Lister = Arc<dyn Fn() -> Vec<DeviceRow> + Send + Sync>;

/// Where the engine runs and where the user wants it to run.
pub struct DeviceChoice {
    /// The device this process's engine was asked for (`auto` unless chosen).
    pub running: DeviceKind,
    /// Why this start runs on a device the menu did not choose (`EMBER_DEVICE` decides over
    /// it), as the start of a sentence.
    pub overridden: Option<String>,
    listing: Listing,
    lister: Lister,
    /// Start again once no image is being made or waits its turn.
    pub when_idle: bool,
    /// Start again as soon as the images being saved are written (one may come back unsaved,
    /// and is then kept with the queue).
    pub once_saved: bool,
    /// Ember closes now to start again (the window then closes; see `gui::run`).
    pub start_now: bool,
}

enum Listing {
    NotYet,
    Waiting(Receiver<Vec<DeviceRow>>),
    Listed(Vec<DeviceRow>),
}

impl Default for DeviceChoice {
    fn default() -> Self {
        Self {
            running: DeviceKind::Auto,
            overridden: None,
            listing: Listing::NotYet,
            lister: Arc::new(inference::device::list_devices),
            when_idle: false,
            once_saved: false,
            start_now: false,
        }
    }
}

/// A device in the words of the app's messages: "the CPU", "wgpu:1".
pub fn in_words(kind: DeviceKind) -> String {
    match kind {
        DeviceKind::Auto => "the automatically chosen device".into(),
        DeviceKind::Cpu => "the CPU".into(),
        other => other.to_string(),
    }
}

/// The device a saved choice names: `auto` for none, or a name this version does not know.
pub fn chosen(setting: &str) -> DeviceKind {
    DeviceKind::parse(setting).unwrap_or(DeviceKind::Auto)
}

impl DeviceChoice {
    /// Lists the devices with `lister` instead of asking the drivers.
    pub fn set_lister(&mut self, lister: Lister) {
        self.lister = lister;
        self.listing = Listing::NotYet;
    }

    /// Starts listing the devices, once; `wake` is called when the list is ready.
    pub fn list(&mut self, wake: impl Fn() + Send + 'static) {
        if !matches!(self.listing, Listing::NotYet) {
            return;
        }
        let (send, receive) = crossbeam_channel::bounded(1);
        let lister = self.lister.clone();
        let spawned = std::thread::Builder::new()
            .name("devices".into())
            .spawn(move || {
                let _ = send.send(lister());
                wake();
            });
        self.listing = match spawned {
            Ok(_) => Listing::Waiting(receive),
            Err(e) => Listing::Listed(vec![DeviceRow {
                name: "?".into(),
                description: format!("could not look for devices: {e}"),
                kind: None,
            }]),
        };
    }

    /// Takes in the list once it is ready (each frame).
    pub fn poll(&mut self) {
        if let Listing::Waiting(receive) = &self.listing
            && let Ok(rows) = receive.try_recv()
        {
            self.listing = Listing::Listed(rows);
        }
    }

    /// The devices, once listed.
    pub fn rows(&self) -> Option<&[DeviceRow]> {
        match &self.listing {
            Listing::Listed(rows) => Some(rows),
            _ => None,
        }
    }

    /// Whether the list was asked for.
    pub fn listing_started(&self) -> bool {
        !matches!(self.listing, Listing::NotYet)
    }

    /// Whether the saved choice `setting` differs from the device this process runs on, so
    /// Ember must start again for it to take effect.
    pub fn needs_start_again(&self, setting: &str) -> bool {
        chosen(setting) != self.running
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_choice_needs_a_start_again_only_when_it_differs_from_the_running_device() {
        let choice = DeviceChoice {
            running: DeviceKind::WgpuAdapter(1),
            ..Default::default()
        };
        assert!(!choice.needs_start_again("wgpu:1"));
        assert!(choice.needs_start_again("cpu"));
        assert!(choice.needs_start_again("auto"));
        // An unknown (newer) name reads as auto, as the engine reads it.
        assert_eq!(chosen("tpu:3"), DeviceKind::Auto);
        assert_eq!(chosen(""), DeviceKind::Auto);
    }

    #[test]
    fn the_list_is_made_once_off_the_ui_thread() {
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut choice = DeviceChoice::default();
        let counted = calls.clone();
        choice.set_lister(Arc::new(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            vec![DeviceRow {
                name: "cpu".into(),
                description: "the CPU".into(),
                kind: Some(DeviceKind::Cpu),
            }]
        }));
        assert!(choice.rows().is_none() && !choice.listing_started());
        let (woke, wait) = crossbeam_channel::bounded(1);
        choice.list(move || {
            let _ = woke.send(());
        });
        choice.list(|| {});
        wait.recv_timeout(std::time::Duration::from_secs(10))
            .unwrap();
        choice.poll();
        assert_eq!(choice.rows().unwrap()[0].name, "cpu");
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
