//! The Canny preprocessor against OpenCV (`sd15/controlnet/canny_cases.*`): the Sobel
//! derivatives and every edge map exactly.

use ember_tests::{Fixtures, json, reference};
use inference::control::canny::{canny, sobel};
use inference::imaging::load_rgb;

#[test]
fn canny_matches_opencv_pixel_for_pixel() {
    let cases = json("sd15/controlnet/canny_cases.json");
    let tensors = Fixtures::load("sd15/controlnet/canny_cases.safetensors");
    let image = load_rgb(&reference("sd15/controlnet/canny_input.png"), None).unwrap();
    let shape: Vec<usize> = cases["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect();
    assert_eq!(shape, [image.height as usize, image.width as usize, 3]);
    let input = tensors.get("input_rgb").i64();
    let ours: Vec<i64> = image.pixels.iter().map(|&p| i64::from(p)).collect();
    assert_eq!(ours, input, "the PNG decodes to the recorded input");

    let (dx, dy) = sobel(&image);
    let widen = |v: &[i16]| v.iter().map(|&x| i64::from(x)).collect::<Vec<_>>();
    assert_eq!(widen(&dx), tensors.get("sobel_dx").i64(), "Sobel dx");
    assert_eq!(widen(&dy), tensors.get("sobel_dy").i64(), "Sobel dy");

    for case in cases["cases"].as_array().unwrap() {
        let (low, high) = (
            case["low"].as_f64().unwrap(),
            case["high"].as_f64().unwrap(),
        );
        let edges = canny(&image, low, high);
        let expected = tensors.get(case["tensor"].as_str().unwrap()).i64();
        let ours: Vec<i64> = edges.pixels.iter().map(|&p| i64::from(p)).collect();
        let differing = ours.iter().zip(&expected).filter(|(a, b)| a != b).count();
        assert_eq!(
            differing, 0,
            "Canny {low},{high}: {differing} pixels differ"
        );
        let count = ours.iter().filter(|&&p| p == 255).count() as u64;
        assert_eq!(count, case["n_edge_pixels"].as_u64().unwrap());
    }
}
