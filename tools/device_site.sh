#!/usr/bin/env bash
# Builds .whl/site.tar.xz, the packages tools/device_check.sh unpacks on a lent GPU machine: the
# versions this checkout's .venv holds (`make install` first) of every package that machine's
# Python 3.12 lacks, as CPython 3.12 manylinux wheels from the package registries, unpacked and
# packed without the MLflow UI's JavaScript (38 MB on 2026-11-26; the tree that travels may be
# 64 MiB). The machine's image holds torch, numpy, pandas, scipy, scikit-learn, pyarrow,
# matplotlib and more (/work/.library/device/KINDS.md lists them); typer, click, rich, psutil
# and nvidia-ml-py travel anyway, at the pinned versions. About 2 minutes here.
# Usage: bash tools/device_site.sh   (then `run` with carry [".whl"])
set -euo pipefail
cd "$(dirname "$0")/.."
# on the machine already (KINDS.md, 2026-11-17), or not needed there (tests, browsers, installers,
# PostgreSQL drivers); nvidia-ml-py travels
skip='^(torch|torchvision|triton|nvidia-.*|cuda-.*|numpy|pandas|scipy|scikit-learn|pyarrow|matplotlib|contourpy|cycler|fonttools|kiwisolver|pillow|pyparsing|python-dateutil|six|packaging|networkx|sympy|mpmath|jinja2|markupsafe|filelock|fsspec|joblib|threadpoolctl|requests|urllib3|idna|certifi|charset-normalizer|protobuf|pyyaml|cloudpickle|werkzeug|typing-extensions|setuptools|pygments|mdurl|zipp|attrs|h11|anyio|httpx|httpcore|aiohttp|aiohappyeyeballs|aiosignal|frozenlist|multidict|propcache|yarl|annotated-doc|narwhals|psycopg|psycopg-binary|adbc-driver-postgresql|selenium|trio|trio-websocket|outcome|pysocks|wsproto|sortedcontainers|uv|pytest|iniconfig|pluggy|tracker)$'
wheels=$(mktemp -d) site=$(mktemp -d)
trap 'rm -rf "$wheels" "$site"' EXIT
.venv/bin/python -m pip freeze --exclude-editable | grep '==' \
  | awk -F'==' -v skip="$skip" '{name=tolower($1); gsub(/[_.]+/, "-", name); if (name == "nvidia-ml-py" || name !~ skip) print $0}' > "$wheels/needed.txt"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 \
  --platform manylinux_2_12_x86_64 --platform manylinux1_x86_64 -d "$wheels" -r "$wheels/needed.txt"
for w in "$wheels"/*.whl; do unzip -q -o "$w" -d "$site"; done
rm -rf "$site/mlflow/server/js"
mkdir -p .whl
tar -C "$site" -c . | xz -T0 -6 > .whl/site.tar.xz
echo "$(wc -l < "$wheels/needed.txt") packages, $(du -h .whl/site.tar.xz | cut -f1): .whl/site.tar.xz"
