"""A model to study: a torchvision name, or the user's own ``nn.Module`` built by ``package.module:factory``
with its input shapes and, optionally, its loss. One record (:class:`ModelSpec`) travels from the config or
the command line to every stage: the estimate, the timing job and the profiling driver build the same
module from it.

- ``name`` is the run's name in paths and Snakemake wildcards, so it is wildcard-safe:
  ``[a-z0-9]+(_[a-z0-9]+)*``. A custom model takes it from the config's ``name:``, or from its factory path
  (``examples.tiny_cnn.model:build`` → ``examples_tiny_cnn_model_build``).
- ``inputs`` are per-sample shapes, the batch prepended: ``3x224x224`` is a ``(batch, 3, 224, 224)``
  float32 tensor; a two-input model lists two (``[3x64x64, 10]``). A shape may name its dtype after a colon
  (:data:`INPUT_DTYPES`): ``35:int64`` is a ``(batch, 35)`` tensor of token ids, as an ``nn.Embedding`` front
  takes, drawn from ``[0, n)`` with ``n`` the fewest ``num_embeddings`` of the model's embeddings
  (:func:`id_bound`).
- ``loss`` (``package.module:callable``) takes the model's output and returns a scalar tensor; without one a
  training step uses rooflow.workload.step.default_loss (the sum of the floating outputs).

Factories and losses import from the working directory or ``PYTHONPATH``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from typing import Any

from rooflow.errors import RooflowError, first_line

NAME_PATTERN = re.compile(r"[a-z0-9]+(_[a-z0-9]+)*")
# A run name's length: it heads file names of up to ~60 more characters ({model}-b{batch}-{precision}-{mode}-ncu...),
# each at most 255 bytes on the usual filesystems (ext4, XFS, Lustre, GPFS)
MAX_NAME_CHARACTERS = 100
OBJECT_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")
# what PyTorch says where an op gets a float tensor and wants another dtype (nn.Embedding's indices: "Expected
# tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got torch.float32")
# torch's words for a dtype mismatch: "expected scalar type Long", "must have the same dtype", "Input type (long
# int) and bias type (float) should be the same" (a convolution's)
DTYPE_ERROR = re.compile(r"scalar types?\b|expected scalar type|dtype|\btype \([^)]*\) and \w+ type", re.IGNORECASE)
INPUT_SEED = 0  # custom models' inputs are drawn from N(0, 1) (ids: uniformly) with this seed
# the dtypes an input may name after its shape ("35:int64"): float32 (the default) are drawn from N(0, 1), the
# integer ones are ids (id_bound)
INPUT_DTYPES = ("float32", "int64", "int32")
DEFAULT_DTYPE = "float32"
# ids of a model without an nn.Embedding are drawn from [0, this): an integer input there is a flag or a class
NO_EMBEDDING_ID_BOUND = 2


@dataclass(frozen=True)
class ModelSpec:
    name: str
    factory: str | None = None  # package.module:callable returning the nn.Module; None: a torchvision model
    inputs: tuple[tuple[int, ...], ...] = ()  # per-sample shapes (batch prepended); custom models only
    loss: str | None = None  # package.module:callable taking the output
    # per input, its INPUT_DTYPES name; () where every input is float32 (the spec's written form then has no dtype)
    input_dtypes: tuple[str, ...] = ()

    @property
    def custom(self) -> bool:
        return self.factory is not None

    @property
    def dtypes(self) -> tuple[str, ...]:
        """Each input's dtype name (:data:`INPUT_DTYPES`)."""
        return self.input_dtypes or (DEFAULT_DTYPE,) * len(self.inputs)

    def written_inputs(self) -> list[str]:
        """The inputs as --input and the config write them: '3x224x224', '35:int64'."""
        return [format_input(shape, dtype) for shape, dtype in zip(self.inputs, self.dtypes)]

    def as_dict(self) -> dict[str, Any]:
        """The spec as the config writes it (a torchvision model: its name alone)."""
        if not self.custom:
            return {"name": self.name}
        entry = {"name": self.name, "factory": self.factory, "inputs": self.written_inputs()}
        if self.loss:
            entry["loss"] = self.loss
        return entry

    def argv(self, mode: str = "training") -> list[str]:
        """The command-line options that give this model's ``mode`` run to `rooflow time` and the profiling
        driver (an inference run has no loss, and refuses one)."""
        if not self.custom:
            return ["--model", self.name]
        argv = ["--model", self.factory, "--name", self.name]
        for written in self.written_inputs():
            argv += ["--input", written]
        if self.loss and mode == "training":
            argv += ["--loss", self.loss]
        return argv


