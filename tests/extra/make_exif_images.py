"""JPEG, WebP and PNG files carrying generation settings in EXIF, written the way the tools
that make them write them, for the tests of Ember's image-metadata reader (and writer):

* a1111.jpg, a1111.webp: A1111's `save_image_with_geninfo` (modules/images.py): Pillow saves
  the image, then `piexif.insert` adds an EXIF whose UserComment is
  `piexif.helper.UserComment.dump(geninfo, encoding="unicode")` ("UNICODE\\0" and UTF-16
  big-endian); Forge and SD.Next keep that code;
* utf16le.jpg: the same UserComment in the other byte order (UTF-16 little-endian under the
  "UNICODE\\0" prefix, in piexif's big-endian TIFF), as some tools write it;
* fooocus.jpg: Fooocus' `get_exif` (modules/meta_parser.py): its JSON as the UserComment, a
  `str` that Pillow writes as an ASCII value in IFD0 with no character-code prefix, Software
  and MakerNote beside it; fooocus_bytes.jpg: its forks' `metadata.encode('utf-8')`, which
  Pillow writes as BYTE;
* camera.jpg: a camera's own comment ("ASCII\\0\\0\\0" and a picture name), not settings;
* comfyui.webp: ComfyUI's SaveAnimatedWEBP (comfy_extras/nodes_images.py): the API graph as
  the IFD0 Model string `prompt:{...}` and each extra_pnginfo entry (the UI workflow) as
  `workflow:{...}` counting down from the Make tag;
* exif.png: Pillow's `save(..., exif=...)` of a PNG (an eXIf chunk), A1111's UserComment;
* plain.jpg: no metadata at all.

expected.json names, for each file, the text entries a reader must find (key, text), and
the UserComment bytes piexif makes of A1111's text (hex), which Ember's writer must equal.
Needs Pillow and piexif; CI only reads the files.

    python3 tests/extra/make_exif_images.py
"""
import json
import os

import piexif
import piexif.helper
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "exif")

# Non-ASCII on purpose: UTF-16 surrogate pairs (the clef) and accents must come back whole.
A1111_TEXT = (
    "a café at night, (neon:1.2), 𝄞 music\n"
    "Negative prompt: lowres, bad hands\n"
    "Steps: 12, Sampler: DPM++ 2M, Schedule type: Karras, CFG scale: 6.5, Seed: 1234, "
    "Size: 64x48, Model hash: 6ce0161689, Model: tiny, RNG: NV, Version: v1.10.1"
)
FOOOCUS = {
    "prompt": "a lighthouse in a storm",
    "negative_prompt": "blurry",
    "steps": 30,
    "guidance_scale": 4.0,
    "seed": "987654321",
    "resolution": "(1152, 896)",
    "sampler": "dpmpp_2m_sde_gpu",
    "scheduler": "karras",
    "base_model": "juggernautXL_v8Rundiffusion",
    "version": "Fooocus v2.5.5",
}
COMFY_PROMPT = {
    "3": {"class_type": "KSampler", "inputs": {
        "seed": 77, "steps": 9, "cfg": 5.5, "sampler_name": "dpmpp_2m", "scheduler": "karras",
        "denoise": 1.0, "model": ["4", 0], "positive": ["6", 0], "negative": ["7", 0],
        "latent_image": ["5", 0]}},
    "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "tiny.safetensors"}},
    "5": {"class_type": "EmptyLatentImage",
          "inputs": {"width": 64, "height": 48, "batch_size": 1}},
    "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "a red fox in snow", "clip": ["4", 1]}},
    "7": {"class_type": "CLIPTextEncode", "inputs": {"text": "watermark", "clip": ["4", 1]}},
}
COMFY_WORKFLOW = {"last_node_id": 7, "nodes": [{"id": 3, "type": "KSampler"}], "version": 0.4}


