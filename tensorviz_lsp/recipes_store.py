"""Saving setups to ``.tensorviz/recipes.toml`` without disturbing the user's file.

Writes go through ``tomlkit`` so that comments, blank lines, key order and the other
profiles survive; only the keys of the saved profile whose values changed are touched.
A write is atomic (a temporary file in the same folder, then a rename): a failed write
leaves the previous file exactly as it was. Each read-modify-write holds the lock beside
the file (``recipes.toml.lock``, :mod:`capture.recipe.lock`), so concurrent writers
(two CLI captures, the editor and the CLI) never drop each other's profiles. The new text is re-read with the same
validator the worker uses before it replaces anything.

Reading and validating recipes lives in :mod:`capture.recipe` (standard library only).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Iterator

import safe_read
import tomlkit
from tomlkit.exceptions import TOMLKitError

from capture.graph.atomic import atomic_write
from capture.recipe.parse import MAX_RECIPES_BYTES, recipes_size_problem, recipes_workspace
from capture.recipe.lock import RecipesLocked, lock_path, recipes_lock
from capture.recipe import (
    DEFAULT_FRAMEWORK,
    RECIPES_FILE,
    RECIPES_VERSION,
    Recipe,
    RecipeError,
    load_profile as _load_profile,
    load_recipes_table,
    parse_profile,
    parse_recipes_text,
    profile_from_document,
    profile_names,
)


class RecipeStoreError(Exception):
    """A profile could not be saved; the recipes file is unchanged. One line."""


def recipes_path(workspace: str | os.PathLike[str]) -> Path:
    return Path(workspace) / RECIPES_FILE


def load_profile(workspace: str | os.PathLike[str], name: str) -> Recipe:
    """The validated profile (raises :class:`capture.recipe.RecipeError`)."""
    return _load_profile(recipes_path(workspace), name)


def list_profiles(workspace: str | os.PathLike[str]) -> list[str]:
    """Profile names in file order ([] when there is no recipes file)."""
    path = recipes_path(workspace)
    if not path.exists():
        return []
    doc, _ = load_recipes_table(path)
    return profile_names(doc)


@contextlib.contextmanager
def _one_writer(path: Path) -> Iterator[None]:
    """The read-modify-write of ``path`` under the lock beside it (:mod:`capture.recipe.lock`).
    A ``.tensorviz`` folder linked out of the workspace gets neither the lock nor a write."""
    if path.parent.exists() and not safe_read.is_inside(path.parent, recipes_workspace(path)):
        raise RecipeStoreError(f"{path}: not saved: {path.parent} resolves to {os.path.realpath(path.parent)}, "
                               "outside the workspace")
    try:
        with recipes_lock(path):
            yield
    except OSError as exc:
        if isinstance(exc, RecipesLocked):
            raise RecipeStoreError(f"{path}: not saved: {exc}") from None
        raise RecipeStoreError(f"{path}: cannot lock {lock_path(path)}: {exc.strerror or exc}") from None


def save_profile(workspace: str | os.PathLike[str], recipe: Recipe) -> Path:
    """Insert or update ``[profiles.<recipe.name>]``; returns the file's path.

    Unchanged keys keep their formatting and comments; keys the recipe no longer has
    are removed; a new profile is appended after the others. Another writer saving at
    the same time (the editor, another ``tensorviz capture``) waits for this one, and
    then keeps what it saved."""
    path = recipes_path(workspace)
    with _one_writer(path):
        return _save_locked(path, recipe)


def _save_locked(path: Path, recipe: Recipe) -> Path:
    doc, original = _read_document(path)
    if "version" not in doc:
        doc.add("version", RECIPES_VERSION)
        # ``version`` belongs at the top, before any table.
        body = doc.body
        body.insert(0, body.pop())
    elif doc["version"] != RECIPES_VERSION:
        raise RecipeStoreError(f"{path}: version is {doc['version']!r}; this TensorViz writes version {RECIPES_VERSION}")
    if "profiles" not in doc:
        profiles = tomlkit.table(is_super_table=True)
        doc.add("profiles", profiles)
    profiles = doc["profiles"]
    if not isinstance(profiles, dict):
        raise RecipeStoreError(f"{path}: profiles is not a table")

    table = recipe.to_table()
    if recipe.name in profiles:
        existing = profiles[recipe.name]
        if not isinstance(existing, dict):
            raise RecipeStoreError(f"{path}: profiles.{recipe.name} is not a table")
        # A key the user left out stays out while the recipe keeps its default value.
        defaults = Recipe(name=recipe.name, model=recipe.model).to_table()
        defaults["framework"] = DEFAULT_FRAMEWORK
        # Keys that mean the same (a tensor written without its default generator…)
        # keep the user's spelling. A profile that does not validate is never rewritten:
        # what the writer does not understand (an unknown key, a misspelt one, and the
        # comments beside it) would be dropped without a word.
        meant = _valid_existing(recipe.name, existing, original, path).to_table()
        for key in [k for k in existing if k not in table]:
            del existing[key]
        for key, value in table.items():
            if key in existing:
                if _plain(existing[key]) == _plain(_toml_ready(value)) or (key in meant and meant[key] == value):
                    continue
            elif key in defaults and defaults[key] == value:
                continue
            existing[key] = _item(value)
    else:
        new = tomlkit.table()
        for key, value in table.items():
            new.add(key, _item(value))
        profiles.add(recipe.name, new)

    text = tomlkit.dumps(doc)
    _check_written(text, recipe, path)
    atomic_write_text(path, text)
    return path


def delete_profile(workspace: str | os.PathLike[str], name: str) -> bool:
    """Remove a profile; False when there was none."""
    path = recipes_path(workspace)
    if not path.exists():
        return False
    with _one_writer(path):
        doc, _ = _read_document(path)
        profiles = doc.get("profiles")
        if not isinstance(profiles, dict) or name not in profiles:
            return False
        del profiles[name]
        atomic_write_text(path, tomlkit.dumps(doc))
        return True


def existing_profile(workspace: str | os.PathLike[str], name: str) -> Recipe | None:
    """The saved profile ``name`` that a save would update, or ``None`` when there is no
    recipes file or no such profile in it.

    Raises :class:`RecipeStoreError` when the file or the profile does not validate:
    such a profile is left alone rather than written afresh (see :func:`save_profile`)."""
    path = recipes_path(workspace)
    if not path.exists():
        return None
    doc, original = _read_document(path)
    profiles = doc.get("profiles")
    if not isinstance(profiles, dict) or name not in profiles:
        return None
    return _valid_existing(name, profiles[name], original, path)


def _valid_existing(name: str, table: Any, text: str, path: Path) -> Recipe:
    if not isinstance(table, dict):
        raise RecipeStoreError(f"{path}: profiles.{name} is not a table, so it was left alone")
    try:
        return parse_profile(name, _plain(table), text=text, file=str(path))
    except RecipeError as exc:
        raise RecipeStoreError(
            f"{exc}\n  profile {name!r} is not valid, so it was left alone (saving over it would drop what "
            "TensorViz does not understand, and the comments beside it): fix or remove that key, or save "
            "under another profile name"
        ) from None


def _read_document(path: Path) -> tuple[tomlkit.TOMLDocument, str]:
    """The file as a tomlkit document and its text (an empty document when absent)."""
    if not path.exists():
        return tomlkit.document(), ""
    try:
        text = safe_read.read_text(path, workspace=recipes_workspace(path), max_bytes=MAX_RECIPES_BYTES)
    except safe_read.UnsafeFile as exc:
        raise RecipeStoreError(f"{path}: not read, so it was left alone: {exc.strerror}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RecipeStoreError(f"{path}: cannot read: {exc}") from None
    try:
        return tomlkit.parse(text), text
    except TOMLKitError as exc:
        raise RecipeStoreError(f"{path}: not valid TOML, so it was left alone: {exc}") from None


def _check_written(text: str, recipe: Recipe, path: Path) -> None:
    """The text we are about to write must read back as the same profile."""
    try:
        doc = parse_recipes_text(text, file=str(path))
        again = profile_from_document(doc, recipe.name, text=text, file=str(path))
    except RecipeError as exc:
        raise RecipeStoreError(f"refusing to write a recipes file that would not read back: {exc}") from None
    if again.to_dict() != _toml_ready(recipe.to_dict()):
        raise RecipeStoreError(f"refusing to write {path}: profile {recipe.name!r} would not read back unchanged")


def _toml_ready(value: Any) -> Any:
    """TOML has no null: an unknown dimension (None) is written as ``"?"``."""
    if value is None:
        return "?"
    if isinstance(value, dict):
        return {k: _toml_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_toml_ready(v) for v in value]
    return value


def _item(value: Any) -> Any:
    """Plain data as tomlkit items: tables inline, spaced as the spec writes them
    (``{ args = [], kwargs = {} }``; an empty one ``{}``)."""
    value = _toml_ready(value)
    if isinstance(value, dict):
        table = tomlkit.inline_table()
        for i, (k, v) in enumerate(value.items()):
            item = _item(v)
            if i == 0:
                item.trivia.indent = " "
            table.append(k, item)
        if value:
            table.add(tomlkit.ws(" "))
        return table
    if isinstance(value, list):
        arr = tomlkit.array()
        for v in value:
            arr.append(_item(v))
        return arr
    return tomlkit.item(value)


def _plain(value: Any) -> Any:
    if hasattr(value, "unwrap"):
        value = value.unwrap()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


# A new recipes file is created ``rw-r--r--`` less the process umask, which the kernel
# applies at ``open``. Reading the umask would mean setting it (``os.umask`` has no
# read-only form), and the umask is process-wide: in the threaded server another
# thread's file could be created under the temporary value.
_NEW_FILE_MODE = 0o644


def atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` or leave it exactly as it was (TensorViz's one
    atomic write, :func:`capture.graph.atomic.atomic_write`). An existing file keeps its
    permission bits; a new one gets ``0o644`` less the umask."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, text.encode("utf-8"), new_mode=_NEW_FILE_MODE)
    except OSError as exc:
        raise RecipeStoreError(f"{path}: cannot write: {exc.strerror or exc}") from None


# --------------------------------------------------------------------------- parsed once per change

#: How many recipes texts stay parsed (the buffer being edited and the file on disk).
PARSED_KEPT = 4
_parsed: "OrderedDict[tuple[int, bytes], tuple[dict[str, Any] | None, RecipeError | None]]" = OrderedDict()
_parsed_lock = threading.Lock()


def text_key(text: str) -> tuple[int, bytes]:
    """What identifies a recipes text: its length and a digest (a 15 MB file: ~20 ms)."""
    return len(text), hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def parsed_recipes(text: str) -> dict[str, Any]:
    """:func:`capture.recipe.parse_recipes_text` of ``text``, parsed once per change: the
    lens, the diagnostics, the hovers and freshness all ask for the same text (a 15 MB
    file of 2,217 profiles took 0.85 s a parse, several parses a request). The document
    is shared: callers must not change it. Raises :class:`RecipeError` as the parser does
    (a text over the recipes bound at once, before it is hashed)."""
    too_big = recipes_size_problem(text)
    if too_big is not None:
        raise RecipeError(too_big, line=1)
    key = text_key(text)
    with _parsed_lock:
        got = _parsed.get(key)
        if got is not None:
            _parsed.move_to_end(key)
    if got is None:
        try:
            got = (parse_recipes_text(text), None)
        except RecipeError as exc:
            got = (None, exc)
        with _parsed_lock:
            _parsed[key] = got
            while len(_parsed) > PARSED_KEPT:
                _parsed.popitem(last=False)
    doc, error = got
    if error is not None:
        raise error
    assert doc is not None
    return doc
