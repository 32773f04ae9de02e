"""Network references: a zoo name, a spec file of a generated or pruned network, or a network
of your own (``FILE.py:NAME``).

Everything that takes a MODEL argument resolves it here, so a spec written by
``tracker zoo generate`` or ``tracker zoo prune``, or a Python file's network, works wherever a
zoo name does.

A network of your own is ``FILE.py:NAME``: NAME is a callable of the file (a function, or an
``nn.Module`` class) that, called with no argument, returns the ``torch.nn.Module``; it takes a
batch of images ``(N, C, S, S)`` (S: the file's ``INPUT_SIZE = S``, else 224; C: its
``INPUT_CHANNELS = C``, else 3), or, where the file says ``INPUT_SHAPE = (...)`` (one input,
without the batch: ``(1, 16000)`` of audio, ``(128,)``), a batch ``(N, *INPUT_SHAPE)`` of values,
or of token ids in ``[0, INPUT_VOCAB)`` where it says ``INPUT_VOCAB``; to be trained, it returns
class scores ``(N, classes)``. It is
read into a spec of kind ``module`` that carries the file's text: the network is described and
measured as the file was when it was planned, and its description hash, as for every network,
says what was measured. The modules beside it that it imports (``blocks.py`` for ``from blocks
import Block``, and those they import in turn) are read with it and carried too: it is built
from the code that was read, the files edited or gone since.
"""

from __future__ import annotations

import ast
import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracker.decode import loads_json
from tracker.errors import ConfigError, not_utf8
from tracker.zoo.generator import MAX_SPEC_SIZE

SPEC_FORMAT = "tracker.netspec/1"
#: ``FILE.py:NAME``, a network of your own: NAME, a callable of the Python file, builds it; since
#: 0.9.1 ``FILE.py:NAME(ARGS)`` calls it with those arguments (Python literals: a NAS space's width)
MODULE_REF = re.compile(r"^(?P<file>.+\.py):(?P<attr>[A-Za-z_][A-Za-z0-9_]*)(?P<args>\(.*\))?$", re.DOTALL)
DEFAULT_INPUT_SIZE = 224


@dataclass(frozen=True)
class ModelRef:
    name: str
    input_size: int  # of its square input images; 0 for a network whose input is no image (input_shape)
    spec: dict[str, Any] | None = None  # None for zoo names
    in_channels: int = 3  # of its input images: 3 but for a network of your own that says otherwise
    #: A network of your own whose input is not images: the shape of one input (its file's
    #: ``INPUT_SHAPE``, without the batch), and where they are token ids, how many (``INPUT_VOCAB``)
    input_shape: tuple[int, ...] | None = None
    input_vocab: int | None = None

    @property
    def is_own(self) -> bool:
        """Whether it is a network of your own (``FILE.py:NAME``): see :func:`is_own_spec`."""
        return is_own_spec(self.spec)

    @property
    def is_detection(self) -> bool:
        from tracker.zoo.torchvision_zoo import detection_models

        return self.spec is None and self.name in detection_models()

    def build(self, input_size: int | None = None) -> Any:
        """The network, untrained; a detection network computing at ``input_size`` (its own where
        None: ``torchvision_zoo.sized_detector``). Memory not given while it is built is one line (a
        traceback until 0.9.7: a width of 10**12 in a spec, which validate_spec bounds now)."""
        from tracker.errors import allocation_failed

        try:
            return self._build(input_size)
        except (MemoryError, RuntimeError) as exc:
            if (asked := allocation_failed(exc)) is None:
                raise
            raise ConfigError(f"network {self.name} needs more memory than this machine gives to be built ({asked} "
                              "failed)") from None

    def _build(self, input_size: int | None) -> Any:
        from tracker.zoo.torchvision_zoo import build_model

        if self.spec is None:
            return build_model(self.name, input_size=input_size if self.is_detection else None)
        kind = self.spec.get("kind")
        if kind == "generated":
            from tracker.zoo.generator import build_generated

            return build_generated(self.spec).eval()
        if kind == "pruned":
            from tracker.zoo.pruning import build_pruned

            try:
                return build_pruned(self.spec).eval()
            except ConfigError as exc:  # which of several networks it was said (until 0.9.5: the layer alone)
                raise ConfigError(f"pruned network {self.name}: {exc}") from None
        if kind == "module":
            return build_module(self.spec).eval()
        raise ConfigError(f"spec {self.name!r}: unknown kind {kind!r} (expected generated, pruned or module)")


def is_own_spec(spec: dict[str, Any] | None) -> bool:
    """Whether a network's spec (None for a zoo name) is of a network of your own: kind ``module``."""
    return spec is not None and spec.get("kind") == "module"


