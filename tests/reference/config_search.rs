//! Single files of a non-standard size (every reference checkpoint is tiny): the config
//! folder beside the file is found and used, a file alone gets `NeedsConfig` with what to
//! do, and `inspect` says which of the two a models list will meet.

use std::path::Path;

use burn::tensor::Device;
use ember_tests::reference;
use inference::Error;
use inference::device::Precision;
use inference::weights::inspect::inspect;
use inference::weights::{LoadOptions, load};

fn options() -> LoadOptions {
    LoadOptions::new(Device::flex(), Precision::F32)
}

/// Copies a folder tree.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn a_file_alone_needs_its_config_and_one_beside_it_is_found() {
    for (family, file, folder) in [
        ("sd15", "checkpoint.safetensors", "pipeline"),
        ("sdxl", "refiner_checkpoint.safetensors", "refiner"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let alone = dir.path().join("alone").join(file);
        std::fs::create_dir_all(alone.parent().unwrap()).unwrap();
        std::fs::copy(reference(&format!("{family}/{file}")), &alone).unwrap();
        let info = inspect(&alone).unwrap();
        assert!(
            info.family.contains("needs its config folder"),
            "{family}: {}",
            info.family
        );
        match load(&alone, &options()) {
            Err(e @ Error::NeedsConfig { .. }) => {
                let text = e.to_string();
                assert!(
                    text.contains("Choose its config folder") && text.contains("--config"),
                    "{text}"
                );
            }
            other => panic!("{family}: expected NeedsConfig, got {:?}", other.err()),
        }

        // Beside the family's own folder (and, for SDXL, the base folder too, which must
        // not be taken for the refiner's).
        let models = dir.path().join("models");
        std::fs::create_dir_all(&models).unwrap();
        let beside = models.join(file);
        std::fs::copy(&alone, &beside).unwrap();
        for sibling in ["pipeline", folder] {
            copy_tree(
                &reference(&format!("{family}/{sibling}")),
                &models.join(sibling),
            );
        }
        let info = inspect(&beside).unwrap();
        assert!(
            info.family.contains("config folder beside it"),
            "{family}: {}",
            info.family
        );
        let model = load(&beside, &options()).unwrap_or_else(|e| panic!("{family}: {e}"));
        let notes = model.info.report.notes().join("\n");
        assert!(
            notes.contains(&models.join(folder).display().to_string()),
            "{family}: the report names the folder used: {notes}"
        );
    }
}
