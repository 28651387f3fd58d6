"""Control-map cases for Ember's ControlNet preprocessors and resize modes.

Re-states, step by step, what A1111's sd-webui-controlnet extension does to a control
image (preprocessor at its resolution via its resize-with-pad, then its detected-map fit to
the generation size: Just Resize / Crop and Resize / Resize and Fill, with its
high-quality resize of flat and black-and-white maps), using OpenCV for every primitive the
extension takes from OpenCV. Inputs are drawn here (no reference-tree file), so the cases
hold whatever tree the tests are given.

Run (needs only numpy + opencv-python-headless; CI never runs it, it reads the output):
    python3 -m venv /tmp/cvenv && /tmp/cvenv/bin/pip install numpy opencv-python-headless
    /tmp/cvenv/bin/python tests/extra/make_control_maps.py
Writes tests/extra/control/: inputs and expected maps as PNG, and cases.json.
"""

import json
import os

import cv2
import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "control")


def inputs():
    rng = np.random.default_rng(7)
    h, w = 48, 64
    y, x = np.mgrid[0:h, 0:w]
    photo = np.stack([x * 4, y * 5, (x + y) * 2], axis=2).astype(np.float32)
    cv2.circle(photo, (40, 20), 12, (250, 40, 90), -1)
    cv2.rectangle(photo, (6, 28), (26, 44), (20, 200, 60), -1)
    photo += rng.normal(0, 6, photo.shape)
    photo = photo.clip(0, 255).astype(np.uint8)
    lines = np.full((40, 56, 3), 255, np.uint8)
    cv2.line(lines, (4, 4), (50, 30), (0, 0, 0), 2)
    cv2.circle(lines, (20, 26), 9, (0, 0, 0), 1)
    segments = np.zeros((30, 45, 3), np.uint8)
    for i, colour in enumerate([(120, 20, 200), (10, 230, 40), (250, 250, 0), (0, 80, 160)]):
        segments[:, i * 11:(i + 1) * 11 + 1] = colour
    return {"photo": photo, "lines": lines, "segments": segments}


def resize_with_pad(img, resolution):
    """The short side to `resolution` (cubic up, area down), edges repeated to 64s."""
    h, w = img.shape[:2]
    k = resolution / min(h, w)
    th, tw = int(np.round(h * k)), int(np.round(w * k))
    img = cv2.resize(img, (tw, th), interpolation=cv2.INTER_CUBIC if k > 1 else cv2.INTER_AREA)
    ph, pw = int(np.ceil(th / 64) * 64 - th), int(np.ceil(tw / 64) * 64 - tw)
    padded = np.pad(img, [[0, ph], [0, pw], [0, 0]], mode="edge")
    return padded, (lambda out: out[:th, :tw])


def as3(gray):
    return np.stack([gray] * 3, axis=2)


def preprocess(img, module, a, b, resolution):
    if module == "none":
        return img
    if module == "invert":
        return 255 - img
    padded, unpad = resize_with_pad(img, resolution)
    if module == "canny":
        out = as3(cv2.Canny(padded, a, b))
    elif module == "threshold":
        out = np.zeros_like(padded)
        out[np.min(padded, axis=2) > a] = 255
    elif module == "scribble_xdog":
        f = padded.astype(np.float32)
        fine, coarse = cv2.GaussianBlur(f, (0, 0), 0.5), cv2.GaussianBlur(f, (0, 0), 5.0)
        dog = (255 - np.min(coarse - fine, axis=2)).clip(0, 255).astype(np.uint8)
        out = np.zeros_like(padded)
        out[2 * (255 - dog) > a] = 255  # uint8 arithmetic wraps, as in the extension
    else:
        raise ValueError(module)
    return unpad(out)


# Thinning kernels (1 set, -1 clear, 0 either) and their four rotations, rotation-major.
THIN = [[[-1, -1, -1], [0, 1, 0], [1, 1, 1]], [[0, -1, -1], [1, 1, -1], [0, 1, 0]]]
PRUNE = [[[-1, -1, -1], [-1, 1, -1], [0, 0, -1]], [[-1, -1, -1], [-1, 1, -1], [-1, 0, 0]]]


def rotations(raw):
    return [np.rot90(np.array(k, np.int32), r, axes=(0, 1)) for r in range(4) for k in raw]


def thin_pass(x, kernels):
    changed = False
    for k in kernels:
        hits = cv2.morphologyEx(x, cv2.MORPH_HITMISS, k) > 127
        if hits.any():
            x[hits] = 0
            changed = True
    return changed


def thin(x, prune):
    for _ in range(32):
        if not thin_pass(x, rotations(THIN)):
            break
    if prune:
        thin_pass(x, rotations(PRUNE))
    return x


def line_peaks(x):
    """Keeps a value where it is the maximum along some line of three (else 0)."""
    out = np.zeros_like(x)
    for k in ([[0, 0, 0], [1, 1, 1], [0, 0, 0]], [[0, 1, 0], [0, 1, 0], [0, 1, 0]],
              [[1, 0, 0], [0, 1, 0], [0, 0, 1]], [[0, 0, 1], [0, 1, 0], [1, 0, 0]]):
        keep = cv2.dilate(x, np.array(k, np.uint8)) == x
        out[keep] = x[keep]
    return out