def picture():
    """A small image with some structure, so the lossy encoders have something to keep."""
    img = Image.new("RGB", (64, 48))
    img.putdata([(x * 4, y * 5, (x + y) * 2) for y in range(48) for x in range(64)])
    return img


def a1111_user_comment(text):
    return piexif.helper.UserComment.dump(text, encoding="unicode")


def save_a1111(path, image_format):
    """modules/images.py `save_image_with_geninfo` for .jpg/.jpeg/.webp (its defaults:
    jpeg_quality 80, webp_lossless off)."""
    picture().save(path, format=image_format, quality=80, lossless=False)
    exif_bytes = piexif.dump({"Exif": {piexif.ExifIFD.UserComment: a1111_user_comment(A1111_TEXT)}})
    piexif.insert(exif_bytes, path)


def main():
    os.makedirs(OUT, exist_ok=True)
    expected = {}

    save_a1111(os.path.join(OUT, "a1111.jpg"), "JPEG")
    expected["a1111.jpg"] = [["parameters", A1111_TEXT]]
    save_a1111(os.path.join(OUT, "a1111.webp"), "WEBP")
    expected["a1111.webp"] = [["parameters", A1111_TEXT]]

    path = os.path.join(OUT, "utf16le.jpg")
    picture().save(path, format="JPEG", quality=80)
    comment = b"UNICODE\0" + A1111_TEXT.encode("utf-16-le")
    piexif.insert(piexif.dump({"Exif": {piexif.ExifIFD.UserComment: comment}}), path)
    expected["utf16le.jpg"] = [["parameters", A1111_TEXT]]

    # Fooocus: `log()` saves with `exif=get_exif(parsed_parameters, metadata_scheme.value)`.
    metadata = json.dumps(FOOOCUS)
    for name, as_written in [("fooocus.jpg", str), ("fooocus_bytes.jpg", str.encode)]:
        exif = Image.Exif()
        exif[0x9286] = as_written(metadata)
        exif[0x0131] = "Fooocus v2.5.5"
        exif[0x927C] = as_written("fooocus")
        picture().save(os.path.join(OUT, name), format="JPEG", quality=95, exif=exif)
        expected[name] = [["parameters", metadata]]

    path = os.path.join(OUT, "camera.jpg")
    picture().save(path, format="JPEG", quality=80)
    comment = b"ASCII\0\0\0" + b"Picture 1" + b" " * 20
    piexif.insert(piexif.dump({"0th": {piexif.ImageIFD.Make: b"Camera Co"},
                               "Exif": {piexif.ExifIFD.UserComment: comment}}), path)
    expected["camera.jpg"] = []

    image = picture()
    exif = image.getexif()
    exif[0x0110] = "prompt:{}".format(json.dumps(COMFY_PROMPT))
    initial_exif = 0x010F
    for key, value in {"workflow": COMFY_WORKFLOW}.items():
        exif[initial_exif] = "{}:{}".format(key, json.dumps(value))
        initial_exif -= 1
    image.save(os.path.join(OUT, "comfyui.webp"), save_all=True, duration=100, append_images=[],
               exif=exif, lossless=False, quality=80, method=4)
    expected["comfyui.webp"] = [["prompt", json.dumps(COMFY_PROMPT)],
                                ["workflow", json.dumps(COMFY_WORKFLOW)]]

    exif_bytes = piexif.dump({"Exif": {piexif.ExifIFD.UserComment: a1111_user_comment(A1111_TEXT)}})
    picture().save(os.path.join(OUT, "exif.png"), format="PNG", exif=exif_bytes)
    expected["exif.png"] = [["parameters", A1111_TEXT]]

    picture().save(os.path.join(OUT, "plain.jpg"), format="JPEG", quality=80)
    expected["plain.jpg"] = []

    with open(os.path.join(OUT, "expected.json"), "w", encoding="utf-8") as f:
        json.dump({
            "files": expected,
            "a1111_text": A1111_TEXT,
            "a1111_user_comment_hex": a1111_user_comment(A1111_TEXT).hex(),
        }, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
