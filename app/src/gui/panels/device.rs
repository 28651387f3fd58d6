//! The Device menu: where images are made (the CPU, or a GPU through wgpu or CUDA), a choice
//! that takes effect when Ember starts again, which the menu offers now or once the queue is
//! done.

use egui::RichText;
use inference::device::{DeviceKind, DeviceRow};

use super::Parts;
use crate::gui::action::{Action, DeviceAction};
use crate::gui::device_choice::{chosen, in_words};

pub(super) fn menu(ui: &mut egui::Ui, app: &mut Parts<'_>, actions: &mut Vec<Action>) {
    ui.set_max_width(480.0);
    let choice = app.device_choice;
    if !choice.listing_started() {
        actions.push(Action::Device(DeviceAction::List));
    }
    if !app.device.short.is_empty() {
        ui.label(RichText::new(&app.device.short).strong())
            .on_hover_text(&app.device.detail);
        ui.separator();
    }
    ui.label("Make images on:");
    let mut selected = chosen(&app.settings.device);
    let before = selected;
    ui.radio_value(&mut selected, DeviceKind::Auto, "Automatic")
        .on_hover_text(
            "The GPU the window draws with when it is a real one (Vulkan, Metal, DirectX 12), \
             otherwise the CPU",
        );
    match choice.rows() {
        None => {
            ui.horizontal(|ui| {
                ui.spinner();
                ui.label("Looking for GPUs…");
            });
        }
        Some(rows) => {
            for row in rows {
                device_row(ui, &mut selected, row);
            }
            // A saved choice the machine no longer shows (a GPU taken out; `wgpu` by hand).
            let listed = rows.iter().any(|row| row.kind == Some(before));
            if before != DeviceKind::Auto && !listed {
                ui.radio_value(&mut selected, before, format!("{before} (not found now)"));
            }
        }
    }
    if selected != before {
        app.settings.device = selected.to_string();
    }
    if let Some(why) = &choice.overridden {
        ui.label(
            RichText::new(format!(
                "{why}; starting again from this menu uses the choice above."
            ))
            .weak(),
        );
    }
    if choice.needs_start_again(&app.settings.device) {
        ui.separator();
        start_again(ui, app, actions);
    }
}

/// One device as a choice, or a backend without devices as a line saying why.
fn device_row(ui: &mut egui::Ui, selected: &mut DeviceKind, row: &DeviceRow) {
    match row.kind {
        Some(DeviceKind::Cpu) => {
            ui.radio_value(selected, DeviceKind::Cpu, "CPU")
                .on_hover_text(format!(
                    "{} (slower than a GPU, always works)",
                    row.description
                ));
        }
        Some(kind) => {
            ui.radio_value(
                selected,
                kind,
                format!("{} · {}", row.description, row.name),
            );
        }
        None => {
            ui.label(RichText::new(format!("{}: {}", row.name, row.description)).weak());
        }
    }
}

/// Starting again on the chosen device: now, or once the images queued are made.
fn start_again(ui: &mut egui::Ui, app: &Parts<'_>, actions: &mut Vec<Action>) {
    let device = in_words(chosen(&app.settings.device));
    if app.device_choice.when_idle {
        ui.label(format!(
            "Ember starts again on {device} once the queue is done."
        ));
        if ui.button("Don't start again").clicked() {
            actions.push(Action::Device(DeviceAction::StayOpen));
        }
        return;
    }
    ui.label(
        "The new device is used when Ember starts again: settings and saved images are \
         kept, and the model loads again.",
    );
    let session = app.session;
    let waiting = session.queue.len() + usize::from(session.running.is_some());
    // After the worker stopped the queue cannot run here: it waits for the new process.
    if waiting > 0
        && session.stopped.is_none()
        && ui
            .button("Start again when the queue is done")
            .on_hover_text(format!(
                "{waiting} image job(s) to make first on the current device"
            ))
            .clicked()
    {
        actions.push(Action::Device(DeviceAction::StartAgain { when_idle: true }));
    }
    let now = ui.button("Start again now");
    let now = if waiting > 0 {
        now.on_hover_text("The queue is kept: the image being made starts over on the new device")
    } else {
        now
    };
    if now.clicked() {
        actions.push(Action::Device(DeviceAction::StartAgain {
            when_idle: false,
        }));
    }
}
