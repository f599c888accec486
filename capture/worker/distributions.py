"""What pip may be asked to install, and by whom the command is made (issue 52, items 1-2).

A capture that fails for a library the capture interpreter lacks ends with an offer: the
exact ``python -m pip install …`` command, run only after the person says yes (the
command line's prompt, the editor's). That command is the *parent's* own, built here
from names checked here; nothing the worker (the model's process) sends is run:

- an import name maps to its distribution through :data:`DISTRIBUTIONS` (``sklearn`` ->
  ``scikit-learn``); a name the table does not know is offered only as itself, and only
  when it is a plain import name (ASCII letters, digits, ``_``; not the standard
  library's), which is also a valid PEP 508 bare project name: never an option
  (``--index-url=…``, ``-e``, ``-r FILE``), a path, a URL, ``name @ url``, an archive
  file name, extras or a version specifier;
- a command is offered only when it is exactly ``[PYTHON, "-m", "pip", "install",
  SPEC…]`` with the interpreter the parent chose and every SPEC a project name, a
  ``name==version`` pin or one of :data:`EXTRAS` (:func:`safe_install`).

Standard library only (the worker imports the ``capture`` package too).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import Any

#: Import names whose distribution is named otherwise; None: several distributions
#: provide that name (a namespace), none is offered.
DISTRIBUTIONS: dict[str, str | None] = {
    "PIL": "pillow", "yaml": "pyyaml", "cv2": "opencv-python", "sklearn": "scikit-learn",
    "skimage": "scikit-image", "bs4": "beautifulsoup4", "attr": "attrs", "dateutil": "python-dateutil",
    "Crypto": "pycryptodome", "Cryptodome": "pycryptodomex", "OpenSSL": "pyopenssl", "jwt": "pyjwt",
    "magic": "python-magic", "dotenv": "python-dotenv", "docx": "python-docx", "pptx": "python-pptx",
    "serial": "pyserial", "usb": "pyusb", "zmq": "pyzmq", "git": "gitpython", "fitz": "pymupdf",
    "Levenshtein": "levenshtein", "google": None, "azure": None, "backports": None, "jaraco": None,
    "mpl_toolkits": "matplotlib", "pkg_resources": "setuptools", "tensorflow_datasets": "tensorflow-datasets",
    "tf_keras": "tf-keras", "sentencepiece": "sentencepiece", "faiss": "faiss-cpu", "lightning": "lightning",
    "pytorch_lightning": "pytorch-lightning", "ruamel": "ruamel.yaml", "multipart": "python-multipart",
    "igraph": "igraph", "wandb": "wandb", "einops": "einops", "jaxtyping": "jaxtyping",
    "ml_collections": "ml-collections", "more_itertools": "more-itertools", "huggingface_hub": "huggingface-hub",
    "umap": "umap-learn", "Bio": "biopython", "rdkit": "rdkit", "MeCab": "mecab-python3", "websocket": "websocket-client",
}

#: Specifications with extras the parent itself writes (JAX's CUDA and TPU builds).
EXTRAS = frozenset({"jax[cuda12]", "jax[tpu]"})

_IMPORT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,99}")
# PEP 508's name: letters and digits at both ends, ``.``, ``_``, ``-`` between.
_PROJECT_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,198}[A-Za-z0-9])?")
_VERSION = re.compile(r"[0-9][A-Za-z0-9.+!_-]{0,98}")
# A bare name that ends so is a local file to pip (``pip install x.whl`` installs ./x.whl).
_ARCHIVES = (".zip", ".whl", ".tar", ".tgz", ".tbz", ".txz", ".tlz", ".gz", ".bz2", ".xz", ".lz", ".lzma", ".egg")


def import_name(name: Any) -> bool:
    """Whether ``name`` is a plain top-level import name (and not the standard library's)."""
    return (isinstance(name, str) and _IMPORT_NAME.fullmatch(name) is not None
            and name not in sys.stdlib_module_names)


def project_name(name: Any) -> bool:
    """Whether ``name`` is a valid PEP 508 bare project name pip reads as nothing else
    (no option, path, URL, archive file, extras or specifier)."""
    return (isinstance(name, str) and _PROJECT_NAME.fullmatch(name) is not None
            and not name.lower().endswith(_ARCHIVES))


def distribution(module: Any) -> str | None:
    """The distribution to install for the missing top-level ``module`` (an import
    name): from :data:`DISTRIBUTIONS`, else the name itself when it is a plain import
    name; None when none can be offered (an invalid name, the standard library, a
    namespace several distributions share)."""
    if not isinstance(module, str):
        return None
    if module in DISTRIBUTIONS:
        return DISTRIBUTIONS[module]
    return module if import_name(module) else None


def install_spec(spec: Any) -> bool:
    """Whether ``spec`` is one the parent writes into an install command: a project
    name, ``name==version`` (the installed Torch build's pins) or one of :data:`EXTRAS`."""
    if not isinstance(spec, str):
        return False
    if spec in EXTRAS:
        return True
    name, sep, version = spec.partition("==")
    return project_name(name) and (not sep or _VERSION.fullmatch(version) is not None)


def safe_install(command: Any, python: str | None = None) -> bool:
    """Whether ``command`` is an install command of the parent's making: ``[PYTHON, "-m",
    "pip", "install", SPEC…]`` (``PYTHON`` is ``python`` when given), every SPEC an
    :func:`install_spec`."""
    if not isinstance(command, Sequence) or isinstance(command, str) or len(command) < 5:
        return False
    if not all(isinstance(part, str) for part in command):
        return False
    if python is not None and command[0] != python:
        return False
    return list(command[1:4]) == ["-m", "pip", "install"] and all(install_spec(s) for s in command[4:])
