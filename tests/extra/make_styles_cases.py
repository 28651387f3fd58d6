"""Records what A1111's own `modules/styles.py` makes of a few styles.csv files, prompts and
restored prompts, into tests/extra/styles_cases.json (read by app/src/styles/tests.rs).

    python tests/extra/make_styles_cases.py --a1111 PATH/TO/stable-diffusion-webui

Only the standard library is needed; A1111's `modules.errors` is replaced by a stub that
raises, so a file A1111 could not read shows as an error here too. CI never runs this.
"""

import argparse
import json
import os
import sys
import tempfile
import types
from pathlib import Path

# Files as people have them: written by A1111, typed by hand (spaces after the commas,
# quoted fields with commas and line breaks, comment rows, a name twice, a byte-order
# mark or none), and A1111's oldest `name,text` form.
FILES = {
    "written_by_a1111": (
        "\ufeffname,prompt,negative_prompt\r\n"
        "Cinematic,\"cinematic still {prompt}, shallow depth of field, film grain\",\"cartoon, "
        "painting\"\r\n"
        "Masterpiece,\"masterpiece, best quality\",\"worst quality, low quality\"\r\n"
        "Negative only,,\"blurry, jpeg artifacts\"\r\n"
        "Wrapped,\"a painting of {prompt} in the style of (monet:1.2)\",\r\n"
        "\"Quote \"\"inside\"\"\",\"\"\"quoted\"\" words, {prompt}\",\r\n"
        "Line break,\"first line\nsecond line\",\"\"\r\n"
    ),
    "typed_by_hand": (
        "name, prompt, negative_prompt\n"
        "# a comment row, skipped\n"
        "Anime, \"anime artwork {prompt}, vibrant\", \"photo, realistic\"\n"
        "Plain,   sharp focus,  lowres\n"
        "\n"
        "Plain, sharp focus, hdr, lowres\n"
        "Short row, only a prompt\n"
    ),
    "old_name_text": "name,text\nOld,\"old style, {prompt}\"\nOlder,detailed\n",
}

# (file, styles chosen in order, prompt, negative prompt)
APPLY = [
    ("written_by_a1111", ["Cinematic"], "a fox in the snow", "ugly"),
    ("written_by_a1111", ["Masterpiece"], "a fox in the snow", ""),
    ("written_by_a1111", ["Masterpiece"], "  a fox  ", "  ugly "),
    ("written_by_a1111", ["Masterpiece"], "", ""),
    ("written_by_a1111", ["Cinematic", "Masterpiece"], "a fox", "ugly"),
    ("written_by_a1111", ["Masterpiece", "Cinematic"], "a fox", "ugly"),
    ("written_by_a1111", ["Negative only", "Wrapped"], "a fox", "ugly"),
    ("written_by_a1111", ["Quote \"inside\"", "Line break"], "a fox", ""),
    ("typed_by_hand", ["Anime", "Plain"], "a girl, (smile:1.1)", "bad hands"),
    ("old_name_text", ["Old", "Older"], "a house", "fog"),
]

# (file, prompt, negative prompt) as an image's metadata holds them.
EXTRACT = [
    ("written_by_a1111", "a fox, masterpiece, best quality", "ugly, worst quality, low quality"),
    ("written_by_a1111", "masterpiece, best quality", "worst quality, low quality"),
    ("written_by_a1111",
     "cinematic still a fox, shallow depth of field, film grain, masterpiece, best quality",
     "ugly, cartoon, painting, worst quality, low quality"),
    ("written_by_a1111", "cinematic still a fox, shallow depth of field, film grain",
     "something else"),
    ("written_by_a1111", "a fox, masterpiece, best quality", "nothing styled"),
    ("written_by_a1111", "a fox masterpiece, best quality", "worst quality, low quality"),
    ("written_by_a1111", "a painting of a fox in the style of (monet:1.2), masterpiece, best quality",
     "ugly, worst quality, low quality"),
    ("written_by_a1111", "a fox", "ugly, blurry, jpeg artifacts"),
    ("written_by_a1111", "no styles here", "none"),
    ("typed_by_hand", "anime artwork a girl, vibrant, sharp focus, hdr", "bad, photo, realistic, lowres"),
    ("typed_by_hand", "anime artwork a girl, vibrant, sharp focus", "bad, photo, realistic, hdr"),
    ("old_name_text", "old style, a house, detailed", ""),
]


def load_a1111(root):
    """A1111's modules.styles, with a stub for modules.errors."""
    errors = types.ModuleType("modules.errors")

    def report(message, exc_info=False):
        raise RuntimeError(message)

    errors.report = report
    sys.modules["modules.errors"] = errors
    sys.path.insert(0, str(root))
    import modules.styles as styles  # noqa: E402

    return styles


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--a1111", required=True, type=Path)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).with_name("styles_cases.json"))
    args = parser.parse_args()
    styles = load_a1111(args.a1111)
    work = Path(tempfile.mkdtemp())
    books, files = {}, {}
    for name, text in FILES.items():
        path = work / f"{name}.csv"
        path.write_bytes(text.encode("utf-8"))
        db = styles.StyleDatabase([str(path)])
        books[name] = db
        saved = work / f"{name}.saved.csv"
        # A1111 writes every style back to the file it came from: a copy, to see its bytes.
        db_copy = styles.StyleDatabase([str(path)])
        for key, style in list(db_copy.styles.items()):
            db_copy.styles[key] = style._replace(path=str(saved))
        db_copy.default_path = saved
        db_copy.save_styles()
        files[name] = {
            "csv": text,
            "styles": [[s.name, s.prompt or "", s.negative_prompt or ""]
                       for s in db.styles.values()],
            "written": saved.read_bytes().decode("utf-8"),
        }
    apply = []
    for file, chosen, prompt, negative in APPLY:
        db = books[file]
        apply.append({
            "file": file, "styles": chosen, "prompt": prompt, "negative_prompt": negative,
            "made_prompt": db.apply_styles_to_prompt(prompt, chosen),
            "made_negative_prompt": db.apply_negative_styles_to_prompt(negative, chosen),
        })
    extract = []
    for file, prompt, negative in EXTRACT:
        db = books[file]
        found, rest, rest_negative = db.extract_styles_from_prompt(prompt, negative)
        # Whether generating again with what A1111 restored gives the image's prompts back.
        again = (db.apply_styles_to_prompt(rest, found),
                 db.apply_negative_styles_to_prompt(rest_negative, found))
        extract.append({
            "file": file, "prompt": prompt, "negative_prompt": negative,
            "a1111_styles": found, "a1111_prompt": rest, "a1111_negative_prompt": rest_negative,
            "a1111_makes_it_again": again == (prompt.strip(), negative.strip()),
        })
    cases = {"made_by": "tests/extra/make_styles_cases.py with A1111's modules/styles.py",
             "files": files, "apply": apply, "extract": extract}
    args.out.write_text(json.dumps(cases, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