def format_shape(shape: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in shape)


def format_input(shape: tuple[int, ...], dtype: str = DEFAULT_DTYPE) -> str:
    """'3x224x224' for a float32 input, '35:int64' for another dtype."""
    return format_shape(shape) if dtype == DEFAULT_DTYPE else f"{format_shape(shape)}:{dtype}"


def parse_input(text: Any, where: str) -> tuple[tuple[int, ...], str]:
    """'3x224x224' → ((3, 224, 224), 'float32'); '35:int64' → ((35,), 'int64'); one sentence naming ``where``
    otherwise."""
    written, _, dtype = str(text).strip().lower().partition(":")
    parts = written.split("x")
    if not all(p.isdigit() and int(p) > 0 for p in parts):
        raise RooflowError(f"{where}: input shape '{text}' is not positive whole numbers joined by 'x': write "
                           f"one sample's shape without the batch, e.g. 3x224x224 (an image) or 10 (a vector), "
                           f"and a dtype after a colon where it is not float32 (35:int64: token ids)")
    dtype = dtype.strip() or DEFAULT_DTYPE
    if dtype not in INPUT_DTYPES:
        raise RooflowError(f"{where}: input '{text}' names dtype '{dtype}', which rooflow cannot draw: use one of "
                           f"{', '.join(INPUT_DTYPES)} (float32 when none is named; the integer ones are token ids)")
    return tuple(int(p) for p in parts), dtype


def derived_name(factory: str) -> str:
    """The run name of a factory path without a ``name``: its dotted path, lowercase, '_'-joined."""
    return "_".join(part for part in re.split(r"[^a-z0-9]+", factory.lower()) if part)


def is_factory_path(text: str) -> bool:
    return ":" in text


def custom_spec(factory: str, inputs: list[Any] | tuple[Any, ...], loss: str | None = None,
                name: str | None = None, where: str = "model", options: bool = False) -> ModelSpec:
    """A custom model's spec, checked: the factory and loss paths, the input shapes, the name. ``options``: given on
    the command line, where a bad input, loss or name is its option's (--input, --loss, --name), not ``where``'s."""
    label = {"loss": "--loss", "input": "--input", "name": "--name"} if options else {}
    for what, path in (("factory", factory), ("loss", loss)):
        if path is not None and not OBJECT_PATTERN.fullmatch(path):
            raise RooflowError(f"{label.get(what, where)}: {what} '{path}' is not of the form package.module:callable: "
                               f"name the module and the callable in it, e.g. examples.tiny_cnn.model:build")
    if not inputs:
        raise RooflowError(f"{where}: custom model '{factory}' has no input shapes: give one per model input "
                           f"(--input 3x224x224 on the command line, inputs: [3x224x224] in the config)")
    parsed = [parse_input(written, label.get("input", where)) for written in inputs]
    shapes = tuple(shape for shape, _ in parsed)
    dtypes = tuple(dtype for _, dtype in parsed)
    given, name = name, name or derived_name(factory)
    named = label.get("name", where) if given else where  # a name derived from its factory path is the model's
    if not NAME_PATTERN.fullmatch(name):
        raise RooflowError(f"{named}: name '{name}' is not lowercase letters and digits joined by single "
                           f"underscores (it names the run's files and Snakemake wildcards): e.g. my_unet")
    if len(name) > MAX_NAME_CHARACTERS:  # validation passed it, the first job could not make its folder
        raise RooflowError(f"{named}: name '{name[:40]}…' is {len(name)} characters, over {MAX_NAME_CHARACTERS}: it "
                           f"names the run's folders and files, of at most 255 bytes each; give the model a shorter "
                           f"name{'' if given else ' (name:, or --name: the one derived from its factory path)'}")
    return ModelSpec(name, factory, shapes, loss,
                     dtypes if any(dtype != DEFAULT_DTYPE for dtype in dtypes) else ())


