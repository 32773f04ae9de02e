"""``tracker data synth``: a small realistic image dataset, written to disk, nothing downloaded.

Each image is a JPEG of a textured background (a colour gradient with noise) holding one to
three objects (filled ellipses and rectangles with an outline); for classification the class
decides the shape and colour of its single object, for detection every object is annotated
with its box and class in COCO JSON (``annotations.json``) and Pascal VOC XML.
"""

from __future__ import annotations

import contextlib
import json
import random
from pathlib import Path
from typing import Any

from tracker.errors import ConfigError, OptionError, os_reason

CLASSES = ("circle", "square", "triangle")
MIN_SIZE_PX = 32
MAX_SIZE_PX = 4096  # a side this long is 48 MiB an image in memory; a larger one would exhaust it
#: The most images synth writes: its names have five digits (00000.jpg to 99999.jpg), and 100,000 at
#: the default 160 px take about an hour to draw here (since 0.9.6: --images 1000000000 was taken)
MAX_IMAGES = 100_000
#: What synth writes: COCO JSON and VOC XML boxes, or one class folder per shape.
KINDS = ("detection", "classification")
COLOURS = {"circle": (200, 40, 40), "square": (40, 160, 60), "triangle": (40, 70, 200)}


def _background(rng: random.Random, size: int) -> Any:
    from PIL import Image, ImageFilter

    top = tuple(rng.randrange(60, 200) for _ in range(3))
    bottom = tuple(rng.randrange(60, 200) for _ in range(3))
    img = Image.new("RGB", (size, size))
    px = img.load()
    for y in range(size):
        t = y / max(1, size - 1)
        row = tuple(int(a + (b - a) * t) for a, b in zip(top, bottom))
        for x in range(size):
            n = rng.randrange(-12, 13)
            px[x, y] = tuple(max(0, min(255, c + n)) for c in row)
    return img.filter(ImageFilter.GaussianBlur(0.6))