def base_of_kind(spec: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    """``spec`` where it is of ``kind``, or the spec of that kind its network was pruned from
    (``base_spec``, through any number of prunings); None where there is none."""
    while spec is not None and spec.get("kind") != kind:
        spec = spec.get("base_spec") if spec.get("kind") == "pruned" else None
    return spec


def own_code_spec(spec: dict[str, Any] | None) -> dict[str, Any] | None:
    """The spec of the network of your own whose code ``spec``'s network runs: its own (kind
    ``module``), or that of the network it was pruned from; None for a network of the zoo's or generated."""
    return base_of_kind(spec, "module")


def call_arguments(text: str, ref: str) -> tuple[list[Any], dict[str, Any]]:
    """The arguments of ``(ARGS)`` in ``FILE.py:NAME(ARGS)``: Python literals (numbers, strings,
    booleans, None, and lists, tuples and dicts of them), by position or keyword, as JSON has them (a
    tuple is a list, as the measuring child gets it); one line where one is something else (a name,
    an expression, which would need the file run to read; a set or bytes, which JSON lacks)."""
    try:
        call = ast.parse(f"f{text}", mode="eval").body
    except SyntaxError:
        call = None
    if not isinstance(call, ast.Call) or any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords):
        raise ConfigError(f"{ref!r}: {text} is not a call's arguments, such as (width=0.5, depth=3)")
    names = [k.arg for k in call.keywords]  # ast parses make(width=1, width=2); Python refuses it (the last
    if repeated := next((n for i, n in enumerate(names) if n in names[:i]), None):  # was taken until 0.9.7)
        raise ConfigError(f"{ref!r}: keyword argument {repeated!r} repeated in {text}: give it once")
    try:
        args = [ast.literal_eval(a) for a in call.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        # as the measuring child gets them, through the plan's JSON: a tuple is a list there too
        args, kwargs = json.loads(json.dumps(args)), json.loads(json.dumps(kwargs))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise ConfigError(f"{ref!r}: the arguments of {text} should be Python literals (numbers, strings, True, "
                          "False, None, and lists, tuples or dicts of them)") from None
    return args, kwargs


def call_text(args: list[Any], kwargs: dict[str, Any]) -> str:
    """``(ARGS)`` as a network's name says them: positional first, then keywords sorted, each as
    Python writes it (``(3, width=0.5)``), so one call has one name whatever its spacing."""
    return "(" + ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in sorted(kwargs.items())]) + ")"


def module_spec(ref: str) -> dict[str, Any]:
    """The spec of ``FILE.py:NAME`` (or ``FILE.py:NAME(ARGS)``): the file's text, where it was,
    NAME and its arguments, and its input's size and channels (the file's top-level ``INPUT_SIZE =
    S`` and ``INPUT_CHANNELS = C``, read without running the file). Runs nothing."""
    match = MODULE_REF.match(ref)
    if match is None:
        raise ConfigError(f"{ref!r} is not FILE.py:NAME (a callable of the file that builds the network; "
                          "FILE.py:NAME(ARGS) calls it with arguments)")
    path, attr = Path(match["file"]), match["attr"]
    try:  # its name is in the network's, its run's params and tags, all UTF-8: measured, then lost when
        str(path.resolve()).encode()  # logged (a traceback), until 0.9.7
    except UnicodeEncodeError:
        raise ConfigError(f"network file {str(path)!r}: its name, or its folder's, is not UTF-8 (as Python prints it "
                          "here): rename it") from None
    args, kwargs = call_arguments(match["args"], ref) if match["args"] else ([], {})
    try:
        source = python_text(path)
    except FileNotFoundError:
        raise ConfigError(f"network file {path} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"network file {path} is a folder, not a file") from None
    except OSError as exc:
        raise ConfigError(f"cannot read network file {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ConfigError(f"network file {path} is {exc}") from None
    tree = _parse(source, path)
    if attr not in top_level_names(tree.body):
        raise ConfigError(f"network file {path} defines no {attr!r} at its top level")
    assigned = input_constants(tree, path)

    def whole(key: str, default: int, least: int, what: str, most: int | None = None) -> int:
        if key not in assigned:
            return default
        try:  # a literal, -3 too (said to be an expression until 0.9.6)
            value = ast.literal_eval(assigned[key])
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):  # 2*16: the file is read to plan,
            # not run ("at least 8" until 0.9.5)
            raise ConfigError(f"network file {path}: {key} should be a number written out ({key} = 32), not an "
                              "expression: tracker reads the file, it does not run it, to plan a measurement") from None
        if not (type(value) is int and value >= least):
            raise ConfigError(f"network file {path}: {key} should be a whole number of {what}, at least {least}, "
                              f"got {value!r}")
        if most is not None and value > most:  # the bound every spec's is held to (a spec written, then
            # refused by every command, until 0.9.8)
            raise ConfigError(f"network file {path}: {key} should be a whole number of {what}, at most {most:,}, "
                              f"got {value!r}")
        return value

    size = whole("INPUT_SIZE", DEFAULT_INPUT_SIZE, 8, "pixels", MAX_SPEC_SIZE)
    channels = whole("INPUT_CHANNELS", 3, 1, "channels", MAX_SPEC_SIZE)
    vocab = whole("INPUT_VOCAB", 0, 2, "token ids") or None
    shape = _input_shape(assigned, path, vocab)
    spec = {"format": SPEC_FORMAT, "kind": "module", "name": f"{path.stem}.{attr}", "callable": attr,
            "file": str(path.resolve()), "source": source}
    if args or kwargs:  # only where given (NAME() is NAME): a spec without them (and its key) is as before 0.9.1
        spec["args"], spec["kwargs"] = args, kwargs
        spec["name"] += call_text(args, kwargs)
    if shape is not None:  # not images: the shape of one input, and token ids where it says how many
        spec["input_shape"] = list(shape)
        if vocab:
            spec["input_vocab"] = vocab
    else:
        spec["input_size"] = size
        if channels != 3:  # as every other network's spec where it is 3
            spec["in_channels"] = channels
    if modules := modules_beside(tree, path):  # a one-file network's spec says nothing of them
        spec["modules"] = modules
    return spec


#: The constants a network file of one's own may say its input with.
INPUT_CONSTANTS = ("INPUT_SIZE", "INPUT_CHANNELS", "INPUT_VOCAB", "INPUT_SHAPE")


def input_constants(tree: ast.Module, path: Path) -> dict[str, ast.expr]:
    """The values a file's top level gives its input constants, ``NAME = value`` or ``NAME: int =
    value`` (an annotated one was passed over until 0.9.5: INPUT_SIZE: int = 48 described at 224);
    one line where one is set another way (``INPUT_SIZE, INPUT_CHANNELS = 28, 1``, ``a = INPUT_SIZE
    = 28``, ``INPUT_SIZE += 1``), which tracker would not read."""
    out: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out[node.target.id] = node.value
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            named = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)} & set(INPUT_CONSTANTS)
            if named:
                name = sorted(named)[0]
                raise ConfigError(f"network file {path}: {name} is set in a way tracker does not read (line "
                                  f"{node.lineno}): give it on a line of its own, {name} = value")
    for node, name in _bound_elsewhere(tree):  # described at 224 without a word until 0.9.8
        how = ("imported" if isinstance(node, (ast.Import, ast.ImportFrom)) else "by a for or with"
               if isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)) else "inside a block")
        raise ConfigError(f"network file {path}: {name} is set in a way tracker does not read (line {node.lineno}, "
                          f"{how}): assign it at the top level of the file, {name} = value")
    return out