def quality_resize(x, size):
    w, h = size
    if x.shape[0] == h and x.shape[1] == w:
        return x
    smaller, bigger = w * h < x.shape[0] * x.shape[1], w * h > x.shape[0] * x.shape[1]
    colours = len(np.unique(x.reshape(-1, 3), axis=0))
    binary = colours == 2 and x.min() < 16 and x.max() > 240
    one_pixel = False
    if binary:
        opened = cv2.dilate(cv2.erode(x, np.ones((3, 3), np.uint8)), np.ones((3, 3), np.uint8))
        one_pixel = (opened < x).sum() * 2 > (x > 127).sum()
    if 2 < colours < 200:
        how = cv2.INTER_NEAREST
    elif smaller:
        how = cv2.INTER_AREA
    else:
        how = cv2.INTER_CUBIC
    y = cv2.resize(x, size, interpolation=how)
    if binary:
        y = np.mean(y.astype(np.float32), axis=2).clip(0, 255).astype(np.uint8)
        if one_pixel:
            y = line_peaks(y)
            _, y = cv2.threshold(y, 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)
            y = thin(y, bigger)
        else:
            _, y = cv2.threshold(y, 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)
        y = as3(y)
    return y


def fit(m, mode, w, h):
    if mode == "resize":
        return quality_resize(m, (w, h))
    oh, ow = m.shape[:2]
    k = (min if mode == "fill" else max)(h / oh, w / ow)
    size = (int(np.round(ow * k)), int(np.round(oh * k)))
    if mode == "fill":
        border = np.concatenate([m[0], m[-1], m[:, 0], m[:, -1]], axis=0)
        out = np.tile(np.median(border, axis=0).astype(np.uint8)[None, None], [h, w, 1])
        m = quality_resize(m, size)
        nh, nw = m.shape[:2]
        ph, pw = max(0, (h - nh) // 2), max(0, (w - nw) // 2)
        out[ph:ph + nh, pw:pw + nw] = m
        return out
    m = quality_resize(m, size)
    nh, nw = m.shape[:2]
    ph, pw = max(0, (nh - h) // 2), max(0, (nw - w) // 2)
    return m[ph:ph + h, pw:pw + w]


def pixel_perfect(img, w, h, mode):
    rh, rw = img.shape[:2]
    k = (min if mode == "fill" else max)(h / rh, w / rw)
    return int(np.round(k * min(rh, rw)))


CASES = [
    # (input, module, threshold a, b, resolution or "pp", resize mode, width, height)
    ("photo", "canny", 100, 200, 96, "crop", 40, 40),
    ("photo", "canny", 50, 150, 512, "resize", 24, 40),
    ("photo", "canny", 80, 160, "pp", "fill", 48, 24),
    ("photo", "canny", 100, 200, 40, "crop", 96, 72),
    ("photo", "threshold", 127, 0.5, 80, "fill", 40, 56),
    ("photo", "threshold", 90, 0.5, 64, "resize", 128, 96),
    ("lines", "scribble_xdog", 32, 0.5, 72, "crop", 48, 48),
    ("lines", "invert", 0.5, 0.5, 512, "resize", 32, 24),
    ("lines", "invert", 0.5, 0.5, 512, "crop", 112, 80),
    ("photo", "none", 0.5, 0.5, 512, "crop", 32, 32),
    ("photo", "none", 0.5, 0.5, 512, "fill", 96, 96),
    ("segments", "none", 0.5, 0.5, 512, "resize", 64, 40),
    ("segments", "none", 0.5, 0.5, 512, "fill", 40, 48),
    # Whole-number shrinking factors (OpenCV's fast area path): 2x and 4x.
    ("photo", "none", 0.5, 0.5, 512, "resize", 32, 24),
    ("photo", "none", 0.5, 0.5, 512, "resize", 16, 12),
    ("photo", "threshold", 100, 0.5, 24, "resize", 24, 32),
]


def main():
    os.makedirs(OUT, exist_ok=True)
    images = inputs()
    for name, img in images.items():
        cv2.imwrite(os.path.join(OUT, f"{name}.png"), img[:, :, ::-1])
    cases = []
    for i, (name, module, a, b, res, mode, w, h) in enumerate(CASES):
        img = images[name]
        resolution = pixel_perfect(img, w, h, mode) if res == "pp" else res
        out = fit(preprocess(img, module, a, b, resolution), mode, w, h)
        assert out.shape == (h, w, 3), (i, out.shape)
        file = f"case{i:02d}.png"
        cv2.imwrite(os.path.join(OUT, file), out[:, :, ::-1])
        cases.append(dict(input=f"{name}.png", module=module, threshold_a=a, threshold_b=b,
                          resolution=512 if res == "pp" else res, pixel_perfect=res == "pp",
                          pixel_perfect_resolution=resolution, resize=mode, width=w,
                          height=h, expected=file))
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump({"opencv": cv2.__version__, "numpy": np.__version__, "cases": cases}, f,
                  indent=1)


if __name__ == "__main__":
    main()