def _draw(draw: Any, cls: str, box: tuple[int, int, int, int]) -> None:
    x0, y0, x1, y1 = box
    colour, outline = COLOURS[cls], (20, 20, 20)
    if cls == "circle":
        draw.ellipse(box, fill=colour, outline=outline, width=2)
    elif cls == "square":
        draw.rectangle(box, fill=colour, outline=outline, width=2)
    else:
        draw.polygon([((x0 + x1) // 2, y0), (x1, y1), (x0, y1)], fill=colour, outline=outline)


def _box(rng: random.Random, size: int) -> tuple[int, int, int, int]:
    w = rng.randrange(size // 6, size // 2)
    h = max(8, min(size - 2, int(w * rng.uniform(0.7, 1.3))))
    x0, y0 = rng.randrange(0, size - w), rng.randrange(0, size - h)
    return x0, y0, x0 + w, y0 + h


#: What synth writes in its folder, by kind: nothing else may be there.
LAYOUT = {"classification": set(CLASSES), "detection": {"images", "Annotations", "annotations.json"}}


def _clear(folder: Path, kind: str, images: int) -> None:
    """Make ``folder`` ready for ``images`` of ``kind``: a folder holding anything synth does not
    write there (another kind's dataset, files of one's own) is refused, and the images and
    annotations a larger synth left there before are removed. Until 0.9.3 they stayed: a VOC
    reader saw the old count, a COCO reader the new; a classification folder kept them all."""
    import re

    try:
        entries = list(folder.iterdir()) if folder.exists() else []
    except OSError as exc:
        raise ConfigError(f"cannot write a dataset in {folder}: {os_reason(exc)}") from None
    foreign = sorted(e.name for e in entries if e.name not in LAYOUT[kind] or (e.name != "annotations.json") != e.is_dir())
    # ASCII digits alone: \d takes ٠٠٠٩٩, and a user's ٠٠٠٩٩.jpg was taken for synth's own and deleted until 0.9.14
    own = re.compile(r"([0-9]{5})\.(jpg|xml)")
    stale = []
    for sub in (e for e in entries if e.is_dir() and e.name in LAYOUT[kind]):
        for f in sub.iterdir():
            match = own.fullmatch(f.name)
            if match is None or not f.is_file():
                foreign.append(f"{sub.name}/{f.name}")
            elif int(match.group(1)) >= images:
                stale.append(f)
    if foreign:
        raise ConfigError(f"{folder} holds what `data synth --kind {kind}` does not write ({', '.join(foreign[:3])}"
                          f"{', ...' if len(foreign) > 3 else ''}): give a new or empty folder")
    for f in stale:
        f.unlink()
    if kind == "detection":  # written last, of the dataset before: gone while the images are written anew, so
        with contextlib.suppress(FileNotFoundError):  # an interrupted synth leaves none (until 0.9.6 it stayed)
            (folder / "annotations.json").unlink()
    for cls in CLASSES[images:] if kind == "classification" else ():  # a class left with no image: an
        with contextlib.suppress(OSError):  # ImageFolder reader refuses an empty class folder
            (folder / cls).rmdir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot write a dataset in {folder}: {os_reason(exc)}") from None


def synth(folder: Path, kind: str, images: int, size: int = 160, seed: int = 0) -> dict[str, Any]:
    """Write ``images`` JPEGs (and annotations) under ``folder``; returns what was written."""
    from PIL import ImageDraw

    # the command's options: usage errors, status 2 (1 until 0.9.8)
    if kind not in KINDS:
        raise OptionError(f"--kind must be {' or '.join(KINDS)}, got {kind!r}")
    if not 1 <= images <= MAX_IMAGES:
        raise OptionError(f"--images must be from 1 to {MAX_IMAGES:,}, got {images}")
    if not MIN_SIZE_PX <= size <= MAX_SIZE_PX:
        raise OptionError(f"--size must be from {MIN_SIZE_PX} to {MAX_SIZE_PX} pixels, got {size}")
    rng = random.Random(seed)
    _clear(folder, kind, images)
    # Ctrl-C (or SIGTERM) mid-way: the files of the image being written are removed, and the exception
    # says how many were written whole (``written``), so that the command says so (until 0.9.6 it said
    # "what was logged before is kept": nothing is logged, and the folder was left incomplete unsaid)
    writing: list[Path] = []
    written = 0
    try:
        if kind == "classification":
            for i in range(images):
                cls = CLASSES[i % len(CLASSES)]
                img = _background(rng, size)
                _draw(ImageDraw.Draw(img), cls, _box(rng, size))
                (folder / cls).mkdir(exist_ok=True)
                writing = [folder / cls / f"{i:05d}.jpg"]
                img.save(writing[0], quality=90)
                writing, written = [], i + 1
            return {"path": str(folder), "kind": kind, "format": "imagefolder", "images": images,
                    "classes": list(CLASSES[:images])}  # those that have a folder (all three until 0.9.3)

        (folder / "images").mkdir(exist_ok=True)
        (folder / "Annotations").mkdir(exist_ok=True)
        coco: dict[str, Any] = {"images": [], "annotations": [],
                                "categories": [{"id": i + 1, "name": c} for i, c in enumerate(CLASSES)]}
        boxes_total = 0
        for i in range(images):
            img = _background(rng, size)
            draw = ImageDraw.Draw(img)
            name = f"{i:05d}.jpg"
            objects = []
            for _ in range(rng.randint(1, 3)):
                cls, box = rng.choice(CLASSES), _box(rng, size)
                _draw(draw, cls, box)
                objects.append((cls, box))
                coco["annotations"].append({"id": len(coco["annotations"]) + 1, "image_id": i + 1,
                                            "category_id": CLASSES.index(cls) + 1, "iscrowd": 0,
                                            "bbox": [box[0], box[1], box[2] - box[0], box[3] - box[1]],
                                            "area": (box[2] - box[0]) * (box[3] - box[1])})
            boxes_total += len(objects)
            writing = [folder / "images" / name, folder / "Annotations" / f"{i:05d}.xml"]
            img.save(writing[0], quality=90)
            coco["images"].append({"id": i + 1, "file_name": name, "width": size, "height": size})
            writing[1].write_text(_voc_xml(name, size, objects))
            writing, written = [], i + 1
        (folder / "annotations.json").write_text(json.dumps(coco))
        return {"path": str(folder), "kind": kind, "format": "coco", "images": images, "boxes": boxes_total,
                "classes": list(CLASSES)}
    except KeyboardInterrupt as exc:
        for f in writing:
            with contextlib.suppress(OSError):
                f.unlink()
        exc.written = written  # type: ignore[attr-defined]
        raise


def _voc_xml(name: str, size: int, objects: list[tuple[str, tuple[int, int, int, int]]]) -> str:
    objs = "".join(
        f"<object><name>{c}</name><difficult>0</difficult><bndbox><xmin>{b[0]}</xmin><ymin>{b[1]}</ymin>"
        f"<xmax>{b[2]}</xmax><ymax>{b[3]}</ymax></bndbox></object>" for c, b in objects)
    return (f"<annotation><folder>images</folder><filename>{name}</filename><size><width>{size}</width>"
            f"<height>{size}</height><depth>3</depth></size>{objs}</annotation>\n")