def _bound_elsewhere(tree: ast.Module) -> Iterator[tuple[ast.AST, str]]:
    """The statements that bind an input constant at the module's level other than by a top-level
    assignment (which :func:`input_constants` reads): an import of it (``from cfg import
    INPUT_SIZE``), a ``for`` or ``with`` naming it, or an assignment inside an ``if``, ``for``,
    ``while``, ``with``, ``try`` or ``match`` block; not inside a function or a class (their own
    names), nor under ``if __name__ == "__main__":`` (not run as the network is built)."""
    constants = set(INPUT_CONSTANTS)

    def bound(node: ast.AST) -> set[str]:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return {(a.asname or a.name).split(".")[0] for a in node.names} & constants
        targets: list[Any] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.NamedExpr)):
            targets = [node.target]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            targets = [item.optional_vars for item in node.items if item.optional_vars is not None]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)} & constants

    def main_guard(node: ast.AST) -> bool:
        return isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) and "__name__" in ast.unparse(node.test)

    def walk(body: list[Any], top: bool) -> Iterator[tuple[ast.AST, str]]:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or main_guard(node):
                continue
            direct = top and isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))  # input_constants' own
            if not direct and (names := bound(node)):
                yield node, sorted(names)[0]
            for block in ("body", "orelse", "finalbody", "handlers", "cases"):
                inner = getattr(node, block, None)
                if isinstance(inner, list):
                    yield from walk(inner, False)
            if isinstance(node, ast.ExceptHandler) and node.name in constants:
                yield node, node.name

    yield from walk(tree.body, True)


#: The ranks an ``INPUT_SHAPE`` may have: one input without its batch dimension.
INPUT_RANKS = range(1, 5)


def _input_shape(assigned: dict[str, Any], path: Path, vocab: int | None) -> tuple[int, ...] | None:
    """A file's ``INPUT_SHAPE`` (one input, without the batch), None where it gives none; one line
    where it is no shape, or an image's ``(C, S, S)`` of values (which INPUT_CHANNELS and
    INPUT_SIZE say, so that every image network has one form and its configurations one key)."""
    if "INPUT_SHAPE" not in assigned:
        if vocab:
            raise ConfigError(f"network file {path}: INPUT_VOCAB needs INPUT_SHAPE, the shape of one input of token ids")
        return None
    if {"INPUT_SIZE", "INPUT_CHANNELS"} & set(assigned):
        raise ConfigError(f"network file {path}: give INPUT_SHAPE (one input's shape) or INPUT_SIZE and "
                          "INPUT_CHANNELS (images), not both")
    try:
        shape = ast.literal_eval(assigned["INPUT_SHAPE"])
    except (ValueError, TypeError, SyntaxError):  # not a literal: a name, a sum
        shape = None
    if not (isinstance(shape, (tuple, list)) and len(shape) in INPUT_RANKS
            and all(type(d) is int and d >= 1 for d in shape)):
        raise ConfigError(f"network file {path}: INPUT_SHAPE should be the shape of one input, without the batch: "
                          "1 to 4 whole numbers of at least 1, such as (128,) or (1, 16000)")
    if len(shape) == 3 and shape[1] == shape[2] >= 8 and vocab is None:
        raise ConfigError(f"network file {path}: INPUT_SHAPE {tuple(shape)} is an image: say INPUT_CHANNELS = "
                          f"{shape[0]} and INPUT_SIZE = {shape[1]}")
    return tuple(shape)


