"""A graph file's groups, each one's ``attrs`` map built when it is first read.

A version-3 file stores the groups' attrs as map columns (:mod:`capture.graph.map_columns`).
Building every map on reading was a quarter of reading a 100,000-op capture (57,141
groups, each with its nested ``outputs`` and ``per_device_memory`` maps: 147 ms of
about 550), while a first view reads the attrs of a handful of groups, and the analyses
that read one key of every group (a module's ``class``) can read it from its column
(:func:`attr_values`).

A :class:`FileGroup` is a :class:`~capture.graph.model.Group` in every way a reader can
tell (fields, equality with any group, repr, copies and pickles as a plain ``Group``),
whose ``attrs`` comes from its file's :class:`GroupAttrs` on first access: the first
:data:`ONE_BY_ONE` groups asked for get theirs built one by one, then every group's are
built at once (C-level passes), as reading did before. A map handed out is the group's
own from then on (a change to it is kept, and :func:`attr_values` reads it).
Standard library only: the worker imports the graph package.
"""

from __future__ import annotations

import threading
from operator import is_
from typing import Any, Iterable, Sequence

from .map_columns import MapColumns
from .model import Group

#: The slot under ``Group.attrs`` (Group is a slots dataclass): FileGroup's property
#: stores the map there once built.
_ATTRS = Group.__dict__["attrs"]
#: Groups whose attrs are built one at a time before all of them are built at once.
ONE_BY_ONE = 256


class GroupAttrs:
    """The attrs maps of a file's groups (entry ``i``: group ``i``), built from their
    columns when asked for. Thread-safe."""

    __slots__ = ("_cols", "_maps", "_one", "_lock", "_groups")

    def __init__(self, cols: MapColumns) -> None:
        self._cols = cols
        self._maps: list[dict[str, Any]] | None = None  # every map, once built at once
        self._one: dict[int, dict[str, Any]] = {}  # the maps handed out before that
        self._lock = threading.Lock()
        self._groups: tuple[Group, ...] = ()  # the groups made over these maps, in order (:meth:`made`)

    def own(self, groups: Sequence[Group]) -> None:
        """``groups`` (group ``i`` over map ``i``) are the groups made over these maps."""
        self._groups = tuple(groups)

    def made(self, groups: Sequence[Group]) -> bool:
        """Whether ``groups`` are the groups made over these maps (:meth:`own`), in order:
        then group ``i``'s value of a key is entry ``i`` of its column."""
        own = self._groups
        return bool(own) and len(groups) == len(own) and all(map(is_, groups, own))

    def __len__(self) -> int:
        return len(self._cols)

    def get(self, i: int) -> dict[str, Any]:
        """Group ``i``'s attrs (``{}`` for none), the same map at every call."""
        with self._lock:
            if self._maps is not None:
                return self._maps[i]
            got = self._one.get(i)
            if got is None:
                if len(self._one) < ONE_BY_ONE:
                    got = self._one[i] = self._cols[i] or {}
                else:
                    got = self._all()[i]
            return got

    def replaced(self, i: int, attrs: dict[str, Any]) -> None:
        """Group ``i``'s attrs are now ``attrs`` (assigned to the group)."""
        with self._lock:
            if self._maps is not None:
                self._maps[i] = attrs
            else:
                self._one[i] = attrs

    def values_of(self, key: str, not_map: Any = None) -> list[Any]:
        """Every group's ``attrs.get(key)``, read from the columns for the maps not built
        yet (a built map is read itself: it may have changed; ``not_map`` where that is
        no map)."""
        with self._lock:
            if self._maps is not None:
                return [m.get(key) if isinstance(m, dict) else not_map for m in self._maps]
            out = self._cols.values_of(key)
            for i, m in self._one.items():
                out[i] = m.get(key) if isinstance(m, dict) else not_map
            return out

    def _all(self) -> list[dict[str, Any]]:
        """Build every map not handed out yet (under the lock)."""
        maps = [m or {} for m in self._cols.maps()]
        for i, m in self._one.items():
            maps[i] = m
        self._maps, self._one = maps, {}
        return maps


class FileGroup(Group):
    """A group read from a graph file: its ``attrs`` built on first access (see the
    module docstring). Constructed like a ``Group``, plus ``table``: where the attrs
    come from when ``attrs`` is not given."""

    __slots__ = ("_table",)

    def __init__(self, id: int, kind: str, name: str, parent: int | None = None,
                 attrs: dict[str, Any] | None = None, table: GroupAttrs | None = None) -> None:
        self.id, self.kind, self.name, self.parent = id, kind, name, parent
        self._table = table
        if attrs is not None or table is None:
            _ATTRS.__set__(self, {} if attrs is None else attrs)

    @classmethod
    def of_columns(cls, kinds: Iterable[str], names: Iterable[str], parents: Iterable[int | None],
                   table: GroupAttrs) -> list[FileGroup]:
        """Groups ``0..n-1`` from their kind, name and parent columns, each one's attrs
        from ``table`` on first access: what ``FileGroup(i, kind, name, parent, table=table)``
        makes, without a call of ``__init__`` each (57,141 groups: 20 ms rather than 50)."""
        new = cls.__new__
        out: list[FileGroup] = []
        keep = out.append
        for i, (kind, name, parent) in enumerate(zip(kinds, names, parents)):
            g = new(cls)
            g.id, g.kind, g.name, g.parent, g._table = i, kind, name, parent, table
            keep(g)
        return out

    @property
    def attrs(self) -> dict[str, Any]:
        try:
            return _ATTRS.__get__(self, FileGroup)
        except AttributeError:  # not built yet
            got = self._table.get(self.id)  # type: ignore[union-attr]
            _ATTRS.__set__(self, got)
            return got

    @attrs.setter
    def attrs(self, value: dict[str, Any]) -> None:
        _ATTRS.__set__(self, value)
        if self._table is not None:
            self._table.replaced(self.id, value)

    def _fields(self) -> tuple[int, str, str, int | None, dict[str, Any]]:
        return self.id, self.kind, self.name, self.parent, self.attrs

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Group):
            return self._fields() == (other.id, other.kind, other.name, other.parent, other.attrs)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # as Group's: mutable, compared by value

    def __repr__(self) -> str:
        return repr(Group(*self._fields()))

    def __reduce__(self) -> tuple[Any, ...]:
        return Group, self._fields()  # copies and pickles are plain groups


def attr_values(groups: Sequence[Group], key: str, not_map: Any = None) -> list[Any]:
    """Every group's ``attrs.get(key)`` (``None`` where absent; ``not_map`` where its
    attrs is not a map), in order, without building the attrs of groups read from a file."""
    table = getattr(groups[0], "_table", None) if groups else None
    if table is None:
        return [g.attrs.get(key) if isinstance(g.attrs, dict) else not_map for g in groups]
    col = table.values_of(key, not_map)
    if table.made(groups):  # the file's own groups, in order (C-level check): the column itself
        return col
    return [col[g.id] if getattr(g, "_table", None) is table else
            (g.attrs.get(key) if isinstance(g.attrs, dict) else not_map) for g in groups]
