//! `--device wgpu:N`: the adapter `ember devices` lists at that number is opened for the
//! engine (as on a machine with several GPUs), once per process, and computes there. Its
//! images are checked in `wgpu_lost`, on a device opened the same way (the window's).

use inference::device::{DeviceKind, tensor_from_vec, tensor_to_vec};

#[test]
fn a_numbered_wgpu_adapter_opens_once_and_computes() {
    let opened = DeviceKind::WgpuAdapter(0)
        .open()
        .unwrap_or_else(|e| panic!("the GPU tests need a wgpu adapter: {e}"));
    assert!(
        opened.gpu && opened.description.ends_with(", wgpu:0)"),
        "{}",
        opened.description
    );
    let again = DeviceKind::WgpuAdapter(0).open().unwrap();
    assert_eq!(again.device, opened.device, "opened once per process");
    let doubled = tensor_from_vec(vec![1.0, -2.5, 3.0], [3], &opened.device) * 2.0;
    assert_eq!(tensor_to_vec(doubled), [2.0, -5.0, 6.0]);
}