def input_batch(batch_size: int, in_channels: int, input_size: int, input_shape: tuple[int, ...] | None = None,
                input_vocab: int | None = None, dtype: Any = None, seed: int = 0) -> Any:
    """A batch of ``batch_size`` inputs on the CPU, the same for a seed: images ``(N, C, S, S)``,
    or inputs of ``input_shape``: token ids in ``[0, input_vocab)`` (int64) where it says how many,
    else values of a normal distribution (``dtype``, default float32)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    shape = (batch_size, *(input_shape or (in_channels, input_size, input_size)))
    if input_vocab:
        return torch.randint(0, input_vocab, shape, generator=generator)
    return torch.randn(*shape, generator=generator, dtype=dtype or torch.float32)


def not_images(ref: ModelRef, why: str) -> ConfigError:
    """The one line refusing, for ``why``, a network whose input is not images (``ref.input_shape``)."""
    assert ref.input_shape is not None
    return ConfigError(f"{ref.name} takes inputs of shape {shape_text(ref.input_shape, ref.input_vocab)}, not images: {why}")


def generated_spec(spec: dict[str, Any] | None) -> dict[str, Any] | None:
    """The generated network's spec that ``spec``'s network is built from: its own (kind
    ``generated``), or that of the network it was pruned from; None for any other network."""
    return base_of_kind(spec, "generated")


def check_input_size(ref: ModelRef, input_size: int | None) -> None:
    """Refuse, in one line, an input size (a resolution) for a network whose input is not images, or
    one under the least a generated network (or one pruned from it) takes: the bound ``zoo generate``
    puts on its ``--input-size`` (since 0.9.8; it was described and measured at 8 px)."""
    if input_size and ref.input_shape is not None:  # 0: its own (none)
        raise not_images(ref, "an input size (--input-size, a campaign's input_sizes) is for networks of images")
    generated = generated_spec(ref.spec)
    if input_size and generated is not None:
        from tracker.zoo.generator import check_least_input_size

        stem, stages = generated.get("stem"), generated.get("stages")
        stride = stem.get("stride") if isinstance(stem, dict) else None
        if isinstance(stride, int) and isinstance(stages, list):  # else building it says what is wrong
            check_least_input_size(input_size, stride, len(stages), f"{ref.name}: input_size")


def shape_text(input_shape: tuple[int, ...] | list[int], input_vocab: int | None = None) -> str:
    """One input's shape as runs name it: ``1x16000``; ``128 ids<30522`` for token ids."""
    return "x".join(map(str, input_shape)) + (f" ids<{input_vocab}" if input_vocab else "")


def python_text(file: Path) -> str:
    """A Python file's text as Python reads it: UTF-8, less the byte-order mark a UTF-8 file may begin
    with, or in the encoding its PEP 263 coding line names (``# -*- coding: latin-1 -*-``). Until 0.9.7
    the mark was read as a character ("invalid non-printable character U+FEFF") and a coding line was
    passed over ("not text"), where Python runs both. ValueError says what it is instead (OSError: it
    could not be read)."""
    import io
    import tokenize

    data = file.read_bytes()
    try:
        encoding = tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    except SyntaxError as exc:  # a coding line naming no encoding Python knows, or the first lines not UTF-8
        raise ValueError(f"not text Python can read ({exc.msg})") from None
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        said = "UTF-8" if encoding.startswith("utf-8") else f"{encoding}, as its coding line says"
        raise ValueError(f"not text ({said}): byte {exc.start}: {exc.object[exc.start:exc.start + 1]!r}") from None


def _parse(source: str, path: Path) -> ast.Module:
    try:
        return ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise ConfigError(f"network file {path}: line {exc.lineno}: {exc.msg}") from None


