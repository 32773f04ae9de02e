"""Data stage: image datasets on disk for training jobs (read, and written by ``tracker data synth``).

Layouts (a user's own dataset in the same layout works unchanged):

- ``imagefolder`` (classification): ``DIR/<class>/<image>.jpg``, as torchvision's ImageFolder;
- ``coco`` (detection): ``DIR/images/*.jpg`` and ``DIR/annotations.json`` (COCO: ``images``,
  ``annotations`` with ``bbox`` as x, y, width, height, ``categories``);
- ``voc`` (detection): ``DIR/JPEGImages/*.jpg`` and ``DIR/Annotations/*.xml`` (Pascal VOC,
  the layout of the Oxford-IIIT Pet annotations).
"""

from __future__ import annotations

FORMATS = ("imagefolder", "coco", "voc")