def _factory_example(path: str) -> str:
    """``path:FACTORY`` where ``path`` is a module that can be found (examples.tiny_cnn.model), else its last dot
    made the colon (examples.tiny_cnn.model.build: examples.tiny_cnn.model:build)."""
    import importlib.util

    _add_working_directory()  # as the factory's import will
    try:
        found = importlib.util.find_spec(path) is not None
    except (ImportError, ValueError):
        found = False
    module, _, attribute = path.rpartition(".")
    return f"{path}:FACTORY" if found else f"{module}:{attribute}"


def refuse_module_path(names: list[str], where: str) -> None:
    """A module path without its callable (examples.tiny_cnn.model) is no torchvision name (none has a dot): one
    sentence with the colon form, not "unknown model" among the torchvision names or "a torchvision model"."""
    dotted = [name for name in names if "." in name and not is_factory_path(name)]
    if dotted:
        raise RooflowError(f"{where}: '{dotted[0]}' is a Python path, not a torchvision model, and names no callable: "
                           f"give your model as package.module:factory, the factory after a colon (e.g. "
                           f"{_factory_example(dotted[0])})")


def torchvision_spec(name: str, where: str = "model") -> ModelSpec:
    from rooflow.workload.models import check_model_names

    refuse_module_path([name], where)
    check_model_names([name], where)
    return ModelSpec(name)


def spec_from_entry(entry: Any, where: str = "model") -> ModelSpec:
    """A config ``models:`` item: a torchvision name, or ``{name, factory, inputs, loss}``."""
    if isinstance(entry, ModelSpec):
        return entry
    if isinstance(entry, str):
        return torchvision_spec(entry, where)
    if "factory" not in entry:  # {name: resnet18}: a torchvision model written as a mapping
        return torchvision_spec(entry["name"], where)
    spec = custom_spec(entry["factory"], entry.get("inputs") or [], entry.get("loss"), entry.get("name"), where)
    _check_collision(spec, where)
    return spec


def refuse_factory_options(models: list[str], inputs=None, loss=None, name=None,
                           size_option: str = "--input-size, e.g. --input-size 32", mode: str | None = None) -> None:
    """--input, --loss and --name describe a package.module:factory model: given with torchvision models only,
    they would be ignored without a word (resnet18 --input 3x32x32 ran at 224×224); one sentence instead. So is
    --loss with --mode inference, which computes no loss."""
    options = [flag for flag, given in (("--input", inputs), ("--loss", loss), ("--name", name)) if given]
    if any(is_factory_path(model) for model in models):
        if loss and mode == "inference":
            raise RooflowError(f"--loss {loss} is the training step's loss, and an inference run computes none: "
                               f"add --mode training, or leave --loss out")
        return
    if not options:
        return
    from rooflow.workload.models import check_model_names

    refuse_module_path(models, "MODEL")  # a name it is not (examples.tiny_cnn.model) is not "a torchvision model"
    check_model_names(models, "MODEL")
    which = (f"{models[0]} is a torchvision model" if len(models) == 1
             else f"{', '.join(models)} are torchvision models")
    size = f" (a torchvision model's square input side is {size_option})" if inputs else ""
    raise RooflowError(f"{' and '.join(options)} describe{'s' if len(options) == 1 else ''} a package.module:factory "
                       f"model, but {which}: leave {' and '.join(options)} out{size}")