def _imported(tree: ast.Module) -> set[str]:
    """The top-level packages or modules a module's code imports (anywhere in it), absolutely."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


#: The most a package beside a network's file may hold to be carried with it (the text of its
#: ``.py`` files): a larger one is imported from its folder when the network is built, as it is then.
CARRIED_PACKAGE_BYTES = 1_000_000


def _package_files(folder: Path) -> dict[str, Path] | None:
    """The ``.py`` files of the package ``folder`` (one with an ``__init__.py``) and of its
    subpackages, by module name relative to the folder beside it, a package's own as
    ``NAME.__init__`` (so each name is also its file's path: ``blocks.conv`` is ``blocks/conv.py``);
    None where they hold more than :data:`CARRIED_PACKAGE_BYTES`."""
    files: dict[str, Path] = {}
    for file in sorted(folder.rglob("*.py")):
        parts = file.relative_to(folder.parent).with_suffix("").parts
        if all((folder.parent.joinpath(*parts[:i]) / "__init__.py").is_file() for i in range(1, len(parts))):
            files[".".join(parts)] = file  # within the package, not in a folder of other files inside it
    if sum(f.stat().st_size for f in files.values()) > CARRIED_PACKAGE_BYTES:
        return None
    return files


def modules_beside(tree: ast.Module, path: Path) -> dict[str, str]:
    """The text of each module beside ``path`` (``NAME.py`` in its folder) that its code imports,
    and of those they import in turn, by module name; of a package beside it (a folder with an
    ``__init__.py``) that it imports, every module in it, its own as ``NAME.__init__``. A package
    larger than :data:`CARRIED_PACKAGE_BYTES` is not read: it is imported from its folder when the
    network is built."""
    found: dict[str, str] = {}

    def read(name: str, file: Path) -> None:
        try:
            found[name] = python_text(file)
        except (OSError, ValueError):
            raise ConfigError(f"network file {path} imports {name.removesuffix('.__init__')}, and {file} cannot "
                              "be read as text") from None
        todo.extend(sorted(_imported(_parse(found[name], file)) - set(found), reverse=True))

    todo = sorted(_imported(tree) - {path.stem}, reverse=True)
    while todo:
        name = todo.pop()
        file, package = path.parent / f"{name}.py", path.parent / name
        if name in found or f"{name}.__init__" in found or name == path.stem:
            continue
        if file.is_file():
            read(name, file)
        elif (package / "__init__.py").is_file() and (files := _package_files(package)) is not None:
            for module, where in files.items():
                read(module, where)
    return dict(sorted(found.items()))


class _CarriedModules:
    """An import finder that gives the modules a ``module`` spec carries (``modules_beside``) from
    their text as read, under their own names and files, ahead of the files as they are now: a
    package's own from ``NAME.__init__``, with its folder for its submodules."""

    def __init__(self, sources: dict[str, str], folder: Path) -> None:
        self.sources, self.folder = sources, folder

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        import importlib.util

        where = self.folder.joinpath(*fullname.split("."))
        if fullname in self.sources:
            return importlib.util.spec_from_file_location(fullname, where.with_name(f"{where.name}.py"), loader=self)  # type: ignore[arg-type]
        if f"{fullname}.__init__" in self.sources:
            return importlib.util.spec_from_file_location(fullname, where / "__init__.py", loader=self,  # type: ignore[arg-type]
                                                          submodule_search_locations=[str(where)])
        return None

    def create_module(self, spec: Any) -> None:
        return None  # the default module

    def exec_module(self, module: Any) -> None:
        package = module.__spec__.submodule_search_locations is not None
        source = self.sources[f"{module.__name__}.__init__" if package else module.__name__]
        exec(compile(source, module.__file__, "exec"), module.__dict__)  # noqa: S102


def top_level_names(body: list[Any]) -> set[str]:
    """The names a module's statements bind at its top level: functions, classes, assignments and
    imports, also inside its ``if``, ``try``, ``with`` and ``for`` blocks (not inside a function or
    a class)."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        for block in ("body", "orelse", "finalbody", "handlers"):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names |= top_level_names([*getattr(node, block, [])])
    return names


class _HardExit(SystemExit):
    """``os._exit`` called by a network's code as it is built, raised in its place (:func:`_hard_exit_refused`)."""


@contextlib.contextmanager
def _hard_exit_refused() -> Iterator[None]:
    """Inside the block ``os._exit`` raises :class:`_HardExit` (a ``SystemExit``) instead of ending the
    process: a network file calling it as it was built ended describe or profile at once, saying
    nothing, with status 0 (until 0.9.8). Only this thread's calls are refused; others end the process
    as they always do, and so does a child forked meanwhile (a multiprocessing worker ends with os._exit;
    it kept the caller's thread id)."""
    import os
    import threading

    real, caller, pid = os._exit, threading.get_ident(), os.getpid()

    def refused(code: int) -> None:
        if threading.get_ident() != caller or os.getpid() != pid:
            real(code)
        raise _HardExit(code)

    os._exit = refused  # type: ignore[assignment]
    try:
        yield
    finally:
        os._exit = real


#: The threads a network file started (as it was run, or as its callable built the network) that
#: were running when it was done, with the file that started them: a thread that is not a daemon
#: holds a process at its exit, the command's work done (``tracker describe ./net.py`` waited for it,
#: forever for a server's or a sleeping one's, until 0.9.8). See :func:`release_network_threads`.
NETWORK_THREADS: dict[Any, str] = {}


def release_network_threads() -> list[str]:
    """Let this process end without waiting for the threads network files started that still run
    and are not daemons (:data:`NETWORK_THREADS`): they are left out of those the interpreter joins
    at its exit, and stop with it as daemon threads do. Each such thread's name and file, to be
    said; none where there are none."""
    import threading

    running = {t: file for t, file in NETWORK_THREADS.items() if t.is_alive() and not t.daemon}
    locks = getattr(threading, "_shutdown_locks", None)  # what threading._shutdown joins (Python 3.11 and 3.12)
    if not running or locks is None:
        return []
    with threading._shutdown_locks_lock:  # type: ignore[attr-defined]
        for thread in running:
            locks.discard(thread._tstate_lock)  # type: ignore[attr-defined]
    return [f"{thread.name} (started by {file})" for thread, file in running.items()]


def build_module(spec: dict[str, Any]) -> Any:
    """The network of a ``module`` spec: its file's text as planned, run as a module of its own (its
    folder first on the import path, for the files beside it), and its callable called. It runs
    with ``sys.argv`` as if run alone with no arguments (not tracker's: a parser at its top level
    reads none of them), and its exiting (``sys.exit``, a parser's error) is one line, not tracker
    ending without a word."""
    import sys
    import threading
    import types

    import torch

    file = Path(spec["file"])
    where = f"{file.name}:{spec['callable']}" + (call_text(spec["args"], spec["kwargs"]) if "args" in spec else "")
    module = types.ModuleType(f"tracker_network_{file.stem}")
    module.__file__ = str(file)
    sys.path.insert(0, str(file.parent))
    carried = _CarriedModules(spec.get("modules") or {}, file.parent)
    sys.meta_path.insert(0, carried)
    before = set(sys.modules)
    sys.modules[module.__name__] = module  # as an import would: dataclasses, pickle and typing look it up
    argv, sys.argv = sys.argv, [str(file)]
    threads = set(threading.enumerate())
    try:
        # What it prints goes to stderr: on stdout it came before a command's JSON until 0.9.3.
        with contextlib.redirect_stdout(sys.stderr), _hard_exit_refused():
            exec(compile(spec["source"], str(file), "exec"), module.__dict__)  # noqa: S102 - the user's own network
            network = getattr(module, spec["callable"])(*spec.get("args", ()), **spec.get("kwargs", {}))
    except ConfigError:
        raise
    except SystemExit as exc:
        how = "os._exit" if isinstance(exc, _HardExit) else "sys.exit"  # os._exit ended tracker without a word (0.9.8)
        raise ConfigError(f"{where} exited ({how}({exc.code!r})) instead of building the network: a network file "
                          "runs as it is imported, so what should run only as a script belongs under "
                          "`if __name__ == \"__main__\":`") from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the user's code: its error, in one line (a BaseException's own: a traceback until 0.9.8)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ConfigError(f"{where} could not build the network: {type(exc).__name__}{': ' + first if first else ''}") from None
    finally:
        sys.argv = argv
        NETWORK_THREADS.update((t, file.name) for t in threading.enumerate() if t not in threads)  # as started
        with contextlib.suppress(ValueError):
            sys.path.remove(str(file.parent))
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(carried)
        for name in set(sys.modules) - before:  # it and the files and packages beside it: read afresh for
            origin = Path(getattr(sys.modules[name], "__file__", None) or "")  # the next network, whose folder
            if origin.parent == file.parent or origin.is_relative_to(file.parent / name.split(".")[0]):  # may have its own
                del sys.modules[name]
    if not isinstance(network, torch.nn.Module):
        raise ConfigError(f"{where} returned {type(network).__name__}, not a torch.nn.Module")
    return network


