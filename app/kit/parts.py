"""Files under a size limit: a long listing or JSON document written a page at a time into as
many files as it needs (at most ``max_files``), each spooled to disk as it fills, so memory
holds a page and never the whole. Each file stands on its own: a JSON file is one whole object
with the head's fields and its share of every array; a text file is whole lines."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from types import TracebackType
from typing import IO, Any, Self


class TooLarge(Exception):
    """The document needs more than ``max_files`` files of ``limit`` bytes (or one item is
    larger than a file)."""

    def __init__(self, limit: int, max_files: int) -> None:
        super().__init__(f"more than {max_files} files of {limit} bytes")
        self.limit = limit
        self.max_files = max_files


@dataclass(frozen=True, slots=True)
class Spooled:
    """One finished file: its number (from 1), its size, and its bytes on demand."""

    number: int
    size: int
    _file: IO[bytes]

    def read(self) -> bytes:
        self._file.seek(0)
        return self._file.read()

    def chunks(self, size: int = 1 << 16) -> Iterator[bytes]:
        """The bytes, ``size`` at a time (to stream the file without holding it)."""
        self._file.seek(0)
        while chunk := self._file.read(size):
            yield chunk


def _encode(item: Any) -> bytes:
    return json.dumps(item, ensure_ascii=False).encode()


class _Files:
    """The spooling and the accounting; subclasses say what opens, separates and closes."""

    def __init__(self, *, limit: int, max_files: int) -> None:
        self._limit = limit
        self._max_files = max_files
        self._done: list[Spooled] = []
        self._file: IO[bytes] | None = None
        self._size = 0
        self._items = 0  # in the open section of the open file
        self._spool = ExitStack()  # every file this writer opened, closed (deleted) on exit

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._spool.close()

    @property
    def size(self) -> int:
        """Bytes written so far, in every file."""
        return sum(s.size for s in self._done) + self._size

    def _write(self, chunk: bytes) -> None:
        assert self._file is not None
        self._file.write(chunk)
        self._size += len(chunk)

    def _start(self, opening: bytes) -> None:
        if len(self._done) == self._max_files:
            raise TooLarge(self._limit, self._max_files)
        spooled = tempfile.TemporaryFile()  # noqa: SIM115  # the ExitStack closes it
        self._file = self._spool.enter_context(spooled)
        self._size = 0
        self._items = 0
        self._write(opening)

    def _end(self, closing: bytes) -> None:
        assert self._file is not None
        self._write(closing)
        self._file.flush()
        self._done.append(Spooled(len(self._done) + 1, self._size, self._file))
        self._file = None

    def _put(
        self, chunk: bytes, *, separator: bytes, closing: bytes, opening: Callable[[], bytes]
    ) -> None:
        """Write ``chunk`` to the open file if it fits with what must still close it, else
        end that file and start the next with ``opening()``."""
        lead = separator if self._items else b""
        if self._file is not None and self._size + len(lead + chunk + closing) <= self._limit:
            self._write(lead + chunk)
        else:
            if self._file is not None:
                self._end(closing)
            self._start(opening())
            if self._size + len(chunk + closing) > self._limit:
                raise TooLarge(self._limit, self._max_files)
            self._write(chunk)
        self._items += 1


class JsonFiles(_Files):
    """One JSON object with the fields ``head(n)`` gives file n, then the arrays named in
    ``arrays``, filled in that order with ``add``."""

    def __init__(
        self,
        *,
        limit: int,
        max_files: int,
        head: Callable[[int], dict[str, Any]],
        arrays: Sequence[str],
    ) -> None:
        super().__init__(limit=limit, max_files=max_files)
        self._head = head
        self._arrays = list(arrays)
        self._open = 0  # the array the open file writes into

    def _key(self, index: int) -> bytes:
        return _encode(self._arrays[index]) + b": "

    def _opening(self, index: int) -> bytes:
        fields = _encode(self._head(len(self._done) + 1))
        assert fields.startswith(b"{") and fields != b"{}", "the head holds at least one field"
        empty = b"".join(b", " + self._key(i) + b"[]" for i in range(index))
        return fields[:-1] + empty + b", " + self._key(index) + b"["

    def _closing(self, index: int) -> bytes:
        empty = b"".join(b", " + self._key(i) + b"[]" for i in range(index + 1, len(self._arrays)))
        return b"]" + empty + b"}"

    def _move_to(self, index: int) -> None:
        """Close the open array and open ``index`` (a later one) in the same file, when the
        switch fits; otherwise the next item starts a new file there."""
        if self._file is not None:
            between = b"]" + b"".join(
                b", " + self._key(i) + b"[]" for i in range(self._open + 1, index)
            )
            switch = between + b", " + self._key(index) + b"["
            if self._size + len(switch + self._closing(index)) <= self._limit:
                self._write(switch)
                self._items = 0
            else:
                self._end(self._closing(self._open))
        self._open = index

    def add(self, array: str, items: Iterable[Any]) -> None:
        """Append ``items`` to ``array``, which is this one or a later one than the last
        call's. Raises ``TooLarge`` once the files are full."""
        index = self._arrays.index(array)
        if index < self._open:
            raise ValueError(f"{array!r} comes before {self._arrays[self._open]!r}")
        if index > self._open:
            self._move_to(index)
        for item in items:
            self._put(
                _encode(item),
                separator=b", ",
                closing=self._closing(index),
                opening=lambda: self._opening(index),
            )

    def finish(self) -> list[Spooled]:
        """Close the last file (an empty document is one file with empty arrays)."""
        if self._file is None and not self._done:
            self._start(self._opening(self._open))
        if self._file is not None:
            self._end(self._closing(self._open))
        return list(self._done)


class TextFiles(_Files):
    """Lines of text, each file whole lines (UTF-8)."""

    def add(self, lines: Iterable[str]) -> None:
        for line in lines:
            self._put((line + "\n").encode(), separator=b"", closing=b"", opening=lambda: b"")

    def finish(self) -> list[Spooled]:
        if self._file is None and not self._done:
            self._start(b"")
        if self._file is not None:
            self._end(b"")
        return list(self._done)