def refuse_input_size(models: list[str], input_size: int | None) -> None:
    """--input-size is a torchvision model's square side: not positive, or given with factory models only (whose
    shapes --input gives), it would run a step nobody asked for without a word; one sentence instead."""
    if input_size is None:
        return
    if input_size < 1:
        raise RooflowError(f"--input-size must be a positive integer (a square image's side in pixels), not {input_size}")
    if all(is_factory_path(model) for model in models):
        raise RooflowError(f"--input-size is a torchvision model's square input side, but {', '.join(models)} "
                           f"{'is a factory model' if len(models) == 1 else 'are factory models'}: leave it out and "
                           f"give each input's shape with --input, e.g. --input 3x64x64")


def spec_from_options(model: str, inputs: list[str] | None = None, loss: str | None = None,
                      name: str | None = None, where: str = "MODEL") -> ModelSpec:
    """A model from the command line: a torchvision name, or ``package.module:factory`` with --input."""
    if not is_factory_path(model):
        return torchvision_spec(model, where)
    spec = custom_spec(model, inputs or [], loss, name, where, options=True)
    _check_collision(spec, where)
    return spec


def _check_collision(spec: ModelSpec, where: str) -> None:
    from rooflow.workload.models import named_models

    if spec.name in named_models():
        raise RooflowError(f"{where}: name '{spec.name}' of custom model {spec.factory} is a torchvision model's "
                           f"name: give the custom model another name")


def check_importable(path: str, where: str) -> None:
    """Cheap check (no import of the module itself: config validation runs at every workflow parse) that the
    module of ``package.module:callable`` can be found."""
    module = path.split(":")[0]
    _add_working_directory()
    try:  # find_spec imports the module's parent packages
        found = importlib.util.find_spec(module)
    except ModuleNotFoundError as error:
        if error.name and not (module == error.name or module.startswith(error.name + ".")):
            # the module was found; what it (or its package) imports is not installed: PYTHONPATH would not help
            raise RooflowError(f"{where}: importing the package of {path} needs module '{error.name}', which is "
                               f"not installed: install it in the workflow's environment (envs/rooflow.yaml, or "
                               f"the virtualenv Snakemake runs in)") from None
        found, reason = None, str(error)
    except (ImportError, ValueError) as error:
        found, reason = None, str(error)
    except (Exception, SystemExit) as error:  # noqa: BLE001 - a package's own code: a traceback at every parse
        raise RooflowError(f"{where}: importing the package of {path} failed with {type(error).__name__}: "
                           f"{first_line(error) or '(no message)'}: fix the package") from None
    else:
        reason = ""
    if found is None:
        raise RooflowError(
            f"{where}: module '{module}' of {path} cannot be found from {os.getcwd()} or PYTHONPATH"
            f"{f' ({reason})' if reason else ''}: run from the directory that holds it or add its parent "
            f"to PYTHONPATH")