def read_spec(path: Path) -> dict[str, Any]:
    try:
        spec = loads_json(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read network spec {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:  # said as Python's codec said it ("'utf-8' codec can't decode") until 0.9.15
        raise ConfigError(f"{path} is not a network spec: {not_utf8(exc)}; a spec is JSON, UTF-8 text") from None
    except ValueError as exc:  # decode.Undecodable: not JSON, nested too deeply ('[' * 100000), too many digits
        raise ConfigError(f"{path} is not a network spec: {exc}") from None
    if not isinstance(spec, dict) or spec.get("format") != SPEC_FORMAT:
        raise ConfigError(f"{path} is not a network spec (format should be {SPEC_FORMAT!r})")
    check_spec(spec, str(path))
    return spec


def check_spec(spec: dict[str, Any], where: str) -> None:
    """The checks of :func:`read_spec` past its format, ``where`` naming the file (and for the
    spec a pruned one carries, ``base_spec``, which is checked as a spec of its own: a list or a
    name there, or its network's file missing, was a traceback until 0.9.8)."""
    path = where
    for key in ("kind", "name"):
        if key not in spec:
            raise ConfigError(f"{path}: network spec has no {key!r}")
    check_fields(spec, str(path))
    if spec["kind"] not in ("generated", "pruned", "module"):  # said without the file until 0.9.6
        raise ConfigError(f"{path}: unknown kind {spec['kind']!r} (expected generated, pruned or module)")
    if spec["kind"] == "module":
        check_module_fields(spec, path)
    if spec["kind"] == "pruned" and "base_spec" in spec:
        base = spec["base_spec"]
        if not isinstance(base, dict):
            raise ConfigError(f"{path}: spec key 'base_spec' must be the spec of the network pruned (a mapping), "
                              f"got {base!r:.80}")
        check_spec(base, f"{path}: base_spec")
    if spec["kind"] == "pruned":  # a ratio of 150 or widths of none were read as a pruned network until 0.9.6
        from tracker.zoo.pruning import check_method, check_ratio

        check_ratio(spec.get("ratio", 0.0), f"{path}: spec key 'ratio'")
        try:  # the seed a valid one (check_fields); as zoo prune --method and --seed are checked: a seed with l1
            # was taken, the network built as seed 0's, and an unknown method said, unnamed, once built (until 0.9.12)
            check_method(spec.get("method", "l1"), spec.get("seed", 0))
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        widths = spec.get("widths")
        if not isinstance(widths, dict) or not widths:
            raise ConfigError(f"{path}: spec key 'widths' must map each convolution of the base to its channels "
                              f"(whole numbers from 1 to {MAX_SPEC_SIZE:,}), got {widths!r:.80}")
        # the layer and its value named: the start of the whole map was said, a bad value past it unseen (until 0.9.8)
        if bad := next(((layer, w) for layer, w in widths.items() if isinstance(w, bool) or not isinstance(w, int)
                        or not 1 <= w <= MAX_SPEC_SIZE), None):
            from tracker.console import clipped

            raise ConfigError(f"{path}: spec key 'widths': layer {clipped(repr(bad[0]), 60)} has {clipped(repr(bad[1]), 40)} "
                              f"channels; each must be a whole number from 1 to {MAX_SPEC_SIZE:,}")
    if spec["kind"] == "generated":  # its keys checked here, where the file is known (unnamed until 0.9.5)
        from tracker.zoo.generator import validate_spec

        try:
            validate_spec(spec)
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None


def check_module_fields(spec: dict[str, Any], where: str) -> None:
    """The keys a spec of kind ``module`` (a network of your own) must have, of their types: its
    file's path and text, the callable that builds it, and the arguments it is called with (a
    list and a mapping, together). A spec edited by hand without one was a KeyError until 0.9.8."""
    for key, what in (("file", "the path of the network's file"), ("source", "the text of the network's file"),
                      ("callable", "the name of the callable that builds the network")):
        if key not in spec:
            raise ConfigError(f"{where}: network spec of kind 'module' has no {key!r} ({what})")
        value = spec[key]
        if not isinstance(value, str) or (key != "source" and not value.strip()):
            raise ConfigError(f"{where}: spec key {key!r} must be {what} (text), got {value!r:.80}")
    if not spec["callable"].isidentifier():
        raise ConfigError(f"{where}: spec key 'callable' must be a Python name, got {spec['callable']!r:.80}")
    if ("args" in spec) != ("kwargs" in spec):
        given, lacking = ("args", "kwargs") if "args" in spec else ("kwargs", "args")
        raise ConfigError(f"{where}: spec key {given!r} without {lacking!r}: a network's arguments are both, "
                          "a list by position and a mapping by keyword")
    if "args" in spec and not isinstance(spec["args"], list):
        raise ConfigError(f"{where}: spec key 'args' must be a list (the arguments by position), got {spec['args']!r:.80}")
    if "kwargs" in spec and not isinstance(spec["kwargs"], dict):
        raise ConfigError(f"{where}: spec key 'kwargs' must be a mapping (the arguments by keyword), "
                          f"got {spec['kwargs']!r:.80}")
    modules = spec.get("modules")
    if modules is not None and (not isinstance(modules, dict)
                                or not all(isinstance(k, str) and isinstance(v, str) for k, v in modules.items())):
        raise ConfigError(f"{where}: spec key 'modules' must map each module beside the network's file to its text")


def check_fields(spec: dict[str, Any], where: str) -> None:
    """The keys every kind of spec may have, of the types they must be (a traceback from ``int()``
    until 0.9.3; a name with a folder in it wrote a pruned spec outside ``--out``)."""
    name = spec["name"]
    if not isinstance(name, str) or not name.strip() or name in (".", "..") or any(c in name for c in "/\\\n"):
        raise ConfigError(f"{where}: spec key 'name' must be a plain name, without a folder, got {name!r}")
    for key in ("input_size", "in_channels", "input_vocab"):
        value = spec.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConfigError(f"{where}: spec key {key!r} must be an integer >= 1, got {value!r}")
        if value is not None and key != "input_vocab" and value > MAX_SPEC_SIZE:  # any was read until 0.9.7
            raise ConfigError(f"{where}: spec key {key!r} must be at most {MAX_SPEC_SIZE:,}, got {value!r}")
    shape = spec.get("input_shape")
    if shape is not None and (not isinstance(shape, list) or not shape
                              or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in shape)):
        raise ConfigError(f"{where}: spec key 'input_shape' must be a list of integers >= 1, got {shape!r}")
    base = spec.get("base")
    if "base" in spec and (not isinstance(base, str) or not base.strip()):
        raise ConfigError(f"{where}: spec key 'base' must name the network pruned, got {base!r}")
    check_seed(spec, where)


def check_seed(spec: dict[str, Any], where: str) -> None:
    """A spec's ``seed`` (a pruned network's: the draw of its filters, method random; a generated
    one's: its draw with its index) is one ``zoo prune --seed`` and ``zoo generate --seed`` take, a
    whole number from 0 to 2**32-1, said as a campaign file's seed is. Until 0.9.12 a pruned spec's
    seed of -1 was built as seed 1's (Python's random takes a seed's absolute value), one past 2**32
    taken, and one not a whole number refused only once its network was built, its file unnamed."""
    if "seed" not in spec:
        return
    from tracker.settings import MAX_SEED

    seed = spec["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"{where}: spec key 'seed' must be a whole number from 0 to {MAX_SEED}, got {seed!r:.80}")
    if not 0 <= seed <= MAX_SEED:
        raise ConfigError(f"{where}: spec key 'seed' must be from 0 to {MAX_SEED}, got {seed!r}")


def names_a_file(ref: str) -> bool:
    """Whether a network reference names a file (``FILE.py:NAME``, a spec file: a ``.json``, any
    suffix, or a path with a folder) rather than a zoo name, which has neither (a bare name that is
    no zoo name's is a file where one is there: ``resolve`` checks that on disk)."""
    path = Path(ref)  # "/" too: pathlib drops a leading "./", and ./resnet18 was read as the zoo's (until 0.9.4)
    return ".py:" in ref or ref.endswith(".json") or bool(path.suffix) or len(path.parts) > 1 or "/" in ref


def names_file_in(ref: str, folder: Path) -> bool:
    """Whether ``ref``, relative to ``folder``, names a file rather than a zoo network: it has the
    form of one (:func:`names_a_file`), or it is a bare name the zoo lacks and a file or folder of
    that name is there. A zoo name is always the zoo's network (since 0.9.8; a file of its name in the
    folder was taken instead, without a word): the file is ``./NAME``."""
    from tracker.zoo.torchvision_zoo import all_models

    there = folder / ref
    return names_a_file(ref) or (ref not in all_models() and (there.is_file() or there.is_dir()))


def shadowed_file(ref: str) -> str | None:
    """The note to say where ``ref`` is a zoo name and a file or folder of that name is in the
    current folder (:func:`resolve` takes the zoo's network): which was taken, and how to name the
    other; None otherwise."""
    from tracker.zoo.torchvision_zoo import all_models

    if names_a_file(ref) or not Path(ref).exists() or ref not in all_models():  # the zoo's names asked last
        return None
    return f"{ref} is the zoo's network, not the {'folder' if Path(ref).is_dir() else 'file'} {ref} in this folder: " \
           f"for the file, give ./{ref}"


#: Spec files planned and not written (a campaign's dry run), by path: :func:`resolve` takes each as
#: if written (see :func:`planned_specs`).
_PLANNED: dict[str, dict[str, Any]] = {}


@contextlib.contextmanager
def planned_specs(specs: dict[str, dict[str, Any]]) -> Iterator[None]:
    """Inside the block :func:`resolve` takes each of ``specs`` (a spec file's path, as a reference
    names it, and the content a run would write there) as if its file said it: a dry run plans the
    networks a campaign generates and prunes without writing their files (it wrote them until 0.9.8)."""
    before = dict(_PLANNED)
    _PLANNED.update(specs)
    try:
        yield
    finally:
        _PLANNED.clear()
        _PLANNED.update(before)


def resolve(ref: str) -> ModelRef:
    """A zoo name, the path of a spec file (``.json``) or ``FILE.py:NAME``. Zoo names have no
    folder and no suffix, and a zoo name is always the zoo's network (a file of that name is
    ``./NAME``: see :func:`names_file_in`, and :func:`shadowed_file` for the note the CLI says)."""
    from tracker.zoo.torchvision_zoo import check_model_name, default_input_size

    if not ref.strip():  # the current folder, "is a folder, not a file", until 0.9.3
        raise ConfigError("no network named (an empty name): give a zoo name, a spec file or FILE.py:NAME")
    if ref in _PLANNED:  # a spec file a dry run plans, not written
        return spec_ref(_PLANNED[ref])
    if ".py:" in ref:  # FILE.py:NAME, or a clear line on what it lacks
        return spec_ref(module_spec(ref))
    path = Path(ref)
    if path.suffix == ".py":  # read as a spec it would be "not JSON"
        raise ConfigError(f"{ref} is a Python file: name the callable of it that builds the network, {ref}:NAME")
    if names_file_in(ref, Path()):  # a zoo name is the zoo's network, a file of its name beside it or not (0.9.8)
        if not path.is_file():
            why = ("is a folder, not a file" if path.is_dir() else "is not a regular file (a device, a pipe)"
                   if path.exists() else "does not exist")  # /dev/null "does not exist" until 0.9.6
            raise ConfigError(f"network spec {ref} {why}")
        return spec_ref(read_spec(path))
    check_model_name(ref)
    return ModelRef(ref, default_input_size(ref))


def spec_ref(spec: dict[str, Any]) -> ModelRef:
    """The network of a spec already read (a file's content, or the copy a plan carries)."""
    from tracker.zoo.torchvision_zoo import default_input_size

    base = spec.get("base")
    if spec.get("input_shape"):  # a network of your own whose input is not images
        vocab = spec.get("input_vocab")
        return ModelRef(spec["name"], 0, spec, 3, tuple(int(d) for d in spec["input_shape"]), int(vocab) if vocab else None)
    size = int(spec.get("input_size") or (default_input_size(base) if base else 224))
    return ModelRef(spec["name"], size, spec, int(spec.get("in_channels", 3)))


def spec_text(spec: dict[str, Any]) -> str:
    """A spec's file as :func:`write_specs` writes it."""
    return json.dumps(spec, indent=2, sort_keys=True) + "\n"


def unwritten_specs(specs: list[dict[str, Any]], folder: Path) -> dict[Path, dict[str, Any]]:
    """The files :func:`write_specs` would write (``NAME.json`` in ``folder``, and the spec it would
    write there), writing none: those missing or saying otherwise."""
    planned = {folder / f"{spec['name']}.json": spec for spec in specs}
    return {p: spec for p, spec in planned.items() if not p.is_file() or p.read_text() != spec_text(spec)}


def write_specs(specs: list[dict[str, Any]], folder: Path, replace: bool = True) -> list[Path]:
    """Each spec's file in ``folder`` (``NAME.json``); a file that already says the same is left
    as it is (a campaign loaded again rewrites nothing). ``replace`` False: a file of that name
    that says otherwise (another input size) is refused before any is written, not replaced."""
    texts = {folder / f"{spec['name']}.json": spec_text(spec) for spec in specs}
    if not replace:
        differ = [p for p, text in texts.items() if p.is_file() and p.read_text() != text]
        if differ:
            raise ConfigError(f"{differ[0]} holds another network of that name{f' (and {len(differ) - 1} more)' if len(differ) > 1 else ''}"
                              ": give another --out, or remove it (it was replaced until 0.9.3)")
    from tracker.errors import os_reason
    from tracker.files import write_whole

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot make the folder {folder} for the network specs: {os_reason(exc)}") from None
    for done, (path, text) in enumerate(texts.items()):
        try:
            if not path.is_file() or path.read_text() != text:
                write_whole(path, text)
        except OSError as exc:  # a read-only folder, a full disk: said without the file (or with the temporary
            # file's name) until 0.9.8
            before = f" ({done} of {len(texts)} in place before it)" if done else ""
            raise ConfigError(f"cannot write network spec {path}: {exc.strerror or type(exc).__name__}{before}") from None
    return list(texts)
