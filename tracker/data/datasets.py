"""Torch datasets over images on disk, decoded and transformed the usual way.

A file that cannot be decoded, or an annotation that is broken, never becomes a silent
wrong number: the item comes back as a ``Bad`` (file and reason) that the collate function
sets aside, and the training loop either reports and skips it or fails the run with it.
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracker.console import decimal_number
from tracker.data import FORMATS
from tracker.decode import Undecodable, loads_json
from tracker.errors import ConfigError, not_utf8, os_reason

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class Bad:
    """An item that could not be read: its file and why."""

    path: str
    reason: str


def undecodable(path: Path, exc: Exception) -> Bad:
    """An image its decoder refused, with the decoder's first line: the file said once, by its name
    in that line (its whole path, said before it, cut the line's end at 120 characters in a deep
    folder until 0.9.5)."""
    reason = (str(exc).splitlines() or [""])[0].replace(str(path), path.name)[:120]
    return Bad(str(path), f"cannot decode image ({type(exc).__name__}: {reason})")


def _image(path: Path, size: int) -> Any:
    """Decode, resize, tensor, normalise: the usual torchvision transform; with the image's size as
    decoded (width, height)."""
    from PIL import Image

    from tracker.zoo.torchvision_zoo import import_torchvision

    F = import_torchvision().transforms.functional

    with Image.open(path) as img:
        img = img.convert("RGB")
        width, height = img.size
        img = img.resize((size, size))
    return F.normalize(F.to_tensor(img), MEAN, STD), (width, height)


class ClassificationFolder:
    def __init__(self, root: Path, size: int) -> None:
        classes = sorted(p.name for p in root.iterdir() if p.is_dir())
        if not classes:
            raise ConfigError(f"{root}: no class folders (imagefolder layout: DIR/<class>/<image>.jpg)")
        self.classes, self.size = classes, size
        self.items = [(p, i) for i, c in enumerate(classes) for p in sorted((root / c).iterdir())
                      if p.suffix.lower() in IMAGE_SUFFIXES]
        if not self.items:
            raise ConfigError(f"{root}: no images in the class folders")

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> Any:
        path, label = self.items[i]
        try:
            image, _ = _image(path, self.size)
        except MemoryError:
            raise  # the machine's fault, not the file's: the run fails oom
        except Exception as exc:  # noqa: BLE001 - any decoder failure is this file's fault
            return undecodable(path, exc)
        return image, label


#: (x0, y0, x1, y1) in the file's pixels, 1-based label, and (its annotation file, its corners as read,
#: the box as a COCO file writes it or None): what a box outside its image is said with when the image
#: is read (:func:`_said`, made then, not for every box)
Box = tuple[list[float], int, tuple[str, list[float], "list[float] | None"]]
#: How far a box may reach past its image's edge, in the image's pixels: VOC's corners are 1-based
#: (xmax is the width at most), a COCO box's x + width may pass the width by a rounding.
EDGE_SLACK_PX = 1.0


def _box(xyxy: list[float], label: Any, source: str, written: list[float] | None = None) -> Box | str:
    """A checked box, or why the annotation is broken, the box as its file writes it (``written``,
    COCO's [x, y, width, height]; a COCO box was said as corners, which the file does not hold,
    until 0.9.6). A coordinate that is not a finite number is broken (since 0.9.8: an infinite one
    was trained on, and crashed the measuring child with SIGSEGV inside torchvision)."""
    if not all(math.isfinite(v) for v in xyxy):
        return f"{source}: broken annotation ({_said(xyxy, written)} has a coordinate that is not a finite number)"
    x0, y0, x1, y1 = xyxy
    if not (x1 > x0 and y1 > y0):
        return f"{source}: broken annotation (empty {_said(xyxy, written)})"
    if not isinstance(label, int) or label < 1:
        return f"{source}: broken annotation (unknown category {label!r})"
    return [float(x0), float(y0), float(x1), float(y1)], label, (source, xyxy, written)


def _said(xyxy: list[float], written: list[float] | None) -> str:
    """A box as its file writes it: VOC's corners, COCO's [x, y, width, height]."""
    return f"box {xyxy}" if written is None else f"bbox {written}: [x, y, width, height]"


def _outside(objects: list[Box], width: int, height: int) -> str | None:
    """Why a box of an image ``width`` x ``height`` is broken where one is not inside it (give or take
    :data:`EDGE_SLACK_PX`): a huge one (a width of 1e308, finite, infinite as the float32 the detector
    trains on) crashed the measuring child until 0.9.8; None where each is inside."""
    for (x0, y0, x1, y1), _, (source, xyxy, written) in objects:
        if not (-EDGE_SLACK_PX <= x0 and -EDGE_SLACK_PX <= y0 and x1 <= width + EDGE_SLACK_PX
                and y1 <= height + EDGE_SLACK_PX):
            return f"{source}: broken annotation ({_said(xyxy, written)} is not inside the image, {width}x{height} pixels)"
    return None


def _first_error(objects: list[Box | str]) -> list[Box] | str:
    errors = [o for o in objects if isinstance(o, str)]
    return errors[0] if errors else objects  # type: ignore[return-value]


def _corner(box: ET.Element, key: str) -> float:
    """Corner ``key`` (``xmax``) of a VOC ``<bndbox>`` as its number, in ASCII digits alone (``<xmax>٣٠</xmax>``
    was 30 until 0.9.14); a ValueError naming it where it is none."""
    text = box.findtext(key)
    if text is None or (value := decimal_number(text)) is None:
        raise ValueError(f"<{key}> {text!r} is not a number" if text is not None else f"no <{key}> in <bndbox>")
    return value


def _xml_fault(xml: Path, exc: Exception) -> str:
    """Why a VOC annotation file could not be read: what the reader said, and where it is not UTF-8
    text and declares no other encoding (a file saved as latin-1, say), that too (expat's "not
    well-formed (invalid token)" alone until 0.9.6); a file that cannot be opened, as the file system said it."""
    if isinstance(exc, OSError):
        return f"cannot read it: {os_reason(exc)}"
    if isinstance(exc, ET.ParseError):
        try:
            head = xml.read_bytes()
            head.decode("utf-8")
        except UnicodeDecodeError as bad:
            if b"encoding=" not in head[:200]:
                return f"{not_utf8(bad)} and no encoding declared: {exc}"
        except OSError:
            pass
    return str(exc)


class NotCoco(Exception):
    """What makes a JSON file no COCO annotation file: said in its one line (``_read_coco``)."""


def _json_kind(value: Any) -> str:
    """What JSON calls the kind of ``value`` (as ``json`` reads it)."""
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def _id(value: Any) -> bool:
    """Whether ``value`` can be a COCO id (of an image, a category): a whole number or a string."""
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def _coco_tables(data: Any) -> tuple[dict[Any, dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """A COCO file's images by id, its categories by id and its annotations, once their shapes are
    checked: each a list of objects, an image and a category with an id, a category with a name
    (since 0.9.8: a category without a name, "annotations" an object or a string, an annotation
    that is a number, ended the command in a traceback). ``NotCoco`` says what is not so."""
    if not isinstance(data, dict):
        raise NotCoco(f"the file holds {_json_kind(data)}, not an object with \"images\", \"annotations\" "
                      "and \"categories\"")
    for key in ("images", "categories"):
        if key not in data:
            raise NotCoco(f"no \"{key}\"")
    annotations = data.get("annotations") or []
    for key, value in (("images", data["images"]), ("categories", data["categories"]), ("annotations", annotations)):
        if not isinstance(value, list):
            raise NotCoco(f"\"{key}\" is {_json_kind(value)}, not an array")
        for item in value:
            if not isinstance(item, dict):
                raise NotCoco(f"an entry of \"{key}\" is {json.dumps(item)[:60]}, not an object")
            if key != "annotations" and not _id(item.get("id")):
                raise NotCoco(f"an entry of \"{key}\" has no \"id\" (a whole number): {json.dumps(item)[:60]}")
            if key == "categories" and not isinstance(item.get("name"), str):
                raise NotCoco(f"a category has no \"name\": {json.dumps(item)[:60]}")
    categories = data["categories"]
    if len({type(c["id"]) for c in categories}) > 1:
        raise NotCoco("its categories' ids are of more than one kind (whole numbers and strings)")
    return {im["id"]: im for im in data["images"]}, sorted(categories, key=lambda c: c["id"]), annotations


class Detection:
    """Boxes (x0, y0, x1, y1, scaled to the resized image) and 1-based labels per image."""

    def __init__(self, root: Path, size: int, fmt: str) -> None:
        self.size = size
        # each image with its boxes, or why its annotation is broken (reported when it is read)
        self.entries: list[tuple[Path, list[Box] | str]] = []
        if fmt == "coco":
            self._read_coco(root)
        else:
            self._read_voc(root)
        if not self.entries:
            raise ConfigError(f"{root}: no annotated images")

    def _read_coco(self, root: Path) -> None:
        ann = root / "annotations.json"
        try:
            # its bytes, which json reads as UTF-8 (a byte-order mark read past, UTF-16 and -32 told by it)
            data = loads_json(ann.read_bytes())
            images, categories, annotations = _coco_tables(data)
        except FileNotFoundError:
            raise ConfigError(f"{root}: no annotations.json (coco layout: DIR/images/, DIR/annotations.json)") from None
        except OSError as exc:  # a folder of that name, a file not readable: a traceback until 0.9.6
            raise ConfigError(f"{ann}: cannot read it ({os_reason(exc)})") from None
        except (NotCoco, Undecodable) as exc:  # Undecodable: not JSON, not UTF-8, nested too deeply, too many digits
            raise ConfigError(f"{ann}: not a COCO annotation file ({exc})") from None
        except (KeyError, TypeError) as exc:
            raise ConfigError(f"{ann}: not a COCO annotation file ({type(exc).__name__}: {exc})") from None
        if not annotations:  # trained on no box at all, FINISHED without a word, until 0.9.6: a
            # detector's step without boxes skips most of its losses, so its time is not a detection step's
            raise ConfigError(f"{ann}: no annotations (\"annotations\" is empty or missing): a detection job "
                              "trains on boxes")
        self.classes = [c["name"] for c in categories]
        label = {c["id"]: i + 1 for i, c in enumerate(categories)}
        objects: dict[Any, list[Box | str]] = {i: [] for i in images}
        for a in annotations:
            category = a.get("category_id")  # an id of any other kind (a list, say: unhashable) is none of them
            bbox, lab = a.get("bbox"), label.get(category) if _id(category) else None
            if not isinstance(bbox, list) or len(bbox) != 4 or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) for v in bbox):
                box: Box | str = f"{ann.name}: broken annotation (bbox {bbox!r} is not [x, y, width, height])"
            elif lab is None:  # a label the network has no class for: torchvision's IndexError mid-step until 0.9.1
                box = (f"{ann.name}: broken annotation (category_id {a.get('category_id')!r} is none of its categories' "
                       "ids)")
            else:
                box = _box([bbox[0], bbox[1], bbox[0] + bbox[2], bbox[1] + bbox[3]], lab, ann.name, bbox)
            if _id(a.get("image_id")):  # an annotation of no image listed is no image's, as an unknown id is
                objects.setdefault(a.get("image_id"), []).append(box)
        for image_id, im in images.items():
            self.entries.append((root / "images" / str(im.get("file_name")), _first_error(objects.get(image_id, []))))

    def _read_voc(self, root: Path) -> None:
        folder = root / "Annotations"
        images = root / "JPEGImages" if (root / "JPEGImages").is_dir() else root / "images"
        files = sorted(folder.glob("*.xml")) if folder.is_dir() else []
        if not files:
            raise ConfigError(f"{root}: no Annotations/*.xml (voc layout: DIR/JPEGImages/, DIR/Annotations/)")
        parsed: list[tuple[Path, str, list[tuple[str, list[float]]] | str]] = []
        for xml in files:
            try:
                tree = ET.parse(xml).getroot()
                objs = [(o.findtext("name") or "?", [_corner(o.find("bndbox"), k)  # type: ignore[arg-type]
                                                     for k in ("xmin", "ymin", "xmax", "ymax")])
                        for o in tree.iter("object")]
                parsed.append((images / (tree.findtext("filename") or xml.stem + ".jpg"), xml.name, objs))
            except (ET.ParseError, AttributeError, TypeError, ValueError, OSError) as exc:
                parsed.append((images / (xml.stem + ".jpg"), xml.name, f"{xml.name}: broken annotation ({_xml_fault(xml, exc)})"))
        if not any(objs for _, _, objs in parsed if not isinstance(objs, str)):  # trained on no box at all, FINISHED
            # without a word, until 0.9.8, as a COCO file without annotations is refused (since 0.9.6)
            broken = sum(isinstance(objs, str) for _, _, objs in parsed)
            raise ConfigError(f"{folder}: no <object> in any of its {len(files)} .xml files"
                              f"{f' ({broken} of them broken)' if broken else ''}: a detection job trains on boxes")
        self.classes = sorted({name for _, _, objs in parsed if not isinstance(objs, str) for name, _ in objs})
        for path, source, objs in parsed:
            self.entries.append((path, objs if isinstance(objs, str) else _first_error(
                [_box(xyxy, self.classes.index(name) + 1, source) for name, xyxy in objs])))

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, i: int) -> Any:
        import torch

        path, objects = self.entries[i]
        if isinstance(objects, str):
            return Bad(str(path), objects)
        try:
            image, (width, height) = _image(path, self.size)
        except MemoryError:
            raise
        except Exception as exc:  # noqa: BLE001
            return undecodable(path, exc)
        if (outside := _outside(objects, width, height)) is not None:
            return Bad(str(path), outside)
        scale = torch.tensor([self.size / width, self.size / height] * 2)
        boxes = torch.tensor([b for b, _, _ in objects], dtype=torch.float32).reshape(-1, 4) * scale
        return image, {"boxes": boxes, "labels": torch.tensor([lab for _, lab, _ in objects], dtype=torch.int64)}