def _add_working_directory() -> None:
    """Factories import from the working directory, as ``python -m`` does (the ``rooflow`` script and
    Snakemake's rule scripts do not put it on sys.path)."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)


def import_object(path: str, what: str, name: str):
    """The callable ``package.module:callable``; one sentence naming it and the fix when it cannot be had."""
    module_name, _, attribute = path.partition(":")
    _add_working_directory()
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001 - the user's module: any failure to import is theirs to fix
        raise RooflowError(
            f"model '{name}': importing {module_name} (its {what} {path}) failed with {type(error).__name__}: "
            f"{first_line(error)}: fix the module, or run from the directory "
            f"that holds it (or add its parent to PYTHONPATH)") from None
    found = getattr(module, attribute, None)
    if not callable(found):
        raise RooflowError(f"model '{name}': {module_name} has no callable '{attribute}' (its {what} {path}): "
                           f"fix the name after the colon")
    return found


def build_custom(spec: ModelSpec, meta: bool = False):
    """The module the factory returns (``meta``: its parameters and buffers on the meta device as they are
    registered, rooflow.workload.models.parameters_on_meta)."""
    import contextlib

    from torch import nn

    from rooflow.workload.models import parameters_on_meta

    factory = import_object(spec.factory, "factory", spec.name)
    with parameters_on_meta() if meta else contextlib.nullcontext():
        try:
            module = factory()
        except Exception as error:  # noqa: BLE001 - the user's factory
            raise RooflowError(f"model '{spec.name}': its factory {spec.factory}() raised {type(error).__name__}: "
                               f"{first_line(error)}: fix the factory") from None
    if not isinstance(module, nn.Module):
        raise RooflowError(f"model '{spec.name}': its factory {spec.factory}() returned {type(module).__name__}, "
                           f"not a torch.nn.Module: return the model itself (e.g. `return MyNet()`)")
    if meta and (problem := scripted_module_problem(module)):  # counted; `rooflow time` runs it as it is
        raise RooflowError(f"model '{spec.name}': what its factory {spec.factory}() returned {problem}")
    return module


def scripted_module_problem(module) -> str | None:
    """Why a TorchScript module (torch.jit.script or torch.jit.trace) cannot be counted, and what to pass instead;
    None for any other. The counter copies a module to the meta device and runs its Python forward; a scripted one
    has neither (its copy failed inside PyTorch: "AssertionError: param must be a Parameter")."""
    import torch

    if not isinstance(module, torch.jit.ScriptModule):
        return None
    return ("is a TorchScript module (torch.jit.script or torch.jit.trace), whose compiled graph rooflow's counter "
            "cannot run on the meta device: pass the nn.Module it was scripted or traced from")


def materialize_lazy(module, inputs: tuple) -> None:
    """Give a lazy module's parameters (nn.LazyLinear, nn.LazyConv2d) their shapes: one forward without
    gradients on ``inputs``, as PyTorch asks before counting, moving or optimising them. Nothing where every
    parameter already has one."""
    import torch
    from torch.nn.modules.lazy import LazyModuleMixin

    if any(isinstance(m, LazyModuleMixin) and m.has_uninitialized_params() for m in module.modules()):
        with torch.no_grad():
            module(*inputs)


def refuse_untrainable(module, name: str, inputs: tuple = ()) -> None:
    """A training step where nothing takes gradients (no parameter, no input that requires them) has no backward
    pass: one sentence (autograd said "element 0 of tensors does not require grad", which rooflow read as a wrong
    input shape). A parameterless layer on inputs that require gradients has one: their gradients."""
    import torch

    if not any(p.requires_grad for p in module.parameters()) and not any(
            isinstance(t, torch.Tensor) and t.requires_grad for t in inputs):
        raise RooflowError(f"model '{name}' has no parameter that takes gradients (requires_grad), nor an input, "
                           f"so its training step has no backward pass and nothing for the optimizer: measure it in "
                           f"mode inference")


def refuse_cast_parameters(module, name: str) -> None:
    """rooflow's precisions are autocast over float32 parameters (rooflow.workload.step): a module cast to half
    (``.half()``, ``.to(torch.bfloat16)``) was counted and labelled fp32, its time predicted at fp32's rates;
    one sentence instead."""
    import torch

    cast = sorted({str(t.dtype).removeprefix("torch.") for t in (*module.parameters(), *module.buffers())
                   if t.is_floating_point() and t.dtype != torch.float32})
    if cast:
        raise RooflowError(f"model '{name}' has {', '.join(cast)} parameters, but rooflow runs each precision as "
                           f"autocast over float32 ones (fp16 and bf16 included): pass the float32 module (without "
                           f".half() or .to(dtype)) with precision fp16 or bf16")


def load_loss(spec: ModelSpec):
    """The user's loss callable, or None (the step's default)."""
    return import_object(spec.loss, "loss", spec.name) if spec.loss else None


def example_inputs(spec: ModelSpec, batch: int, device: Any = "meta", module=None) -> tuple:
    """The custom model's inputs at ``batch`` (random_inputs); integer ones are ids below ``module``'s
    :func:`id_bound`."""
    return random_inputs(spec.inputs, batch, device, spec.dtypes, id_bound(module))


def id_bound(module) -> int:
    """The ids an integer input may hold are below this: the fewest ``num_embeddings`` of ``module``'s
    ``nn.Embedding``/``nn.EmbeddingBag`` layers (an id every one of them can look up: a token and a position
    table alike), :data:`NO_EMBEDDING_ID_BOUND` where it has none or no module is given."""
    from torch import nn

    sizes = [m.num_embeddings for m in (module.modules() if module is not None else ())
             if isinstance(m, (nn.Embedding, nn.EmbeddingBag))]
    return min(sizes) if sizes else NO_EMBEDDING_ID_BOUND


def random_inputs(shapes, batch: int, device: Any = "meta", dtypes=(), high: int = NO_EMBEDDING_ID_BOUND) -> tuple:
    """Tensors of ``(batch, *shape)`` with a fixed seed: float32 from N(0, 1), integer ``dtypes``
    (:data:`INPUT_DTYPES`) uniform in ``[0, high)`` (meta: shapes and dtypes only)."""
    import torch

    dtypes = tuple(dtypes) or (DEFAULT_DTYPE,) * len(shapes)
    generator = torch.Generator().manual_seed(INPUT_SEED)
    tensors = []
    for shape, name in zip(shapes, dtypes):
        dtype = getattr(torch, name)
        if str(device) == "meta":
            tensors.append(torch.empty(batch, *shape, dtype=dtype, device="meta"))
        elif dtype.is_floating_point:
            tensors.append(torch.randn(batch, *shape, generator=generator).to(device))
        else:
            tensors.append(torch.randint(0, high, (batch, *shape), generator=generator, dtype=dtype).to(device))
    return tuple(tensors)


def shape_error(spec: ModelSpec, batch: int, error: BaseException) -> RooflowError:
    """One sentence for a model that rejects the inputs it was given."""
    shapes = ", ".join(format_shape((batch, *s)) for s in spec.inputs)
    cause = f"{type(error).__name__}: {first_line(error)}"
    if DTYPE_ERROR.search(str(error)):  # the shape may be right: the dtype is not the one the model wants
        dtypes = ", ".join(dict.fromkeys(spec.dtypes))
        if any(dtype != DEFAULT_DTYPE for dtype in spec.dtypes):  # ids given where it takes float32
            written = " ".join(f"--input {format_input(shape)}" for shape in spec.inputs)
            config = ", ".join(format_input(shape) for shape in spec.inputs)
            return RooflowError(f"model '{spec.name}' rejects {dtypes} inputs of shape {shapes} ({cause}): give "
                                f"the dtype it takes — float32, the default, is {written} on the command line, "
                                f"inputs: [{config}] in the config (no dtype after the shape)")
        written = " ".join(f"--input {format_input(shape, 'int64')}" for shape in spec.inputs)
        config = ", ".join(format_input(shape, "int64") for shape in spec.inputs)
        return RooflowError(f"model '{spec.name}' rejects {dtypes} inputs of shape {shapes} ({cause}): name the "
                            f"dtype it takes after each shape — token ids for an nn.Embedding are {written} on the "
                            f"command line, inputs: [{config}] in the config")
    return RooflowError(f"model '{spec.name}' rejects inputs of shape {shapes} ({cause}): fix its input shapes "
                        f"(--input on the command line, inputs: in the config; the batch is prepended)")