def open_dataset(root: Path, fmt: str, size: int) -> Any:
    if fmt not in FORMATS:
        raise ConfigError(f"[data].format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if not root.is_dir():
        raise ConfigError(f"[data].path: {root} is not a folder")
    return ClassificationFolder(root, size) if fmt == "imagefolder" else Detection(root, size, fmt)


def save_index(dataset: Any, folder: Path) -> Path:
    """``dataset`` as the file a measuring child opens with :func:`load_index`, in ``folder``: the
    file list, labels and parsed annotations, so that the child does not scan the folder and parse
    the annotations a second time (a COCO annotation file of the full training set takes seconds
    to parse and gigabytes to hold)."""
    import pickle

    path = folder / "dataset-index.pickle"
    path.write_bytes(pickle.dumps(dataset, protocol=pickle.HIGHEST_PROTOCOL))
    return path


def load_index(path: Path) -> Any:
    """The dataset :func:`save_index` wrote (this process's own parent wrote it)."""
    import pickle

    return pickle.loads(path.read_bytes())


def _split(items: list[Any]) -> tuple[list[Any], list[Bad]]:
    return [it for it in items if not isinstance(it, Bad)], [it for it in items if isinstance(it, Bad)]


def collate_classification(items: list[Any]) -> tuple[Any, Any, list[Bad]]:
    import torch

    good, bad = _split(items)
    if not good:
        return None, None, bad
    return torch.stack([g[0] for g in good]), torch.tensor([g[1] for g in good]), bad


def collate_detection(items: list[Any]) -> tuple[Any, Any, list[Bad]]:
    good, bad = _split(items)
    if not good:
        return None, None, bad
    return [g[0] for g in good], [g[1] for g in good], bad
